// layers/cuda/rope_cuda.cu: RoPE on CUDA (own kernel, a thread per pair or copied element; the
// cos and sin tables computed in float64 on the host at build; f32 or bf16, rotated in f32
// registers).
#include <cmath>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/rope.h"

namespace tbd::cuda {
namespace {

// Rows of W: the first heads*d columns as pairs rotated by sign * angle, the rest copied.
template <class E>
__global__ void rope_kernel(const E* __restrict__ x, E* __restrict__ y,
                            const float* __restrict__ cs, const float* __restrict__ sn,
                            int64_t rows, int64_t T, int64_t W, int64_t rot, int64_t d,
                            float sign) {
  const int64_t half = d / 2, per_row = rot / 2 + (W - rot);  // pairs, then copies
  TBD_GRID_STRIDE(e, rows * per_row) {
    const int64_t r = e / per_row, k = e % per_row, t = r % T;
    const E* xr = x + r * W;
    E* yr = y + r * W;
    if (k < rot / 2) {
      const int64_t i = k % half, c0 = 2 * k;
      const float a = widen(xr[c0]), b = widen(xr[c0 + 1]), c = cs[t * half + i],
                  s = sign * sn[t * half + i];
      store(yr + c0, a * c - b * s);
      store(yr + c0 + 1, a * s + b * c);
    } else {
      const int64_t j = rot + (k - rot / 2);
      yr[j] = xr[j];
    }
  }
}

class RopeCuda final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;  // y and dx in x's dtype

  RopeCuda(Backend& be, const std::string& name, const RopeConfig& cfg,
           const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    rot_ = rope_rotated_heads(name, cfg, in[0]) * cfg.head_dim;
    N_ = in[0].shape[0];
    T_ = in[0].shape[1];
    W_ = in[0].shape[2];
    const int64_t half = cfg.head_dim / 2;
    tables_ = be.empty(Shape{2, T_, half}, MemCategory::kWorkspace);
    const std::vector<float> host = rope_tables(cfg, T_);
    be.copy_from_host(tables_, host.data());
  }

  std::string implementation() const override { return "own kernel, float64 tables"; }

  void fprop(MutTensorRefs y, TensorRefs x) override { rotate(*y[0], *x[0], 1.f); }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] != nullptr) rotate(*dx[0], *dy[0], -1.f);
  }

 private:
  void rotate(Tensor& y, const Tensor& x, float sign) {
    if (x.dtype() == DType::kBF16) {
      rotate(y.data<__nv_bfloat16>(), x.data<const __nv_bfloat16>(), sign);
    } else {
      rotate(y.f32(), x.data<const float>(), sign);
    }
  }
  template <class E>
  void rotate(E* y, const E* x, float sign) {
    const int64_t rows = N_ * T_, per_row = rot_ / 2 + (W_ - rot_);
    const float* cs = tables_.f32();
    rope_kernel<<<grid_for(rows * per_row), kBlock, 0, cu_.stream()>>>(
        x, y, cs, cs + T_ * (cfg_.head_dim / 2), rows, T_, W_, rot_, cfg_.head_dim, sign);
    TBD_CUDA_CHECK_LAST();
  }

  RopeConfig cfg_;
  CudaBackend& cu_;
  int64_t rot_ = 0, N_ = 0, T_ = 0, W_ = 0;
  Tensor tables_;
};

TBD_REGISTER_LAYER(RopeConfig, DeviceKind::kCuda, RopeCuda);

}  // namespace
}  // namespace tbd::cuda
