// models/transformer.cpp: the Transformer-base training graph.
#include "models/transformer.h"

#include <cmath>

#include "core/random.h"
#include "layers/activation.h"
#include "layers/attention.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/positional_encoding.h"
#include "layers/tensor_ops.h"
#include "models/registry.h"

namespace tbd {

int64_t transformer_param_count(const TransformerSpec& s) {
  const int64_t D = s.d_model, F = s.ffn;
  const int64_t attn = 4 * D * D + 4 * D, ffn = 2 * D * F + F + D;
  return s.vocab * D + s.layers * (attn + ffn + 4 * D) + s.layers * (2 * attn + ffn + 6 * D) +
         4 * D;
}

namespace {

class TransformerBuilder {
 public:
  TransformerBuilder(Graph& g, const TransformerSpec& s, uint64_t seed)
      : g_(g), s_(s), seed_(seed) {}

  TensorId dropout(const std::string& name, TensorId x) {
    if (s_.dropout <= 0) return x;
    DropoutConfig c;
    c.p = s_.dropout;
    c.seed = seed_for(seed_, name);
    return g_.add1(name, c, {x});
  }
  TensorId norm(const std::string& name, TensorId x) {
    return g_.add1(name, LayerNormConfig{}, {x});
  }

  // x + dropout(attn(norm(x)[, memory]))
  TensorId attention_block(const std::string& name, TensorId x, TensorId memory, bool causal) {
    TensorId h = norm(name + ".norm", x);
    MultiHeadAttentionConfig c;
    c.num_heads = s_.heads;
    c.causal = causal;
    c.cross = memory >= 0;
    c.dropout = s_.dropout;
    c.seed = seed_for(seed_, name);
    std::vector<TensorId> in{h};
    if (c.cross) in.push_back(memory);
    h = g_.add1(name, c, in);
    h = dropout(name + ".dropout", h);
    return g_.add1(name + ".residual", AddConfig{}, {x, h});
  }

  // x + dropout(fc2(dropout(relu(fc1(norm(x))))))
  TensorId ffn_block(const std::string& name, TensorId x) {
    TensorId h = norm(name + ".norm", x);
    LinearConfig fc1;
    fc1.out_features = s_.ffn;
    h = g_.add1(name + ".fc1", fc1, {h});
    h = g_.add1(name + ".relu", ActivationConfig{ActKind::kRelu}, {h});
    h = dropout(name + ".relu_dropout", h);
    LinearConfig fc2;
    fc2.out_features = s_.d_model;
    h = g_.add1(name + ".fc2", fc2, {h});
    h = dropout(name + ".dropout", h);
    return g_.add1(name + ".residual", AddConfig{}, {x, h});
  }

  TensorId embed(const std::string& name, TensorId ids, Layer** emb_layer) {
    EmbeddingConfig e;
    e.num_embeddings = s_.vocab;
    e.dim = s_.d_model;
    e.scale = std::sqrt(static_cast<double>(s_.d_model));
    e.init = Init::kNormal002;
    TensorId h;
    if (*emb_layer == nullptr) {
      h = g_.add1(name, e, {ids});
      *emb_layer = g_.nodes().back().layer.get();
    } else {
      h = g_.add1(name, e, {ids});
      g_.tie(g_.nodes().back().layer->params()[0], (*emb_layer)->params()[0]);
    }
    h = g_.add1(name + ".positions", PositionalEncodingConfig{}, {h});
    return dropout(name + ".dropout", h);
  }

 private:
  Graph& g_;
  const TransformerSpec& s_;
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<Model> build_transformer(Backend& be, const TransformerOptions& o) {
  const TransformerSpec& s = o.spec;
  auto m = std::make_unique<Model>(be, "Transformer", o.seed);
  Graph& g = m->graph();
  const int64_t N = o.batch;
  // Token ids in [1, V): 0 is conventionally padding; synthetic sentences are full length.
  TensorId src = m->data_input("src_tokens", Shape{N, s.src_len}, DType::kI32, 1, s.vocab);
  TensorId tgt = m->data_input("tgt_tokens", Shape{N, s.tgt_len}, DType::kI32, 1, s.vocab);
  TensorId labels = m->data_input("labels", Shape{N * s.tgt_len}, DType::kI32, 1, s.vocab);

  TransformerBuilder b(g, s, o.seed);
  Layer* emb = nullptr;
  TensorId h = b.embed("encoder.embed", src, &emb);
  for (int64_t l = 0; l < s.layers; ++l) {
    std::string n = "encoder." + std::to_string(l);
    h = b.attention_block(n + ".self_attn", h, -1, false);
    h = b.ffn_block(n + ".ffn", h);
  }
  TensorId memory = b.norm("encoder.norm", h);

  TensorId d = b.embed("decoder.embed", tgt, &emb);
  for (int64_t l = 0; l < s.layers; ++l) {
    std::string n = "decoder." + std::to_string(l);
    d = b.attention_block(n + ".self_attn", d, -1, true);
    d = b.attention_block(n + ".cross_attn", d, memory, false);
    d = b.ffn_block(n + ".ffn", d);
  }
  d = b.norm("decoder.norm", d);
  d = g.add1("decoder.flatten", ReshapeConfig{{-1, s.d_model}}, {d});  // (N*T, D)
  LinearConfig proj;
  proj.out_features = s.vocab;
  proj.bias = false;
  TensorId logits = g.add1("output_proj", proj, {d});
  g.tie(g.nodes().back().layer->params()[0], emb->params()[0]);  // (V, D) both
  SoftmaxCrossEntropyConfig xent;
  xent.label_smoothing = s.label_smoothing;
  g.set_loss(g.add1("loss", xent, {logits, labels}));

  m->set_samples_per_step(N);
  m->set_extra_items("tokens", static_cast<double>(N * s.tgt_len));
  if (o.build_only) return m;
  AdamConfig adam;
  adam.lr = o.lr;
  adam.beta2 = 0.98;
  adam.eps = 1e-9;
  m->finalize([&](std::vector<Param*> ps) { return make_optimizer(be, adam, std::move(ps)); });
  return m;
}

TransformerOptions transformer_tiny() {
  TransformerOptions o;
  o.spec.layers = 2;
  o.spec.d_model = 32;
  o.spec.heads = 4;
  o.spec.ffn = 64;
  o.spec.vocab = 50;
  o.spec.src_len = 8;
  o.spec.tgt_len = 8;
  o.spec.label_smoothing = 0.0;
  o.batch = 4;
  o.lr = 3e-3;
  o.seed = 5;
  return o;
}

TBD_REGISTER_MODEL(ModelEntry{"Transformer",
                              {1, 2, 4, 8, 16, 32, 64, 128},
                              1,
                              [](Backend& be, const ModelArgs& a) {
                                TransformerOptions o;
                                o.batch = a.batch;
                                o.build_only = a.build_only;
                                // len: source and target length (tbd_bench --tbd_seq_len; the
                                // name's /len:<T>).
                                o.spec.src_len = o.spec.tgt_len = a.param("len", o.spec.src_len);
                                return build_transformer(be, o);
                              },
                              {"len"}});

}  // namespace tbd
