// layers/cuda/batchnorm2d_cuda.cu: BatchNorm2d on cuDNN (layers/cuda/batchnorm_cuda.cuh),
// x as it is: (N, C, H, W).
#include "layers/cuda/batchnorm_cuda.cuh"

namespace tbd::cuda {
namespace {

class BatchNorm2dCudnn final : public BatchNormCudnn {
 public:
  BatchNorm2dCudnn(Backend& be, const std::string& name, const BatchNorm2dConfig& cfg,
                   const std::vector<TensorDesc>& in)
      : BatchNormCudnn(be, name, in, contract_of(name, cfg, in), batchnorm_spec(name, cfg, in)) {}
};

TBD_REGISTER_LAYER(BatchNorm2dConfig, DeviceKind::kCuda, BatchNorm2dCudnn);

}  // namespace
}  // namespace tbd::cuda
