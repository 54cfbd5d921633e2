// models/gpt2.cpp: the GPT-2 training graph (llm.c's configuration).
#include "models/gpt2.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "layers/activation.h"
#include "layers/attention.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/optimizer.h"
#include "layers/sdpa.h"
#include "layers/tensor_ops.h"
#include "models/registry.h"

namespace tbd {

namespace {

// llm.c's GPT-2 sizes, by their parameter count in millions (d12, d24, d36).
struct Gpt2Size {
  int64_t millions, layers, channels, heads;
};
constexpr Gpt2Size kSizes[] = {{124, 12, 768, 12}, {350, 24, 1024, 16}, {774, 36, 1280, 20}};

std::vector<int64_t> size_values() {
  std::vector<int64_t> v;
  for (const Gpt2Size& z : kSizes) v.push_back(z.millions);
  return v;
}

}  // namespace

Gpt2Spec gpt2_spec(int64_t size_millions) {
  std::string known;
  for (const Gpt2Size& z : kSizes) {
    if (z.millions == size_millions) {
      Gpt2Spec s;
      s.layers = z.layers;
      s.channels = z.channels;
      s.heads = z.heads;
      return s;
    }
    known += detail::concat(known.empty() ? "" : ", ", z.millions, "m (d", z.layers, ")");
  }
  TBD_CHECK(false, "GPT2: size:", size_millions, " is not one of llm.c's GPT-2 sizes ", known);
  return {};
}

int64_t gpt2_param_count(const Gpt2Spec& s) {
  const int64_t C = s.channels;
  return s.vocab_pad * C + s.max_len * C + s.layers * (12 * C * C + 13 * C) + 2 * C;
}

double gpt2_model_flops_per_token(const Gpt2Spec& s, int64_t T) {
  return 6.0 * static_cast<double>(gpt2_param_count(s)) +
         6.0 * static_cast<double>(s.layers * s.channels * T);
}

namespace {

class Gpt2Builder {
 public:
  Gpt2Builder(Graph& g, const Gpt2Spec& s) : g_(g), s_(s) {}

  TensorId norm(const std::string& name, TensorId x) {
    return g_.add1(name, LayerNormConfig{}, {x});  // eps 1e-5
  }
  // A residual projection's weight (N(0, 0.02) like every weight here): scaled by 1/sqrt(2L),
  // as llm.c scales it.
  void scale_residual_init(Param& w) { ::tbd::scale_residual_init(w, s_.layers); }

  // x + attn(ln1(x)), causal. Fused (llm.c's structure): c_attn (C -> 3C, q k v column blocks)
  // into the fused kind reading it packed, then c_proj. Unfused: MultiHeadAttention, whose
  // wq, wk, wv, wo and biases are the same parameters split four ways.
  TensorId attention_block(const std::string& name, TensorId x, bool fused) {
    TensorId h = norm(name + ".ln_1", x);
    if (fused) {
      LinearConfig qkv;
      qkv.out_features = 3 * s_.channels;
      qkv.init = Init::kNormal002;
      h = g_.add1(name + ".attn.c_attn", qkv, {h});
      ScaledDotProductAttentionConfig a;
      a.num_heads = s_.heads;
      a.causal = true;
      a.packed = true;
      h = g_.add1(name + ".attn.sdpa", a, {h});
      LinearConfig proj;
      proj.out_features = s_.channels;
      proj.init = Init::kNormal002;
      h = g_.add1(name + ".attn.c_proj", proj, {h});
      scale_residual_init(g_.nodes().back().layer->params()[0]);
    } else {
      MultiHeadAttentionConfig c;
      c.num_heads = s_.heads;
      c.causal = true;
      c.weight_init = Init::kNormal002;
      h = g_.add1(name + ".attn", c, {h});
      scale_residual_init(g_.nodes().back().layer->params()[3]);  // wo
    }
    return g_.add1(name + ".attn.residual", AddConfig{}, {x, h});
  }

  // x + proj(gelu_tanh(fc(ln2(x)))).
  TensorId mlp_block(const std::string& name, TensorId x) {
    TensorId h = norm(name + ".ln_2", x);
    LinearConfig fc;
    fc.out_features = 4 * s_.channels;
    fc.init = Init::kNormal002;
    h = g_.add1(name + ".mlp.c_fc", fc, {h});
    h = g_.add1(name + ".mlp.gelu", ActivationConfig{ActKind::kGeluTanh}, {h});
    LinearConfig proj;
    proj.out_features = s_.channels;
    proj.init = Init::kNormal002;
    h = g_.add1(name + ".mlp.c_proj", proj, {h});
    scale_residual_init(g_.nodes().back().layer->params()[0]);
    return g_.add1(name + ".mlp.residual", AddConfig{}, {x, h});
  }

