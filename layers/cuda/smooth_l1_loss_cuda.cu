// layers/cuda/smooth_l1_loss_cuda.cu: SmoothL1Loss on CUDA (own kernels).
//
// Forward: one block sums the weighted losses in a fixed order (double), so the loss is
// deterministic; the inputs are at most a few hundred thousand box coordinates. Backward: one
// elementwise pass.
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/smooth_l1_loss.h"

namespace tbd::cuda {
namespace {

// y: (1)  pred, target, weight: (E)
__global__ void smooth_l1_fwd_kernel(const float* __restrict__ p, const float* __restrict__ t,
                                     const float* __restrict__ w, float* __restrict__ y, int64_t E,
                                     float s2, double scale) {
  __shared__ double red[32];
  double s = 0;
  for (int64_t i = threadIdx.x; i < E; i += blockDim.x) s += w[i] * smooth_l1(p[i] - t[i], s2);
  s = block_sum(s, red);
  if (threadIdx.x == 0) y[0] = static_cast<float>(scale * s);
}

__global__ void smooth_l1_bwd_kernel(const float* __restrict__ dy, const float* __restrict__ p,
                                     const float* __restrict__ t, const float* __restrict__ w,
                                     float* __restrict__ dp, int64_t E, float s2, double scale) {
  const float g = static_cast<float>(scale * dy[0]);
  TBD_GRID_STRIDE(i, E) { dp[i] = g * w[i] * smooth_l1_grad(p[i] - t[i], s2); }
}

class SmoothL1LossCuda final : public Layer {
 public:
  SmoothL1LossCuda(Backend& be, const std::string& name, const SmoothL1LossConfig& cfg,
                   const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    const char* args[] = {"pred", "target", "weight"};
    for (int i = 0; i < 3; ++i) check_row_major(kind(), name, args[i], in[i]);
    E_ = in[0].shape.numel();
    s2_ = static_cast<float>(cfg.sigma * cfg.sigma);
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    smooth_l1_fwd_kernel<<<1, 1024, 0, cu_.stream()>>>(x[0]->f32(), x[1]->f32(), x[2]->f32(),
                                                       y[0]->f32(), E_, s2_, cfg_.scale);
    TBD_CUDA_CHECK_LAST();
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs) override {
    if (dx[0] == nullptr) return;
    smooth_l1_bwd_kernel<<<grid_for(E_), kBlock, 0, cu_.stream()>>>(
        dy[0]->f32(), x[0]->f32(), x[1]->f32(), x[2]->f32(), dx[0]->f32(), E_, s2_, cfg_.scale);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  SmoothL1LossConfig cfg_;
  CudaBackend& cu_;
  int64_t E_ = 0;
  float s2_ = 1.0f;
};

TBD_REGISTER_LAYER(SmoothL1LossConfig, DeviceKind::kCuda, SmoothL1LossCuda);

}  // namespace
}  // namespace tbd::cuda
