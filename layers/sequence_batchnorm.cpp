// layers/sequence_batchnorm.cpp: shape checks, FLOP and byte counts of SequenceBatchNorm
// (shared by all backends): BatchNorm2d's over x seen as (M, C, 1, 1).
#include "layers/sequence_batchnorm.h"

namespace tbd {
namespace {

Shape as_nchw(const Shape& x) { return Shape{x.numel() / x[x.rank() - 1], x[x.rank() - 1], 1, 1}; }

}  // namespace

BatchNormSpec batchnorm_spec(const std::string& name, const SequenceBatchNormConfig& cfg,
                             const std::vector<TensorDesc>& in) {
  const char* k = SequenceBatchNormConfig::kKind;
  check_input_count(k, name, in, 1);
  const TensorDesc& x = in[0];
  TBD_LAYER_CHECK(x.shape.rank() >= 2, k, name,
                  "input x must have rank >= 2 ((T, N, C) or (M, C)), got ", x.shape.to_string());
  check_positive(k, name, "x", x.shape);
  check_f32(k, name, "x", x);
  TBD_LAYER_CHECK(x.layout == Layout::kRowMajor, k, name, "input x must be row-major, got ",
                  x.to_string());
  check_batchnorm_config(k, name, cfg.eps, cfg.momentum);
  return BatchNormSpec{k, cfg.eps, cfg.momentum, as_nchw(x.shape)};
}

Flops sequence_batchnorm_flops(const Shape& x) { return batchnorm2d_flops(as_nchw(x)); }

Bytes sequence_batchnorm_bytes(const Shape& x) { return batchnorm2d_bytes(as_nchw(x)); }

template <>
Contract contract(const std::string& name, const SequenceBatchNormConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const BatchNormSpec spec = batchnorm_spec(name, cfg, in);  // checks in first
  return batchnorm_contract(in[0], spec.nchw);
}

std::string describe_problem(const SequenceBatchNormConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].to_string(), " eps=", cfg.eps, " momentum=", cfg.momentum);
}

}  // namespace tbd
