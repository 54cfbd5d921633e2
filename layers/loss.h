// layers/loss.h: losses; each returns a scalar (shape (1)) mean over the batch.
//
// SoftmaxCrossEntropy: logits: (M, V) row-major f32, labels: (M) i32  y: (1)
//   loss = mean over rows with label != ignore_index of
//          -(1-ls)*log p[label] - ls/V * sum_v log p[v]   (ls = label_smoothing)
//   Rows whose label == ignore_index contribute nothing (and are not in the mean).
//   The gradient flows only to logits. FLOPs fwd 4*M*V, bwd_data 3*M*V.
// MseLoss: pred, target: same shape  y: (1) = mean((pred - target)^2); gradients to both.
//   FLOPs fwd 3*E, bwd_data 3*E.
#pragma once

#include "layers/layer.h"

namespace tbd {

struct SoftmaxCrossEntropyConfig {
  static constexpr const char* kKind = "SoftmaxCrossEntropy";
  double label_smoothing = 0.0;
  int64_t ignore_index = -100;
};

struct MseLossConfig {
  static constexpr const char* kKind = "MseLoss";
};

}  // namespace tbd
