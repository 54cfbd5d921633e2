// layers/sdpa.h: scaled dot-product attention as one fused kind (flash-attention style), with
// a causal mask and grouped-query attention. No parameters: the projections around it are
// Linear layers (GPT-2's c_attn and c_proj, Llama's wq, wk, wv, wo).
//
// Inputs, row-major, f32 or bf16 (all the same dtype):
//   separate: q (N, T, Hq*d), k (N, T, Hkv*d), v (N, T, Hkv*d)
//   packed:   qkv (N, T, (Hq + 2*Hkv)*d): q, k and v as consecutive column blocks, as a
//             C -> 3C projection writes them (llm.c's c_attn); nothing is split or copied.
// Heads are consecutive column blocks of d within q, k and v. Query head h reads key/value head
// h / (Hq/Hkv) (grouped-query attention; Hkv = Hq is multi-head attention, Hkv = 1 multi-query).
// Output: o (N, T, Hq*d) in the inputs' dtype; o's head h is softmax(q_h k_g^T * scale [+ causal
// mask]) v_g with scale = 1/sqrt(d). Causal: query i sees keys j <= i.
//
// Algorithm (every backend): tiles of queries against tiles of keys with an online softmax
// (running row max m and sum l, the output rescaled as m grows), so the T x T scores never
// exist in memory; saved for backward are the inputs, o and the rows' log-sum-exp
// lse = m + log(l), (N, Hq, T) f32: O(T) per head, not O(T^2). Backward recomputes each tile's
// probabilities P = exp(scale * q k^T - lse) and with D = rowsum(do * o) forms
// dv += P^T do, dP = do v^T, dS = P * (dP - D) * scale, dq += dS k, dk += dS^T q
// (FlashAttention-2's backward); a key/value head sums the gradients of its Hq/Hkv query heads.
//
// FLOPs (FMA = 2), counting the pairs (query i, key j) the mask keeps: pairs = N*Hq*T*(T+1)/2
// causal, N*Hq*T^2 otherwise. Tiles on the diagonal compute their masked half too; that work is
// not counted (the convention of FlashAttention's and PyTorch's causal FLOP counts).
//   fprop = 4*pairs*d (q k^T, P v) + 4*pairs (max, subtract, exp, sum) + N*Hq*T*d (o / l)
//   dgrad = 10*pairs*d (q k^T again, do v^T, P^T do, dS k, dS^T q)
//         + 5*pairs (subtract, exp, dP - D, times P, times scale) + 2*N*Hq*T*d (D)
//   wgrad = 0
// The scale is folded into the q k^T product (its alpha) and the online rescaling of the
// output rows is not counted.
// Bytes (a lower bound, layers/layer.h; Eq = N*T*Hq*d, Ekv = N*T*Hkv*d, element size from the
// dtype, lse 4 bytes):
//   fprop = bytes(Eq q + 2*Ekv k, v + Eq o) + 4*N*Hq*T lse
//   dgrad = bytes(Eq q + 2*Ekv k, v + Eq o + Eq do + Eq dq + 2*Ekv dk, dv) + 4*N*Hq*T lse
#pragma once

#include <string>
#include <vector>

#include "layers/layer.h"

namespace tbd {

struct ScaledDotProductAttentionConfig {
  static constexpr const char* kKind = "ScaledDotProductAttention";
  int64_t num_heads = 8;     // query heads Hq
  int64_t num_kv_heads = 0;  // key/value heads Hkv (0: Hq); Hq % Hkv == 0
  bool causal = true;
  bool packed = false;  // one qkv input instead of q, k, v
};

// The problem sizes, and where q, k and v live: element (n, t, column c) of input x is at
// x[(n*T + t)*ld + off + c] with x the only input when packed.
struct SdpaDims {
  int64_t N = 0, T = 0, Hq = 0, Hkv = 0, d = 0;
  int64_t ld_q = 0, ld_kv = 0;                // row strides of q and of k, v
  int64_t off_q = 0, off_k = 0, off_v = 0;    // column offsets (non-zero when packed)
  int64_t group() const { return Hq / Hkv; }  // query heads per key/value head
  // Pairs (query, key) the mask keeps, over all of (N, Hq).
  double pairs(bool causal) const;
};

// Checks the inputs against cfg (arity, ranks, dtypes, N and T agreement, widths divisible by
// the heads, Hq % Hkv) and throws naming the layer, the argument and the dims.
SdpaDims sdpa_dims(const std::string& name, const ScaledDotProductAttentionConfig& cfg,
                   const std::vector<TensorDesc>& inputs);
Flops sdpa_flops(const ScaledDotProductAttentionConfig& cfg, const SdpaDims& d);
Bytes sdpa_bytes(const SdpaDims& d, DType t);

// Contract: inputs q, k, v or qkv; output o (N, T, Hq*d) in their dtype; no parameters;
// backward reads every input and o.
template <>
Contract contract(const std::string& name, const ScaledDotProductAttentionConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const ScaledDotProductAttentionConfig& cfg,
                             const std::vector<TensorDesc>& in, const Contract& c);

}  // namespace tbd
