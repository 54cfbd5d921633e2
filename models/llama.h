// models/llama.h: a Llama-3-style decoder (Meta's Llama 3 architecture; torchtitan trains it).
//
// Token embedding tok_embeddings (V, C), no position table; L pre-norm blocks
//   x += wo(attention(rope(q), rope(k), v)),  q|k|v = wqkv(attention_norm(x))
//   x += w2(SwiGLU(w13(ffn_norm(x))))
// with RMSNorm (eps 1e-5), rotary position embeddings (theta 500000, on q and k: one RoPE
// layer over the packed q|k|v that passes v through), causal grouped-query attention (Hq query
// heads, Hkv key/value heads of d = C/Hq; the fused ScaledDotProductAttention reading q|k|v
// packed), a SwiGLU MLP of hidden size F, no biases anywhere; a final RMSNorm and an untied
// output head (C -> V; `tied` ties it to the embedding, as Llama 3.2 1B and 3B do); softmax
// cross-entropy against the next tokens. wq, wk, wv are one Linear (C -> (Hq + 2 Hkv) d) and
// w1, w3 one Linear (C -> 2F): the same parameters as Meta's separate matrices, fewer passes.
// AdamW (betas 0.9/0.95, eps 1e-8, decoupled weight decay 0.1 on the matrices and embeddings,
// lr 3e-4: torchtitan's Llama 3 defaults); every weight N(0, 0.02), the residual projections
// (wo, w2) N(0, 0.02/sqrt(2L)) as GPT-2's (torchtitan scales them by depth too); norm weights one.
//
// Parameter count (V vocabulary, C channels, L layers, F MLP hidden, d = C/Hq):
//   embedding V*C, head V*C (0 when tied)
//   block  2C (two norms) + C*(Hq + 2*Hkv)*d (wq, wk, wv) + Hq*d*C (wo) + 3*C*F (w1, w3, w2)
//   final norm C
//   Llama 3.2 1B's shape (L 16, C 2048, Hq 32, Hkv 8, F 8192, V 128256): 1,498,482,688 untied;
//   tied 1,235,814,400, the count Meta publishes for Llama 3.2 1B.
// Model FLOPs per token (the `mfu` numerator): 6*(N - V*C) + 6*L*Hq*d*T: every weight's
// forward and backward (6 per parameter) except the input embedding's, a lookup (when tied the
// head's matmul is counted once through its shared table: 6*N then), plus attention's q k^T
// and P v over the causal half (12*L*Hq*d*T / 2; with grouped-query heads the products still
// run per query head, so Hq*d, not C, stands where GPT-2's formula has C). torchtitan's count
// differs in two ways: it drops the embedding table from N and takes 12*L*Hq*d*T (no halving).
#pragma once

#include <cstdint>
#include <memory>

#include "models/model.h"

namespace tbd {

struct LlamaSpec {
  int64_t layers = 16;
  int64_t channels = 2048;
  int64_t heads = 32;
  int64_t kv_heads = 8;
  int64_t hidden = 8192;  // F, the SwiGLU MLP's width
  int64_t vocab = 128256;
  double rope_theta = 500000.0;
  bool tied = false;  // output head tied to the embedding
};

struct LlamaOptions {
  LlamaSpec spec;
  int64_t batch = 4;
  int64_t seq_len = 1024;
  double lr = 3e-4;
  double weight_decay = 0.1;
  uint64_t seed = 0;
  bool build_only = false;
};

// Shapes by their parameter count in millions (untied): 1498 (Llama 3.2 1B's shape, the
// default) and 45 (4 layers, 512 channels, 8/2 heads, F 1536, V 32000: for quick runs). Throws
// naming the accepted sizes for any other.
LlamaSpec llama_spec(int64_t size_millions);
int64_t llama_param_count(const LlamaSpec& s);
// Model FLOPs per token at sequence length T, as above.
double llama_model_flops_per_token(const LlamaSpec& s, int64_t T);

std::unique_ptr<Model> build_llama(Backend& be, const LlamaOptions& opt);
// The tiny configuration the tests train: 2 layers, 32 channels, 4 query and 2 key/value
// heads (d 8), F 64, vocabulary 64, length 8, batch 4.
LlamaOptions llama_tiny();

}  // namespace tbd
