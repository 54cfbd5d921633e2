// layers/batchnorm2d.h: batch normalization over (N, H, W) per channel, training mode.
//
//   x: (N, C, H, W) any layout  gamma, beta: (C)  y: like x
// Training: batch statistics (biased variance for normalisation); running_mean/var updated
// with `momentum` (unbiased variance, PyTorch convention). Eval: running statistics.
// Running statistics are buffers, not parameters: category dynamic, not weights.
// FLOPs: fwd 8*N*C*H*W (mean, var, normalise, scale+shift), bwd_data 10*N*C*H*W,
//        bwd_weights 4*N*C*H*W (dgamma, dbeta reductions).
#pragma once

#include "layers/layer.h"

namespace tbd {

struct BatchNorm2dConfig {
  static constexpr const char* kKind = "BatchNorm2d";
  static constexpr bool kAcceptsBlocked = true;
  double eps = 1e-5;
  double momentum = 0.1;
};

}  // namespace tbd
