// models/seq2seq.cpp: the Seq2Seq (Sockeye 1.5) training graph, unrolled over the decoder steps.
#include "models/seq2seq.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/random.h"
#include "layers/activation.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/mlp_attention.h"
#include "layers/rnn.h"
#include "layers/sequence_last.h"
#include "layers/tensor_ops.h"
#include "models/registry.h"

namespace tbd {

int64_t seq2seq_param_count(const Seq2SeqSpec& s) {
  const int64_t E = s.embed, H = s.hidden, A = s.attention, h = H / 2;
  const int64_t lstm = 4 * H * (H + H) + 4 * H;
  return (s.src_vocab + s.tgt_vocab) * E + 2 * (4 * h * (E + h) + 4 * h) + lstm +
         (4 * H * (E + H + H) + 4 * H) + lstm + (2 * H * A + A) + (2 * H * H + H) +
         4 * (H * H + H) + (H * s.tgt_vocab + s.tgt_vocab);
}

namespace {

// Per-sample valid lengths: all T, or uniform in [max(1, T/2), T] from a stream of their own
// (the same lengths whichever input asks for them).
std::vector<int32_t> sample_lengths(uint64_t seed, const char* what, int64_t N, int64_t T,
                                    bool random) {
  std::vector<int32_t> v(N, static_cast<int32_t>(T));
  if (!random) return v;
  Rng rng(seed_for(seed, what));
  for (int32_t& l : v) l = static_cast<int32_t>(rng.randint(std::max<int64_t>(1, T / 2), T + 1));
  return v;
}

// Adds a layer whose parameters are those of the first layer added through the same `first`
// (each decoder step's layers share step 0's weights; gradients of all steps add up).
template <class Config>
std::vector<TensorId> add_shared(Graph& g, const std::string& name, const Config& cfg,
                                 std::vector<TensorId> inputs, Layer*& first) {
  std::vector<TensorId> out = g.add(name, cfg, std::move(inputs));
  Layer* layer = g.nodes().back().layer.get();
  if (first == nullptr) {
    first = layer;
  } else {
    for (std::size_t i = 0; i < layer->params().size(); ++i) {
      g.tie(layer->params()[i], first->params()[i]);
    }
  }
  return out;
}

LinearConfig linear(int64_t out, bool bias = true) {
  LinearConfig c;
  c.out_features = out;
  c.bias = bias;
  return c;
}

const ActivationConfig kTanh{ActKind::kTanh};

}  // namespace

std::unique_ptr<Model> build_seq2seq(Backend& be, const Seq2SeqOptions& o) {
  const Seq2SeqSpec& s = o.spec;
  const int64_t N = o.batch, S = s.src_len, T = s.tgt_len, E = s.embed, H = s.hidden;
  TBD_CHECK(H % 2 == 0, "Seq2Seq: hidden=", H, " must be even (a bidirectional layer of H/2)");
  auto m = std::make_unique<Model>(be, "Seq2Seq", o.seed);
  Graph& g = m->graph();
  const bool rnd = o.random_lengths;
  const uint64_t seed = o.seed;

  // ---- data: time-major token ids in [1, V) (0 is padding), lengths, labels ----
  const int64_t len_lo = rnd ? std::max<int64_t>(1, S / 2) : S;
  TensorId src_len =
      m->data_input("src_lengths", Shape{N}, DType::kI32, static_cast<double>(len_lo),
                    static_cast<double>(S + 1), [=](void* host, int64_t) {
                      const std::vector<int32_t> l = sample_lengths(seed, "src_lengths", N, S, rnd);
                      std::memcpy(host, l.data(), l.size() * sizeof(int32_t));
                    });
  TensorId src = m->data_input("src_tokens", Shape{S, N}, DType::kI32, 1, s.src_vocab);
  TensorId tgt = m->data_input("tgt_tokens", Shape{T, N}, DType::kI32, 1, s.tgt_vocab);
  // Labels (T*N, step-major like the decoder's outputs); padding (0) past a target's length.
  TensorId labels = m->data_input(
      "labels", Shape{T * N}, DType::kI32, rnd ? 0 : 1, static_cast<double>(s.tgt_vocab),
      [=](void* host, int64_t) {
        const std::vector<int32_t> l = sample_lengths(seed, "tgt_lengths", N, T, rnd);
        Rng rng(seed_for(seed, "data:labels"));
        auto* v = static_cast<int32_t*>(host);
        for (int64_t t = 0; t < T; ++t)
          for (int64_t n = 0; n < N; ++n)
            v[t * N + n] = t < l[n] ? static_cast<int32_t>(rng.randint(1, s.tgt_vocab)) : 0;
      });
  // h~_0 = 0: the first step's input feed.
  TensorId feed = m->data_input("decoder.feed0", Shape{N, H}, DType::kF32, 0, 0);

  // ---- encoder ----
  // Sockeye's order: embed, then reverse each sample's valid steps (padding stays at the end).
  EmbeddingConfig emb;
  emb.num_embeddings = s.src_vocab;
  emb.dim = E;
  TensorId x = g.add1("encoder.embed", emb, {src});  // (S, N, E)
  x = g.add1("encoder.reverse", ReverseConfig{}, {x, src_len});
  LstmConfig birnn;
  birnn.hidden = H / 2;
  birnn.bidirectional = true;
  x = g.add1("encoder.birnn", birnn, {x});
  LstmConfig rnn;
  rnn.hidden = H;
  TensorId enc = g.add1("encoder.rnn", rnn, {x});  // (S, N, H)
  TensorId last = g.add1("encoder.last", SequenceLastConfig{}, {enc, src_len});
  TensorId memory = g.add1("encoder.memory", TransposeConfig{{1, 0, 2}}, {enc});  // (N, S, H)
  TensorId keys = g.add1("attention.keys", linear(s.attention, false), {memory});

  // ---- decoder: initial states, target embeddings per step ----
  TensorId state[4];
  const char* state_names[4] = {"h0", "c0", "h1", "c1"};
  for (int k = 0; k < 4; ++k) {
    const std::string n = std::string("decoder.init.") + state_names[k];
    state[k] = g.add1(n + ".tanh", kTanh, {g.add1(n, linear(H), {last})});
  }
  emb.num_embeddings = s.tgt_vocab;
  TensorId y = g.add1("decoder.embed", emb, {tgt});               // (T, N, E)
  y = g.add1("decoder.embed.rows", ReshapeConfig{{-1, E}}, {y});  // (T*N, E)
  SplitConfig per_step;
  per_step.axis = 0;
  per_step.parts = T;
  std::vector<TensorId> steps = g.add("decoder.embed.steps", per_step, {y});  // T x (N, E)

  Layer *l0 = nullptr, *l1 = nullptr, *query = nullptr, *attn = nullptr, *hidden = nullptr;
  LstmCellConfig cell;
  cell.hidden = H;
  std::vector<TensorId> feeds;
  for (int64_t t = 0; t < T; ++t) {
    const std::string n = "decoder.step" + std::to_string(t);
    TensorId in = g.add1(n + ".input", ConcatConfig{1}, {steps[t], feed});  // (N, E + H)
    auto h0 = add_shared(g, n + ".l0", cell, {in, state[0], state[1]}, l0);
    state[0] = h0[0], state[1] = h0[1];
    auto h1 = add_shared(g, n + ".l1", cell, {state[0], state[2], state[3]}, l1);
    state[2] = h1[0], state[3] = h1[1];
    TensorId q = add_shared(g, n + ".query", linear(s.attention, false), {state[2]}, query)[0];
    TensorId ctx =
        add_shared(g, n + ".attention", MlpAttentionConfig{}, {q, keys, memory, src_len}, attn)[0];
    TensorId oc = g.add1(n + ".concat", ConcatConfig{1}, {state[2], ctx});
    feed = add_shared(g, n + ".hidden", linear(H), {oc}, hidden)[0];
    feed = g.add1(n + ".tanh", kTanh, {feed});
    feeds.push_back(feed);
  }
  TensorId out = g.add1("decoder.outputs", ConcatConfig{0}, feeds);  // (T*N, H)
  TensorId logits = g.add1("classifier", linear(s.tgt_vocab), {out});
  SoftmaxCrossEntropyConfig xent;
  xent.ignore_index = 0;
  g.set_loss(g.add1("loss", xent, {logits, labels}));

  m->set_samples_per_step(N);
  const std::vector<int32_t> tl = sample_lengths(seed, "tgt_lengths", N, T, rnd);
  m->set_extra_items("tokens", static_cast<double>(std::accumulate(tl.begin(), tl.end(), 0)));
  if (o.build_only) return m;
  AdamConfig adam;
  adam.lr = o.lr;
  adam.clip.value = o.clip;
  m->finalize([&](std::vector<Param*> ps) { return make_optimizer(be, adam, std::move(ps)); });
  return m;
}

Seq2SeqOptions seq2seq_tiny() {
  Seq2SeqOptions o;
  o.spec.src_vocab = o.spec.tgt_vocab = 50;
  o.spec.embed = o.spec.hidden = o.spec.attention = 16;
  o.spec.src_len = o.spec.tgt_len = 8;
  o.random_lengths = true;
  o.batch = 4;
  o.lr = 1e-2;
  o.seed = 7;
  return o;
}

TBD_REGISTER_MODEL(ModelEntry{"Seq2Seq",
                              {1, 2, 4, 8, 16, 32, 64, 128},
                              16,
                              [](Backend& be, const ModelArgs& a) {
                                Seq2SeqOptions o;
                                o.batch = a.batch;
                                o.build_only = a.build_only;
                                // len: source and target length (--tbd_seq_len; /len:<T>).
                                o.spec.src_len = o.spec.tgt_len = a.param("len", o.spec.src_len);
                                o.random_lengths = a.param("mask", 0) != 0;
                                return build_seq2seq(be, o);
                              },
                              {"len", "mask"}});

}  // namespace tbd
