// layers/cpu/batchnorm2d_onednn.cpp: BatchNorm2d on oneDNN batch_normalization.
//
// x and y share x's layout (plain or nChw16c; nothing is reordered). Training: forward_training
// computes the batch mean and biased variance into saved state (feature maps, C floats each);
// our own loop then updates the running statistics with the unbiased variance (PyTorch).
// Eval: forward_inference with use_global_stats on the running statistics. Backward uses the
// saved batch statistics (or, in eval mode, the running ones as constants). oneDNN assigns
// diff_scale/diff_shift, so they go to workspace scratch and are added onto the gradients (+=).
#include <cmath>

#include "backends/cpu/onednn.h"
#include "layers/batchnorm2d.h"

namespace tbd::cpu {
namespace {

using dnnl::memory;
using nf = dnnl::normalization_flags;

class BatchNorm2dOneDnn final : public BatchNorm2dLayer {
 public:
  BatchNorm2dOneDnn(Backend& be, const std::string& name, const BatchNorm2dConfig& cfg,
                    const std::vector<TensorDesc>& in)
      : BatchNorm2dLayer(be, name, in, contract(name, cfg, in)), cfg_(cfg), cpu_(as_cpu(be)) {
    const int64_t C = in[0].shape[1];
    running_mean_ = be.empty(Shape{C}, MemCategory::kDynamic);
    running_var_ = be.empty(Shape{C}, MemCategory::kDynamic);
    be.fill(running_mean_, 0.f);
    be.fill(running_var_, 1.f);
    mean_ = be.empty(Shape{C}, MemCategory::kFeatureMaps);
    var_ = be.empty(Shape{C}, MemCategory::kFeatureMaps);
    dscale_ = be.empty(Shape{C}, MemCategory::kWorkspace);
    dshift_ = be.empty(Shape{C}, MemCategory::kWorkspace);

    memory::desc x_md = md_of(in[0]);
    const float eps = static_cast<float>(cfg.eps);
    const nf flags = nf::use_scale | nf::use_shift;
    const nf global = flags | nf::use_global_stats;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto& eng = cpu_.engine();
    using fwd = dnnl::batch_normalization_forward;
    using bwd = dnnl::batch_normalization_backward;
    try {
      fwd_train_pd_ = fwd::primitive_desc(
          fwd::desc(dnnl::prop_kind::forward_training, x_md, eps, flags), attr, eng);
      fwd_eval_pd_ = fwd::primitive_desc(
          fwd::desc(dnnl::prop_kind::forward_inference, x_md, eps, global), attr, eng);
      bwd_train_pd_ = bwd::primitive_desc(
          bwd::desc(dnnl::prop_kind::backward, x_md, x_md, eps, flags), attr, eng, fwd_train_pd_);
      // The hint must have the same flags, so it is a training-kind twin of the eval forward.
      fwd::primitive_desc global_hint(
          fwd::desc(dnnl::prop_kind::forward_training, x_md, eps, global), attr, eng);
      bwd_eval_pd_ = bwd::primitive_desc(
          bwd::desc(dnnl::prop_kind::backward, x_md, x_md, eps, global), attr, eng, global_hint);
    } catch (const dnnl::error& e) {
      throw_layer_error(kind(), name,
                        std::string("oneDNN has no batch normalization for x ") +
                            in[0].to_string() + ": " + e.what());
    }
    fwd_train_ = fwd(fwd_train_pd_);
    fwd_eval_ = fwd(fwd_eval_pd_);
    bwd_train_ = bwd(bwd_train_pd_);
    bwd_eval_ = bwd(bwd_eval_pd_);
    std::size_t scratch = std::max(
        {fwd_train_pd_.scratchpad_desc().get_size(), fwd_eval_pd_.scratchpad_desc().get_size(),
         bwd_train_pd_.scratchpad_desc().get_size(), bwd_eval_pd_.scratchpad_desc().get_size()});
    if (scratch) {
      scratch_ = be.empty(Shape{static_cast<int64_t>((scratch + 3) / 4)}, MemCategory::kWorkspace);
    }
  }

