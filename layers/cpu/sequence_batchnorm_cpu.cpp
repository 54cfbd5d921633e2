// layers/cpu/sequence_batchnorm_cpu.cpp: SequenceBatchNorm on oneDNN batch_normalization
// (layers/cpu/batchnorm_cpu.h): x (..., C) row-major goes to oneDNN as a 2-D `nc` memory
// (M, C), whose statistics are per C over the M rows.
#include "layers/cpu/batchnorm_cpu.h"
#include "layers/sequence_batchnorm.h"

namespace tbd::cpu {
namespace {

class SequenceBatchNormOneDnn final : public BatchNormOneDnn {
 public:
  SequenceBatchNormOneDnn(Backend& be, const std::string& name, const SequenceBatchNormConfig& cfg,
                          const std::vector<TensorDesc>& in)
      : BatchNormOneDnn(be, name, in, contract_of(name, cfg, in), batchnorm_spec(name, cfg, in)) {}
};

TBD_REGISTER_LAYER(SequenceBatchNormConfig, DeviceKind::kCpu, SequenceBatchNormOneDnn);

}  // namespace
}  // namespace tbd::cpu
