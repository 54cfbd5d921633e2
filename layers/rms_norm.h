// layers/rms_norm.h: root-mean-square normalization over the last dimension (Llama's norm).
//
// x: (..., D) row-major f32, rank >= 2 (M rows of D)  weight: (D), ones, no weight decay
// y = x * rstd * weight with rstd = 1 / sqrt(mean(x^2) + eps) per row (no mean subtracted, no
// bias: Zhang and Sennrich 2019; Llama's RMSNorm, eps 1e-5 in Llama 3).
// Saved for backward (feature_maps): rstd per row, (M) f32; backward reads x, not y.
// Gradients, with u = dy * weight: dx = rstd * u - x * rstd^3 * sum(u * x) / D;
//   dweight += sum over rows of dy * x * rstd.
// FLOPs (E = M*D): fprop 4E (square-accumulate, times rstd, times weight), dgrad 6E (u, the
//   dot, two scalings and a subtract), wgrad 3E (dy * x * rstd, accumulated); the M square
//   roots and divisions are not counted.
// Bytes (a lower bound, layers/layer.h):
//   fprop = 4*(2E + D + M)      read x, weight; write y, rstd
//   dgrad = 4*(3E + D + M)      read dy, x, weight, rstd; write dx
//   wgrad = 4*(2E + M + 2D)     read dy, x, rstd; read and write dweight
// As LayerNorm, the implementations compute both gradients in one backward.
#pragma once

#include "layers/layer.h"

namespace tbd {

struct RmsNormConfig {
  static constexpr const char* kKind = "RMSNorm";
  double eps = 1e-5;
};

// Contract: one input x (f32, rank >= 2); y like x; weight (D) ones, no decay.
template <>
Contract contract(const std::string& name, const RmsNormConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const RmsNormConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
