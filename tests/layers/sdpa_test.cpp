// tests/layers/sdpa_test.cpp: ScaledDotProductAttention (fused, flash-attention style) against a
// float64 reference with finite differences on every target (causal or not, grouped-query,
// packed qkv or separate q, k, v, odd T across tile edges); against the unfused
// MultiHeadAttention at odd T, forward and gradients; the saved state is O(T); FLOPs count the
// causal pairs; input checks; the no-allocation rule.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/attention.h"
#include "layers/sdpa.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct SdpaCase {
  std::string name;
  int64_t N, T, Hq, Hkv, d;
  bool causal = true;
  bool packed = false;
  bool run_fd = true;
};
void PrintTo(const SdpaCase& c, std::ostream* os) { *os << c.name; }

ScaledDotProductAttentionConfig config_of(const SdpaCase& c) {
  ScaledDotProductAttentionConfig cfg;
  cfg.num_heads = c.Hq;
  cfg.num_kv_heads = c.Hkv;
  cfg.causal = c.causal;
  cfg.packed = c.packed;
  return cfg;
}

std::vector<TensorDesc> inputs_of(const SdpaCase& c) {
  if (c.packed) return {TensorDesc{Shape{c.N, c.T, (c.Hq + 2 * c.Hkv) * c.d}}};
  return {TensorDesc{Shape{c.N, c.T, c.Hq * c.d}}, TensorDesc{Shape{c.N, c.T, c.Hkv * c.d}},
          TensorDesc{Shape{c.N, c.T, c.Hkv * c.d}}};
}

// Naive float64 attention with the kind's documented semantics: all T x T scores, a plain
// softmax, query head h reading key/value head h / (Hq / Hkv).
struct RefSdpa {
  SdpaCase c;
  // Index of element (n, t, column col) of q (which 0), k (1) or v (2) within its input, and
  // which input holds it.
  int64_t width(int which) const {
    if (c.packed) return (c.Hq + 2 * c.Hkv) * c.d;
    return (which == 0 ? c.Hq : c.Hkv) * c.d;
  }
  std::size_t input(int which) const { return c.packed ? 0 : static_cast<std::size_t>(which); }
  int64_t idx(int which, int64_t n, int64_t t, int64_t col) const {
    int64_t off = 0;
    if (c.packed) off = which == 0 ? 0 : which == 1 ? c.Hq * c.d : (c.Hq + c.Hkv) * c.d;
    return (n * c.T + t) * width(which) + off + col;
  }
  bool visible(int64_t i, int64_t j) const { return !c.causal || j <= i; }
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(c.d)); }

  // P (N, Hq, T, T).
  Vec probs(const std::vector<Vec>& x) const {
    const int64_t T = c.T, d = c.d, grp = c.Hq / c.Hkv;
    Vec P(static_cast<std::size_t>(c.N * c.Hq * T * T), 0.0);
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t i = 0; i < T; ++i) {
          double mx = -1e300, sum = 0;
          double* row = &P[static_cast<std::size_t>(((n * c.Hq + h) * T + i) * T)];
          for (int64_t j = 0; j < T; ++j) {
            if (!visible(i, j)) continue;
            double s = 0;
            for (int64_t e = 0; e < d; ++e) {
              s +=
                  x[input(0)][idx(0, n, i, h * d + e)] * x[input(1)][idx(1, n, j, h / grp * d + e)];
            }
            row[j] = s * scale();
            mx = std::max(mx, row[j]);
          }
          for (int64_t j = 0; j < T; ++j) {
            if (visible(i, j)) sum += (row[j] = std::exp(row[j] - mx));
          }
          for (int64_t j = 0; j < T; ++j) row[j] = visible(i, j) ? row[j] / sum : 0.0;
        }
    return P;
  }

  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>&) const {
    const int64_t T = c.T, d = c.d, grp = c.Hq / c.Hkv;
    const Vec P = probs(x);
    Vec o(static_cast<std::size_t>(c.N * T * c.Hq * d), 0.0);
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < T; ++j) {
            const double p = P[static_cast<std::size_t>(((n * c.Hq + h) * T + i) * T + j)];
            for (int64_t e = 0; e < d; ++e) {
              o[(n * T + i) * c.Hq * d + h * d + e] +=
                  p * x[input(2)][idx(2, n, j, h / grp * d + e)];
            }
          }
    return {o};
  }

  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>&,
                    const std::vector<Vec>& dy) const {
    const int64_t T = c.T, d = c.d, grp = c.Hq / c.Hkv;
    const Vec P = probs(x);
    RefGrads g;
    for (const Vec& v : x) g.dx.emplace_back(v.size(), 0.0);
    const Vec& go = dy[0];
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t i = 0; i < T; ++i) {
          const int64_t kvc = h / grp * d;
          Vec dp(static_cast<std::size_t>(T), 0.0);
          double dot = 0;
          for (int64_t j = 0; j < T; ++j) {
            const double p = P[static_cast<std::size_t>(((n * c.Hq + h) * T + i) * T + j)];
            for (int64_t e = 0; e < d; ++e) {
              const double gij = go[(n * T + i) * c.Hq * d + h * d + e];
              dp[j] += gij * x[input(2)][idx(2, n, j, kvc + e)];
              g.dx[input(2)][idx(2, n, j, kvc + e)] += p * gij;
            }
            dot += p * dp[j];
          }
          for (int64_t j = 0; j < T; ++j) {
            const double p = P[static_cast<std::size_t>(((n * c.Hq + h) * T + i) * T + j)];
            const double ds = p * (dp[j] - dot) * scale();
            for (int64_t e = 0; e < d; ++e) {
              g.dx[input(0)][idx(0, n, i, h * d + e)] += ds * x[input(1)][idx(1, n, j, kvc + e)];
              g.dx[input(1)][idx(1, n, j, kvc + e)] += ds * x[input(0)][idx(0, n, i, h * d + e)];
            }
          }
        }
    return g;
  }
};

