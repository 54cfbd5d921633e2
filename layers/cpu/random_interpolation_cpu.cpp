// layers/cpu/random_interpolation_cpu.cpp: RandomInterpolation, own loops (row-major).
//
// Forward draws alpha_n for the step (layers/random_interpolation.h), keeps it for backward and
// writes y in one pass; OpenMP over samples (over elements when a sample is large).
#include "layers/random_interpolation.h"

namespace tbd::cpu {
namespace {

constexpr int64_t kParallelMin = 16384;

class RandomInterpolationCpu final : public Layer {
 public:
  RandomInterpolationCpu(Backend& be, const std::string& name, const RandomInterpolationConfig& cfg,
                         const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    N_ = in[0].shape[0];
    S_ = in[0].shape.numel() / N_;
    key_ = random_interpolation_key(cfg, name);
    saved(alpha_, TensorDesc{Shape{N_}});
  }

  // y, x0, x1: (N, ...)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    float* alpha = alpha_.f32();
    const uint64_t step = call_numbering().index(step_++);
    for (int64_t n = 0; n < N_; ++n) alpha[n] = random_interpolation_alpha(key_, step, n);
    const float* a = x[0]->f32();
    const float* b = x[1]->f32();
    float* out = y[0]->f32();
    const int64_t S = S_;
#pragma omp parallel for collapse(2) schedule(static) if (parallel : N_ * S > kParallelMin)
    for (int64_t n = 0; n < N_; ++n) {
      for (int64_t i = 0; i < S; ++i) {
        const int64_t k = n * S + i;
        out[k] = a[k] + alpha[n] * (b[k] - a[k]);
      }
    }
  }

  // dx0, dx1, dy: (N, ...)
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    const float* g = dy[0]->f32();
    const float* alpha = alpha_.f32();
    float* d0 = dx[0] ? dx[0]->f32() : nullptr;
    float* d1 = dx[1] ? dx[1]->f32() : nullptr;
    if (!d0 && !d1) return;
    const int64_t S = S_;
#pragma omp parallel for collapse(2) schedule(static) if (parallel : N_ * S > kParallelMin)
    for (int64_t n = 0; n < N_; ++n) {
      for (int64_t i = 0; i < S; ++i) {
        const int64_t k = n * S + i;
        const float t = alpha[n] * g[k];
        if (d1) d1[k] = t;
        if (d0) d0[k] = g[k] - t;
      }
    }
  }

 private:
  RandomInterpolationConfig cfg_;
  int64_t N_ = 0, S_ = 0;
  uint64_t key_ = 0;
  uint64_t step_ = 0;
  Tensor alpha_;
};

TBD_REGISTER_LAYER(RandomInterpolationConfig, DeviceKind::kCpu, RandomInterpolationCpu);

}  // namespace
}  // namespace tbd::cpu
