// layers/cpu/input_grad_cpu.cpp: the input-gradient kinds (layers/input_grad.h) on the CPU.
//
// LinearDgrad runs three planned products (jit sgemm in f32); Conv2dDgrad runs oneDNN's convolution
// primitives with their roles exchanged (backward data as forward, forward as backward data,
// backward weights with v as the source), on nChw16c copies where the channels allow, else on plain
// nchw/oihw data; the elementwise, pooling and LayerNorm kinds are own loops, OpenMP over rows.
// All of them read and write row-major data (the graph reorders blocked activations first).
#include <cmath>

#include "backends/cpu/onednn.h"
#include "layers/cpu/conv_onednn.h"
#include "layers/cpu/matmul_onednn.h"
#include "layers/input_grad.h"

namespace tbd::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

constexpr int64_t kParallelMin = 16384;

// ---- LinearDgrad ----

// dx = dy W as a layer, x[0] = dy (M, O), W (O, I) the linear's weights (a tied parameter);
// its backward d(dy) = v W^T and dW += dy^T v. Three planned products (matmul_onednn.h: f32 on
// jit sgemm). Under bf16 dy, dx and v are bf16 and the products read a bf16 cast of W made at
// each call (forward and backward each: a transient, as Linear's); dW comes out f32.
class LinearDgradCpu final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  LinearDgradCpu(Backend& be, const std::string& name, const LinearDgradConfig& cfg,
                 const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cpu_(as_cpu(be)) {
    const int64_t O = in[0].shape[-1], I = cfg.in_features, M = in[0].shape.numel() / O;
    bf16_ = in[0].dtype == DType::kBF16;
    const memory::data_type a = dnnl_dtype(in[0].dtype);
    const memory::desc none;
    // dx (M, I) = dy (M, O) x W (O, I)
    fwd_ = make_matmul(cpu_, kind(), name, "forward", mat(M, O, false, a), mat(O, I, false, a),
                       none, mat(M, I, false, a), 1.f, false);
    // d(dy) (M, O) = v (M, I) x W^T (I, O)
    dgrad_ = make_matmul(cpu_, kind(), name, "backward data", mat(M, I, false, a),
                         mat(I, O, true, a), none, mat(M, O, false, a), 1.f, false);
    // dW (O, I) += dy^T (O, M) x v (M, I), f32
    wgrad_ = make_matmul(cpu_, kind(), name, "weight gradient", mat(O, M, true, a),
                         mat(M, I, false, a), none, mat(O, I, false), 1.f, true);
    if (bf16_) transient(w16_, TensorDesc{Shape{O, I}, DType::kBF16});
    if (const std::size_t b = max_scratch_bytes({&fwd_, &dgrad_, &wgrad_})) transient(scratch_, b);
  }

  std::string implementation() const override {
    if (!bf16_) return {};
    return detail::concat("fwd ", fwd_.pd.impl_info_str(), " bwd ", dgrad_.pd.impl_info_str(), "/",
                          wgrad_.pd.impl_info_str(), " (bf16 weight copy made ",
                          param_copies_made(), ")");
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    run_matmul(cpu_, fwd_, x[0]->raw(), weights(), nullptr, y[0]->raw(), scratch_,
               "LinearDgrad forward");
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] != nullptr) {
      run_matmul(cpu_, dgrad_, dy[0]->raw(), weights(), nullptr, dx[0]->raw(), scratch_,
                 "LinearDgrad backward data");
    }
    if (param_grads()) {
      run_matmul(cpu_, wgrad_, x[0]->raw(), dy[0]->raw(), nullptr, params_[0].grad.raw(), scratch_,
                 "LinearDgrad weight gradient");
    }
  }

 private:
  // The f32 master, or under bf16 its cast (made once per forward pass in a graph).
  const void* weights() {
    const Tensor& w = params_[0].value;
    if (!bf16_) return w.raw();
    return bf16_param_copy(0, w16_, bf16_cast_of(w));
  }

  CpuBackend& cpu_;
  bool bf16_ = false;
  Matmul fwd_, dgrad_, wgrad_;
  Tensor w16_, scratch_;
};

TBD_REGISTER_LAYER(LinearDgradConfig, DeviceKind::kCpu, LinearDgradCpu);

// ---- Conv2dDgrad ----