class SdpaTest : public LayerTest<SdpaCase> {};

TEST_P(SdpaTest, MatchesFloat64Reference) {
  const SdpaCase& tc = tcase();
  auto layer = make("attn", config_of(tc), inputs_of(tc));
  EXPECT_EQ(layer->output_descs()[0].shape, (Shape{tc.N, tc.T, tc.Hq * tc.d}));
  EXPECT_TRUE(layer->params().empty());
  RefSdpa ref{tc};
  LayerCheckOptions opt;
  opt.x_lo = -2.0;  // scores of a few units: a softmax far from uniform
  opt.x_hi = 2.0;
  opt.run_fd = tc.run_fd;
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SdpaTest,
    on_all_targets(::testing::Values(
        SdpaCase{"causal_one_head", 1, 5, 1, 1, 4}, SdpaCase{"causal_mha_odd_t", 2, 7, 3, 3, 4},
        SdpaCase{"full_mha", 2, 5, 2, 2, 8, /*causal=*/false},
        SdpaCase{"causal_gqa", 2, 6, 4, 2, 4}, SdpaCase{"causal_mqa", 1, 5, 3, 1, 6},
        SdpaCase{"packed_causal", 2, 5, 2, 2, 4, true, /*packed=*/true},
        SdpaCase{"packed_gqa_full", 1, 7, 4, 2, 4, false, true},
        // Across the tiles' edges (CPU: 128 queries x 256 keys; CUDA: 64 and 32): several query and
        // key tiles, a ragged last one; finite differences skipped (slow), the reference holds.
        SdpaCase{"causal_gqa_three_tiles", 1, 131, 4, 2, 8, true, false, false},
        SdpaCase{"packed_full_two_tiles", 2, 67, 2, 1, 16, false, true, false},
        SdpaCase{"causal_head_dim_64", 1, 70, 2, 2, 64, true, true, false},
        SdpaCase{"causal_mqa_three_key_tiles", 1, 600, 2, 1, 4, true, false, false},
        SdpaCase{"full_packed_two_key_tiles", 1, 300, 2, 2, 4, false, true, false})),
    CaseOnTarget());

// Forward and backward of `layer` with inputs x and output gradient dy (host values); the
// output and every input's gradient.
struct Ran {
  std::vector<Vec> y, dx;
};
Ran run_layer(Backend& be, Layer& layer, const std::vector<Vec>& xv, const Vec& dyv) {
  std::vector<Tensor> x, dx;
  for (std::size_t k = 0; k < xv.size(); ++k) {
    x.push_back(be.empty(layer.input_descs()[k], MemCategory::kDynamic));
    from_host(be, x.back(), xv[k]);
    dx.push_back(be.empty(layer.input_descs()[k], MemCategory::kDynamic));
  }
  Tensor y = be.empty(layer.output_descs()[0], MemCategory::kFeatureMaps);
  Tensor dy = be.empty(layer.output_descs()[0], MemCategory::kDynamic);
  from_host(be, dy, dyv);
  std::vector<const Tensor*> xp, yc{&y}, dyp{&dy};
  std::vector<Tensor*> yp{&y}, dxp;
  for (std::size_t k = 0; k < x.size(); ++k) xp.push_back(&x[k]), dxp.push_back(&dx[k]);
  layer.forward(yp, xp);
  layer.backward(dxp, dyp, xp, yc);
  Ran r;
  r.y.push_back(to_host(be, y));
  for (const Tensor& t : dx) r.dx.push_back(to_host(be, t));
  return r;
}

