// layers/cpu/swiglu_cpu.cpp: SwiGLU on the CPU, own OpenMP loops over rows; f32 or bf16 (the
// row widened in registers, the outputs rounded once).
#include <cmath>

#include "backends/cpu/onednn.h"
#include "layers/cpu/simd.h"
#include "layers/swiglu.h"

namespace tbd::cpu {
namespace {

// One row: y = silu(gate) * up, and its backward; E is f32 or bf16 (f32 in registers).
template <class E>
[[gnu::always_inline]] inline void swiglu_of(E* y, const E* x, int64_t f) {
#pragma omp simd
  for (int64_t j = 0; j < f; ++j) {
    const float g = as_f32(x[j]);
    store_as(y[j], g * sigmoid_fast(g) * as_f32(x[f + j]));
  }
}
template <class E>
[[gnu::always_inline]] inline void swiglu_backward_of(E* dx, const E* dy, const E* x, int64_t f) {
#pragma omp simd
  for (int64_t j = 0; j < f; ++j) {
    const float g = as_f32(x[j]), up = as_f32(x[f + j]), s = sigmoid_fast(g), d = as_f32(dy[j]);
    store_as(dx[f + j], d * g * s);
    store_as(dx[j], d * up * s * (1.f + g * (1.f - s)));
  }
}
TBD_SIMD_CLONES void swiglu_row(float* y, const float* x, int64_t f) { swiglu_of(y, x, f); }
TBD_SIMD_CLONES void swiglu_row(uint16_t* y, const uint16_t* x, int64_t f) { swiglu_of(y, x, f); }
TBD_SIMD_CLONES void swiglu_row_backward(float* dx, const float* dy, const float* x, int64_t f) {
  swiglu_backward_of(dx, dy, x, f);
}
TBD_SIMD_CLONES void swiglu_row_backward(uint16_t* dx, const uint16_t* dy, const uint16_t* x,
                                         int64_t f) {
  swiglu_backward_of(dx, dy, x, f);
}

class SwiGluCpu final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;  // y and dx in x's dtype

  SwiGluCpu(Backend& be, const std::string& name, const SwiGluConfig& cfg,
            const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)) {
    F_ = in[0].shape[-1] / 2;
    M_ = in[0].shape.numel() / (2 * F_);
  }

  std::string implementation() const override { return "own loops"; }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    if (x[0]->dtype() == DType::kBF16) {
      forward(y[0]->data<uint16_t>(), x[0]->data<const uint16_t>());
    } else {
      forward(y[0]->f32(), x[0]->data<const float>());
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    if (x[0]->dtype() == DType::kBF16) {
      backward(dx[0]->data<uint16_t>(), dy[0]->data<const uint16_t>(),
               x[0]->data<const uint16_t>());
    } else {
      backward(dx[0]->f32(), dy[0]->data<const float>(), x[0]->data<const float>());
    }
  }

 private:
  template <class T>
  void forward(T* y, const T* x) const {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M_; ++r) swiglu_row(y + r * F_, x + r * 2 * F_, F_);
  }
  template <class T>
  void backward(T* dx, const T* dy, const T* x) const {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < M_; ++r) {
      swiglu_row_backward(dx + r * 2 * F_, dy + r * F_, x + r * 2 * F_, F_);
    }
  }

  int64_t F_ = 0, M_ = 0;
};

TBD_REGISTER_LAYER(SwiGluConfig, DeviceKind::kCpu, SwiGluCpu);

}  // namespace
}  // namespace tbd::cpu
