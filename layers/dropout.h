// layers/dropout.h: inverted dropout with seeded, reproducible masks.
//
//   x: any shape (row-major or blocked)  y: like x
//   Training: y = x * mask / (1 - p), mask[i] ~ Bernoulli(1 - p) from a counter-based hash of
//   (seed, step, i): the same seed gives the same sequence of masks on a rerun, a new mask
//   every forward. The mask is kept for backward (feature_maps). Eval: y = x.
// FLOPs: fwd 2*E (compare, scale), bwd_data E.
#pragma once

#include "layers/layer.h"

namespace tbd {

struct DropoutConfig {
  static constexpr const char* kKind = "Dropout";
  static constexpr bool kAcceptsBlocked = true;
  double p = 0.1;
  uint64_t seed = 0;
};

}  // namespace tbd
