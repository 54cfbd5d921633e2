// layers/cpu/rope_cpu.cpp: RoPE on the CPU, own OpenMP loops over the (n, t) rows; the cos and
// sin tables (T x d/2, computed in float64 at build) are the layer's workspace. f32 or bf16 (the
// pairs widened in registers, y rounded once; the copied columns copied as they are).
#include <cmath>

#include "backends/cpu/onednn.h"
#include "layers/cpu/simd.h"
#include "layers/rope.h"

namespace tbd::cpu {
namespace {

// One row: `heads` heads of d rotated by (cos, sin) (sign -1: the opposite angle), the columns
// from heads*d to w copied; E is f32 or bf16 (rotated in f32, rounded once).
template <class E>
[[gnu::always_inline]] inline void rotate_row(E* y, const E* x, const float* cs, const float* sn,
                                              int64_t heads, int64_t d, int64_t w, float sign) {
  for (int64_t h = 0; h < heads; ++h) {
    const E* xh = x + h * d;
    E* yh = y + h * d;
#pragma omp simd
    for (int64_t i = 0; i < d / 2; ++i) {
      const float a = as_f32(xh[2 * i]), b = as_f32(xh[2 * i + 1]), c = cs[i], s = sign * sn[i];
      store_as(yh[2 * i], a * c - b * s);
      store_as(yh[2 * i + 1], a * s + b * c);
    }
  }
  for (int64_t j = heads * d; j < w; ++j) y[j] = x[j];
}
TBD_SIMD_CLONES void rope_row(float* y, const float* x, const float* cs, const float* sn,
                              int64_t heads, int64_t d, int64_t w, float sign) {
  rotate_row(y, x, cs, sn, heads, d, w, sign);
}
TBD_SIMD_CLONES void rope_row(uint16_t* y, const uint16_t* x, const float* cs, const float* sn,
                              int64_t heads, int64_t d, int64_t w, float sign) {
  rotate_row(y, x, cs, sn, heads, d, w, sign);
}

class RopeCpu final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;  // y and dx in x's dtype

  RopeCpu(Backend& be, const std::string& name, const RopeConfig& cfg,
          const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    heads_ = rope_rotated_heads(name, cfg, in[0]);
    N_ = in[0].shape[0];
    T_ = in[0].shape[1];
    W_ = in[0].shape[2];
    const int64_t half = cfg.head_dim / 2;
    tables_ = be.empty(Shape{2, T_, half}, MemCategory::kWorkspace);
    const std::vector<float> host = rope_tables(cfg, T_);
    be.copy_from_host(tables_, host.data());
  }

  std::string implementation() const override { return "own loops, float64 tables"; }

  void fprop(MutTensorRefs y, TensorRefs x) override { rotate(*y[0], *x[0], 1.f); }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] != nullptr) rotate(*dx[0], *dy[0], -1.f);
  }

 private:
  void rotate(Tensor& y, const Tensor& x, float sign) const {
    if (x.dtype() == DType::kBF16) {
      rotate(y.data<uint16_t>(), x.data<const uint16_t>(), sign);
    } else {
      rotate(y.f32(), x.data<const float>(), sign);
    }
  }
  template <class E>
  void rotate(E* y, const E* x, float sign) const {
    const int64_t half = cfg_.head_dim / 2, T = T_, W = W_, heads = heads_, d = cfg_.head_dim;
    const float* cs = tables_.f32();
    const float* sn = cs + T * half;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < N_ * T; ++r) {
      const int64_t t = r % T;
      rope_row(y + r * W, x + r * W, cs + t * half, sn + t * half, heads, d, W, sign);
    }
  }

  RopeConfig cfg_;
  int64_t heads_ = 0, N_ = 0, T_ = 0, W_ = 0;
  Tensor tables_;
};

TBD_REGISTER_LAYER(RopeConfig, DeviceKind::kCpu, RopeCpu);

}  // namespace
}  // namespace tbd::cpu
