// layers/sequence_batchnorm.h: sequence-wise batch normalization (Deep Speech 2): statistics per
// feature over every position of every sequence in the batch.
//
//   x: (..., C) row-major f32, rank >= 2: time-major sequences (T, N, C) or rows (M, C)
//   weight, bias: (C)  y: like x
// M = the product of the leading dims (N x T for sequences). Training: the batch statistics
// over the M rows (biased variance for normalisation); running_mean/var updated with `momentum`
// (unbiased variance, PyTorch convention). Eval: the running statistics. Running statistics are
// buffers, not parameters: category dynamic, reached through BatchNormLayer
// (layers/batchnorm2d.h). Padding positions of shorter sequences count like the others.
// It is BatchNorm2d of x seen as (M, C, 1, 1): the same FLOPs and bytes (layers/batchnorm2d.h)
// with E = M*C, e.g. fprop 8E FLOPs and 4*(2E + 8C) bytes.
#pragma once

#include "layers/batchnorm2d.h"

namespace tbd {

struct SequenceBatchNormConfig {
  static constexpr const char* kKind = "SequenceBatchNorm";
  double eps = 1e-5;
  double momentum = 0.1;
};

// Checks the inputs (one x: rank >= 2 f32 row-major, positive dims) and cfg (eps > 0, momentum
// in [0, 1]); returns the normalization with x seen as (M, C, 1, 1), the BatchNorm2d it is
// (layers/batchnorm2d.h). Throws naming the layer, the argument and the dims.
BatchNormSpec batchnorm_spec(const std::string& name, const SequenceBatchNormConfig& cfg,
                             const std::vector<TensorDesc>& in);
Flops sequence_batchnorm_flops(const Shape& x);
Bytes sequence_batchnorm_bytes(const Shape& x);

// Contract: one input x; y like x; weight (C) ones and bias (C) zeros, no decay.
template <>
Contract contract(const std::string& name, const SequenceBatchNormConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const SequenceBatchNormConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