  const char* kind() const override { return BatchNorm2dConfig::kKind; }
  // Elementwise over the buffer (or per channel): any layout, as it comes.
  static std::vector<Layout> input_layouts(const BatchNorm2dConfig&,
                                           const std::vector<TensorDesc>& in) {
    return layouts_as_given(in);
  }
  std::string describe() const override {
    return detail::concat("x ", inputs_[0].shape.to_string(), " ", to_string(inputs_[0].layout));
  }
  const Tensor& running_mean() const override { return running_mean_; }
  const Tensor& running_var() const override { return running_var_; }

  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), 1, "forward inputs");
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem_of(cpu_, *x[0])},
                                         {DNNL_ARG_DST, mem_of(cpu_, *y[0])},
                                         {DNNL_ARG_SCALE, mem_of(cpu_, params_[0].value)},
                                         {DNNL_ARG_SHIFT, mem_of(cpu_, params_[1].value)}};
    if (!training_) {
      args[DNNL_ARG_MEAN] = mem_of(cpu_, running_mean_);
      args[DNNL_ARG_VARIANCE] = mem_of(cpu_, running_var_);
      add_scratch(args, fwd_eval_pd_.scratchpad_desc());
      execute(cpu_, fwd_eval_, args, "BatchNorm2d forward (eval)");
      return;
    }
    args[DNNL_ARG_MEAN] = mem_of(cpu_, mean_);
    args[DNNL_ARG_VARIANCE] = mem_of(cpu_, var_);
    add_scratch(args, fwd_train_pd_.scratchpad_desc());
    execute(cpu_, fwd_train_, args, "BatchNorm2d forward");
    update_running_stats();
  }

  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    const Tensor& mean = training_ ? mean_ : running_mean_;
    const Tensor& var = training_ ? var_ : running_var_;
    if (dx[0] == nullptr) {
      // No input gradient wanted (x is data): oneDNN would need a full-size diff_src buffer,
      // so the two per-channel reductions are done here instead.
      if (param_grads()) param_grads_only(*dy[0], *x[0], mean, var);
      return;
    }
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem_of(cpu_, *x[0])},
                                         {DNNL_ARG_DIFF_DST, mem_of(cpu_, *dy[0])},
                                         {DNNL_ARG_MEAN, mem_of(cpu_, mean)},
                                         {DNNL_ARG_VARIANCE, mem_of(cpu_, var)},
                                         {DNNL_ARG_SCALE, mem_of(cpu_, params_[0].value)},
                                         // Unread, but oneDNN 2.6 lists it as an input.
                                         {DNNL_ARG_SHIFT, mem_of(cpu_, params_[1].value)},
                                         {DNNL_ARG_DIFF_SRC, mem_of(cpu_, *dx[0])},
                                         {DNNL_ARG_DIFF_SCALE, mem_of(cpu_, dscale_)},
                                         {DNNL_ARG_DIFF_SHIFT, mem_of(cpu_, dshift_)}};
    const auto& pd = training_ ? bwd_train_pd_ : bwd_eval_pd_;
    add_scratch(args, pd.scratchpad_desc());
    execute(cpu_, training_ ? bwd_train_ : bwd_eval_, args, "BatchNorm2d backward");
    if (!param_grads()) return;  // oneDNN computed them into scratch; they are not added
    be_.accumulate(params_[0].grad, dscale_);
    be_.accumulate(params_[1].grad, dshift_);
  }

 private:
  void add_scratch(std::unordered_map<int, memory>& args, const memory::desc& md) {
    if (md.get_size()) args[DNNL_ARG_SCRATCHPAD] = memory(md, cpu_.engine(), scratch_.raw());
  }

  // running = (1 - m) * running + m * batch, with the unbiased batch variance. With a single
  // value per channel (N*H*W == 1) the unbiased variance is undefined; the biased one (0) is
  // used rather than a division by zero.
  void update_running_stats() {
    const Shape& s = inputs_[0].shape;
    const int64_t C = s[1], M = s[0] * s[2] * s[3];
    const double m = cfg_.momentum;
    const double unbias = M > 1 ? static_cast<double>(M) / static_cast<double>(M - 1) : 1.0;
    float* rm = running_mean_.f32();
    float* rv = running_var_.f32();
    const float* bm = mean_.f32();
    const float* bv = var_.f32();
    for (int64_t c = 0; c < C; ++c) {
      rm[c] = static_cast<float>((1 - m) * rm[c] + m * bm[c]);
      rv[c] = static_cast<float>((1 - m) * rv[c] + m * unbias * bv[c]);
    }
  }

  // dgamma += sum dy * (x - mean) / sqrt(var + eps), dbeta += sum dy, per channel; plain and
  // nChw16c element offsets.
  void param_grads_only(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& var) {
    const Shape& s = inputs_[0].shape;
    const int64_t N = s[0], C = s[1], HW = s[2] * s[3];
    const bool blocked = inputs_[0].layout == Layout::kNChw16c;
    const float* xp = x.f32();
    const float* dyp = dy.f32();
    const float* mp = mean.f32();
    const float* vp = var.f32();
    float* dg = params_[0].grad.f32();
    float* db = params_[1].grad.f32();
    const double eps = cfg_.eps;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < C; ++c) {
      double sg = 0, sb = 0;
      const double mu = mp[c], rstd = 1.0 / std::sqrt(static_cast<double>(vp[c]) + eps);
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t i = 0; i < HW; ++i) {
          int64_t off =
              blocked ? ((n * (C / 16) + c / 16) * HW + i) * 16 + c % 16 : (n * C + c) * HW + i;
          sg += dyp[off] * (xp[off] - mu) * rstd;
          sb += dyp[off];
        }
      }
      dg[c] += static_cast<float>(sg);
      db[c] += static_cast<float>(sb);
    }
  }

  BatchNorm2dConfig cfg_;
  CpuBackend& cpu_;
  dnnl::batch_normalization_forward::primitive_desc fwd_train_pd_, fwd_eval_pd_;
  dnnl::batch_normalization_backward::primitive_desc bwd_train_pd_, bwd_eval_pd_;
  dnnl::primitive fwd_train_, fwd_eval_, bwd_train_, bwd_eval_;
  Tensor running_mean_, running_var_, mean_, var_, dscale_, dshift_, scratch_;
};

TBD_REGISTER_LAYER(BatchNorm2dConfig, DeviceKind::kCpu, BatchNorm2dOneDnn);

}  // namespace
}  // namespace tbd::cpu
