// models/gpt2.h: GPT-2 as llm.c trains it (Karpathy's llm.c, train_gpt2.c / train_gpt2.cu).
//
// A decoder-only language model: token embedding wte (Vp, C) plus a learned position embedding
// wpe (max_len, C); L pre-norm blocks x += attn(ln1(x)); x += mlp(ln2(x)) with causal
// multi-head self-attention (C/heads per head, biases; the fused kind of layers/sdpa.h between
// llm.c's c_attn and c_proj projections) and a 4x MLP with GELU (tanh
// approximation); a final LayerNorm (eps 1e-5 everywhere); logits = x wte^T (the output head
// tied to the token embedding, no bias); softmax cross-entropy against the next tokens. No
// dropout. AdamW (betas 0.9/0.999, eps 1e-8, decoupled weight decay 0.1 on the matrices and
// embeddings only, as llm.c's CUDA trainer: not on biases or LayerNorm). Initialisation as
// llm.c's: every weight N(0, 0.02), the two residual projections (attention output, MLP
// output) N(0, 0.02/sqrt(2L)), biases zero, LayerNorm scales one.
//
// Vocabulary: 50257 tokens, padded to Vp = 50304 (a multiple of 128) as llm.c pads it. Token
// ids and labels are in [0, 50257); the 47 padded rows of wte are parameters like the rest.
// One difference from llm.c: its loss takes the softmax over the 50257 real logits, this one
// over all Vp (the padded logits only ever get pushed down; the FLOPs are the same matmul).
//
// Parameter count (V padded vocab, C channels, L layers, P max length):
//   wte V*C + wpe P*C
//   block  ln1 2C, attention 4C^2 + 4C (q, k, v, out with biases: llm.c's qkv 3C^2 + 3C and
//          proj C^2 + C), ln2 2C, mlp fc 4C^2 + 4C, proj 4C^2 + C      = 12C^2 + 13C   (x L)
//   final LayerNorm 2C; head tied: 0
//   124M (L 12, C 768, P 1024): 38,633,472 + 786,432 + 12 * 7,087,872 + 1,536 = 124,475,904,
//   the count llm.c prints. 350M: L 24, C 1024, heads 16; 774M: L 36, C 1280, heads 20.
//
// Model FLOPs (the `mfu` numerator, llm.c's gpt2_estimate_mfu after PaLM's appendix B): per
// token 6N + 6*L*C*T, N the parameter count above, T the sequence length: 6N for the forward
// and backward of every weight, and 6LCT for attention's QK^T and PV taking the causal half of
// PaLM's 12LCT. The executed `flop` counts the work as run: the fused attention's backward
// recomputes the scores (and the unfused attention computes all T^2 of them), so flop > model
// FLOPs.
#pragma once

#include <cstdint>
#include <memory>

#include "models/model.h"

namespace tbd {

struct Gpt2Spec {
  int64_t layers = 12;
  int64_t channels = 768;
  int64_t heads = 12;
  int64_t max_len = 1024;     // rows of wpe; the sequence length may not exceed it
  int64_t vocab = 50257;      // real tokens: ids and labels are drawn in [0, vocab)
  int64_t vocab_pad = 50304;  // rows of wte and logits per token
};

struct Gpt2Options {
  Gpt2Spec spec;
  int64_t batch = 4;
  int64_t seq_len = 1024;
  double lr = 3e-4;  // train_gpt2.cu's default
  double weight_decay = 0.1;
  uint64_t seed = 0;
  bool build_only = false;  // the graph without storage (ModelArgs::build_only)
  // Attention as llm.c builds it, c_attn (C -> 3C) + the fused causal ScaledDotProductAttention
  // + c_proj; false: the unfused MultiHeadAttention (wq, wk, wv, wo), which keeps the T x T
  // probabilities for backward (--tbd_model_args=unfused:1, for comparison).
  bool fused_attention = true;
};

// llm.c's sizes by their parameter count in millions: 124 (d12), 350 (d24), 774 (d36). Throws
// naming the accepted sizes for any other.
Gpt2Spec gpt2_spec(int64_t size_millions);
// The count above, as a function of the spec (tests compare it with the built model).
int64_t gpt2_param_count(const Gpt2Spec& s);
// Model FLOPs per token at sequence length T: 6N + 6*L*C*T.
double gpt2_model_flops_per_token(const Gpt2Spec& s, int64_t T);

std::unique_ptr<Model> build_gpt2(Backend& be, const Gpt2Options& opt);
// The tiny configuration the model tests train: 2 layers, 32 channels, 4 heads, vocabulary 64
// (no padding), length 8, batch 4.
Gpt2Options gpt2_tiny();

}  // namespace tbd
