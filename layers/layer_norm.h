// layers/layer_norm.h: layer normalization over the last dimension.
//
//   x: (..., D) row-major, rank >= 2  gamma, beta: (D)  y: like x
//   y = (x - mean) / sqrt(var + eps) * gamma + beta, biased variance over D.
//   Saved for backward (feature_maps): mean and variance per row, (M) each.
//   gamma initialises to ones, beta to zeros; neither takes weight decay.
// FLOPs: fprop 8*M*D, dgrad 12*M*D, wgrad 4*M*D (M = product of leading dims).
// Bytes (FP32; a lower bound, layers/layer.h), E = M*D:
//   fprop         = 4*(2E + 2D + 2M)  read x, gamma, beta; write y, the saved mean and variance
//   dgrad    = 4*(3E + 2M + D)   read dy, x, saved mean and variance, gamma; write dx
//   wgrad = 4*(2E + 2M + 4D)  read dy, x, saved mean and variance; read and write dgamma,
//                                   dbeta
// As for BatchNorm2d, implementations compute all three gradients in one backward; the phase
// sum counts x and dy twice.
#pragma once

#include "layers/layer.h"

namespace tbd {

struct LayerNormConfig {
  static constexpr const char* kKind = "LayerNorm";
  double eps = 1e-5;
};

// Checks x against cfg (throws naming the layer); y has x's shape.
Shape layer_norm_output_shape(const std::string& name, const LayerNormConfig& cfg, const Shape& x);
Flops layer_norm_flops(const Shape& x);
Bytes layer_norm_bytes(const Shape& x);

// Contract: one input x (f32, normalised over the last dim D); y like x; gamma (D) ones
// and beta (D) zeros, no decay.
template <>
Contract contract(const std::string& name, const LayerNormConfig& cfg,
                  const std::vector<TensorDesc>& in);

}  // namespace tbd
