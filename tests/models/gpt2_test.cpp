// tests/models/gpt2_test.cpp: GPT-2 as llm.c trains it. The tiny configuration overfits one
// batch and reruns identically; its loss and every parameter's gradient match a float64
// reference of the whole model (written out below, differentiated by central differences),
// with the fused attention kind and with the unfused one;
// attention is causal through the whole model; the full sizes have llm.c's parameter counts and
// initialisation; weight decay skips biases and LayerNorm; the model FLOPs follow llm.c's
// formula; bad sizes and lengths are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "backends/backends.h"
#include "core/error.h"
#include "core/random.h"
#include "models/gpt2.h"
#include "tests/models/causal.h"
#include "tests/models/overfit.h"
#include "tests/support/check.h"

namespace tbd {
namespace {

using test::from_host;
using test::to_host;
using Vec = test::Vec;

// The tiny model unplanned: every tensor keeps its value after a forward, for the host to read.
std::unique_ptr<Model> build_unplanned(Backend& be, const Gpt2Options& o) {
  const bool planned = memory_planning_default();
  set_memory_planning_default(false);
  auto m = build_gpt2(be, o);
  set_memory_planning_default(planned);
  return m;
}

TensorId data_named(Model& m, const std::string& name) {
  for (TensorId id : m.data_input_ids()) {
    if (m.graph().tensor_name(id) == name) return id;
  }
  return -1;
}

// GPT-2's forward and mean next-token loss in float64, written from models/gpt2.h with the
// parameters by name (c_attn.weight (3C, C) maps x to x W^T = [q k v], as Linear's weight, or
// the unfused wq, wk, wv (C, C); heads are consecutive column blocks of q, k and v).
struct Gpt2Reference {
  Gpt2Spec s;
  int64_t B, T;
  std::vector<int64_t> tokens, labels;
  std::map<std::string, Vec> p;

