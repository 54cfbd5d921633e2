// layers/cuda/mean_loss_cuda.cu: MeanLoss on CUDA (own kernels).
//
// Forward: one block sums x in a fixed order (double), so the loss is deterministic; the
// inputs are a critic's N scores, far too few for more than one block. Backward: a fill.
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/mean_loss.h"

namespace tbd::cuda {
namespace {

__global__ void mean_loss_fwd_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t E,
                                     double weight) {
  __shared__ double red[32];
  double s = 0;
  for (int64_t i = threadIdx.x; i < E; i += blockDim.x) s += x[i];
  s = block_sum(s, red);
  if (threadIdx.x == 0) y[0] = static_cast<float>(weight * s / static_cast<double>(E));
}

__global__ void mean_loss_bwd_kernel(const float* __restrict__ dy, float* __restrict__ dx,
                                     int64_t E, double weight) {
  const float g = static_cast<float>(dy[0] * weight / static_cast<double>(E));
  TBD_GRID_STRIDE(i, E) { dx[i] = g; }
}

class MeanLossCuda final : public Layer {
 public:
  MeanLossCuda(Backend& be, const std::string& name, const MeanLossConfig& cfg,
               const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x", in[0]);
    E_ = in[0].shape.numel();
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    mean_loss_fwd_kernel<<<1, kBlock, 0, cu_.stream()>>>(x[0]->f32(), y[0]->f32(), E_, cfg_.weight);
    TBD_CUDA_CHECK_LAST();
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0] == nullptr) return;
    mean_loss_bwd_kernel<<<grid_for(E_), kBlock, 0, cu_.stream()>>>(dy[0]->f32(), dx[0]->f32(), E_,
                                                                    cfg_.weight);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  MeanLossConfig cfg_;
  CudaBackend& cu_;
  int64_t E_ = 0;
};

TBD_REGISTER_LAYER(MeanLossConfig, DeviceKind::kCuda, MeanLossCuda);

}  // namespace
}  // namespace tbd::cuda