// With C and K multiples of 16 (every convolution of WGAN-GP's critic but its input one) the
// primitives run on nChw16c activations and blocked weights, where oneDNN 2.6 has its jit
// kernels (on plain nchw it picks an im2col gemm, about 1.7x slower on the critic's 3x3s): the
// row-major dy, v and results are reordered at the layer's edge, and dy's blocked copy made by
// the forward is what the weight gradient reads (saved state). Otherwise plain nchw/oihw
// throughout. The weights are the convolution's (a tied parameter), stored in the layout that
// layer chose (packed in its forward's format): each call reads them directly where its
// primitive wants that format, else through a transient copy reordered per call, and the
// weight gradient is added into the convolution's gradient in its layout.
class Conv2dDgradCpu final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  Conv2dDgradCpu(Backend& be, const std::string& name, const Conv2dDgradConfig& cfg,
                 const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cpu_(as_cpu(be)) {
    const Conv2dConfig& c = cfg.conv;
    const Shape& xs = outputs_[0].shape;  // the forward conv's x
    const Shape& ys = in[0].shape;        // its y
    const int64_t G = c.groups, K = c.out_channels, C = xs[1];
    const DType t = in[0].dtype;
    bf16_ = t == DType::kBF16;
    // bf16 runs channels-last, reordered at the edges the same way: on nhwc oneDNN 2.6 has its
    // AMX kernels (on nChw16c only avx512_core_bf16's, several times slower on an AMX CPU: see
    // conv2d_cpu.cpp) and, where the channels do not block, jit bf16 kernels at all (on plain
    // nchw only its gemm-based ones).
    nhwc_ = bf16_ && G == 1;
    blocked_ = (G == 1 && C % 16 == 0 && K % 16 == 0) || nhwc_;
    const OneDnnConv conv(c, xs, ys);
    w_md_ = conv.w_user;
    x_plain_md_ = md_of(TensorDesc{xs, t});
    y_plain_md_ = md_of(TensorDesc{ys, t});
    x_md_ = nhwc_      ? memory::desc(dnnl_dims(xs), dnnl_dtype(t), tag::nhwc)
            : blocked_ ? md_of(TensorDesc{xs, t, Layout::kNChw16c})
                       : x_plain_md_;
    y_md_ = nhwc_      ? memory::desc(dnnl_dims(ys), dnnl_dtype(t), tag::nhwc)
            : blocked_ ? md_of(TensorDesc{ys, t, Layout::kNChw16c})
                       : y_plain_md_;
    // Under bf16 the two data products read bf16 weights (the f32 master cast in WeightsAs's
    // reorder at each call) and the weight gradient comes out f32, as Conv2d's.
    const memory::data_type wt = dnnl_dtype(t);
    const memory::desc w_prim =
        blocked_ ? conv.w_any(wt) : memory::desc(conv.w_dims, wt, G == 1 ? tag::oihw : tag::goihw);
    const memory::desc dw_prim = blocked_ ? conv.w_any() : w_md_;
    auto& eng = cpu_.engine();
    try {
      fwd_pd_ = conv.forward(x_md_, w_prim, memory::desc(), y_md_, eng);
      bwd_data_pd_ = conv.backward_data(x_md_, w_prim, y_md_, eng, fwd_pd_);
      bwd_w_pd_ = conv.backward_weights(x_md_, dw_prim, memory::desc(), y_md_, eng, fwd_pd_);
    } catch (const dnnl::error& e) {
      throw_layer_error(
          kind(), name,
          std::string("oneDNN has no convolution for dy ") + in[0].to_string() + ": " + e.what());
    }
    fwd_ = dnnl::convolution_forward(fwd_pd_);
    bwd_data_ = dnnl::convolution_backward_data(bwd_data_pd_);
    bwd_w_ = dnnl::convolution_backward_weights(bwd_w_pd_);
    const std::size_t scratch =
        std::max({fwd_pd_.scratchpad_desc().get_size(), bwd_data_pd_.scratchpad_desc().get_size(),
                  bwd_w_pd_.scratchpad_desc().get_size()});
    if (scratch) {
      transient(scratch_, scratch);
    }
    // Copies for whatever layout the weights are bound in (known once the graph ties them).
    w_fwd_ = WeightsAs(fwd_pd_.weights_desc(), w_md_);
    w_bwd_ = WeightsAs(bwd_data_pd_.weights_desc(), w_md_);
    transient(w_fwd_copy_, w_fwd_.copy_bytes());
    transient(w_bwd_copy_, w_bwd_.copy_bytes());
    transient(dw_scratch_, bwd_w_pd_.diff_weights_desc().get_size());  // backward only
    dw_into_ = GradInto(bwd_w_pd_.diff_weights_desc(), w_md_);
    if (!blocked_) return;
    auto reorder = [&](const memory::desc& from, const memory::desc& to) {
      return dnnl::reorder(dnnl::reorder::primitive_desc(eng, from, eng, to));
    };
    saved(dy_blk_, TensorDesc{ys, t});     // read again by the weight gradient
    transient(x_blk_, TensorDesc{xs, t});  // inside one call each
    transient(y_blk_, TensorDesc{ys, t});
    x_to_blk_ = reorder(x_plain_md_, x_md_);
    x_from_blk_ = reorder(x_md_, x_plain_md_);
    y_to_blk_ = reorder(y_plain_md_, y_md_);
    y_from_blk_ = reorder(y_md_, y_plain_md_);
  }
  std::string implementation() const override {
    return detail::concat(nhwc_      ? "nhwc "
                          : blocked_ ? "nChw16c "
                                     : "",
                          "fwd ", bwd_data_pd_.impl_info_str(), " bwd ", fwd_pd_.impl_info_str(),
                          "/", bwd_w_pd_.impl_info_str(),
                          bf16_ ? " (bf16 weights cast per call)" : "");
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {  // dx = conv backward data of dy
    const memory w = w_bwd_.read(cpu_, params_[0].value, w_bwd_copy_, "Conv2dDgrad reorder");
    if (!blocked_) {
      std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, mem(y_md_, *x[0])},
                                           {DNNL_ARG_WEIGHTS, w},
                                           {DNNL_ARG_DIFF_SRC, mem(x_md_, *y[0])}};
      add_scratch(args, bwd_data_pd_.scratchpad_desc());
      execute(cpu_, bwd_data_, args, "Conv2dDgrad forward");
      return;
    }
    copy(y_to_blk_, mem(y_plain_md_, *x[0]), mem(y_md_, dy_blk_));
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, mem(y_md_, dy_blk_)},
                                         {DNNL_ARG_WEIGHTS, w},
                                         {DNNL_ARG_DIFF_SRC, mem(x_md_, x_blk_)}};
    add_scratch(args, bwd_data_pd_.scratchpad_desc());
    execute(cpu_, bwd_data_, args, "Conv2dDgrad forward");
    copy(x_from_blk_, mem(x_md_, x_blk_), mem(x_plain_md_, *y[0]));
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (!blocked_) {  // (the blocked path reads dy's copy from the forward instead of x)
      backward_plain(dx, dy, x);
      return;
    }
    const memory v = mem(x_md_, x_blk_);
    copy(x_to_blk_, mem(x_plain_md_, *dy[0]), v);
    if (dx[0] != nullptr) {  // d(dy) = conv(v, W)
      const memory w = w_fwd_.read(cpu_, params_[0].value, w_fwd_copy_, "Conv2dDgrad reorder");
      std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, v}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, mem(y_md_, y_blk_)}};
      add_scratch(args, fwd_pd_.scratchpad_desc());
      execute(cpu_, fwd_, args, "Conv2dDgrad backward data");
      copy(y_from_blk_, mem(y_md_, y_blk_), mem(y_plain_md_, *dx[0]));
    }
    if (!param_grads()) return;
    // d(W) += wgrad(src = v, diff_dst = dy), dy's blocked copy from the forward
    const memory dw = mem(bwd_w_pd_.diff_weights_desc(), dw_scratch_);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, v}, {DNNL_ARG_DIFF_DST, mem(y_md_, dy_blk_)}, {DNNL_ARG_DIFF_WEIGHTS, dw}};
    add_scratch(args, bwd_w_pd_.scratchpad_desc());
    execute(cpu_, bwd_w_, args, "Conv2dDgrad backward weights");
    dw_into_.add(cpu_, dw_scratch_.raw(), params_[0].grad,
                 "Conv2dDgrad weight-gradient accumulate");
  }

 private:
  void backward_plain(MutTensorRefs dx, TensorRefs dy, TensorRefs x) {
    if (dx[0] != nullptr) {  // d(dy) = conv(v, W)
      const memory w = w_fwd_.read(cpu_, params_[0].value, w_fwd_copy_, "Conv2dDgrad reorder");
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(x_md_, *dy[0])},
                                           {DNNL_ARG_WEIGHTS, w},
                                           {DNNL_ARG_DST, mem(y_md_, *dx[0])}};
      add_scratch(args, fwd_pd_.scratchpad_desc());
      execute(cpu_, fwd_, args, "Conv2dDgrad backward data");
    }
    if (!param_grads()) return;
    // d(W) += wgrad(src = v, diff_dst = dy)
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, mem(x_md_, *dy[0])},
        {DNNL_ARG_DIFF_DST, mem(y_md_, *x[0])},
        {DNNL_ARG_DIFF_WEIGHTS, mem(bwd_w_pd_.diff_weights_desc(), dw_scratch_)}};
    add_scratch(args, bwd_w_pd_.scratchpad_desc());
    execute(cpu_, bwd_w_, args, "Conv2dDgrad backward weights");
    dw_into_.add(cpu_, dw_scratch_.raw(), params_[0].grad,
                 "Conv2dDgrad weight-gradient accumulate");
  }

  memory mem(const memory::desc& md, const Tensor& t) { return memory(md, cpu_.engine(), t.raw()); }
  void copy(const dnnl::primitive& r, const memory& from, const memory& to) {
    execute(cpu_, r, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, "Conv2dDgrad reorder");
  }
  void add_scratch(std::unordered_map<int, memory>& args, const memory::desc& md) {
    if (md.get_size()) args[DNNL_ARG_SCRATCHPAD] = memory(md, cpu_.engine(), scratch_.raw());
  }

  Conv2dDgradConfig cfg_;
  CpuBackend& cpu_;
  bool blocked_ = false;  // reordered at the edges into x_md_, y_md_ (nChw16c or nhwc)
  bool nhwc_ = false;
  bool bf16_ = false;  // bf16 dy, dx and weight copies
  memory::desc x_md_, y_md_, w_md_, x_plain_md_, y_plain_md_;
  dnnl::convolution_forward::primitive_desc fwd_pd_;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd_;
  dnnl::convolution_backward_weights::primitive_desc bwd_w_pd_;
  dnnl::primitive fwd_, bwd_data_, bwd_w_;
  WeightsAs w_fwd_, w_bwd_;  // the weights as the two convolutions read them
  GradInto dw_into_;         // the weight gradient into the convolution's
  Tensor w_fwd_copy_, w_bwd_copy_, dw_scratch_, scratch_;
  // The blocked path: reorders at the edges, dy's blocked copy (saved).
  dnnl::primitive x_to_blk_, x_from_blk_, y_to_blk_, y_from_blk_;
  Tensor dy_blk_, x_blk_, y_blk_;
};

