// layers/cpu/rms_norm_cpu.cpp: RMSNorm on the CPU, own OpenMP loops (oneDNN 2.6 has no RMS
// normalization). Rows split into one contiguous range per thread. The backward computes dx
// and each thread's partial dweight in one pass over its rows, then adds the partials onto the
// accumulated gradient in thread order, so results do not depend on the schedule (for a fixed
// thread count).
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/onednn.h"
#include "layers/cpu/simd.h"
#include "layers/rms_norm.h"

namespace tbd::cpu {
namespace {

// y = x * rstd * w over one row; returns rstd.
TBD_SIMD_CLONES float rms_row_forward(float* y, const float* x, const float* w, int64_t d,
                                      float eps) {
  float ss = 0.f;
#pragma omp simd reduction(+ : ss)
  for (int64_t j = 0; j < d; ++j) ss += x[j] * x[j];
  const float rstd = 1.f / std::sqrt(ss / static_cast<float>(d) + eps);
#pragma omp simd
  for (int64_t j = 0; j < d; ++j) y[j] = x[j] * rstd * w[j];
  return rstd;
}

// dx (when non-null) of one row; dw += dy * x * rstd.
TBD_SIMD_CLONES void rms_row_backward(float* dx, float* dw, const float* dy, const float* x,
                                      const float* w, int64_t d, float rstd) {
  float dot = 0.f;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < d; ++j) dot += dy[j] * w[j] * x[j];
  const float c = rstd * rstd * rstd * dot / static_cast<float>(d);
  if (dx != nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) dx[j] = rstd * dy[j] * w[j] - x[j] * c;
  }
  if (dw != nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) dw[j] += dy[j] * x[j] * rstd;
  }
}

class RmsNormCpu final : public Layer {
 public:
  RmsNormCpu(Backend& be, const std::string& name, const RmsNormConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), eps_(static_cast<float>(cfg.eps)) {
    D_ = in[0].shape[-1];
    M_ = in[0].shape.numel() / D_;
    threads_ = std::max(1, omp_get_max_threads());
    saved(rstd_, TensorDesc{Shape{M_}});
    partial_ = be.empty(Shape{threads_, D_}, MemCategory::kWorkspace);
  }

  std::string implementation() const override { return "own loops, a row range per thread"; }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    const float* xp = x[0]->f32();
    const float* w = params_[0].value.f32();
    float* yp = y[0]->f32();
    float* rstd = rstd_.f32();
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t r = 0; r < M_; ++r) {
      rstd[r] = rms_row_forward(yp + r * D_, xp + r * D_, w, D_, eps_);
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    const float* xp = x[0]->f32();
    const float* g = dy[0]->f32();
    const float* w = params_[0].value.f32();
    const float* rstd = rstd_.f32();
    float* dxp = dx[0] ? dx[0]->f32() : nullptr;
    const bool pg = param_grads();
    float* partial = partial_.f32();
#pragma omp parallel num_threads(threads_)
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t r0 = M_ * t / nt, r1 = M_ * (t + 1) / nt;
      float* dw = pg ? partial + t * D_ : nullptr;
      if (dw != nullptr) std::fill_n(dw, D_, 0.f);
      for (int64_t r = r0; r < r1; ++r) {
        rms_row_backward(dxp ? dxp + r * D_ : nullptr, dw, g + r * D_, xp + r * D_, w, D_, rstd[r]);
      }
      if (pg) {
#pragma omp barrier
        // Columns split across threads; each adds the partials in thread order.
        const int64_t c0 = D_ * t / nt, c1 = D_ * (t + 1) / nt;
        float* grad = params_[0].grad.f32();
        for (int64_t s = 0; s < nt; ++s) {
          for (int64_t j = c0; j < c1; ++j) grad[j] += partial[s * D_ + j];
        }
      }
    }
  }

 private:
  float eps_;
  int64_t D_ = 0, M_ = 0;
  int threads_ = 1;
  Tensor rstd_, partial_;
};

TBD_REGISTER_LAYER(RmsNormConfig, DeviceKind::kCpu, RmsNormCpu);

}  // namespace
}  // namespace tbd::cpu
