// layers/linear.h: fully connected layer and the raw GEMM op.
//
// Linear: x: (..., D_in) row-major  w: (D_out, D_in)  b: (D_out)  y: (..., D_out)
//   y = x w^T + b, M = product of the leading dims.
//   FLOPs fwd 2*M*D_in*D_out (+M*D_out bias), bwd_data 2*M*D_in*D_out,
//   bwd_weights 2*M*D_in*D_out (+M*D_out for the bias gradient).
// Gemm: a: (B..., M, K) or (B..., K, M) with trans_a; b: (B..., K, N) or (B..., N, K) with
//   trans_b, or rank 2 (shared by every batch); y: (B..., M, N) = alpha * op(a) op(b) (+ bias
//   (N) parameter when `bias`). Both inputs get gradients.
//   FLOPs fwd 2*B*M*N*K, bwd_data 4*B*M*N*K (da and db), bwd_weights B*M*N (bias only).
#pragma once

#include "layers/layer.h"

namespace tbd {

struct LinearConfig {
  static constexpr const char* kKind = "Linear";
  int64_t out_features = 0;
  bool bias = true;
  Init init = Init::kXavierUniform;  // kHeNormal before a ReLU (ResNet's fc uses uniform fan-in)
};

struct GemmConfig {
  static constexpr const char* kKind = "Gemm";
  bool trans_a = false;
  bool trans_b = false;
  double alpha = 1.0;
  bool bias = false;
};

}  // namespace tbd
