// layers/mlp_attention.h: MLP (additive, Bahdanau-style) attention with a length mask, one
// decoder step: Sockeye's `--attention-type mlp`, as TBD's Seq2Seq runs it.
//
// Inputs (all row-major):
//   query   (N, A) f32: the decoder state already projected to the attention hidden size
//           (W_q2h o_t, a Linear without bias before this layer, so its GEMM is a Linear);
//   keys    (N, S, A) f32: the encoder states projected once per sequence (W_e2h enc_s, a
//           Linear without bias over all S positions, outside the decoder loop);
//   memory  (N, S, D) f32: the encoder states the context averages;
//   lengths (N) i32: source positions s >= lengths[n] are masked; every length must lie in
//           [1, S] (checked at each forward on the CPU; on CUDA, where a kernel cannot throw,
//           a sample with an invalid length gets a NaN context).
// Output ctx (N, D) f32. One parameter, the score vector v (A) (Sockeye's h2s, no bias),
// Xavier-uniform (fan_in A, fan_out 1), with weight decay. Per sample n and s < lengths[n]:
//   t_s = tanh(keys[n, s] + query[n])         (A)
//   e_s = v . t_s
//   alpha = softmax over s < lengths[n] of e  (masked positions: alpha_s = 0)
//   ctx[n] = sum_s alpha_s memory[n, s]
// Backward: dalpha_s = dctx . memory_s; de_s = alpha_s (dalpha_s - sum_j alpha_j dalpha_j);
//   dmemory_s = alpha_s dctx; g_s = de_s v (1 - t_s^2); dkeys_s = g_s; dquery = sum_s g_s;
//   dv += sum_{n,s} de_s t_s. Masked positions get zero gradients. Saved for backward
//   (feature_maps): t (N, S, A) and alpha (N, S).
// FLOPs, counted densely over all S positions (masked ones are skipped, not subtracted),
//   E = N*S*A, P = N*S, M = N*S*D:
//   fprop = E (add) + 4E (tanh, as Activation counts it) + 2E (dot with v) + 5P (softmax: max,
//           subtract, exp, sum, normalise) + 2M (weighted sum)
//   dgrad = 2M (dalpha) + M (dmemory) + 4P (softmax backward) + 4E (g: 1 - t^2 as two,
//           times v, times de) + E (dquery sum)
//   wgrad = 2E (dv += de t)
// Bytes (FP32, 4 per element, lengths i32; a lower bound, layers/layer.h), NA = N*A, ND = N*D:
//   fprop = 4*(NA + E + M + A + N read query, keys, memory, v, lengths; ND + E + P write ctx
//           and the saved t and alpha)
//   dgrad = 4*(ND + M + P + E + A + N read dctx, memory, alpha, t, v, lengths; M + E + NA
//           write dmemory, dkeys, dquery)
//   wgrad = 4*(E + P + 2A)  read t and the score gradients de; read and write dv
#pragma once

#include "layers/layer.h"

namespace tbd {

struct MlpAttentionConfig {
  static constexpr const char* kKind = "MlpAttention";
};

// The problem after the inputs are checked.
struct MlpAttentionDims {
  int64_t N = 0, S = 0, A = 0, D = 0;
};
// Checks the four inputs (throws naming the layer, the argument and the dims).
MlpAttentionDims mlp_attention_dims(const std::string& name, const std::vector<TensorDesc>& in);
Flops mlp_attention_flops(const MlpAttentionDims& d);
Bytes mlp_attention_bytes(const MlpAttentionDims& d);

// Contract: inputs query (N, A), keys (N, S, A), memory (N, S, D) f32 and lengths (N) i32;
// output ctx (N, D) f32; parameter v (A). lengths take no gradient.
template <>
Contract contract(const std::string& name, const MlpAttentionConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const MlpAttentionConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
