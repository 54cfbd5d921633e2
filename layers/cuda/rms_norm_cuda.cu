// layers/cuda/rms_norm_cuda.cu: RMSNorm on CUDA (own kernels): one block per row for y, rstd
// and dx; dweight by a column kernel (a thread per column, rows in order: deterministic, no
// atomics).
#include <cmath>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/rms_norm.h"

namespace tbd::cuda {
namespace {

constexpr int kRowThreads = 256;

__global__ void rms_fwd_kernel(const float* __restrict__ x, const float* __restrict__ w,
                               float* __restrict__ y, float* __restrict__ rstd, int64_t D,
                               float eps) {
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * D;
  float ss = 0.f;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) ss += xr[j] * xr[j];
  ss = block_sum(ss, red);
  const float rs = rsqrtf(ss / static_cast<float>(D) + eps);
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) y[r * D + j] = xr[j] * rs * w[j];
  if (threadIdx.x == 0) rstd[r] = rs;
}

__global__ void rms_dx_kernel(const float* __restrict__ x, const float* __restrict__ w,
                              const float* __restrict__ dy, const float* __restrict__ rstd,
                              float* __restrict__ dx, int64_t D) {
  __shared__ float red[32];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * D;
  const float* gr = dy + r * D;
  float dot = 0.f;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) dot += gr[j] * w[j] * xr[j];
  dot = block_sum(dot, red);
  const float rs = rstd[r], c = rs * rs * rs * dot / static_cast<float>(D);
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
    dx[r * D + j] = rs * gr[j] * w[j] - xr[j] * c;
}

__global__ void rms_dw_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                              const float* __restrict__ rstd, float* __restrict__ dw, int64_t M,
                              int64_t D) {
  TBD_GRID_STRIDE(j, D) {
    float acc = 0.f;
    for (int64_t r = 0; r < M; ++r) acc += dy[r * D + j] * x[r * D + j] * rstd[r];
    dw[j] += acc;
  }
}

class RmsNormCuda final : public Layer {
 public:
  RmsNormCuda(Backend& be, const std::string& name, const RmsNormConfig& cfg,
              const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)),
        cu_(as_cuda(be)),
        eps_(static_cast<float>(cfg.eps)) {
    D_ = in[0].shape[-1];
    M_ = in[0].shape.numel() / D_;
    saved(rstd_, TensorDesc{Shape{M_}});
  }

  std::string implementation() const override { return "own kernels (a block per row)"; }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    rms_fwd_kernel<<<static_cast<unsigned>(M_), kRowThreads, 0, cu_.stream()>>>(
        x[0]->f32(), params_[0].value.f32(), y[0]->f32(), rstd_.f32(), D_, eps_);
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] != nullptr) {
      rms_dx_kernel<<<static_cast<unsigned>(M_), kRowThreads, 0, cu_.stream()>>>(
          x[0]->f32(), params_[0].value.f32(), dy[0]->f32(), rstd_.f32(), dx[0]->f32(), D_);
      TBD_CUDA_CHECK_LAST();
    }
    if (param_grads()) {
      rms_dw_kernel<<<grid_for(D_), kBlock, 0, cu_.stream()>>>(
          x[0]->f32(), dy[0]->f32(), rstd_.f32(), params_[0].grad.f32(), M_, D_);
      TBD_CUDA_CHECK_LAST();
    }
  }

 private:
  CudaBackend& cu_;
  float eps_;
  int64_t D_ = 0, M_ = 0;
  Tensor rstd_;
};

TBD_REGISTER_LAYER(RmsNormConfig, DeviceKind::kCuda, RmsNormCuda);

}  // namespace
}  // namespace tbd::cuda
