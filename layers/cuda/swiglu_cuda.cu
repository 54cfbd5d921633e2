// layers/cuda/swiglu_cuda.cu: SwiGLU on CUDA (own kernels, a thread per output element).
#include "backends/cuda/cuda_backend.h"
#include "layers/cuda/kernel_util.cuh"
#include "layers/swiglu.h"

namespace tbd::cuda {
namespace {

__device__ __forceinline__ float sigmoid(float g) { return 1.f / (1.f + expf(-g)); }

__global__ void swiglu_fwd_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t M,
                                  int64_t F) {
  TBD_GRID_STRIDE(e, M * F) {
    const int64_t r = e / F, j = e % F;
    const float g = x[r * 2 * F + j];
    y[e] = g * sigmoid(g) * x[r * 2 * F + F + j];
  }
}

__global__ void swiglu_bwd_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                  float* __restrict__ dx, int64_t M, int64_t F) {
  TBD_GRID_STRIDE(e, M * F) {
    const int64_t r = e / F, j = e % F;
    const float g = x[r * 2 * F + j], up = x[r * 2 * F + F + j], s = sigmoid(g);
    dx[r * 2 * F + F + j] = dy[e] * g * s;
    dx[r * 2 * F + j] = dy[e] * up * s * (1.f + g * (1.f - s));
  }
}

class SwiGluCuda final : public Layer {
 public:
  SwiGluCuda(Backend& be, const std::string& name, const SwiGluConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cu_(as_cuda(be)) {
    F_ = in[0].shape[-1] / 2;
    M_ = in[0].shape.numel() / (2 * F_);
  }

  std::string implementation() const override { return "own kernels"; }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    swiglu_fwd_kernel<<<grid_for(M_ * F_), kBlock, 0, cu_.stream()>>>(x[0]->f32(), y[0]->f32(), M_,
                                                                      F_);
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    swiglu_bwd_kernel<<<grid_for(M_ * F_), kBlock, 0, cu_.stream()>>>(x[0]->f32(), dy[0]->f32(),
                                                                      dx[0]->f32(), M_, F_);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  CudaBackend& cu_;
  int64_t F_ = 0, M_ = 0;
};

TBD_REGISTER_LAYER(SwiGluConfig, DeviceKind::kCuda, SwiGluCuda);

}  // namespace
}  // namespace tbd::cuda
