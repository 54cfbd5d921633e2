// models/transformer.h: Transformer-base for machine translation (Vaswani et al. 2017, as
// tensor2tensor's transformer_base configures it).
//
// 6 encoder + 6 decoder layers, d_model 512, 8 heads, FFN 2048 (ReLU), dropout 0.1 on
// sublayer outputs, attention probabilities and the FFN hidden layer, label smoothing 0.1, Adam
// (beta2 0.98, eps 1e-9). Pre-norm residual blocks with a final layer norm per stack
// (tensor2tensor's layer_preprocess "n" / postprocess "da"). One embedding of the shared
// 32,000-token vocabulary, scaled by sqrt(d_model), serves source, target and (tied) the
// output projection (no bias); sinusoidal positions.
//
// Parameter count, from the configuration (V vocab, D d_model, F ffn, L layers):
//   embedding                  V*D                       = 16,384,000
//   encoder layer  attn 4*D*D + 4*D, ffn 2*D*F + F + D, 2 norms 4*D   = 3,152,384  (x L)
//   decoder layer  2 attn, ffn, 3 norms 6*D                          = 4,204,032  (x L)
//   final norms    2 * 2*D                                            =     2,048
//   output projection: tied to the embedding                          =         0
//   total (L = 6)                                                     = 60,524,544
#pragma once

#include <memory>

#include "models/model.h"

namespace tbd {

struct TransformerSpec {
  int64_t layers = 6;  // encoder layers = decoder layers
  int64_t d_model = 512;
  int64_t heads = 8;
  int64_t ffn = 2048;
  int64_t vocab = 32000;  // shared source/target vocabulary, tied to the output projection
  int64_t src_len = 128;
  int64_t tgt_len = 128;
  double dropout = 0.1;
  double label_smoothing = 0.1;
};

struct TransformerOptions {
  TransformerSpec spec;
  int64_t batch = 8;  // sentences
  double lr = 1e-4;
  uint64_t seed = 0;
  bool build_only = false;  // the graph without storage (ModelArgs::build_only)
};

// The count above, as a function of the spec (tests compare it with the built model).
int64_t transformer_param_count(const TransformerSpec& s);

std::unique_ptr<Model> build_transformer(Backend& be, const TransformerOptions& opt);
// The tiny configuration the model tests train and tools/peers mirrors: 2 layers, d_model 32,
// 4 heads, FFN 64, vocabulary 50, 8 tokens a side, batch 4, no label smoothing (its floor of
// about 0.7 nats at V = 50 would hide whether the loss fell; the loss tests cover smoothing).
TransformerOptions transformer_tiny();

}  // namespace tbd