 private:
  Graph& g_;
  const Gpt2Spec& s_;
};

}  // namespace

std::unique_ptr<Model> build_gpt2(Backend& be, const Gpt2Options& o) {
  const Gpt2Spec& s = o.spec;
  const int64_t B = o.batch, T = o.seq_len, C = s.channels;
  TBD_CHECK(T >= 1 && T <= s.max_len, "GPT2: sequence length ", T, " is outside [1, ", s.max_len,
            "] (the learned position embedding has ", s.max_len, " rows)");
  TBD_CHECK(s.vocab >= 2 && s.vocab <= s.vocab_pad, "GPT2: vocabulary ", s.vocab,
            " must lie in [2, padded vocabulary ", s.vocab_pad, "]");
  auto m = std::make_unique<Model>(be, "GPT2", o.seed);
  Graph& g = m->graph();
  // Synthetic tokens and next-token labels in [0, V); positions 0 .. T-1 in every sequence.
  TensorId tokens = m->data_input("tokens", Shape{B, T}, DType::kI32, 0, s.vocab);
  TensorId positions =
      m->data_input("positions", Shape{B, T}, DType::kI32, 0, T, [T](void* host, int64_t n) {
        auto* p = static_cast<int32_t*>(host);
        for (int64_t i = 0; i < n; ++i) {
          p[i] = static_cast<int32_t>(i % T);
        }
      });
  TensorId labels = m->data_input("labels", Shape{B * T}, DType::kI32, 0, s.vocab);

  EmbeddingConfig wte;
  wte.num_embeddings = s.vocab_pad;
  wte.dim = C;
  TensorId h = g.add1("wte", wte, {tokens});
  Layer* wte_layer = g.nodes().back().layer.get();
  EmbeddingConfig wpe;
  wpe.num_embeddings = s.max_len;
  wpe.dim = C;
  TensorId p = g.add1("wpe", wpe, {positions});
  h = g.add1("embed", AddConfig{}, {h, p});

  Gpt2Builder b(g, s);
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string n = "h." + std::to_string(l);
    h = b.attention_block(n, h, o.fused_attention);
    h = b.mlp_block(n, h);
  }
  h = b.norm("ln_f", h);
  h = g.add1("flatten", ReshapeConfig{{-1, C}}, {h});  // (B*T, C)
  LinearConfig head;
  head.out_features = s.vocab_pad;
  head.bias = false;
  TensorId logits = g.add1("lm_head", head, {h});
  g.tie(g.nodes().back().layer->params()[0], wte_layer->params()[0]);  // (Vp, C) both
  g.set_loss(g.add1("loss", SoftmaxCrossEntropyConfig{}, {logits, labels}));

  m->set_samples_per_step(B);
  m->set_extra_items("tokens", static_cast<double>(B * T));
  m->set_model_flops_per_step(gpt2_model_flops_per_token(s, T) * static_cast<double>(B * T));
  if (o.build_only) return m;
  AdamConfig adamw;
  adamw.lr = o.lr;
  adamw.beta1 = 0.9;
  adamw.beta2 = 0.999;
  adamw.eps = 1e-8;
  adamw.weight_decay = o.weight_decay;  // on parameters with decay: not biases, not LayerNorm
  adamw.decoupled = true;
  m->finalize([&](std::vector<Param*> ps) { return make_optimizer(be, adamw, std::move(ps)); });
  return m;
}

Gpt2Options gpt2_tiny() {
  Gpt2Options o;
  o.spec.layers = 2;
  o.spec.channels = 32;
  o.spec.heads = 4;
  o.spec.max_len = 16;
  o.spec.vocab = 64;
  o.spec.vocab_pad = 64;
  o.batch = 4;
  o.seq_len = 8;
  o.lr = 3e-3;
  o.seed = 7;
  return o;
}

TBD_REGISTER_MODEL(ModelEntry{"GPT2",
                              {1, 2, 4, 8, 16, 32, 64},
                              1,
                              [](Backend& be, const ModelArgs& a) {
                                Gpt2Options o;
                                o.batch = a.batch;
                                o.build_only = a.build_only;
                                // size: llm.c's 124m|350m|774m (--tbd_model_args=size:350m).
                                o.spec = gpt2_spec(a.param("size", 124));
                                // len: the sequence length (--tbd_seq_len; /len:<T> in every
                                // row's name, 1024 by default).
                                o.seq_len = a.param("len", 1024);
                                // unfused:1 the unfused MultiHeadAttention (T x T
                                // probabilities in memory) instead of the fused kind.
                                o.fused_attention = a.param("unfused", 0) == 0;
                                return build_gpt2(be, o);
                              },
                              {"len", "size", "unfused"},
                              {{"len", 1024}},
                              {{"size", size_values()}, {"unfused", {1}}}});

}  // namespace tbd
