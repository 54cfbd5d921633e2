// layers/cuda/cast_scale_cuda.cu: CastScale on CUDA: one grid-stride kernel, bytes to f32
// times the scale.
#include <cstdint>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cast_scale.h"
#include "layers/cuda/cuda_layer_util.h"

namespace tbd::cuda {
namespace {

__global__ void cast_scale_kernel(const uint8_t* __restrict__ x, float* __restrict__ y, int64_t n,
                                  float scale) {
  TBD_GRID_STRIDE(i, n) { y[i] = scale * static_cast<float>(x[i]); }
}

class CastScaleCuda final : public Layer {
 public:
  CastScaleCuda(Backend& be, const std::string& name, const CastScaleConfig& cfg,
                const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)),
        cu_(as_cuda(be)),
        scale_(static_cast<float>(cfg.scale)) {}

  // y: (...) f32, x: (...) u8
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const int64_t n = x[0]->numel();
    cast_scale_kernel<<<grid_for(n), kBlock, 0, cu_.stream()>>>(x[0]->data<uint8_t>(), y[0]->f32(),
                                                                n, scale_);
    TBD_CUDA_CHECK_LAST();
  }
  // x is u8: nothing flows back, and there are no parameters.
  void bprop(MutTensorRefs, TensorRefs, TensorRefs, TensorRefs) override {}

 private:
  CudaBackend& cu_;
  float scale_;
};

TBD_REGISTER_LAYER(CastScaleConfig, DeviceKind::kCuda, CastScaleCuda);

}  // namespace
}  // namespace tbd::cuda
