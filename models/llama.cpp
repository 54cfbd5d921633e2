// models/llama.cpp: the Llama-3-style decoder's training graph.
#include "models/llama.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/optimizer.h"
#include "layers/rms_norm.h"
#include "layers/rope.h"
#include "layers/sdpa.h"
#include "layers/swiglu.h"
#include "layers/tensor_ops.h"
#include "models/registry.h"

namespace tbd {

namespace {

struct LlamaSize {
  int64_t millions;
  LlamaSpec spec;
};
LlamaSpec small_spec() {
  LlamaSpec s;
  s.layers = 4;
  s.channels = 512;
  s.heads = 8;
  s.kv_heads = 2;
  s.hidden = 1536;
  s.vocab = 32000;
  return s;
}
const std::vector<LlamaSize>& sizes() {
  static const std::vector<LlamaSize> k{{1498, LlamaSpec{}}, {45, small_spec()}};
  return k;
}
std::vector<int64_t> size_values() {
  std::vector<int64_t> v;
  for (const LlamaSize& z : sizes()) v.push_back(z.millions);
  return v;
}

}  // namespace

LlamaSpec llama_spec(int64_t size_millions) {
  std::string known;
  for (const LlamaSize& z : sizes()) {
    if (z.millions == size_millions) return z.spec;
    known += detail::concat(known.empty() ? "" : ", ", z.millions, "m (", z.spec.layers,
                            " layers, ", z.spec.channels, " channels)");
  }
  TBD_CHECK(false, "Llama: size:", size_millions, " is not one of ", known);
  return {};
}

int64_t llama_param_count(const LlamaSpec& s) {
  const int64_t C = s.channels, d = C / s.heads;
  const int64_t block =
      2 * C + C * (s.heads + 2 * s.kv_heads) * d + s.heads * d * C + 3 * C * s.hidden;
  return s.vocab * C * (s.tied ? 1 : 2) + s.layers * block + C;
}

double llama_model_flops_per_token(const LlamaSpec& s, int64_t T) {
  const double n = static_cast<double>(llama_param_count(s));
  const double embed = s.tied ? 0.0 : static_cast<double>(s.vocab * s.channels);
  const double hd = static_cast<double>(s.channels / s.heads * s.heads);
  return 6.0 * (n - embed) + 6.0 * static_cast<double>(s.layers) * hd * static_cast<double>(T);
}

namespace {

class LlamaBuilder {
 public:
  LlamaBuilder(Graph& g, const LlamaSpec& s) : g_(g), s_(s), d_(s.channels / s.heads) {}

  TensorId norm(const std::string& name, TensorId x) {
    return g_.add1(name, RmsNormConfig{}, {x});  // eps 1e-5
  }
  // A bias-free Linear with N(0, 0.02) weights; residual projections scaled by 1/sqrt(2L).
  TensorId linear(const std::string& name, TensorId x, int64_t out, bool residual = false) {
    LinearConfig c;
    c.out_features = out;
    c.bias = false;
    c.init = Init::kNormal002;
    TensorId y = g_.add1(name, c, {x});
    if (residual) scale_residual_init(g_.nodes().back().layer->params()[0], s_.layers);
    return y;
  }

  // x + wo(attention(rope(wqkv(attention_norm(x))))), causal, grouped-query.
  TensorId attention_block(const std::string& name, TensorId x) {
    TensorId h = norm(name + ".attention_norm", x);
    h = linear(name + ".attention.wqkv", h, (s_.heads + 2 * s_.kv_heads) * d_);
    RopeConfig rope;
    rope.head_dim = d_;
    rope.rotate_heads = s_.heads + s_.kv_heads;  // q and k; v passes through
    rope.theta = s_.rope_theta;
    h = g_.add1(name + ".attention.rope", rope, {h});
    ScaledDotProductAttentionConfig a;
    a.num_heads = s_.heads;
    a.num_kv_heads = s_.kv_heads;
    a.causal = true;
    a.packed = true;
    h = g_.add1(name + ".attention.sdpa", a, {h});
    h = linear(name + ".attention.wo", h, s_.channels, /*residual=*/true);
    return g_.add1(name + ".attention.residual", AddConfig{}, {x, h});
  }

