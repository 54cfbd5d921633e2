// layers/cpu/pool2d_cpu.cpp: Pool2d and GlobalAvgPool2d on oneDNN pooling.
//
// x and y share x's layout (plain or nChw16c). Max pooling keeps oneDNN's workspace (the
// argmax of every window) as saved state for backward, category feature maps. Global average
// pooling is a pooling with an HxW kernel into (N, C, 1, 1) in x's layout: plain abcd and, for
// C % 16 == 0, nChw16c with 1x1 spatial are both byte-identical to (N, C) row-major, so y is
// written in place and is ready for a Linear layer without a reorder.
#include "backends/cpu/onednn.h"
#include "layers/pool2d.h"

namespace tbd::cpu {
namespace {

using dnnl::memory;

// One pooling problem: forward_training and backward primitives, workspace, scratchpad.
class PoolingPrims {
 public:
  PoolingPrims(CpuBackend& cpu, const char* kind, const std::string& name, const TensorDesc& x,
               dnnl::algorithm alg, const memory::desc& x_md, const memory::desc& y_md,
               const memory::dims& strides, const memory::dims& kernel, const memory::dims& pad_l,
               const memory::dims& pad_r)
      : cpu_(cpu), x_md_(x_md), y_md_(y_md) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto& eng = cpu.engine();
    try {
      fwd_pd_ = dnnl::pooling_forward::primitive_desc(
          dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, alg, x_md, y_md, strides,
                                      kernel, pad_l, pad_r),
          attr, eng);
      bwd_pd_ = dnnl::pooling_backward::primitive_desc(
          dnnl::pooling_backward::desc(alg, x_md, y_md, strides, kernel, pad_l, pad_r), attr, eng,
          fwd_pd_);
    } catch (const dnnl::error& e) {
      throw_layer_error(
          kind, name,
          std::string("oneDNN has no pooling for x ") + x.to_string() + ": " + e.what());
    }
    fwd_ = dnnl::pooling_forward(fwd_pd_);
    bwd_ = dnnl::pooling_backward(bwd_pd_);
    std::size_t ws = fwd_pd_.workspace_desc().get_size();
    if (ws) saved_.push_back({&workspace_, TensorDesc{Shape{static_cast<int64_t>((ws + 3) / 4)}}});
    std::size_t scratch =
        std::max(fwd_pd_.scratchpad_desc().get_size(), bwd_pd_.scratchpad_desc().get_size());
    if (scratch) {
      scratch_ = cpu.empty(Shape{static_cast<int64_t>((scratch + 3) / 4)}, MemCategory::kWorkspace);
    }
  }

  // The tensors kept from the forward to the backward (oneDNN's max-pooling indices; average
  // pooling keeps none), for the owning layer to declare as its saved state (Layer::saved);
  // undefined until bound.
  const std::vector<DeclaredTensor>& saved_state() const { return saved_; }

  void forward(void* y, const void* x, const char* who) {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(x_md_, x)},
                                         {DNNL_ARG_DST, mem(y_md_, y)}};
    if (workspace_.defined())
      args[DNNL_ARG_WORKSPACE] = mem(fwd_pd_.workspace_desc(), workspace_.raw());
    add_scratch(args, fwd_pd_.scratchpad_desc());
    execute(cpu_, fwd_, args, who);
  }

  void backward(void* dx, const void* dy, const char* who) {
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, mem(y_md_, dy)},
                                         {DNNL_ARG_DIFF_SRC, mem(x_md_, dx)}};
    if (workspace_.defined())
      args[DNNL_ARG_WORKSPACE] = mem(fwd_pd_.workspace_desc(), workspace_.raw());
    add_scratch(args, bwd_pd_.scratchpad_desc());
    execute(cpu_, bwd_, args, who);
  }

 private:
  memory mem(const memory::desc& md, const void* p) {
    return memory(md, cpu_.engine(), const_cast<void*>(p));
  }
  void add_scratch(std::unordered_map<int, memory>& args, const memory::desc& md) {
    if (md.get_size()) args[DNNL_ARG_SCRATCHPAD] = mem(md, scratch_.raw());
  }

  CpuBackend& cpu_;
  memory::desc x_md_, y_md_;
  dnnl::pooling_forward::primitive_desc fwd_pd_;
  dnnl::pooling_backward::primitive_desc bwd_pd_;
  dnnl::primitive fwd_, bwd_;
  Tensor workspace_, scratch_;
  std::vector<DeclaredTensor> saved_;
};

