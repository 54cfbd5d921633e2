// models/seq2seq.h: Seq2Seq NMT as TBD ran it with Sockeye 1.5 on IWSLT15 En-Vi: an LSTM
// encoder-decoder with MLP attention and input feeding.
//
// Source (S, N) and target (T, N) token ids, time-major. Encoder: the source is embedded (512)
// and reversed over time (Sockeye's --rnn-encoder-reverse-input, in its order; per sample over
// its valid length), run through a bidirectional LSTM (256 per direction, concatenated to 512) and
// an LSTM 512. The decoder's four initial states (h and c of its two layers) are each tanh(FC 512)
// of the encoder's output at the last valid source step; the keys W_e2h enc_s are computed once.
// Decoder, step by step (the previous attentional hidden state is concatenated to the next input,
// so it cannot be one fused sequence call): x_t = [emb(y_t); h~_{t-1}] (h~_0 = 0), a 2-layer LSTM
// 512 (two LSTMCell layers) gives o_t, MLP attention (hidden 512, length mask,
// layers/mlp_attention.h) over the encoder states with query W_q2h o_t gives ctx_t, and h~_t =
// tanh(W_h [o_t; ctx_t] + b). The classifier (512 -> V_tgt, with bias) runs over all T steps at
// once; cross-entropy ignores padding (id 0) and averages over the other tokens. Adam lr 3e-4,
// gradients clipped element-wise to [-1, 1] (MXNet's clip_gradient). Every step's layers are nodes
// of their own (each keeps its saved state for backward) whose parameters are tied to step 0's:
// primitives are built once, at graph build, never per step.
//
// Parameter count (Vs, Vt vocabularies, E embedding, H hidden, A attention hidden; LSTM
// gates 4, one bias vector per gate):
//   embeddings            Vs*E + Vt*E                          = 12,749,824
//   encoder bi-LSTM       2 * (4*(H/2)*(E + H/2) + 4*(H/2))    =  1,574,912
//   encoder LSTM          4*H*(H + H) + 4*H                    =  2,099,200
//   decoder LSTM layer 0  4*H*(E + H + H) + 4*H                =  3,147,776
//   decoder LSTM layer 1  4*H*(H + H) + 4*H                    =  2,099,200
//   MLP attention         H*A (e2h) + H*A (q2h) + A (v)        =    524,800
//   attentional hidden    2*H*H + H                            =    524,800
//   decoder init          4 * (H*H + H)                        =  1,050,624
//   classifier            H*Vt + Vt                            =  3,955,230
//   total                                                      = 27,726,366
// Sockeye (MXNet's LSTMCell) has two bias vectors per gate (i2h and h2h) where ours has one:
// their sum is the only thing either computes with, so the functions are the same and our
// count is 8,192 lower than Sockeye's 27,734,558 (the h2h biases: 2 x 4*256 in the
// bidirectional layer, 4*512 in each of the other three LSTM layers).
#pragma once

#include <memory>

#include "models/model.h"

namespace tbd {

struct Seq2SeqSpec {
  int64_t src_vocab = 17192;  // IWSLT15 En with Sockeye's <pad>, <unk>, <s>, </s>
  int64_t tgt_vocab = 7710;   // IWSLT15 Vi
  int64_t embed = 512;
  int64_t hidden = 512;     // encoder output (2 x 256 bidirectional, then 512) and decoder
  int64_t attention = 512;  // MLP attention hidden size
  int64_t src_len = 30;
  int64_t tgt_len = 30;
};

struct Seq2SeqOptions {
  Seq2SeqSpec spec;
  int64_t batch = 16;  // sentences
  double lr = 3e-4;
  double clip = 1.0;  // element-wise gradient clip
  // Random valid lengths per sample (source in [max(1, S/2), S], target likewise; labels past
  // a target's length are padding) instead of full-length sentences, to exercise the masks.
  bool random_lengths = false;
  uint64_t seed = 0;
  bool build_only = false;  // the graph without storage (ModelArgs::build_only)
};

// The count above, as a function of the spec (tests compare it with the built model).
int64_t seq2seq_param_count(const Seq2SeqSpec& s);

std::unique_ptr<Model> build_seq2seq(Backend& be, const Seq2SeqOptions& opt);
// The tiny configuration the model tests train and tools/peers mirrors: vocabularies of 50,
// embedding, hidden and attention 16, 8 tokens a side with random lengths (the masks and the
// padding labels take part), batch 4.
Seq2SeqOptions seq2seq_tiny();

}  // namespace tbd