  // x + w2(SwiGLU(w13(ffn_norm(x)))).
  TensorId mlp_block(const std::string& name, TensorId x) {
    TensorId h = norm(name + ".ffn_norm", x);
    h = linear(name + ".feed_forward.w13", h, 2 * s_.hidden);
    h = g_.add1(name + ".feed_forward.swiglu", SwiGluConfig{}, {h});
    h = linear(name + ".feed_forward.w2", h, s_.channels, /*residual=*/true);
    return g_.add1(name + ".feed_forward.residual", AddConfig{}, {x, h});
  }

 private:
  Graph& g_;
  const LlamaSpec& s_;
  int64_t d_;
};

}  // namespace

std::unique_ptr<Model> build_llama(Backend& be, const LlamaOptions& o) {
  const LlamaSpec& s = o.spec;
  const int64_t B = o.batch, T = o.seq_len, C = s.channels;
  TBD_CHECK(T >= 1, "Llama: sequence length ", T, " must be positive");
  TBD_CHECK(s.heads > 0 && s.kv_heads > 0 && s.heads % s.kv_heads == 0 && C % s.heads == 0 &&
                (C / s.heads) % 2 == 0,
            "Llama: ", C, " channels, ", s.heads, " heads and ", s.kv_heads,
            " key/value heads: heads must divide the channels into an even head dimension and "
            "be a multiple of the key/value heads");
  auto m = std::make_unique<Model>(be, "Llama", o.seed);
  Graph& g = m->graph();
  TensorId tokens = m->data_input("tokens", Shape{B, T}, DType::kI32, 0, s.vocab);
  TensorId labels = m->data_input("labels", Shape{B * T}, DType::kI32, 0, s.vocab);

  EmbeddingConfig emb;
  emb.num_embeddings = s.vocab;
  emb.dim = C;
  TensorId h = g.add1("tok_embeddings", emb, {tokens});
  Layer* emb_layer = g.nodes().back().layer.get();

  LlamaBuilder b(g, s);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string n = "layers." + std::to_string(l);
    h = b.attention_block(n, h);
    h = b.mlp_block(n, h);
  }
  h = b.norm("norm", h);
  h = g.add1("flatten", ReshapeConfig{{-1, C}}, {h});  // (B*T, C)
  TensorId logits = b.linear("output", h, s.vocab);
  if (s.tied) g.tie(g.nodes().back().layer->params()[0], emb_layer->params()[0]);  // (V, C)
  g.set_loss(g.add1("loss", SoftmaxCrossEntropyConfig{}, {logits, labels}));

  m->set_samples_per_step(B);
  m->set_extra_items("tokens", static_cast<double>(B * T));
  m->set_model_flops_per_step(llama_model_flops_per_token(s, T) * static_cast<double>(B * T));
  if (o.build_only) return m;
  AdamConfig adamw;
  adamw.lr = o.lr;
  adamw.beta1 = 0.9;
  adamw.beta2 = 0.95;
  adamw.eps = 1e-8;
  adamw.weight_decay = o.weight_decay;  // matrices and embeddings; not the norms' weights
  adamw.decoupled = true;
  m->finalize([&](std::vector<Param*> ps) { return make_optimizer(be, adamw, std::move(ps)); });
  return m;
}

LlamaOptions llama_tiny() {
  LlamaOptions o;
  o.spec.layers = 2;
  o.spec.channels = 32;
  o.spec.heads = 4;
  o.spec.kv_heads = 2;
  o.spec.hidden = 64;
  o.spec.vocab = 64;
  o.batch = 4;
  o.seq_len = 8;
  o.lr = 3e-3;
  o.seed = 7;
  return o;
}

TBD_REGISTER_MODEL(ModelEntry{"Llama",
                              {1, 2, 4, 8, 16, 32, 64},
                              1,
                              [](Backend& be, const ModelArgs& a) {
                                LlamaOptions o;
                                o.batch = a.batch;
                                o.build_only = a.build_only;
                                // size: 1498m (Llama 3.2 1B's shape) | 45m.
                                o.spec = llama_spec(a.param("size", 1498));
                                // tied:1 ties the output head to the embedding.
                                o.spec.tied = a.param("tied", 0) != 0;
                                // len: the sequence length (--tbd_seq_len; /len:<T> in every
                                // row's name, 1024 by default).
                                o.seq_len = a.param("len", 1024);
                                return build_llama(be, o);
                              },
                              {"len", "size", "tied"},
                              {{"len", 1024}},
                              {{"size", size_values()}, {"tied", {1}}}});

}  // namespace tbd
