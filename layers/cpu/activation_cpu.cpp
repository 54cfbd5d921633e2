// layers/cpu/activation_cpu.cpp: Activation on oneDNN eltwise (forward_training, backward).
//
// An elementwise op does not care about layout, so x (plain or nChw16c, any rank) is described
// to oneDNN as one dense 1-D run of numel floats; y keeps x's layout. relu, leaky relu (alpha
// >= 0), tanh and sigmoid use the *_use_dst_for_bwd algorithms: backward then reads y instead of
// recomputing the function of x (cheaper for tanh/sigmoid). gelu (erf form) needs x. Clipped
// relu is clip_v2 with bounds (0, ceiling) in its use_dst_for_bwd form: its gradient passes
// where 0 < y < ceiling, which is 0 < x < ceiling (the first clip's gradient would also pass at
// x == ceiling).
#include "backends/cpu/onednn.h"
#include "layers/activation.h"

namespace tbd::cpu {
namespace {

using dnnl::algorithm;
using dnnl::memory;

class ActivationOneDnn final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;  // oneDNN's eltwise: bf16 in and out, f32 inside

  ActivationOneDnn(Backend& be, const std::string& name, const ActivationConfig& cfg,
                   const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cpu_(as_cpu(be)) {
    float alpha = 0.f, beta = 0.f;
    switch (cfg.act) {
      case ActKind::kRelu:
        alg_ = algorithm::eltwise_relu_use_dst_for_bwd;
        break;
      case ActKind::kLeakyRelu:
        alpha = static_cast<float>(cfg.alpha);
        // y keeps x's sign only for alpha >= 0, so only then can backward read y.
        alg_ = alpha >= 0 ? algorithm::eltwise_relu_use_dst_for_bwd : algorithm::eltwise_relu;
        break;
      case ActKind::kTanh:
        alg_ = algorithm::eltwise_tanh_use_dst_for_bwd;
        break;
      case ActKind::kSigmoid:
        alg_ = algorithm::eltwise_logistic_use_dst_for_bwd;
        break;
      case ActKind::kGelu:
        alg_ = algorithm::eltwise_gelu_erf;
        break;
      case ActKind::kGeluTanh:
        alg_ = algorithm::eltwise_gelu_tanh;
        break;
      case ActKind::kClippedRelu:
        alg_ = algorithm::eltwise_clip_v2_use_dst_for_bwd;
        beta = static_cast<float>(cfg.ceiling);
        break;
    }
    use_dst_ = alg_ == algorithm::eltwise_relu_use_dst_for_bwd ||
               alg_ == algorithm::eltwise_tanh_use_dst_for_bwd ||
               alg_ == algorithm::eltwise_logistic_use_dst_for_bwd ||
               alg_ == algorithm::eltwise_clip_v2_use_dst_for_bwd;
    md_ = memory::desc({in[0].shape.numel()}, dnnl_dtype(in[0].dtype), memory::format_tag::a);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto& eng = cpu_.engine();
    try {
      fwd_pd_ = dnnl::eltwise_forward::primitive_desc(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, alg_, md_, alpha, beta),
          attr, eng);
      bwd_pd_ = dnnl::eltwise_backward::primitive_desc(
          dnnl::eltwise_backward::desc(alg_, md_, md_, alpha, beta), attr, eng, fwd_pd_);
    } catch (const dnnl::error& e) {
      throw_layer_error(kind(), name,
                        std::string("oneDNN has no eltwise ") + to_string(cfg.act) + " for x " +
                            in[0].to_string() + ": " + e.what());
    }
    fwd_ = dnnl::eltwise_forward(fwd_pd_);
    bwd_ = dnnl::eltwise_backward(bwd_pd_);
    std::size_t scratch =
        std::max(fwd_pd_.scratchpad_desc().get_size(), bwd_pd_.scratchpad_desc().get_size());
    if (scratch) {
      transient(scratch_, scratch);
    }
  }

  // Elementwise over the buffer (or per channel): any layout, as it comes.
  static std::vector<Layout> input_layouts(const ActivationConfig&,
                                           const std::vector<TensorDesc>& in) {
    return layouts_as_given(in);
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, flat(*x[0])}, {DNNL_ARG_DST, flat(*y[0])}};
    add_scratch(args, fwd_pd_.scratchpad_desc());
    execute(cpu_, fwd_, args, "Activation forward");
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    if (dx[0] == nullptr) return;
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, flat(*dy[0])},
                                         {DNNL_ARG_DIFF_SRC, flat(*dx[0])}};
    if (use_dst_) {
      args[DNNL_ARG_DST] = flat(*y[0]);
    } else {
      args[DNNL_ARG_SRC] = flat(*x[0]);
    }
    add_scratch(args, bwd_pd_.scratchpad_desc());
    execute(cpu_, bwd_, args, "Activation backward");
  }

 private:
  memory flat(const Tensor& t) { return memory(md_, cpu_.engine(), t.raw()); }
  void add_scratch(std::unordered_map<int, memory>& args, const memory::desc& md) {
    if (md.get_size()) args[DNNL_ARG_SCRATCHPAD] = memory(md, cpu_.engine(), scratch_.raw());
  }

  ActivationConfig cfg_;
  CpuBackend& cpu_;
  algorithm alg_ = algorithm::eltwise_relu;
  bool use_dst_ = false;
  memory::desc md_;
  dnnl::eltwise_forward::primitive_desc fwd_pd_;
  dnnl::eltwise_backward::primitive_desc bwd_pd_;
  dnnl::primitive fwd_, bwd_;
  Tensor scratch_;
};

TBD_REGISTER_LAYER(ActivationConfig, DeviceKind::kCpu, ActivationOneDnn);

}  // namespace
}  // namespace tbd::cpu
