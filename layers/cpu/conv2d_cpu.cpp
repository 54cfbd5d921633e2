// layers/cpu/conv2d_cpu.cpp: Conv2d on oneDNN (fprop, dgrad, wgrad primitives).
//
// Activations: x in whatever layout the producer left it (plain or nChw16c); y is nChw16c when
// K % 16 == 0 (what oneDNN's AVX-512/AVX2 kernels want), so blocked data flows on to the next
// layer. Under bf16 on AMX, x and y are channels-last (nhwc) instead (channels_last_bf16). The
// weights are stored in the format the forward primitive chose (a packed parameter: value, gradient
// and optimizer state in the arena, padded to whole blocks), so the forward reads them as they are;
// backward-data reorders them into a transient copy where it wants another format. wgrad writes a
// scratch that is reordered into the gradient with a sum post-op, which is the (+=) accumulation of
// the gradient policy.
//
// Strided spatial convolutions (kernel > 1, stride > 1, e.g. ResNet-50's layer2.0.conv2) run
// their forward channels-last: oneDNN 2.6 has its brgemm kernel (brgconv) only for nhwc, which
// beats its nChw16c direct kernel on those shapes (results/tuning.md). A few images at a time, x is
// reordered nChw16c -> nhwc into a workspace chunk, brgconv runs, y is reordered back to nChw16c:
// the reorders are inside the layer's forward time, and the path is taken only when oneDNN actually
// offers brgconv. Backward stays nChw16c (oneDNN 2.6's nhwc wgrad is slower), except a wgrad
// that oneDNN has only its reference kernel for on nChw16c: it runs on x and dy reordered to
// nhwc, else nchw, whichever has a real kernel; so do a dgrad and a forward in that case (a
// forward from nChw16c to a plain y of K % 16 != 0 channels). Under bf16 on AMX a pointwise
// (1x1) convolution's backward runs as matmuls over channels-last copies, where oneDNN 2.6's AMX
// convolution backward is slower (plan_pointwise_backward). describe() names the
// implementations in use.
#include "backends/cpu/onednn.h"
#include "layers/conv2d.h"
#include "layers/cpu/conv_onednn.h"

#include <algorithm>
#include <string>

namespace tbd::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