TBD_REGISTER_LAYER(Conv2dDgradConfig, DeviceKind::kCpu, Conv2dDgradCpu);

// ---- ActivationDgrad ----

class ActivationDgradCpu final : public Layer {
 public:
  ActivationDgradCpu(Backend& be, const std::string& name, const ActivationDgradConfig& cfg,
                     const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    slope_ = cfg.act.act == ActKind::kRelu ? 0.f : static_cast<float>(cfg.act.alpha);
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {  // dx = dy * f'(x)
    scale(y[0]->f32(), x[0]->f32(), x[1]->f32());
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] != nullptr) scale(dx[0]->f32(), dy[0]->f32(), x[1]->f32());  // v * f'(x)
  }

 private:
  void scale(float* out, const float* in, const float* x) const {
    const int64_t E = inputs_[0].shape.numel();
    const float s = slope_;
#pragma omp parallel for simd schedule(static) if (parallel : E > kParallelMin)
    for (int64_t i = 0; i < E; ++i) out[i] = x[i] > 0.f ? in[i] : s * in[i];
  }

  ActivationDgradConfig cfg_;
  float slope_ = 0.f;
};

TBD_REGISTER_LAYER(ActivationDgradConfig, DeviceKind::kCpu, ActivationDgradCpu);

// ---- Pool2dDgrad (average) ----

