// layers/cpu/layer_norm_onednn.cpp: LayerNorm on oneDNN layer_normalization primitives.
//
// x is seen as (M, D) rows. The forward (training) writes the per-row mean and variance into
// buffers kept for backward (feature_maps). The backward primitive (prop_kind::backward)
// computes dx and the gamma/beta gradients together; it assigns them, so the parameter
// gradients go to a (D) workspace pair that is then added onto the accumulated gradients
// (2*D floats: negligible next to the M*D pass). When dx is not wanted (LayerNorm directly on
// graph input data) oneDNN would still need somewhere to write it, so that case computes
// only the parameter gradients with own loops instead.
#include <algorithm>
#include <cmath>

#include "backends/cpu/onednn.h"
#include "layers/layer_norm.h"

namespace tbd::cpu {
namespace {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;
using flags = dnnl::normalization_flags;

class LayerNormOneDnn final : public Layer {
 public:
  LayerNormOneDnn(Backend& be, const std::string& name, const LayerNormConfig& cfg,
                  const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract(name, cfg, in)), cfg_(cfg), cpu_(as_cpu(be)) {
    TBD_LAYER_CHECK(in[0].layout == Layout::kRowMajor, kind(), name,
                    "input x must be row-major, got ", in[0].to_string());
    D_ = in[0].shape[-1];
    M_ = in[0].shape.numel() / D_;

    data_md_ = memory::desc({M_, D_}, dt::f32, tag::ab);
    stat_md_ = memory::desc({M_}, dt::f32, tag::a);
    param_md_ = memory::desc({D_}, dt::f32, tag::a);
    const float eps = static_cast<float>(cfg.eps);
    const flags f = flags::use_scale | flags::use_shift;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto& eng = cpu_.engine();
    try {
      fwd_pd_ = dnnl::layer_normalization_forward::primitive_desc(
          dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_training, data_md_,
                                                  stat_md_, eps, f),
          attr, eng);
      bwd_pd_ = dnnl::layer_normalization_backward::primitive_desc(
          dnnl::layer_normalization_backward::desc(dnnl::prop_kind::backward, data_md_, data_md_,
                                                   stat_md_, eps, f),
          attr, eng, fwd_pd_);
    } catch (const dnnl::error& e) {
      throw_layer_error(kind(), name,
                        std::string("oneDNN has no layer normalization for x ") +
                            in[0].to_string() + ": " + e.what());
    }
    fwd_ = dnnl::layer_normalization_forward(fwd_pd_);
    bwd_ = dnnl::layer_normalization_backward(bwd_pd_);
    mean_ = be.empty(Shape{M_}, MemCategory::kFeatureMaps);
    var_ = be.empty(Shape{M_}, MemCategory::kFeatureMaps);
    dgamma_ = be.empty(Shape{D_}, MemCategory::kWorkspace);
    dbeta_ = be.empty(Shape{D_}, MemCategory::kWorkspace);
    std::size_t scratch =
        std::max(fwd_pd_.scratchpad_desc().get_size(), bwd_pd_.scratchpad_desc().get_size());
    if (scratch) {
      scratch_ = be.empty(Shape{static_cast<int64_t>((scratch + 3) / 4)}, MemCategory::kWorkspace);
    }
  }

  const char* kind() const override { return LayerNormConfig::kKind; }
  std::string describe() const override {
    return detail::concat("x ", inputs_[0].shape.to_string(), " eps=", cfg_.eps);
  }

  // y: (..., D)  x: (..., D)
  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), 1, "forward inputs");
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(data_md_, x[0]->raw())},
                                         {DNNL_ARG_DST, mem(data_md_, y[0]->raw())},
                                         {DNNL_ARG_MEAN, mem(stat_md_, mean_.raw())},
                                         {DNNL_ARG_VARIANCE, mem(stat_md_, var_.raw())},
                                         {DNNL_ARG_SCALE, mem(param_md_, params_[0].value.raw())},
                                         {DNNL_ARG_SHIFT, mem(param_md_, params_[1].value.raw())}};
    add_scratch(args, fwd_pd_.scratchpad_desc());
    execute(cpu_, fwd_, args, "LayerNorm forward");
  }

  // dx: (..., D)  dy: (..., D)  x: (..., D)
  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) {
      if (param_grads()) param_grads_only(dy[0]->f32(), x[0]->f32());
      return;
    }
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(data_md_, x[0]->raw())},
                                         {DNNL_ARG_DIFF_DST, mem(data_md_, dy[0]->raw())},
                                         {DNNL_ARG_MEAN, mem(stat_md_, mean_.raw())},
                                         {DNNL_ARG_VARIANCE, mem(stat_md_, var_.raw())},
                                         {DNNL_ARG_SCALE, mem(param_md_, params_[0].value.raw())},
                                         {DNNL_ARG_SHIFT, mem(param_md_, params_[1].value.raw())},
                                         {DNNL_ARG_DIFF_SRC, mem(data_md_, dx[0]->raw())},
                                         {DNNL_ARG_DIFF_SCALE, mem(param_md_, dgamma_.raw())},
                                         {DNNL_ARG_DIFF_SHIFT, mem(param_md_, dbeta_.raw())}};
    add_scratch(args, bwd_pd_.scratchpad_desc());
    execute(cpu_, bwd_, args, "LayerNorm backward");
    if (!param_grads()) return;  // computed into scratch, not added
    be_.accumulate(params_[0].grad, dgamma_);
    be_.accumulate(params_[1].grad, dbeta_);
  }

 private:
  memory mem(const memory::desc& md, void* p) { return memory(md, cpu_.engine(), p); }
  void add_scratch(std::unordered_map<int, memory>& args, const memory::desc& md) {
    if (md.get_size()) args[DNNL_ARG_SCRATCHPAD] = mem(md, scratch_.raw());
  }

  // dgamma += sum_m dy * xhat, dbeta += sum_m dy. Threads own column blocks (no races, and the
  // summation order is fixed, so the result is deterministic); rows stream through each block.
  void param_grads_only(const float* dy, const float* x) {
    const int64_t M = M_, D = D_;
    const float* mean = mean_.f32();
    const float* var = var_.f32();
    float* dg = params_[0].grad.f32();
    float* db = params_[1].grad.f32();
    const float eps = static_cast<float>(cfg_.eps);
    constexpr int64_t kCols = 64;
#pragma omp parallel for schedule(static) if (parallel : M * D > 16384)
    for (int64_t c0 = 0; c0 < D; c0 += kCols) {
      const int64_t c1 = std::min(D, c0 + kCols);
      for (int64_t m = 0; m < M; ++m) {
        const float mu = mean[m], inv = 1.0f / std::sqrt(var[m] + eps);
        const float* xr = x + m * D;
        const float* gr = dy + m * D;
#pragma omp simd
        for (int64_t d = c0; d < c1; ++d) {
          dg[d] += gr[d] * (xr[d] - mu) * inv;
          db[d] += gr[d];
        }
      }
    }
  }

  LayerNormConfig cfg_;
  CpuBackend& cpu_;
  int64_t M_ = 0, D_ = 0;
  memory::desc data_md_, stat_md_, param_md_;
  dnnl::layer_normalization_forward::primitive_desc fwd_pd_;
  dnnl::layer_normalization_backward::primitive_desc bwd_pd_;
  dnnl::primitive fwd_, bwd_;
  Tensor mean_, var_, dgamma_, dbeta_, scratch_;
};

TBD_REGISTER_LAYER(LayerNormConfig, DeviceKind::kCpu, LayerNormOneDnn);

}  // namespace
}  // namespace tbd::cpu
