// layers/layer_norm.h: layer normalization over the last dimension.
//
//   x: (..., D) row-major  gamma, beta: (D)  y: like x
//   y = (x - mean) / sqrt(var + eps) * gamma + beta, biased variance over D.
// FLOPs: fwd 8*M*D, bwd_data 12*M*D, bwd_weights 4*M*D (M = product of leading dims).
#pragma once

#include "layers/layer.h"

namespace tbd {

struct LayerNormConfig {
  static constexpr const char* kKind = "LayerNorm";
  double eps = 1e-5;
};

}  // namespace tbd