class Conv2dOneDnn final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;  // x, y bf16; f32 master weights and gradients

  Conv2dOneDnn(Backend& be, const std::string& name, const Conv2dConfig& cfg,
               const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cpu_(as_cpu(be)) {
    const Shape& xs = in[0].shape;
    const Shape& ys = outputs_[0].shape;
    // y blocked by 16 channels where K allows: what the next conv, batchnorm, relu, pooling
    // and add take as they are. Under bf16 on AMX, y channels-last (see channels_last_bf16).
    if (channels_last_bf16(cfg, in)) {
      outputs_[0].layout = Layout::kNhwc;
    } else if (ys[1] % 16 == 0) {
      outputs_[0].layout = Layout::kNChw16c;
    }
    const int64_t K = cfg.out_channels, G = cfg.groups;

    // Under --tbd_math=bf16 x and y are bf16 (the graph casts them: layers/precision.h): the
    // forward and backward-data read bf16 weights, cast from the f32 master at each call, and
    // the weight gradient comes out f32 (oneDNN's bf16 kernels write f32 diff_weights at no
    // extra cost) to be added into the f32 gradient.
    const memory::data_type dt = dnnl_dtype(in[0].dtype);
    bf16_ = in[0].dtype == DType::kBF16;
    const OneDnnConv conv(cfg, xs, ys);
    const memory::desc w_any = conv.w_any(dt);
    const memory::desc dw_any = conv.w_any();
    memory::desc b_md =
        cfg.bias ? memory::desc({K}, memory::data_type::f32, tag::a) : memory::desc();
    memory::desc x_md = md_of(in[0]);
    memory::desc y_md = md_of(outputs_[0]);
    auto& eng = cpu_.engine();
    try {
      fwd_pd_ = conv.forward(x_md, w_any, b_md, y_md, eng);
      bwd_data_pd_ = conv.backward_data(x_md, w_any, y_md, eng, fwd_pd_);
      bwd_w_pd_ = conv.backward_weights(x_md, dw_any, b_md, y_md, eng, fwd_pd_);
    } catch (const dnnl::error& e) {
      throw_layer_error(
          kind(), name,
          std::string("oneDNN has no convolution for x ") + in[0].to_string() + ": " + e.what());
    }
    // Channels-last forward (see the top of this file), over chunks of the batch.
    if (G == 1 && cfg.stride_h * cfg.stride_w > 1 && cfg.kernel_h * cfg.kernel_w > 1 &&
        in[0].layout == Layout::kNChw16c && outputs_[0].layout == Layout::kNChw16c) {
      chunk_ = channels_last_chunk(xs, params_[0].value.shape());
      span_ = reorder_span(xs, ys, chunk_);
      Shape xc{chunk_, xs[1], xs[2], xs[3]}, yc{chunk_, ys[1], ys[2], ys[3]};
      Shape xr{span_, xs[1], xs[2], xs[3]}, yr{span_, ys[1], ys[2], ys[3]};
      memory::desc x_nhwc(dnnl_dims(xc), dt, tag::nhwc);
      memory::desc y_nhwc(dnnl_dims(yc), dt, tag::nhwc);
      try {
        dnnl::convolution_forward::primitive_desc pd =
            conv.forward(x_nhwc, w_any, b_md, y_nhwc, eng);
        if (std::string(pd.impl_info_str()).rfind("brgconv", 0) == 0) {
          fwd_pd_ = pd;
          x_span_md_ = md_of(TensorDesc{xr, in[0].dtype, Layout::kNChw16c});
          y_span_md_ = md_of(TensorDesc{yr, in[0].dtype, Layout::kNChw16c});
          x_span_nhwc_md_ = memory::desc(dnnl_dims(xr), dt, tag::nhwc);
          y_span_nhwc_md_ = memory::desc(dnnl_dims(yr), dt, tag::nhwc);
          const memory::desc& x_span_nhwc = x_span_nhwc_md_;
          const memory::desc& y_span_nhwc = y_span_nhwc_md_;
          channels_last_ = true;
          transient(x_nhwc_, TensorDesc{xr, in[0].dtype});
          transient(y_nhwc_, TensorDesc{yr, in[0].dtype});
          x_to_nhwc_ =
              dnnl::reorder(dnnl::reorder::primitive_desc(eng, x_span_md_, eng, x_span_nhwc));
          y_from_nhwc_ =
              dnnl::reorder(dnnl::reorder::primitive_desc(eng, y_span_nhwc, eng, y_span_md_));
        }
      } catch (const dnnl::error&) {
        // No nhwc implementation: keep the blocked forward.
      }
    }
    // dgrad or wgrad on oneDNN's reference kernel (ref:any: no jit kernel for blocked x and dy,
    // e.g. Deep Speech 2's 11x21 stride-(1, 2) conv, 15 + 30 s at batch 2 where everything else
    // in its step takes 10): try channels-last, then plain, reordered at each backward
    // (results/tuning.md).
    auto is_ref = [](const auto& pd) {
      return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
    };
    // Replaces pd by make(x, y descriptors) on the first of nhwc, nchw that has a real kernel.
    auto retry = [&](auto& pd, const auto& make) {
      for (tag t : {tag::nhwc, tag::nchw}) {
        memory::desc xt(dnnl_dims(xs), dt, t);
        memory::desc yt(dnnl_dims(ys), dt, t);
        try {
          auto p = make(xt, yt);
          if (is_ref(p)) continue;
          pd = p;
          return true;
        } catch (const dnnl::error&) {
          // No implementation for this layout: try the next.
        }
      }
      return false;
    };
    // The forward too (x nChw16c, y plain: a conv to 3 channels, WGAN-GP's generator output,
    // 230 ms per image on ref:any): x and y reordered around a channels-last kernel.
    if (!channels_last_fwd() && is_ref(fwd_pd_) &&
        retry(fwd_pd_, [&](const memory::desc& xt, const memory::desc& yt) {
          return conv.forward(xt, w_any, b_md, yt, eng);
        })) {
      x_fwd_ = relayout(xs, x_md, fwd_pd_.src_desc());
      y_fwd_ = relayout(ys, fwd_pd_.dst_desc(), y_md);
    }
    if (is_ref(bwd_data_pd_) &&
        retry(bwd_data_pd_, [&](const memory::desc& xt, const memory::desc& yt) {
          return conv.backward_data(xt, w_any, yt, eng, fwd_pd_);
        })) {
      dx_dgrad_ = relayout(xs, bwd_data_pd_.diff_src_desc(), x_md);
      dy_dgrad_ = relayout(ys, y_md, bwd_data_pd_.diff_dst_desc());
    }
    if (is_ref(bwd_w_pd_) && retry(bwd_w_pd_, [&](const memory::desc& xt, const memory::desc& yt) {
          return conv.backward_weights(xt, dw_any, b_md, yt, eng, fwd_pd_);
        })) {
      x_wgrad_ = relayout(xs, x_md, bwd_w_pd_.src_desc());
      dy_wgrad_ = relayout(ys, y_md, bwd_w_pd_.diff_dst_desc());
    }
    // Under bf16 on an AMX CPU: oneDNN 2.6 runs AMX only in its channels-last kernels; on
    // nChw16c it picks avx512_core_bf16, whose vdpbf16ps ran at 0.15 TFLOP/s on 2 cores here
    // against AMX's 4.7 (and below FP32's 0.32). In a graph x and y come nhwc already
    // (channels_last_bf16); otherwise each pass whose kernel is not AMX runs on nhwc copies of
    // its activations where oneDNN has an AMX kernel for it (the reorders are inside the pass's
    // time).
    auto is_amx = [](const auto& pd) {
      return std::string(pd.impl_info_str()).find("amx") != std::string::npos;
    };
    if (bf16_) {
      const memory::desc xt(dnnl_dims(xs), dt, tag::nhwc), yt(dnnl_dims(ys), dt, tag::nhwc);
      // Replaces pd by make() where that runs on AMX; returns whether it did.
      auto prefer_amx = [&](auto& pd, const auto& make) {
        if (is_amx(pd)) return false;
        try {
          auto p = make();
          if (!is_amx(p)) return false;
          pd = p;
          return true;
        } catch (const dnnl::error&) {
          return false;  // no channels-last implementation: keep the blocked one
        }
      };
      if (!channels_last_fwd() && !x_fwd_.active &&
          prefer_amx(fwd_pd_, [&] { return conv.forward(xt, w_any, b_md, yt, eng); })) {
        x_fwd_ = relayout(xs, x_md, xt);
        y_fwd_ = relayout(ys, yt, y_md);
      }
      if (!dx_dgrad_.active && prefer_amx(bwd_data_pd_, [&] {
            return conv.backward_data(xt, w_any, yt, eng, fwd_pd_);
          })) {
        dx_dgrad_ = relayout(xs, xt, x_md);
        dy_dgrad_ = relayout(ys, y_md, yt);
      }
      if (!x_wgrad_.active && prefer_amx(bwd_w_pd_, [&] {
            return conv.backward_weights(xt, dw_any, b_md, yt, eng, fwd_pd_);
          })) {
        x_wgrad_ = relayout(xs, x_md, xt);
        dy_wgrad_ = relayout(ys, y_md, yt);
      }
    }
    if (bf16_ && G == 1 && !cfg.bias && cfg.kernel_h * cfg.kernel_w == 1 &&
        cfg.pad_h + cfg.pad_w == 0 && cfg.dilation_h * cfg.dilation_w == 1) {
      plan_pointwise_backward(in[0], outputs_[0]);
    }
    fwd_ = dnnl::convolution_forward(fwd_pd_);
    bwd_data_ = dnnl::convolution_backward_data(bwd_data_pd_);
    bwd_w_ = dnnl::convolution_backward_weights(bwd_w_pd_);

    // The weights live in the forward's format: the parameter (its gradient and the
    // optimizer's state alike) is stored packed in the arena, so the forward reads it as it is
    // and no copy persists. Grouped weights stay row-major (their 5-D formats do not fit the
    // 4-D parameter; no model has them), reordered for each call. Backward-data reads the same
    // format where it wants it, else a transient copy reordered per call (oneDNN 2.6's kernels
    // want the blocks transposed: OIhw16o16i, IOhw16o16i for 1x1s). Transient too: the
    // reordered arguments, the wgrad result before it is added into the gradient, and one
    // scratchpad for the three primitives.
    // Under bf16 the f32 master (and its gradient and optimizer state) is stored in the format
    // of the weight gradient, so that wgrad adds into it without a change of format.
    // The pointwise backward's products read and write row-major (K, C) weights: the master
    // stays row-major, and wgrad adds into its gradient directly.
    if (G == 1 && !mm_wgrad_on_) {
      pack_param(0, packed_desc(params_[0].value.shape(), dt == memory::data_type::f32
                                                              ? fwd_pd_.weights_desc()
                                                              : bwd_w_pd_.diff_weights_desc()));
    }
    const TensorDesc& w = params_[0].value.desc();
    w_fwd_ = WeightsAs(fwd_pd_.weights_desc(), conv.w_user);
    w_bwd_ = WeightsAs(bwd_data_pd_.weights_desc(), conv.w_user);
    if (!w_fwd_.reads_directly(w)) transient(w_fwd_copy_, w_fwd_.copy_bytes());
    if (!w_bwd_.reads_directly(w)) transient(w_bwd_copy_, w_bwd_.copy_bytes());
    for (Relayout* r :
         {&x_fwd_, &y_fwd_, &dy_dgrad_, &dx_dgrad_, &x_wgrad_, &dy_wgrad_, &dy_cl_, &x_cl_}) {
      if (r->active) transient(r->buf, TensorDesc{r->shape, in[0].dtype});
    }
    std::size_t scratch = fwd_pd_.scratchpad_desc().get_size();
    if (mm_dgrad_on_) {
      w_mm_ = WeightsAs(memory::desc(conv.w_dims, memory::data_type::bf16, tag::oihw), conv.w_user);
      transient(w_mm_copy_, w_mm_.copy_bytes());
      scratch = std::max(scratch, mm_dgrad_pd_.scratchpad_desc().get_size());
    } else {
      scratch = std::max(scratch, bwd_data_pd_.scratchpad_desc().get_size());
    }
    if (mm_wgrad_on_) {
      transient(dw_scratch_, TensorDesc{params_[0].value.shape()});
      dw_into_ =
          GradInto(memory::desc(conv.w_dims, memory::data_type::f32, tag::oihw), conv.w_user);
      scratch = std::max({scratch, mm_wgrad_pd_.scratchpad_desc().get_size(),
                          mm_wgrad_sum_pd_.scratchpad_desc().get_size()});
    } else {
      transient(dw_scratch_, bwd_w_pd_.diff_weights_desc().get_size());
      dw_into_ = GradInto(bwd_w_pd_.diff_weights_desc(), conv.w_user);
      scratch = std::max(scratch, bwd_w_pd_.scratchpad_desc().get_size());
    }
    if (cfg.bias) transient(db_scratch_, TensorDesc{Shape{K}});
    if (scratch) transient(scratch_, scratch);
  }

  // x in nChw16c whenever C allows: on plain nchw oneDNN 2.6 has only its reference kernels
  // (ref:any, about 100x slower) for C > 3, so a row-major x is better reordered first. Under
  // bf16 on AMX, x channels-last (channels_last_bf16).
  static std::vector<Layout> input_layouts(const Conv2dConfig& cfg,
                                           const std::vector<TensorDesc>& in) {
    if (channels_last_bf16(cfg, in)) return {Layout::kNhwc};
    const bool blockable = !in.empty() && in[0].shape.rank() == 4 && in[0].shape[1] % 16 == 0;
    return {blockable ? Layout::kNChw16c : Layout::kRowMajor};
  }

  // Under bf16 on an AMX CPU, x and y channels-last: oneDNN 2.6 runs AMX only in its nhwc
  // convolution kernels, so blocked activations were reordered to nhwc and back around every
  // pass (18% of Inception-v3's bf16 step at batch 8); batch norm, activations, pooling, add
  // and concat take nhwc as it comes. Ungrouped convolutions only.
  static bool channels_last_bf16(const Conv2dConfig& cfg, const std::vector<TensorDesc>& in) {
    return !in.empty() && in[0].dtype == DType::kBF16 && in[0].shape.rank() == 4 &&
           cfg.groups == 1 && dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
  }

  std::string implementation() const override {
    return detail::concat("fwd ", fwd_pd_.impl_info_str(),
                          channels_last_fwd()
                              ? detail::concat(" (nhwc, ", chunk_, "/chunk, ", span_, "/reorder)")
                              : "",
                          " bwd ",
                          mm_dgrad_on_ ? detail::concat("matmul ", mm_dgrad_pd_.impl_info_str())
                                       : std::string(bwd_data_pd_.impl_info_str()),
                          "/",
                          mm_wgrad_on_ ? detail::concat("matmul ", mm_wgrad_sum_pd_.impl_info_str())
                                       : std::string(bwd_w_pd_.impl_info_str()),
                          mm_dgrad_on_ || mm_wgrad_on_ ? " (matmul: over nhwc positions)" : "",
                          " w ", format_name(md_of(params_[0].value.desc())),
                          bf16_ ? " (bf16 copies: fwd " + format_name(fwd_pd_.weights_desc()) +
                                      ", dgrad " + format_name(bwd_data_pd_.weights_desc()) + ")"
                          : !w_bwd_.reads_directly(params_[0].value.desc())
                              ? " (dgrad copy " + format_name(bwd_data_pd_.weights_desc()) + ")"
                              : "");
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    auto& e = cpu_.engine();
    const memory w_mem = w_fwd_.read(cpu_, params_[0].value, w_fwd_copy_, "Conv2d reorder");
    std::unordered_map<int, memory> args{{DNNL_ARG_WEIGHTS, w_mem}};
    if (cfg_.bias) args[DNNL_ARG_BIAS] = mem_of(cpu_, params_[1].value);
    add_scratch(args, fwd_pd_.scratchpad_desc());
    if (!channels_last_fwd()) {
      args[DNNL_ARG_SRC] = x_fwd_.into(cpu_, mem_of(cpu_, *x[0]));
      const memory y_mem = y_fwd_.source(cpu_, mem_of(cpu_, *y[0]));
      args[DNNL_ARG_DST] = y_mem;
      execute(cpu_, fwd_, args, "Conv2d forward");
      y_fwd_.out_of(cpu_, y_mem, mem_of(cpu_, *y[0]));
      return;
    }
    // Span by span: nChw16c -> nhwc (one reorder call), brgconv chunk by chunk, nhwc ->
    // nChw16c. The batch is the outermost dimension of both layouts, so spans and chunks are
    // contiguous slices.
    memory x_span(x_span_nhwc_md_, e, x_nhwc_.raw()), y_span(y_span_nhwc_md_, e, y_nhwc_.raw());
    const std::size_t x_span_bytes = x_span_md_.get_size(), y_span_bytes = y_span_md_.get_size();
    const std::size_t x_chunk_bytes = fwd_pd_.src_desc().get_size();
    const std::size_t y_chunk_bytes = fwd_pd_.dst_desc().get_size();
    auto* xp = static_cast<char*>(x[0]->raw());
    auto* yp = static_cast<char*>(y[0]->raw());
    for (int64_t n = 0; n < inputs_[0].shape[0]; n += span_) {
      const auto k = static_cast<std::size_t>(n / span_);
      memory x_blk(x_span_md_, e, xp + k * x_span_bytes);
      memory y_blk(y_span_md_, e, yp + k * y_span_bytes);
      execute(cpu_, x_to_nhwc_, {{DNNL_ARG_FROM, x_blk}, {DNNL_ARG_TO, x_span}}, "Conv2d reorder");
      for (int64_t c = 0; c < span_ / chunk_; ++c) {
        const auto i = static_cast<std::size_t>(c);
        args[DNNL_ARG_SRC] =
            memory(fwd_pd_.src_desc(), e, static_cast<char*>(x_nhwc_.raw()) + i * x_chunk_bytes);
        args[DNNL_ARG_DST] =
            memory(fwd_pd_.dst_desc(), e, static_cast<char*>(y_nhwc_.raw()) + i * y_chunk_bytes);
        execute(cpu_, fwd_, args, "Conv2d forward");
      }
      execute(cpu_, y_from_nhwc_, {{DNNL_ARG_FROM, y_span}, {DNNL_ARG_TO, y_blk}},
              "Conv2d reorder");
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    if (!(mm_dgrad_on_ && mm_wgrad_on_)) return backward_in_two(dx, dy, x, y);
    // Both as products: dy's channels-last copy made once for the two.
    void* dy_cl = pointwise_dy(*dy[0]);
    if (dx[0] != nullptr) pointwise_dgrad(dy_cl, *dx[0]);
    if (param_grads()) pointwise_wgrad(dy_cl, *x[0]);
  }
  bool split_backward() const override { return true; }

  void dgrad(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (mm_dgrad_on_ && dx[0] != nullptr) {
      pointwise_dgrad(pointwise_dy(*dy[0]), *dx[0]);
    } else if (dx[0] != nullptr) {
      const memory w_mem = w_bwd_.read(cpu_, params_[0].value, w_bwd_copy_, "Conv2d reorder");
      memory dy_mem = dy_dgrad_.into(cpu_, mem_of(cpu_, *dy[0]));
      memory dx_mem = dx_dgrad_.source(cpu_, mem_of(cpu_, *dx[0]));
      std::unordered_map<int, memory> args{
          {DNNL_ARG_DIFF_DST, dy_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DIFF_SRC, dx_mem}};
      add_scratch(args, bwd_data_pd_.scratchpad_desc());
      execute(cpu_, bwd_data_, args, "Conv2d backward data");
      dx_dgrad_.out_of(cpu_, dx_mem, mem_of(cpu_, *dx[0]));
    }
  }

  // wgrad into scratch, then += into the gradient (stored as the weights are).
  void wgrad(TensorRefs dy, TensorRefs x, TensorRefs) override {
    if (mm_wgrad_on_) {
      pointwise_wgrad(pointwise_dy(*dy[0]), *x[0]);
      return;
    }
    auto& e = cpu_.engine();
    memory dw_blk(bwd_w_pd_.diff_weights_desc(), e, dw_scratch_.raw());
    memory x_mem = x_wgrad_.into(cpu_, mem_of(cpu_, *x[0]));
    memory dy_mem = dy_wgrad_.into(cpu_, mem_of(cpu_, *dy[0]));
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, x_mem}, {DNNL_ARG_DIFF_DST, dy_mem}, {DNNL_ARG_DIFF_WEIGHTS, dw_blk}};
    if (cfg_.bias) args[DNNL_ARG_DIFF_BIAS] = mem_of(cpu_, db_scratch_);
    add_scratch(args, bwd_w_pd_.scratchpad_desc());
    execute(cpu_, bwd_w_, args, "Conv2d backward weights");
    dw_into_.add(cpu_, dw_scratch_.raw(), params_[0].grad, "Conv2d weight-gradient accumulate");
    if (cfg_.bias) be_.accumulate(params_[1].grad, db_scratch_);
  }

 private:
  bool channels_last_fwd() const { return channels_last_; }

  // Images per channels-last chunk, so that the reordered slice is still in cache when brgconv
  // reads it: 2 (or 1 for an odd batch), and 1 when the weights pass 4 MiB (brgconv then
  // streams them per chunk). Images per reorder: a whole small batch at once (the per-call cost
  // of oneDNN's reorder dominates one-image reorders), else one chunk, so that brgconv finds the
  // slice in cache. The measurements that chose both: results/tuning.md.
  static int64_t reorder_span(const Shape& x, const Shape& y, int64_t chunk) {
    constexpr int64_t kSmallBatch = 16 << 20;
    const int64_t bytes = 4 * x[0] * (x[1] * x[2] * x[3] + y[1] * y[2] * y[3]);
    return bytes <= kSmallBatch ? x[0] : chunk;
  }

  static int64_t channels_last_chunk(const Shape& x, const Shape& w) {
    constexpr int64_t kWeightsInCache = 4 << 20;
    const int64_t w_bytes = 4 * w[0] * w[1] * w[2] * w[3];
    return (w_bytes > kWeightsInCache || x[0] % 2 != 0) ? 1 : 2;
  }

  // A tensor reordered from one layout to another around one primitive, through a transient
  // copy; a no-op (no copy) where the layouts agree. Made both ways, the copy also serves as a
  // primitive's output in `to`, moved back into `from` (one buffer for an input and, later in
  // the same call, a gradient of its shape).
  struct Relayout {
    bool active = false;  // the layouts differ: the copy exists
    Shape shape;
    Tensor buf;  // the copy (transient; bound after construction)
    memory::desc from_md, to_md;
    dnnl::primitive reorder, back_reorder;  // from -> to; to -> from (made both ways only)
    // An input of the primitive: `from` reordered into the copy (to_md).
    memory into(CpuBackend& cpu, const memory& from) const {
      if (!active) return from;
      memory to(to_md, cpu.engine(), buf.raw());
      execute(cpu, reorder, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, "Conv2d reorder");
      return to;
    }
    // An output of the primitive: it writes the copy (from_md), which out_of moves to `dst`.
    memory source(CpuBackend& cpu, const memory& dst) const {
      return active ? memory(from_md, cpu.engine(), buf.raw()) : dst;
    }
    void out_of(CpuBackend& cpu, const memory& from, const memory& dst) const {
      if (active) {
        execute(cpu, reorder, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, dst}}, "Conv2d reorder");
      }
    }
    // Both ways: an output in `to` (the copy, or `dst` itself where the layouts agree), then
    // moved back into dst (in `from`).
    memory back_source(CpuBackend& cpu, const memory& dst) const {
      return active ? memory(to_md, cpu.engine(), buf.raw()) : dst;
    }
    void back(CpuBackend& cpu, const memory& copy, const memory& dst) const {
      if (active) {
        execute(cpu, back_reorder, {{DNNL_ARG_FROM, copy}, {DNNL_ARG_TO, dst}}, "Conv2d reorder");
      }
    }
  };
  Relayout relayout(const Shape& s, const memory::desc& from, const memory::desc& to,
                    bool both_ways = false) {
    Relayout r;
    if (from == to) return r;
    auto& eng = cpu_.engine();
    r.active = true;
    r.shape = s;
    r.from_md = from, r.to_md = to;
    r.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, from, eng, to));
    if (both_ways)
      r.back_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, to, eng, from));
    return r;
  }

  // t (N, C, H, W; nChw16c, nhwc or row-major) read or written at every (sh, sw)-th row and
  // column, and a dense channels-last (N, P, Q, C) array of the same elements: two plain strided
  // views with the same dims, between which one oneDNN reorder copies (nChw16c as
  // (N, C/16, P, Q, 16); the same view twice for an nhwc t at stride 1: no copy).
  static std::pair<memory::desc, memory::desc> channels_last_views(const TensorDesc& t, int64_t sh,
                                                                   int64_t sw) {
    const int64_t N = t.shape[0], C = t.shape[1], H = t.shape[2], W = t.shape[3];
    const int64_t P = (H - 1) / sh + 1, Q = (W - 1) / sw + 1;
    const memory::data_type dt = dnnl_dtype(t.dtype);
    if (t.layout == Layout::kNChw16c) {
      const memory::dims d{N, C / 16, P, Q, 16};
      return {memory::desc(d, dt, {C * H * W, 16 * H * W, 16 * sh * W, 16 * sw, 1}),
              memory::desc(d, dt, {P * Q * C, 16, Q * C, C, 1})};
    }
    const memory::dims d{N, C, P, Q};
    const memory::desc cl(d, dt, {P * Q * C, 1, Q * C, C});
    if (t.layout == Layout::kNhwc) {
      return {memory::desc(d, dt, {H * W * C, 1, sh * W * C, sw * C}), cl};
    }
    return {memory::desc(d, dt, {C * H * W, H * W, sh * W, sw}), cl};
  }

  // Under bf16, a pointwise convolution (1x1, unpadded, any stride) as two products over its
  // M = N P Q output positions, on channels-last copies of dy and of x read at the strided
  // positions: dx (M, C) = dy (M, K) W (K, C), scattered back into dx (zeros elsewhere), and
  // dW (K, C) += dy^T (K, M) x (M, C). Each is taken where oneDNN 2.6 runs its product on AMX
  // (on ResNet-50's shapes its matmul ran them up to 2x (dgrad; one shape even) and 1.5-4x
  // (wgrad) as fast as its AMX convolution backward: results/tuning.md) and the convolution's
  // own backward is on AMX too (the machine has it). A stride must divide the size it steps
  // over (oneDNN's strided views may not reach past the tensor). Sets mm_dgrad_on_ and
  // mm_wgrad_on_.
  void plan_pointwise_backward(const TensorDesc& x, const TensorDesc& y) {
    if (x.shape[2] % cfg_.stride_h != 0 || x.shape[3] % cfg_.stride_w != 0) return;
    const int64_t C = x.shape[1], K = y.shape[1], M = y.shape[0] * y.shape[2] * y.shape[3];
    const memory::data_type bf = memory::data_type::bf16, f32 = memory::data_type::f32;
    const memory::desc dy2({M, K}, bf, tag::ab), w2({K, C}, bf, tag::ab), x2({M, C}, bf, tag::ab);
    const memory::desc dyt({K, M}, bf, tag::ba), dw2({K, C}, f32, tag::ab);
    auto& eng = cpu_.engine();
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::primitive_attr attr_sum;  // not a copy of attr: copies share one oneDNN handle
    attr_sum.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    attr_sum.set_post_ops(sum);
    auto amx = [](const auto& pd) {
      return std::string(pd.impl_info_str()).find("amx") != std::string::npos;
    };
    Relayout x_cl, dy_cl;
    try {
      dnnl::matmul::primitive_desc d(dnnl::matmul::desc(dy2, w2, x2), attr, eng);
      dnnl::matmul::primitive_desc w(dnnl::matmul::desc(dyt, x2, dw2), attr, eng);
      dnnl::matmul::primitive_desc ws(dnnl::matmul::desc(dyt, x2, dw2), attr_sum, eng);
      if (!amx(bwd_data_pd_) || !amx(bwd_w_pd_)) return;
      mm_dgrad_pd_ = d, mm_wgrad_pd_ = w, mm_wgrad_sum_pd_ = ws;
      const auto [x_at, x_cl_md] = channels_last_views(x, cfg_.stride_h, cfg_.stride_w);
      const auto [dy_at, dy_cl_md] = channels_last_views(y, 1, 1);
      const Shape xs{y.shape[0], C, y.shape[2], y.shape[3]};
      x_cl = relayout(xs, x_at, x_cl_md, /*both_ways=*/true);
      dy_cl = relayout(y.shape, dy_at, dy_cl_md);
      x_at_md_ = x_at, dy_at_md_ = dy_at;
      dy2_md_ = dy2, w2_md_ = w2, x2_md_ = x2, dyt_md_ = dyt, dw2_md_ = dw2;
    } catch (const dnnl::error&) {
      return;  // no matmul or no strided reorder: keep the convolution's backward
    }
    if (amx(mm_dgrad_pd_)) {
      mm_dgrad_ = dnnl::matmul(mm_dgrad_pd_);
      mm_dgrad_on_ = true;
      dy_dgrad_ = dx_dgrad_ = Relayout{};  // the convolution's, not used
    }
    if (amx(mm_wgrad_pd_) && amx(mm_wgrad_sum_pd_)) {
      mm_wgrad_ = dnnl::matmul(mm_wgrad_pd_);
      mm_wgrad_sum_ = dnnl::matmul(mm_wgrad_sum_pd_);
      mm_wgrad_on_ = true;
      x_wgrad_ = dy_wgrad_ = Relayout{};
    }
    if (mm_dgrad_on_ || mm_wgrad_on_) x_cl_ = x_cl, dy_cl_ = dy_cl;
  }

  // dy into its channels-last copy; returns its data.
  void* pointwise_dy(const Tensor& dy) {
    return dy_cl_.into(cpu_, memory(dy_at_md_, cpu_.engine(), dy.raw())).get_data_handle();
  }

  // dx = dy W at the strided positions, zeros elsewhere; dy_data: pointwise_dy's.
  void pointwise_dgrad(void* dy_data, Tensor& dx) {
    auto& e = cpu_.engine();
    const memory w = w_mm_.read(cpu_, params_[0].value, w_mm_copy_, "Conv2d reorder");
    const memory dx_mem(x_at_md_, e, dx.raw());
    const memory dx_cl = x_cl_.back_source(cpu_, dx_mem);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(dy2_md_, e, dy_data)},
        {DNNL_ARG_WEIGHTS, memory(w2_md_, e, w.get_data_handle())},
        {DNNL_ARG_DST, memory(x2_md_, e, dx_cl.get_data_handle())}};
    add_scratch(args, mm_dgrad_pd_.scratchpad_desc());
    if (cfg_.stride_h * cfg_.stride_w > 1) be_.fill(dx, 0.f);
    execute(cpu_, mm_dgrad_, args, "Conv2d backward data (matmul)");
    x_cl_.back(cpu_, dx_cl, dx_mem);
  }

  // dW += dy^T x: straight into a row-major gradient, else through the scratch; dy_data:
  // pointwise_dy's.
  void pointwise_wgrad(void* dy_data, const Tensor& x) {
    auto& e = cpu_.engine();
    const memory x_cl = x_cl_.into(cpu_, memory(x_at_md_, e, x.raw()));
    const Tensor& g = params_[0].grad;
    const bool direct = g.layout() == Layout::kRowMajor;
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, memory(dyt_md_, e, dy_data)},
        {DNNL_ARG_WEIGHTS, memory(x2_md_, e, x_cl.get_data_handle())},
        {DNNL_ARG_DST, memory(dw2_md_, e, direct ? g.raw() : dw_scratch_.raw())}};
    add_scratch(args, (direct ? mm_wgrad_sum_pd_ : mm_wgrad_pd_).scratchpad_desc());
    execute(cpu_, direct ? mm_wgrad_sum_ : mm_wgrad_, args, "Conv2d backward weights (matmul)");
    if (!direct) dw_into_.add(cpu_, dw_scratch_.raw(), g, "Conv2d weight-gradient accumulate");
  }

  void add_scratch(std::unordered_map<int, memory>& args, const memory::desc& md) {
    if (md.get_size()) args[DNNL_ARG_SCRATCHPAD] = memory(md, cpu_.engine(), scratch_.raw());
  }

  Conv2dConfig cfg_;
  CpuBackend& cpu_;
  dnnl::convolution_forward::primitive_desc fwd_pd_;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd_;
  dnnl::convolution_backward_weights::primitive_desc bwd_w_pd_;
  dnnl::primitive fwd_, bwd_data_, bwd_w_;
  WeightsAs w_fwd_, w_bwd_;                  // the weights as forward and backward-data read them
  GradInto dw_into_;                         // wgrad's result into the gradient
  dnnl::primitive x_to_nhwc_, y_from_nhwc_;  // channels-last forward only
  // fprop, dgrad and wgrad on other layouts (where blocked ones have only the reference kernel)
  Relayout x_fwd_, y_fwd_, dy_dgrad_, dx_dgrad_, x_wgrad_, dy_wgrad_;
  Tensor w_fwd_copy_, w_bwd_copy_;  // transient weight copies where a format differs
  Tensor dw_scratch_, db_scratch_, scratch_;
  bool channels_last_ = false;  // the forward runs nhwc (x_nhwc_, y_nhwc_)
  bool bf16_ = false;           // bf16 x, y and weight copies
  Tensor x_nhwc_, y_nhwc_;      // channels-last forward only: one span of x and y
  // The pointwise backward as products (plan_pointwise_backward)
  bool mm_dgrad_on_ = false, mm_wgrad_on_ = false;
  dnnl::matmul::primitive_desc mm_dgrad_pd_, mm_wgrad_pd_, mm_wgrad_sum_pd_;
  dnnl::primitive mm_dgrad_, mm_wgrad_, mm_wgrad_sum_;
  memory::desc x_at_md_, dy_at_md_;                        // x's strided positions, dy
  memory::desc dy2_md_, w2_md_, x2_md_, dyt_md_, dw2_md_;  // the products' 2-D operands
  WeightsAs w_mm_;                                         // bf16 (K, C) row-major
  Tensor w_mm_copy_;
  // dy and x channels-last; x_cl_ also holds dx before the scatter (both ways)
  Relayout dy_cl_, x_cl_;
  memory::desc x_span_md_, y_span_md_;            // nChw16c slices of span_ images
  memory::desc x_span_nhwc_md_, y_span_nhwc_md_;  // the same slices, nhwc (built once)
  int64_t chunk_ = 0;                             // images per brgconv call
  int64_t span_ = 0;                              // images per reorder (a multiple of chunk_)
};

TBD_REGISTER_LAYER(Conv2dConfig, DeviceKind::kCpu, Conv2dOneDnn);

}  // namespace
}  // namespace tbd::cpu
