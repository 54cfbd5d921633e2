// layers/cuda/swiglu_cuda.cu: SwiGLU on CUDA (own kernels, a thread per output element; f32 or
// bf16, computed in f32 registers).
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/swiglu.h"

namespace tbd::cuda {
namespace {

__device__ __forceinline__ float sigmoid(float g) { return 1.f / (1.f + expf(-g)); }

template <class E>
__global__ void swiglu_fwd_kernel(const E* __restrict__ x, E* __restrict__ y, int64_t M,
                                  int64_t F) {
  TBD_GRID_STRIDE(e, M * F) {
    const int64_t r = e / F, j = e % F;
    const float g = widen(x[r * 2 * F + j]);
    store(y + e, g * sigmoid(g) * widen(x[r * 2 * F + F + j]));
  }
}

template <class E>
__global__ void swiglu_bwd_kernel(const E* __restrict__ x, const E* __restrict__ dy,
                                  E* __restrict__ dx, int64_t M, int64_t F) {
  TBD_GRID_STRIDE(e, M * F) {
    const int64_t r = e / F, j = e % F;
    const float g = widen(x[r * 2 * F + j]), up = widen(x[r * 2 * F + F + j]), s = sigmoid(g);
    const float d = widen(dy[e]);
    store(dx + r * 2 * F + F + j, d * g * s);
    store(dx + r * 2 * F + j, d * up * s * (1.f + g * (1.f - s)));
  }
}

class SwiGluCuda final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;  // y and dx in x's dtype

  SwiGluCuda(Backend& be, const std::string& name, const SwiGluConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cu_(as_cuda(be)) {
    F_ = in[0].shape[-1] / 2;
    M_ = in[0].shape.numel() / (2 * F_);
  }

  std::string implementation() const override { return "own kernels"; }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    if (x[0]->dtype() == DType::kBF16) {
      forward(y[0]->data<__nv_bfloat16>(), x[0]->data<const __nv_bfloat16>());
    } else {
      forward(y[0]->f32(), x[0]->data<const float>());
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    if (x[0]->dtype() == DType::kBF16) {
      backward(dx[0]->data<__nv_bfloat16>(), dy[0]->data<const __nv_bfloat16>(),
               x[0]->data<const __nv_bfloat16>());
    } else {
      backward(dx[0]->f32(), dy[0]->data<const float>(), x[0]->data<const float>());
    }
  }

 private:
  template <class E>
  void forward(E* y, const E* x) {
    swiglu_fwd_kernel<<<grid_for(M_ * F_), kBlock, 0, cu_.stream()>>>(x, y, M_, F_);
    TBD_CUDA_CHECK_LAST();
  }
  template <class E>
  void backward(E* dx, const E* dy, const E* x) {
    swiglu_bwd_kernel<<<grid_for(M_ * F_), kBlock, 0, cu_.stream()>>>(x, dy, dx, M_, F_);
    TBD_CUDA_CHECK_LAST();
  }

  CudaBackend& cu_;
  int64_t F_ = 0, M_ = 0;
};

TBD_REGISTER_LAYER(SwiGluConfig, DeviceKind::kCuda, SwiGluCuda);

}  // namespace
}  // namespace tbd::cuda
