// layers/attention.h: multi-head attention (self and cross), causal and padding masks.
//
// Inputs: q_in: (N, Tq, D); kv_in: (N, Tk, D) for cross attention (self: q_in only);
//   kv_lengths: (N) i32, last input when `padding_mask` (keys at positions >= length are
//   masked). Output: (N, Tq, D). Params: wq, wk, wv, wo (D, D) and bq, bk, bv, bo (D) when
//   `bias`. Heads h = num_heads, head dim dh = D/h, scale 1/sqrt(dh).
//   Q = q_in Wq^T + bq, K, V likewise from kv_in; S = Q K^T * scale (+mask -inf);
//   P = softmax(S) (attention dropout `dropout`, seeded like Dropout); O = P V;
//   y = concat_heads(O) Wo^T + bo.
// FLOPs: fwd = 2*N*Tq*D*D*2 (q, out proj) + 2*N*Tk*D*D*2 (k, v) + 4*N*h*Tq*Tk*dh (QK^T, PV)
//   + 5*N*h*Tq*Tk (softmax); bwd_data ~ 2x the GEMM part of fwd; bwd_weights the projection
//   weight gradients 2*(2*N*Tq*D*D + 2*N*Tk*D*D).
#pragma once

#include "layers/layer.h"

namespace tbd {

struct MultiHeadAttentionConfig {
  static constexpr const char* kKind = "MultiHeadAttention";
  int64_t num_heads = 8;
  bool causal = false;        // query i sees keys j <= i (decoder self-attention)
  bool cross = false;         // kv_in is a second input
  bool padding_mask = false;  // kv_lengths is the last input
  bool bias = true;
  double dropout = 0.0;  // on the attention probabilities
  uint64_t seed = 0;
};

}  // namespace tbd
