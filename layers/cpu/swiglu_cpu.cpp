// layers/cpu/swiglu_cpu.cpp: SwiGLU on the CPU, own OpenMP loops over rows.
#include <cmath>

#include "backends/cpu/onednn.h"
#include "layers/cpu/simd.h"
#include "layers/swiglu.h"

namespace tbd::cpu {
namespace {

TBD_SIMD_CLONES void swiglu_row(float* y, const float* x, int64_t f) {
#pragma omp simd
  for (int64_t j = 0; j < f; ++j) {
    const float g = x[j];
    y[j] = g * sigmoid_fast(g) * x[f + j];
  }
}

TBD_SIMD_CLONES void swiglu_row_backward(float* dx, const float* dy, const float* x, int64_t f) {
#pragma omp simd
  for (int64_t j = 0; j < f; ++j) {
    const float g = x[j], up = x[f + j], s = sigmoid_fast(g);
    dx[f + j] = dy[j] * g * s;
    dx[j] = dy[j] * up * s * (1.f + g * (1.f - s));
  }
}

class SwiGluCpu final : public Layer {
 public:
  SwiGluCpu(Backend& be, const std::string& name, const SwiGluConfig& cfg,
            const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)) {
    F_ = in[0].shape[-1] / 2;
    M_ = in[0].shape.numel() / (2 * F_);
  }

  std::string implementation() const override { return "own loops"; }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    const float* xp = x[0]->f32();
    float* yp = y[0]->f32();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M_; ++r) swiglu_row(yp + r * F_, xp + r * 2 * F_, F_);
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    const float* xp = x[0]->f32();
    const float* g = dy[0]->f32();
    float* d = dx[0]->f32();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M_; ++r) {
      swiglu_row_backward(d + r * 2 * F_, g + r * F_, xp + r * 2 * F_, F_);
    }
  }

 private:
  int64_t F_ = 0, M_ = 0;
};

TBD_REGISTER_LAYER(SwiGluConfig, DeviceKind::kCpu, SwiGluCpu);

}  // namespace
}  // namespace tbd::cpu