  // y (M, N) = x (M, K) w^T (N, K) + b
  static Vec linear(const Vec& x, int64_t M, int64_t K, const Vec& w, const Vec* b, int64_t N) {
    Vec y(static_cast<std::size_t>(M * N));
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t n = 0; n < N; ++n) {
        double a = b ? (*b)[n] : 0.0;
        for (int64_t k = 0; k < K; ++k) a += x[i * K + k] * w[n * K + k];
        y[i * N + n] = a;
      }
    }
    return y;
  }
  Vec norm(const Vec& x, const std::string& name) const {
    const int64_t C = s.channels, M = static_cast<int64_t>(x.size()) / C;
    const Vec &g = p.at(name + ".gamma"), &b = p.at(name + ".beta");
    Vec y(x.size());
    for (int64_t i = 0; i < M; ++i) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < C; ++c) mean += x[i * C + c];
      mean /= static_cast<double>(C);
      for (int64_t c = 0; c < C; ++c) var += (x[i * C + c] - mean) * (x[i * C + c] - mean);
      const double rstd = 1.0 / std::sqrt(var / static_cast<double>(C) + 1e-5);
      for (int64_t c = 0; c < C; ++c) y[i * C + c] = (x[i * C + c] - mean) * rstd * g[c] + b[c];
    }
    return y;
  }
  // Column block `b` (of width C) of z (M, 3C).
  static Vec columns(const Vec& z, int64_t M, int64_t C, int64_t b) {
    Vec y(static_cast<std::size_t>(M * C));
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t c = 0; c < C; ++c) y[i * C + c] = z[i * 3 * C + b * C + c];
    }
    return y;
  }
  // Fused (c_attn, c_proj) or unfused (wq, wk, wv, wo) parameters, by which the model has.
  Vec attention(const Vec& h, const std::string& n) const {
    const int64_t C = s.channels, H = s.heads, dh = C / H, M = B * T;
    const bool fused = p.count(n + ".c_attn.weight") != 0;
    Vec q, k, v;
    if (fused) {
      const Vec z = linear(h, M, C, p.at(n + ".c_attn.weight"), &p.at(n + ".c_attn.bias"), 3 * C);
      q = columns(z, M, C, 0);
      k = columns(z, M, C, 1);
      v = columns(z, M, C, 2);
    } else {
      q = linear(h, M, C, p.at(n + ".wq"), &p.at(n + ".bq"), C);
      k = linear(h, M, C, p.at(n + ".wk"), &p.at(n + ".bk"), C);
      v = linear(h, M, C, p.at(n + ".wv"), &p.at(n + ".bv"), C);
    }
    Vec o(static_cast<std::size_t>(M * C), 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t hd = 0; hd < H; ++hd) {
        for (int64_t i = 0; i < T; ++i) {
          std::vector<double> sc(static_cast<std::size_t>(i + 1));
          double mx = -INFINITY, sum = 0;
          for (int64_t j = 0; j <= i; ++j) {  // causal: keys up to the query's position
            double a = 0;
            for (int64_t d = 0; d < dh; ++d) {
              a += q[(b * T + i) * C + hd * dh + d] * k[(b * T + j) * C + hd * dh + d];
            }
            sc[j] = a * scale;
            mx = std::max(mx, sc[j]);
          }
          for (double& x : sc) sum += (x = std::exp(x - mx));
          for (int64_t j = 0; j <= i; ++j) {
            for (int64_t d = 0; d < dh; ++d) {
              o[(b * T + i) * C + hd * dh + d] += sc[j] / sum * v[(b * T + j) * C + hd * dh + d];
            }
          }
        }
      }
    }
    if (fused) return linear(o, M, C, p.at(n + ".c_proj.weight"), &p.at(n + ".c_proj.bias"), C);
    return linear(o, M, C, p.at(n + ".wo"), &p.at(n + ".bo"), C);
  }
  double loss() const {
    const int64_t C = s.channels, M = B * T, V = s.vocab_pad;
    const Vec &wte = p.at("wte.weight"), &wpe = p.at("wpe.weight");
    Vec x(static_cast<std::size_t>(M * C));
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t c = 0; c < C; ++c) {
        x[i * C + c] = wte[tokens[i] * C + c] + wpe[(i % T) * C + c];
      }
    }
    for (int64_t l = 0; l < s.layers; ++l) {
      const std::string n = "h." + std::to_string(l);
      Vec a = attention(norm(x, n + ".ln_1"), n + ".attn");
      for (std::size_t i = 0; i < x.size(); ++i) x[i] += a[i];
      Vec f = linear(norm(x, n + ".ln_2"), M, C, p.at(n + ".mlp.c_fc.weight"),
                     &p.at(n + ".mlp.c_fc.bias"), 4 * C);
      for (double& u : f) {  // GELU, tanh approximation
        u = 0.5 * u * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (u + 0.044715 * u * u * u)));
      }
      Vec m = linear(f, M, 4 * C, p.at(n + ".mlp.c_proj.weight"), &p.at(n + ".mlp.c_proj.bias"), C);
      for (std::size_t i = 0; i < x.size(); ++i) x[i] += m[i];
    }
    const Vec logits = linear(norm(x, "ln_f"), M, C, wte, nullptr, V);  // the tied head
    double total = 0;
    for (int64_t i = 0; i < M; ++i) {
      double mx = -INFINITY, sum = 0;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, logits[i * V + v]);
      for (int64_t v = 0; v < V; ++v) sum += std::exp(logits[i * V + v] - mx);
      total += mx + std::log(sum) - logits[i * V + labels[i]];
    }
    return total / static_cast<double>(M);
  }
};

// The tiny model's loss against the float64 reference, and every parameter's gradient: along
// two random directions per parameter tensor (all its entries at once) and at four single
// entries of each, by central differences of the reference (h 1e-3: float64's rounding stays
// near 1e-12, the truncation near 1e-7 of the derivative).
class Gpt2Attention : public ::testing::TestWithParam<bool> {};