class Pool2dDgradCpu final : public Layer {
 public:
  Pool2dDgradCpu(Backend& be, const std::string& name, const Pool2dDgradConfig& cfg,
                 const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {}

  // dx[h, w] = sum over the windows (p, q) that cover (h, w) of dy[p, q] / divisor(p, q).
  void fprop(MutTensorRefs y, TensorRefs x) override {
    for_planes([&](int64_t plane) {
      const float* dy = x[0]->f32() + plane * P() * Q();
      float* dx = y[0]->f32() + plane * H() * W();
      std::fill(dx, dx + H() * W(), 0.f);
      for_windows(
          [&](int64_t p, int64_t q, int64_t h0, int64_t h1, int64_t w0, int64_t w1, float inv) {
            const float g = dy[p * Q() + q] * inv;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) dx[h * W() + w] += g;
          });
    });
  }
  // d(dy)[p, q] = average pooling of v.
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    for_planes([&](int64_t plane) {
      const float* v = dy[0]->f32() + plane * H() * W();
      float* out = dx[0]->f32() + plane * P() * Q();
      for_windows(
          [&](int64_t p, int64_t q, int64_t h0, int64_t h1, int64_t w0, int64_t w1, float inv) {
            float s = 0.f;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) s += v[h * W() + w];
            out[p * Q() + q] = s * inv;
          });
    });
  }

 private:
  int64_t H() const { return outputs_[0].shape[2]; }
  int64_t W() const { return outputs_[0].shape[3]; }
  int64_t P() const { return inputs_[0].shape[2]; }
  int64_t Q() const { return inputs_[0].shape[3]; }

  template <class F>
  void for_planes(F&& f) const {
    const int64_t planes = inputs_[0].shape[0] * inputs_[0].shape[1];
    const int64_t work = planes * H() * W();
#pragma omp parallel for schedule(static) if (parallel : work > kParallelMin)
    for (int64_t i = 0; i < planes; ++i) f(i);
  }
  // Each output window clipped to the image, with its divisor (the window's size, or its
  // in-image part without count_include_pad).
  template <class F>
  void for_windows(F&& f) const {
    const Pool2dConfig& c = cfg_.pool;
    for (int64_t p = 0; p < P(); ++p) {
      const int64_t hs = p * c.stride_h - c.pad_h;
      const int64_t h0 = std::max<int64_t>(hs, 0), h1 = std::min(hs + c.kernel_h, H());
      for (int64_t q = 0; q < Q(); ++q) {
        const int64_t ws = q * c.stride_w - c.pad_w;
        const int64_t w0 = std::max<int64_t>(ws, 0), w1 = std::min(ws + c.kernel_w, W());
        const int64_t n = c.count_include_pad ? c.kernel_h * c.kernel_w : (h1 - h0) * (w1 - w0);
        f(p, q, h0, h1, w0, w1, n > 0 ? 1.f / static_cast<float>(n) : 0.f);
      }
    }
  }

  Pool2dDgradConfig cfg_;
};

