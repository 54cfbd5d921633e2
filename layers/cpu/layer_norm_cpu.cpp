// layers/cpu/layer_norm_cpu.cpp: LayerNorm on oneDNN layer_normalization primitives (over the
// last dim), and own loops for the (C, H, W) form.
//
// Over the last dim, x is seen as (M, D) rows. The forward (training) writes the per-row mean and
// variance into buffers kept for backward (feature_maps). The backward primitive
// (prop_kind::backward) computes dx and the gamma/beta gradients together; it assigns them, so the
// parameter gradients go to a (D) workspace pair that is then added onto the accumulated gradients
// (2*D floats: negligible next to the M*D pass). When dx is not wanted (LayerNorm directly on
// graph input data) oneDNN would still need somewhere to write it, so that case computes
// only the parameter gradients with own loops instead.
//
// Over (C, H, W) with per-channel gamma and beta, oneDNN has no primitive (its layer
// normalization scales elementwise over the normalised dims), so own loops: x stays in the
// layout it comes in, row-major or nChw16c (the critic's convolutions produce nChw16c; no
// reorder either way). Both layouts hold a sample contiguously as planes of H*W*B values
// with B channels interleaved (B = 1 row-major, 16 blocked); OpenMP over the (sample, plane)
// pairs. Sums are per plane in double, then added per sample in a fixed order, so results
// do not depend on the thread schedule.
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
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cpu_(as_cpu(be)) {
    TBD_LAYER_CHECK(in[0].layout == Layout::kRowMajor, kind(), name,
                    "input x must be row-major, got ", in[0].to_string());
    TBD_LAYER_CHECK(cfg.over == LayerNormOver::kLastDim, kind(), name,
                    "the oneDNN implementation normalises over the last dim only");
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
    saved(mean_, TensorDesc{Shape{M_}});
    saved(var_, TensorDesc{Shape{M_}});
    transient(dgamma_, TensorDesc{Shape{D_}});  // backward only: computed, then added
    transient(dbeta_, TensorDesc{Shape{D_}});
    std::size_t scratch =
        std::max(fwd_pd_.scratchpad_desc().get_size(), bwd_pd_.scratchpad_desc().get_size());
    if (scratch) {
      transient(scratch_, scratch);
    }
  }

  // y: (..., D)  x: (..., D)
  void fprop(MutTensorRefs y, TensorRefs x) override {
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
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
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

// ---- over (C, H, W), per-channel gamma and beta ----

constexpr int64_t kParallelMin = 16384;

class LayerNormChwCpu final : public Layer {
 public:
  LayerNormChwCpu(Backend& be, const std::string& name, const LayerNormConfig& cfg,
                  const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    const Shape& xs = in[0].shape;
    N_ = xs[0], C_ = xs[1], HW_ = xs[2] * xs[3];
    B_ = in[0].layout == Layout::kNChw16c ? 16 : 1;
    TBD_LAYER_CHECK(B_ == 1 || C_ % 16 == 0, kind(), name,
                    "input x in nChw16c needs C % 16 == 0, got ", in[0].to_string());
    outputs_[0].layout = in[0].layout;
    saved(mean_, TensorDesc{Shape{N_}});
    saved(var_, TensorDesc{Shape{N_}});
    // Doubles: per (sample, channel) two sums (forward: per plane; backward: per channel),
    // then per sample two means (backward).
    sums_ = be.empty(Shape{2 * (2 * N_ * C_ + 2 * N_)}, MemCategory::kWorkspace);
  }
  // Row-major, or nChw16c as the convolutions give it when C % 16 == 0.
  static std::vector<Layout> input_layouts(const LayerNormConfig&,
                                           const std::vector<TensorDesc>& in) {
    const bool blocked =
        in[0].layout == Layout::kNChw16c && in[0].shape.rank() == 4 && in[0].shape[1] % 16 == 0;
    return {blocked ? Layout::kNChw16c : Layout::kRowMajor};
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    if (B_ == 16) {
      forward_impl<16>(y[0]->f32(), x[0]->f32());
    } else {
      forward_impl<1>(y[0]->f32(), x[0]->f32());
    }
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    float* out = dx[0] ? dx[0]->f32() : nullptr;
    if (B_ == 16) {
      backward_impl<16>(out, dy[0]->f32(), x[0]->f32());
    } else {
      backward_impl<1>(out, dy[0]->f32(), x[0]->f32());
    }
  }

 private:
  int64_t planes() const { return N_ * (C_ / B_); }
  int64_t plane_len() const { return HW_ * B_; }

  // y = x * scale_c + shift_c, scale_c = r gamma_c, shift_c = beta_c - mean r gamma_c.
  template <int B>
  void forward_impl(float* y, const float* x) {
    double* part = sums_.data<double>();  // per plane: sum, sum of squares
    const int64_t L = plane_len(), cb = C_ / B, D = C_ * HW_;
#pragma omp parallel for schedule(static) if (parallel : N_ * D > kParallelMin)
    for (int64_t pl = 0; pl < planes(); ++pl) {
      const float* xp = x + pl * L;
      double s = 0, ss = 0;
#pragma omp simd reduction(+ : s, ss)
      for (int64_t j = 0; j < L; ++j) {
        const double v = xp[j];
        s += v;
        ss += v * v;
      }
      part[2 * pl] = s, part[2 * pl + 1] = ss;
    }
    float* mean = mean_.f32();
    float* var = var_.f32();
    for (int64_t n = 0; n < N_; ++n) {
      double s = 0, ss = 0;
      for (int64_t k = 0; k < cb; ++k)
        s += part[2 * (n * cb + k)], ss += part[2 * (n * cb + k) + 1];
      const double mu = s / static_cast<double>(D);
      mean[n] = static_cast<float>(mu);
      var[n] = static_cast<float>(std::max(0.0, ss / static_cast<double>(D) - mu * mu));
    }
    const float* gamma = params_[0].value.f32();
    const float* beta = params_[1].value.f32();
    const float eps = static_cast<float>(cfg_.eps);
#pragma omp parallel for schedule(static) if (parallel : N_ * D > kParallelMin)
    for (int64_t pl = 0; pl < planes(); ++pl) {
      const int64_t n = pl / cb, c0 = (pl % cb) * B;
      const float r = 1.0f / std::sqrt(var[n] + eps);
      float sc[B], sh[B];
      for (int l = 0; l < B; ++l) {
        sc[l] = r * gamma[c0 + l];
        sh[l] = beta[c0 + l] - mean[n] * sc[l];
      }
      const float* xp = x + pl * L;
      float* yp = y + pl * L;
      for (int64_t p = 0; p < HW_; ++p) {
#pragma omp simd
        for (int l = 0; l < B; ++l) yp[p * B + l] = xp[p * B + l] * sc[l] + sh[l];
      }
    }
  }

  // Per (n, c): A = sum dy, X = sum dy * xhat. dbeta_c += sum_n A, dgamma_c += sum_n X;
  // dx = r (dy gamma_c - mean(g) - xhat mean(g xhat)), mean(g) = sum_c gamma_c A / D,
  // mean(g xhat) = sum_c gamma_c X / D.
  template <int B>
  void backward_impl(float* dx, const float* dy, const float* x) {
    double* A = sums_.data<double>();
    double* X = A + N_ * C_;
    double* rowsum = X + N_ * C_;  // per sample: mean(g), mean(g xhat)
    const int64_t L = plane_len(), cb = C_ / B, D = C_ * HW_;
    const float* mean = mean_.f32();
    const float* var = var_.f32();
    const float* gamma = params_[0].value.f32();
    const double eps = cfg_.eps;
#pragma omp parallel for schedule(static) if (parallel : N_ * D > kParallelMin)
    for (int64_t pl = 0; pl < planes(); ++pl) {
      const int64_t n = pl / cb, c0 = (pl % cb) * B;
      const float* xp = x + pl * L;
      const float* gp = dy + pl * L;
      double a[B], xs[B];
      for (int l = 0; l < B; ++l) a[l] = 0, xs[l] = 0;
      for (int64_t p = 0; p < HW_; ++p) {
#pragma omp simd
        for (int l = 0; l < B; ++l) {
          a[l] += gp[p * B + l];
          xs[l] += static_cast<double>(gp[p * B + l]) * xp[p * B + l];
        }
      }
      const double mu = mean[n], r = 1.0 / std::sqrt(var[n] + eps);
      for (int l = 0; l < B; ++l) {
        A[n * C_ + c0 + l] = a[l];
        X[n * C_ + c0 + l] = r * (xs[l] - mu * a[l]);
      }
    }
    if (param_grads()) {
      float* dg = params_[0].grad.f32();
      float* db = params_[1].grad.f32();
      for (int64_t c = 0; c < C_; ++c) {
        double sg = 0, sb = 0;
        for (int64_t n = 0; n < N_; ++n) sg += X[n * C_ + c], sb += A[n * C_ + c];
        dg[c] += static_cast<float>(sg);
        db[c] += static_cast<float>(sb);
      }
    }
    if (dx == nullptr) return;
    for (int64_t n = 0; n < N_; ++n) {
      double mg = 0, mgx = 0;
      for (int64_t c = 0; c < C_; ++c)
        mg += gamma[c] * A[n * C_ + c], mgx += gamma[c] * X[n * C_ + c];
      rowsum[2 * n] = mg / static_cast<double>(D), rowsum[2 * n + 1] = mgx / static_cast<double>(D);
    }
#pragma omp parallel for schedule(static) if (parallel : N_ * D > kParallelMin)
    for (int64_t pl = 0; pl < planes(); ++pl) {
      const int64_t n = pl / cb, c0 = (pl % cb) * B;
      const float mu = mean[n], r = static_cast<float>(1.0 / std::sqrt(var[n] + eps));
      const float mg = static_cast<float>(rowsum[2 * n]),
                  mgx = static_cast<float>(rowsum[2 * n + 1]);
      float gm[B];
      for (int l = 0; l < B; ++l) gm[l] = gamma[c0 + l];
      const float* xp = x + pl * L;
      const float* gp = dy + pl * L;
      float* dp = dx + pl * L;
      for (int64_t p = 0; p < HW_; ++p) {
#pragma omp simd
        for (int l = 0; l < B; ++l) {
          const float xh = (xp[p * B + l] - mu) * r;
          dp[p * B + l] = r * (gp[p * B + l] * gm[l] - mg - xh * mgx);
        }
      }
    }
  }

  LayerNormConfig cfg_;
  int64_t N_ = 0, C_ = 0, HW_ = 0;
  int B_ = 1;
  Tensor mean_, var_, sums_;
};

// One kind, two implementations: the form in the config picks.
std::unique_ptr<Layer> make_layer_norm(Backend& be, const std::string& name,
                                       const LayerNormConfig& cfg,
                                       const std::vector<TensorDesc>& in) {
  if (cfg.over == LayerNormOver::kChw) return std::make_unique<LayerNormChwCpu>(be, name, cfg, in);
  return std::make_unique<LayerNormOneDnn>(be, name, cfg, in);
}
std::vector<Layout> layer_norm_layouts(const LayerNormConfig& cfg,
                                       const std::vector<TensorDesc>& in) {
  if (cfg.over == LayerNormOver::kChw) return LayerNormChwCpu::input_layouts(cfg, in);
  return impl_input_layouts<LayerNormOneDnn>(cfg, in);
}

const bool registered =
    register_layer<LayerNormConfig>(DeviceKind::kCpu, &make_layer_norm, &layer_norm_layouts, false);

}  // namespace
}  // namespace tbd::cpu