TEST_P(Gpt2Attention, LossAndEveryGradientMatchAFloat64ReferenceOfTheWholeModel) {
  auto be = make_cpu_backend();
  Gpt2Options o = gpt2_tiny();
  o.fused_attention = GetParam();
  o.spec.vocab_pad = 72;  // padded logits as the full model has (labels stay below 64)
  auto m = build_unplanned(*be, o);
  Graph& g = m->graph();
  Gpt2Reference ref{o.spec, o.batch, o.seq_len, {}, {}, {}};
  for (double t : to_host(*be, g.tensor(data_named(*m, "tokens")))) {
    ref.tokens.push_back(static_cast<int64_t>(t));
  }
  for (double t : to_host(*be, g.tensor(data_named(*m, "labels")))) {
    ref.labels.push_back(static_cast<int64_t>(t));
  }
  // Weights 8x their initial size (std 0.16), so that activations reach GELU's and softmax's
  // curvature (at init the blocks are nearly linear); LayerNorm scales one, biases zero.
  std::vector<Param*> params = g.params();
  for (Param* q : params) {
    Vec v = to_host(*be, q->value);
    if (q->value.shape().rank() == 2) {
      for (double& x : v) x = static_cast<float>(8 * x);
      from_host(*be, q->value, v);
    }
    ref.p[q->name] = v;
  }
  // wte, wpe; per block 12 (fused: ln_1, c_attn, c_proj, ln_2, c_fc, c_proj: weight and bias
  // each) or 16 (unfused: wq, wk, wv, wo and their biases); ln_f.
  ASSERT_EQ(ref.p.size(), 2u + (o.fused_attention ? 12u : 16u) * 2u + 2u);
  g.zero_grad();
  g.forward();
  g.backward();
  const double loss = ref.loss();
  EXPECT_NEAR(g.loss_value(), loss, 1e-5 * loss);
  Rng rng(42);
  const double h = 1e-3;
  // A floor for gradients that are exactly zero in exact arithmetic (the key bias: softmax
  // ignores a constant added to every score of a query), which float32 leaves near 1e-12.
  std::vector<Vec> grads;
  double floor = 0;
  for (Param* q : params) {
    grads.push_back(to_host(*be, q->grad));
    for (double x : grads.back()) floor = std::max(floor, 1e-6 * std::abs(x));
  }
  for (std::size_t t = 0; t < params.size(); ++t) {
    Param* q = params[t];
    const Vec& grad = grads[t];
    Vec& w = ref.p[q->name];
    const Vec w0 = w;
    auto diff = [&](const Vec& dir) {
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = w0[i] + h * dir[i];
      const double up = ref.loss();
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = w0[i] - h * dir[i];
      const double down = ref.loss();
      w = w0;
      return (up - down) / (2 * h);
    };
    double scale = 0;  // the gradient's size, for the tolerance
    for (double x : grad) scale = std::max(scale, std::abs(x));
    for (int k = 0; k < 2; ++k) {
      Vec dir(w.size());
      double dot = 0;
      for (std::size_t i = 0; i < w.size(); ++i) {
        dir[i] = rng.uniform() < 0.5 ? -1.0 : 1.0;
        dot += dir[i] * grad[i];
      }
      const double fd = diff(dir);
      EXPECT_NEAR(dot, fd, 2e-3 * std::abs(fd) + 1e-4 * scale * std::sqrt(double(w.size())) + floor)
          << q->name << ": the gradient along random direction " << k;
    }
    for (int k = 0; k < 4; ++k) {
      const std::size_t i = static_cast<std::size_t>(rng.uniform() * static_cast<double>(w.size()));
      Vec dir(w.size(), 0.0);
      dir[i] = 1.0;
      const double fd = diff(dir);
      EXPECT_NEAR(grad[i], fd, 2e-3 * std::abs(fd) + 1e-4 * scale + floor)
          << q->name << "[" << i << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(FusedAndUnfused, Gpt2Attention, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "fused" : "unfused";
                         });

TEST(Gpt2, TinyConfigurationOverfitsAndReruns) {
  auto be = make_cpu_backend();
  auto a = losses(*build_gpt2(*be, gpt2_tiny()), 60);
  expect_overfits(a);
  auto b = losses(*build_gpt2(*be, gpt2_tiny()), 60);
  EXPECT_EQ(a, b);
}

// The logits at positions before t do not move when the tokens from t on change; those at t
// and after do (so the comparison can fail).
TEST(Gpt2, AttentionIsCausalThroughTheModel) {
  auto be = make_cpu_backend();
  const Gpt2Options o = gpt2_tiny();
  auto m = build_unplanned(*be, o);
  test::expect_causal(*be, *m, "lm_head", o.spec.vocab, o.batch, o.seq_len, 5);
}

// llm.c prints 124,475,904 for d12; 350m and 774m are Hugging Face's gpt2-medium (354,823,168)
// and gpt2-large (774,030,080) plus the 47 padded rows of wte (47 * 1024 and 47 * 1280).
TEST(Gpt2, FullSizesHaveLlmcsParameterCounts) {
  EXPECT_EQ(gpt2_param_count(gpt2_spec(124)), 124475904);
  EXPECT_EQ(gpt2_param_count(gpt2_spec(350)), 354823168 + 47 * 1024);
  EXPECT_EQ(gpt2_param_count(gpt2_spec(774)), 774030080 + 47 * 1280);
  auto be = make_cpu_backend();
  for (int64_t size : {124, 350, 774}) {
    Gpt2Options o;
    o.spec = gpt2_spec(size);
    o.batch = 1;
    o.seq_len = 16;
    o.build_only = true;
    EXPECT_EQ(build_gpt2(*be, o)->graph().num_params(), gpt2_param_count(o.spec)) << size;
  }
}

TEST(Gpt2, FullSizeIsInitialisedAsLlmc) {
  auto be = make_cpu_backend();
  Gpt2Options o;
  o.batch = 1;
  o.seq_len = 16;  // the length does not change the parameters
  auto m = build_gpt2(*be, o);
  EXPECT_EQ(m->graph().num_params(), 124475904);
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kWeights), 4u * 124475904);
  const double residual = 0.02 / std::sqrt(24.0);
  const std::map<std::string, double> stds = {{"wte.weight", 0.02},
                                              {"wpe.weight", 0.02},
                                              {"h.0.attn.c_attn.weight", 0.02},
                                              {"h.11.attn.c_attn.weight", 0.02},
                                              {"h.0.attn.c_proj.weight", residual},
                                              {"h.11.attn.c_proj.weight", residual},
                                              {"h.3.mlp.c_fc.weight", 0.02},
                                              {"h.3.mlp.c_proj.weight", residual}};
  int64_t decayed = 0;
  std::map<std::string, bool> seen;
  for (Param* p : m->graph().params()) {
    if (p->decay) decayed += p->value.numel();
    const bool bias_or_norm = p->value.shape().rank() == 1;
    EXPECT_EQ(p->decay, !bias_or_norm) << p->name << ": decay on matrices and embeddings only";
    auto it = stds.find(p->name);
    if (it == stds.end()) continue;
    seen[p->name] = true;
    const test::Vec v = to_host(*be, p->value);
    double sum = 0, sq = 0;
    for (double x : v) sum += x, sq += x * x;
    const double n = static_cast<double>(v.size()), mean = sum / n;
    const double sd = std::sqrt(sq / n - mean * mean);
    EXPECT_NEAR(sd, it->second, 0.03 * it->second) << p->name;
    EXPECT_NEAR(mean, 0.0, 0.05 * it->second) << p->name;
  }
  EXPECT_EQ(seen.size(), stds.size());
  const int64_t C = 768;
  EXPECT_EQ(decayed, 50304 * C + 1024 * C + 12 * 12 * C * C);
}

TEST(Gpt2, ModelFlopsAreLlmcsFormula) {
  auto be = make_cpu_backend();
  Gpt2Options o;
  o.batch = 4;
  o.seq_len = 64;
  o.build_only = true;
  auto m = build_gpt2(*be, o);
  const double per_token = 6.0 * 124475904 + 6.0 * 12 * 768 * 64;
  EXPECT_DOUBLE_EQ(m->model_flops_per_step(), per_token * 4 * 64);
  EXPECT_EQ(m->extra_items_per_step().at("tokens"), 4 * 64);
  EXPECT_EQ(m->samples_per_step(), 4);
}

TEST(Gpt2, RefusesUnknownSizesAndLengthsBeyondThePositionTable) {
  test::expect_error([] { gpt2_spec(125); }, {"size:125", "124m", "350m", "774m"});
  auto be = make_cpu_backend();
  Gpt2Options o;
  o.seq_len = 1025;
  o.build_only = true;
  test::expect_error([&] { build_gpt2(*be, o); }, {"GPT2", "1025", "1024"});
}

}  // namespace
}  // namespace tbd
