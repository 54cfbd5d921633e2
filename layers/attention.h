// layers/attention.h: multi-head attention (self and cross), causal and padding masks.
//
// Inputs: q_in: (N, Tq, D); kv_in: (N, Tk, D) for cross attention (self: q_in only, Tk = Tq);
//   kv_lengths: (N) i32, last input when `padding_mask` (keys at positions >= length are
//   masked; every length must lie in [1, Tk], checked at each forward). Output: (N, Tq, D).
//   Params, in this order: wq, wk, wv, wo (D, D), Xavier-uniform (cfg.weight_init), then bq, bk,
//   bv, bo (D), zeros, no weight decay, when `bias`. Heads h = num_heads, head dim dh = D/h, scale
//   1/sqrt(dh).
//   Q = q_in Wq^T + bq, K, V likewise from kv_in; S = Q K^T * scale (+mask -inf);
//   P = softmax(S) (attention dropout `dropout`, seeded like Dropout); O = P V;
//   y = concat_heads(O) Wo^T + bo.
// Masks: query i sees key j iff j < kv_lengths[n] (padding_mask) and j <= i (causal); the
//   padding mask applies to keys only (queries at padded positions still produce rows).
// Dropout (training mode only): keep[i] = attention_dropout_keep(seed, step, i, p) for the
//   flat index i of P in (N, h, Tq, Tk); `step` is the training forward's index (0, 1, 2, ...,
//   or as Layer::set_call_numbering numbers it on a data-parallel rank), so a rerun with the
//   same seed repeats the masks and every forward draws a new one.
//
// FLOPs (FMA = 2; Mq = N*Tq, Mk = N*Tk, E = N*h*Tq*Tk scores, E*dh = N*Tq*Tk*D). Exact for the
// CPU implementation, with the softmax counted densely over all E scores (the GEMMs compute
// masked scores too; the softmax skips them, which is not subtracted):
//   fprop = 4*Mq*D*D (q, out proj) + 4*Mk*D*D (k, v) + 4*E*dh (QK^T, PV)
//         + 6*E (softmax: max, scale-subtract FMA, exp, sum, normalise)
//         [+ 2*E dropout: compare, scale] [+ 2*(Mq + Mk)*D bias adds]
//   dgrad = 4*Mq*D*D (dO = dy Wo, dq_in = dQ Wq) + 4*Mk*D*D (dK Wk, dV Wv)
//         + 8*E*dh (P^T dO, dO V^T, dS K, dS^T Q)
//         + 5*E (softmax: dot FMA, subtract, times P, times scale) [+ E dropout]
//         + input-gradient sums: self 2*Mq*D (three projections into one input), cross Mk*D
//   wgrad = 4*Mq*D*D + 4*Mk*D*D (dWq, dWo, dWk, dWv) + 4*D*D (accumulate)
//         [+ 2*(Mq + Mk)*D bias-gradient sums]
//
// Bytes (FP32, 4 per element; a lower bound, layers/layer.h). The kind saves Q, K, V (the
// projections), P (the attention probabilities, E floats) and O (the heads' outputs before the
// output projection) for backward, as both implementations do; a fused kernel that recomputes P
// (flash attention) would move less. Wt = 4*D*D [+ 4*D biases]; [cross] terms only for cross
// attention (self attention reads q_in once for all three projections):
//   fprop = 4*(Mq*D q_in + [cross] Mk*D kv_in + Wt + Mq*D y + Mq*D Q + 2*Mk*D K, V + E P
//            + Mq*D O) [+ 4*N kv_lengths] [+ E: the one-byte dropout mask]
//   dgrad = 4*(Mq*D dy + 4*D*D weights + Mq*D Q + 2*Mk*D K, V + E P + Mq*D dq_in
//            + [cross] Mk*D dkv_in + (Mq + 2*Mk)*D dQ, dK, dV, kept for the weight gradients)
//            [+ E: the dropout mask]
//   wgrad = 4*(Mq*D dy + Mq*D O + (Mq + 2*Mk)*D dQ, dK, dV + Mq*D q_in + [cross] Mk*D
//            kv_in + 2*Wt: read and write every parameter gradient)
#pragma once

#include <cmath>
#include <cstdint>

#include "core/random.h"
#include "layers/layer.h"

namespace tbd {

struct MultiHeadAttentionConfig {
  static constexpr const char* kKind = "MultiHeadAttention";
  int64_t num_heads = 8;
  bool causal = false;        // query i sees keys j <= i (decoder self-attention)
  bool cross = false;         // kv_in is a second input
  bool padding_mask = false;  // kv_lengths is the last input
  bool bias = true;
  Init weight_init = Init::kXavierUniform;  // wq, wk, wv, wo (GPT-2: kNormal002)
  double dropout = 0.0;                     // on the attention probabilities
  uint64_t seed = 0;
};

// The problem sizes of one attention layer, from checked inputs.
struct AttentionDims {
  int64_t N, Tq, Tk, D, h, dh;
};

// Checks the inputs against cfg (arity, ranks, dtypes, N and D agreement, D % heads, config
// values) and throws naming the layer, the argument and the dims. Returns the sizes.
AttentionDims attention_dims(const std::string& name, const MultiHeadAttentionConfig& cfg,
                             const std::vector<TensorDesc>& inputs);
// y: (N, Tq, D).
inline Shape attention_output_shape(const AttentionDims& d) { return Shape{d.N, d.Tq, d.D}; }
// FLOPs as documented above; `dropout_active` adds the dropout terms (training with p > 0).
Flops attention_flops(const MultiHeadAttentionConfig& cfg, const AttentionDims& d,
                      bool dropout_active);
// Bytes as documented above; `dropout_active` adds the mask.
// Under bf16 (t) every tensor but the biases and the parameter gradients is 2 bytes.
Bytes attention_bytes(const MultiHeadAttentionConfig& cfg, const AttentionDims& d,
                      bool dropout_active, DType t = DType::kF32);

// The attention-dropout mask, counter based: element i of the forward numbered `step` is kept
// iff splitmix64(base + i) >= p * 2^64 with base = splitmix64(seed ^ splitmix64(step)), i.e.
// position i of the splitmix64 stream seeded by (seed, step). Any backend (and the tests'
// reference) reproduces it exactly.
inline uint64_t attention_dropout_base(uint64_t seed, uint64_t step) {
  return splitmix64(seed ^ splitmix64(step));
}
inline uint64_t attention_dropout_threshold(double p) {
  // p in [0, 1): p * 2^64 fits in uint64_t (ldexp is exact; p < 1 keeps it below 2^64).
  return static_cast<uint64_t>(std::ldexp(p, 64));
}
inline bool attention_dropout_keep(uint64_t base, uint64_t i, uint64_t threshold) {
  return splitmix64(base + i) >= threshold;
}

// Contract: inputs q_in [, kv_in] [, kv_lengths]; y (N, Tq, D) f32; parameters
// wq, wk, wv, wo (D, D) Xavier-uniform [and bq, bk, bv, bo (D) zeros, no decay]; work with dropout
// as configured (training mode; Layer::set_work switches it off in eval mode).
template <>
Contract contract(const std::string& name, const MultiHeadAttentionConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const MultiHeadAttentionConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