dnnl::algorithm pool_algorithm(const Pool2dConfig& c) {
  if (c.pool == PoolKind::kMax) return dnnl::algorithm::pooling_max;
  return c.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                             : dnnl::algorithm::pooling_avg_exclude_padding;
}

// oneDNN wants the right padding that makes its size formula give exactly P; floor mode can
// leave trailing rows unused (a negative value), which 0 expresses equally well.
int64_t right_pad(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad_l) {
  return std::max<int64_t>(0, (out - 1) * stride + kernel - in - pad_l);
}

class Pool2dOneDnn final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;  // oneDNN's pooling (average accumulated in f32)

  Pool2dOneDnn(Backend& be, const std::string& name, const Pool2dConfig& cfg,
               const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    const Shape& xs = in[0].shape;
    const Shape& ys = outputs_[0].shape;
    memory::dims pad_r{right_pad(xs[2], ys[2], cfg.kernel_h, cfg.stride_h, cfg.pad_h),
                       right_pad(xs[3], ys[3], cfg.kernel_w, cfg.stride_w, cfg.pad_w)};
    prims_ = std::make_unique<PoolingPrims>(
        as_cpu(be), kind(), name, in[0], pool_algorithm(cfg), md_of(in[0]), md_of(outputs_[0]),
        memory::dims{cfg.stride_h, cfg.stride_w}, memory::dims{cfg.kernel_h, cfg.kernel_w},
        memory::dims{cfg.pad_h, cfg.pad_w}, pad_r);
    for (const auto& [t, desc] : prims_->saved_state()) saved(*t, desc);
  }

  // oneDNN pools nChw16c and nchw alike: as it comes.
  static std::vector<Layout> input_layouts(const Pool2dConfig&, const std::vector<TensorDesc>& in) {
    return layouts_as_given(in);
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    prims_->forward(y[0]->raw(), x[0]->raw(), "Pool2d forward");
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0] != nullptr) prims_->backward(dx[0]->raw(), dy[0]->raw(), "Pool2d backward");
  }

 private:
  Pool2dConfig cfg_;
  std::unique_ptr<PoolingPrims> prims_;
};

class GlobalAvgPool2dOneDnn final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  GlobalAvgPool2dOneDnn(Backend& be, const std::string& name, const GlobalAvgPool2dConfig& cfg,
                        const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)) {
    const Shape& xs = in[0].shape;
    // (N, C, 1, 1) in x's layout: the same bytes as y's (N, C) row-major (see the top).
    TensorDesc y4{Shape{xs[0], xs[1], 1, 1}, in[0].dtype, in[0].layout};
    prims_ = std::make_unique<PoolingPrims>(
        as_cpu(be), kind(), name, in[0], dnnl::algorithm::pooling_avg_exclude_padding, md_of(in[0]),
        md_of(y4), memory::dims{1, 1}, memory::dims{xs[2], xs[3]}, memory::dims{0, 0},
        memory::dims{0, 0});
    for (const auto& [t, desc] : prims_->saved_state()) saved(*t, desc);
  }

  static std::vector<Layout> input_layouts(const GlobalAvgPool2dConfig&,
                                           const std::vector<TensorDesc>& in) {
    return layouts_as_given(in);
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    prims_->forward(y[0]->raw(), x[0]->raw(), "GlobalAvgPool2d forward");
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0] != nullptr) prims_->backward(dx[0]->raw(), dy[0]->raw(), "GlobalAvgPool2d backward");
  }

 private:
  std::unique_ptr<PoolingPrims> prims_;
};

TBD_REGISTER_LAYER(Pool2dConfig, DeviceKind::kCpu, Pool2dOneDnn);
TBD_REGISTER_LAYER(GlobalAvgPool2dConfig, DeviceKind::kCpu, GlobalAvgPool2dOneDnn);

}  // namespace
}  // namespace tbd::cpu
