// layers/cuda/sequence_batchnorm_cuda.cu: SequenceBatchNorm on cuDNN
// (layers/cuda/batchnorm_cuda.cuh): x (..., C) row-major is the NCHW tensor (M, C, 1, 1), whose
// spatial-mode statistics are per C over the M rows.
#include "layers/cuda/batchnorm_cuda.cuh"
#include "layers/sequence_batchnorm.h"

namespace tbd::cuda {
namespace {

class SequenceBatchNormCudnn final : public BatchNormCudnn {
 public:
  SequenceBatchNormCudnn(Backend& be, const std::string& name, const SequenceBatchNormConfig& cfg,
                         const std::vector<TensorDesc>& in)
      : BatchNormCudnn(be, name, in, contract_of(name, cfg, in), batchnorm_spec(name, cfg, in)) {}
};

TBD_REGISTER_LAYER(SequenceBatchNormConfig, DeviceKind::kCuda, SequenceBatchNormCudnn);

}  // namespace
}  // namespace tbd::cuda