// The fused kind against the unfused MultiHeadAttention at odd T: MHA with projections Wq, Wk,
// Wv, Wo = I and no biases computes attention(x Wq^T, x Wk^T, x Wv^T); the fused kind is given
// those q, k, v, and MHA's input gradient must equal dq Wq + dk Wk + dv Wv.
TEST(SdpaVersusUnfused, OutputsAndGradientsAtOddT) {
  auto be = make_cpu_backend();
  const int64_t N = 2, T = 69, H = 4, d = 8, D = H * d;
  MultiHeadAttentionConfig mc;
  mc.num_heads = H;
  mc.causal = true;
  mc.bias = false;
  auto mha = make_layer(*be, "mha", mc, {TensorDesc{Shape{N, T, D}}});
  ScaledDotProductAttentionConfig sc;
  sc.num_heads = H;
  auto sdpa = make_layer(
      *be, "sdpa", sc,
      {TensorDesc{Shape{N, T, D}}, TensorDesc{Shape{N, T, D}}, TensorDesc{Shape{N, T, D}}});
  Vec x = random_vec(N * T * D, 3);
  for (double& e : x) e = static_cast<float>(e);
  std::vector<Vec> w;  // Wq, Wk, Wv
  for (int k = 0; k < 3; ++k) w.push_back(random_vec(D * D, 20 + k, -0.4, 0.4));
  Vec eye(static_cast<std::size_t>(D * D), 0.0);
  for (int64_t i = 0; i < D; ++i) eye[i * D + i] = 1.0;
  for (int k = 0; k < 4; ++k) from_host(*be, mha->params()[k].value, k < 3 ? w[k] : eye);
  // q, k, v = x W^T in float64, rounded to f32 as the layer's inputs.
  std::vector<Vec> qkv;
  for (int k = 0; k < 3; ++k) {
    Vec z(static_cast<std::size_t>(N * T * D));
    for (int64_t r = 0; r < N * T; ++r)
      for (int64_t o = 0; o < D; ++o) {
        double s = 0;
        for (int64_t i = 0; i < D; ++i) s += x[r * D + i] * w[k][o * D + i];
        z[r * D + o] = static_cast<float>(s);
      }
    qkv.push_back(z);
  }
  const Vec dy = random_vec(N * T * D, 4);
  const Ran a = run_layer(*be, *mha, {x}, dy);
  const Ran b = run_layer(*be, *sdpa, qkv, dy);
  expect_close("o: fused vs unfused", b.y[0], a.y[0], kF32);
  Vec dx(static_cast<std::size_t>(N * T * D), 0.0);
  for (int k = 0; k < 3; ++k)
    for (int64_t r = 0; r < N * T; ++r)
      for (int64_t i = 0; i < D; ++i) {
        double s = 0;
        for (int64_t o = 0; o < D; ++o) s += b.dx[k][r * D + o] * w[k][o * D + i];
        dx[r * D + i] += s;
      }
  expect_close("dx: fused (dq Wq + dk Wk + dv Wv) vs unfused", dx, a.dx[0], kF32);
}

TEST(SdpaRuntime, SavedStateIsTheRowsLogSumExpOnly) {
  auto be = make_cpu_backend();
  const int64_t N = 2, T = 300, Hq = 4, Hkv = 2, d = 16;
  const std::size_t before = be->allocator().stats().current_of(MemCategory::kFeatureMaps);
  SdpaCase tc{"s", N, T, Hq, Hkv, d};
  auto layer = make_layer(*be, "attn", config_of(tc), inputs_of(tc));
  // (N, Hq, T) f32: O(T), where the unfused kind keeps (N, Hq, T, T) probabilities.
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kFeatureMaps) - before,
            4u * N * Hq * T);
}

