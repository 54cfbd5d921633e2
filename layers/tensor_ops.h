// layers/tensor_ops.h: structural layers: residual add, concat, split, reshape, transpose.
//
// Add:       x0, x1: same shape and layout (any layout)  y: like x0.  y = x0 + x1.
//            FLOPs fwd N, bwd_data 0 (gradient passes through to both).
// Concat:    inputs equal except along `axis`; y concatenates them.  Row-major.
// Split:     one input; outputs of `sizes` along `axis` (sum(sizes) == dim).  Row-major.
// Reshape:   same element count; one dim may be -1.  Row-major (a copy: layers own outputs).
// Transpose: y = permute(x, perm), e.g. perm {1, 0, 2} swaps the first two dims.  Row-major.
// None has weights.
#pragma once

#include <vector>

#include "layers/layer.h"

namespace tbd {

struct AddConfig {
  static constexpr const char* kKind = "Add";
  static constexpr bool kAcceptsBlocked = true;
};

struct ConcatConfig {
  static constexpr const char* kKind = "Concat";
  int axis = 1;
};

struct SplitConfig {
  static constexpr const char* kKind = "Split";
  int axis = 1;
  std::vector<int64_t> sizes;
};

struct ReshapeConfig {
  static constexpr const char* kKind = "Reshape";
  std::vector<int64_t> shape;  // one entry may be -1
};

struct TransposeConfig {
  static constexpr const char* kKind = "Transpose";
  std::vector<int> perm;
};

}  // namespace tbd