TBD_REGISTER_LAYER(Pool2dDgradConfig, DeviceKind::kCpu, Pool2dDgradCpu);

// ---- LayerNormDgrad ----

// Row statistics in double; per row: mean and r from x, then the formulas of
// layers/input_grad.h. d(gamma) is a sum per gamma entry, done after the rows from saved row
// scalars. A row's values go as P runs of G (kLastDim: D runs of 1; kChw: C channels of H*W),
// run p using gamma[p].
class LayerNormDgradCpu final : public Layer {
 public:
  LayerNormDgradCpu(Backend& be, const std::string& name, const LayerNormDgradConfig& cfg,
                    const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    rows_ = layer_norm_rows(cfg.ln, in[1].shape);
    D_ = rows_.D;
    M_ = rows_.M;
    rows_buf_ = be.empty(Shape{2 * 4 * M_}, MemCategory::kWorkspace);  // 4 doubles per row
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    const float* dy = x[0]->f32();
    const float* xv = x[1]->f32();
    const float* gamma = params_[0].value.f32();
    float* out = y[0]->f32();
    const int64_t D = D_, P = rows_.P, G = rows_.G;
#pragma omp parallel for schedule(static) if (parallel : M_ * D > kParallelMin)
    for (int64_t m = 0; m < M_; ++m) {
      const float* xr = xv + m * D;
      const float* dr = dy + m * D;
      double mu, r;
      stats(xr, &mu, &r);
      double mg = 0, mgx = 0;
      for (int64_t p = 0; p < P; ++p) {
        const double gm = gamma[p];
        double s = 0, sx = 0;
        for (int64_t i = p * G; i < (p + 1) * G; ++i) {
          s += dr[i];
          sx += dr[i] * (xr[i] - mu);
        }
        mg += gm * s;
        mgx += gm * sx * r;
      }
      mg /= static_cast<double>(D);
      mgx /= static_cast<double>(D);
      for (int64_t p = 0; p < P; ++p) {
        const double gm = gamma[p];
        for (int64_t i = p * G; i < (p + 1) * G; ++i) {
          const double xh = (xr[i] - mu) * r;
          out[m * D + i] = static_cast<float>(r * (dr[i] * gm - mg - xh * mgx));
        }
      }
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dyv, TensorRefs x, TensorRefs /*y*/) override {
    const float* v = dyv[0]->f32();
    const float* dy = x[0]->f32();
    const float* xv = x[1]->f32();
    const float* gamma = params_[0].value.f32();
    float* ddy = dx[0] ? dx[0]->f32() : nullptr;
    float* dxx = dx[1] ? dx[1]->f32() : nullptr;
    double* row = rows_buf_.data<double>();  // per row: mu, r, mean(v), mean(v xh)
    const int64_t D = D_, P = rows_.P, G = rows_.G;
    const double inv_d = 1.0 / static_cast<double>(D);
#pragma omp parallel for schedule(static) if (parallel : M_ * D > kParallelMin)
    for (int64_t m = 0; m < M_; ++m) {
      const float* xr = xv + m * D;
      const float* dr = dy + m * D;
      const float* vr = v + m * D;
      double mu, r;
      stats(xr, &mu, &r);
      double mg = 0, mgx = 0, mv = 0, mvx = 0, mvg = 0;
      for (int64_t p = 0; p < P; ++p) {
        const double gm = gamma[p];
        double sg = 0, sgx = 0, sv = 0, svx = 0, svg = 0;
        for (int64_t i = p * G; i < (p + 1) * G; ++i) {
          const double xh = (xr[i] - mu) * r;
          sg += dr[i];
          sgx += dr[i] * xh;
          sv += vr[i];
          svx += vr[i] * xh;
          svg += static_cast<double>(vr[i]) * dr[i];
        }
        mg += gm * sg, mgx += gm * sgx, mv += sv, mvx += svx, mvg += gm * svg;
      }
      mg *= inv_d, mgx *= inv_d, mv *= inv_d, mvx *= inv_d, mvg *= inv_d;
      row[4 * m + 0] = mu, row[4 * m + 1] = r, row[4 * m + 2] = mv, row[4 * m + 3] = mvx;
      const double c_xh = mgx * mvx - mvg + mg * mv;
      for (int64_t p = 0; p < P; ++p) {
        const double gm = gamma[p];
        for (int64_t i = p * G; i < (p + 1) * G; ++i) {
          const double xh = (xr[i] - mu) * r, g = dr[i] * gm;
          const double pv = vr[i] - mv - xh * mvx;
          if (ddy) ddy[m * D + i] = static_cast<float>(r * pv * gm);
          if (dxx) {
            const double pg = g - mg - xh * mgx;
            dxx[m * D + i] = static_cast<float>(r * r * (xh * c_xh - pg * mvx - pv * mgx));
          }
        }
      }
    }
    if (!param_grads()) return;
    // d(gamma)[p] += sum over rows and the run's values of r P(v) dy
    float* dgamma = params_[0].grad.f32();
#pragma omp parallel for schedule(static) if (parallel : M_ * D > kParallelMin)
    for (int64_t p = 0; p < P; ++p) {
      double s = 0;
      for (int64_t m = 0; m < M_; ++m) {
        const double mu = row[4 * m], r = row[4 * m + 1];
        for (int64_t i = m * D + p * G; i < m * D + (p + 1) * G; ++i) {
          const double xh = (xv[i] - mu) * r;
          const double pv = v[i] - row[4 * m + 2] - xh * row[4 * m + 3];
          s += r * pv * dy[i];
        }
      }
      dgamma[p] += static_cast<float>(s);
    }
  }

 private:
  void stats(const float* xr, double* mu, double* r) const {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < D_; ++i) s += xr[i];
    const double mean = s / static_cast<double>(D_);
    for (int64_t i = 0; i < D_; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
    *mu = mean;
    *r = 1.0 / std::sqrt(ss / static_cast<double>(D_) + cfg_.ln.eps);
  }

  LayerNormDgradConfig cfg_;
  LayerNormRows rows_;
  int64_t M_ = 0, D_ = 0;
  Tensor rows_buf_;
};

TBD_REGISTER_LAYER(LayerNormDgradConfig, DeviceKind::kCpu, LayerNormDgradCpu);

}  // namespace
}  // namespace tbd::cpu