TEST(SdpaRuntime, ForwardAndBackwardAllocateNothing) {
  SdpaCase tc{"alloc", 2, 70, 4, 2, 8, true, true};
  auto be = make_cpu_backend();
  auto layer = make_layer(*be, "attn", config_of(tc), inputs_of(tc));
  Tensor x = be->empty(inputs_of(tc)[0], MemCategory::kDynamic);
  from_host(*be, x, random_vec(x.numel(), 1));
  Tensor y = be->empty(layer->output_descs()[0], MemCategory::kFeatureMaps);
  Tensor dx = be->empty(x.desc(), MemCategory::kDynamic);
  Tensor dy = be->empty(y.desc(), MemCategory::kDynamic);
  be->fill(dy, 0.5f);
  std::vector<const Tensor*> xp{&x}, yc{&y}, dyp{&dy};
  std::vector<Tensor*> yp{&y}, dxp{&dx};
  layer->forward(yp, xp);
  layer->backward(dxp, dyp, xp, yc);
  const uint64_t before = be->allocator().stats().num_allocations;
  for (int i = 0; i < 2; ++i) {
    layer->forward(yp, xp);
    layer->backward(dxp, dyp, xp, yc);
  }
  EXPECT_EQ(be->allocator().stats().num_allocations, before);
}

TEST(SdpaWork, FlopsCountTheCausalPairs) {
  SdpaCase tc{"f", 2, 10, 4, 2, 8};
  auto be = make_cpu_backend();
  auto causal = make_layer(*be, "a", config_of(tc), inputs_of(tc));
  const double pairs = 2.0 * 4 * (10 * 11 / 2), rows_d = 2.0 * 4 * 10 * 8;
  EXPECT_DOUBLE_EQ(causal->flops().fprop, 4 * pairs * 8 + 4 * pairs + rows_d);
  EXPECT_DOUBLE_EQ(causal->flops().dgrad, 10 * pairs * 8 + 5 * pairs + 2 * rows_d);
  EXPECT_DOUBLE_EQ(causal->flops().wgrad, 0.0);
  tc.causal = false;
  auto full = make_layer(*be, "a", config_of(tc), inputs_of(tc));
  const double all = 2.0 * 4 * 10 * 10;
  EXPECT_DOUBLE_EQ(full->flops().fprop, 4 * all * 8 + 4 * all + rows_d);
  // Bytes: q, k, v, o and lse in fprop (the scores never reach memory).
  const double eq = 2.0 * 10 * 32, ekv = 2.0 * 10 * 16, lse = 4.0 * 2 * 4 * 10;
  EXPECT_DOUBLE_EQ(full->bytes().fprop, 4 * (2 * eq + 2 * ekv) + lse);
  EXPECT_DOUBLE_EQ(full->bytes().dgrad, 4 * (4 * eq + 4 * ekv) + lse);
}

TEST(SdpaErrors, BadShapesAndConfigsNameTheLayerAndTheDims) {
  auto be = make_cpu_backend();
  ScaledDotProductAttentionConfig c;
  c.num_heads = 4;
  c.num_kv_heads = 3;
  const TensorDesc q{Shape{2, 5, 32}}, kv{Shape{2, 5, 16}};
  expect_error(
      [&] {
        make_layer(*be, "h.0.attn", c, {q, kv, kv});
      },
      {"ScaledDotProductAttention 'h.0.attn'", "num_kv_heads=3"});
  c.num_kv_heads = 2;
  expect_error(
      [&] {
        make_layer(*be, "h.0.attn", c, {q, TensorDesc{Shape{2, 5, 8}}, kv});
      },
      {"input k", "(2, 5, 8)", "(2, 5, 16)"});
  expect_error(
      [&] {
        make_layer(*be, "h.0.attn", c, {q, kv, TensorDesc{Shape{2, 4, 16}}});
      },
      {"input v", "(2, 4, 16)"});
  expect_error([&] { make_layer(*be, "h.0.attn", c, {q, kv}); }, {"inputs (q, k, v)", "got 2"});
  expect_error(
      [&] {
        make_layer(*be, "h.0.attn", c, {TensorDesc{Shape{2, 5, 30}}, kv, kv});
      },
      {"input q", "(2, 5, 30)", "num_heads=4"});
  c.packed = true;
  expect_error(
      [&] {
        make_layer(*be, "h.0.attn", c, {TensorDesc{Shape{2, 5, 33}}});
      },
      {"input qkv", "(2, 5, 33)", "Hq + 2 Hkv = 8"});
  expect_error(
      [&] {
        make_layer(*be, "h.0.attn", c, {TensorDesc{Shape{2, 5, 32}, DType::kI32}});
      },
      {"input qkv", "f32 or bf16"});
}

}  // namespace
}  // namespace tbd::test
