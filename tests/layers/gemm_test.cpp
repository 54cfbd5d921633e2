// tests/layers/gemm_test.cpp: Gemm (transposes, batch, shared b, alpha, bias) forward and the
// gradients of both inputs and the bias against a float64 reference, on every target.
#include <gtest/gtest.h>

#include "layers/linear.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct GemmCase {
  std::string name;
  Shape a, b;
  GemmConfig cfg;
};

GemmConfig gcfg(bool ta, bool tb, double alpha = 1.0, bool bias = false) {
  GemmConfig c;
  c.trans_a = ta;
  c.trans_b = tb;
  c.alpha = alpha;
  c.bias = bias;
  return c;
}

// y[i, m, n] = alpha * sum_k A(i, m, k) Bm(i, k, n) + bias[n], with A = op(a), Bm = op(b).
struct RefGemm {
  GemmConfig c;
  int64_t B = 1, M, N, K;
  bool shared;
  RefGemm(const Shape& a, const Shape& b, GemmConfig cfg) : c(cfg) {
    M = c.trans_a ? a[-1] : a[-2];
    K = c.trans_a ? a[-2] : a[-1];
    N = c.trans_b ? b[-2] : b[-1];
    for (int i = 0; i + 2 < a.rank(); ++i) B *= a[i];
    shared = b.rank() == 2;
  }
  int64_t ai(int64_t i, int64_t m, int64_t k) const {
    return i * M * K + (c.trans_a ? k * M + m : m * K + k);
  }
  int64_t bi(int64_t i, int64_t k, int64_t n) const {
    return (shared ? 0 : i) * K * N + (c.trans_b ? n * K + k : k * N + n);
  }
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>& p) const {
    Vec y(B * M * N);
    for (int64_t i = 0; i < B; ++i)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k) s += x[0][ai(i, m, k)] * x[1][bi(i, k, n)];
          y[(i * M + m) * N + n] = c.alpha * s + (c.bias ? p[0][n] : 0.0);
        }
    return {y};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>& p,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(x[0].size(), 0.0), Vec(x[1].size(), 0.0)};
    if (c.bias) g.dparams = {Vec(N, 0.0)};
    for (int64_t i = 0; i < B; ++i)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double d = dy[0][(i * M + m) * N + n];
          for (int64_t k = 0; k < K; ++k) {
            g.dx[0][ai(i, m, k)] += c.alpha * d * x[1][bi(i, k, n)];
            g.dx[1][bi(i, k, n)] += c.alpha * d * x[0][ai(i, m, k)];
          }
          if (c.bias) g.dparams[0][n] += d;
        }
    return g;
  }
};

class GemmTest : public LayerTest<GemmCase> {};

TEST_P(GemmTest, MatchesFloat64Reference) {
  const GemmCase& tc = tcase();
  auto layer = make("gemm", tc.cfg, {TensorDesc{tc.a}, TensorDesc{tc.b}});
  RefGemm ref(tc.a, tc.b, tc.cfg);
  std::vector<int64_t> ydims(tc.a.dims().begin(), tc.a.dims().end() - 2);
  ydims.push_back(ref.M);
  ydims.push_back(ref.N);
  EXPECT_EQ(layer->output_descs()[0].shape, Shape(ydims));
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); });
}

// Only one input wants a gradient (the other is data): the skipped one must stay untouched.
TEST_P(GemmTest, OneInputGradientAtATime) {
  const GemmCase& tc = tcase();
  RefGemm ref(tc.a, tc.b, tc.cfg);
  for (int which = 0; which < 2; ++which) {
    auto layer = make("gemm", tc.cfg, {TensorDesc{tc.a}, TensorDesc{tc.b}});
    LayerCheckOptions opt;
    opt.x_needs_grad = {which == 0, which == 1};
    opt.run_fd = false;
    check_layer(
        be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
        [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmTest,
    on_all_targets(::testing::Values(
        GemmCase{"plain_2d", Shape{5, 7}, Shape{7, 3}, gcfg(false, false)},
        GemmCase{"trans_a", Shape{2, 7, 5}, Shape{2, 7, 3}, gcfg(true, false)},
        GemmCase{"trans_b", Shape{2, 5, 7}, Shape{2, 3, 7}, gcfg(false, true)},
        GemmCase{"trans_both_alpha", Shape{3, 7, 5}, Shape{3, 3, 7}, gcfg(true, true, 0.5)},
        GemmCase{"shared_b", Shape{3, 4, 6}, Shape{6, 5}, gcfg(false, false)},
        GemmCase{"shared_b_trans_a", Shape{3, 6, 4}, Shape{6, 5}, gcfg(true, false)},
        GemmCase{"shared_b_trans_b", Shape{3, 4, 6}, Shape{5, 6}, gcfg(false, true)},
        GemmCase{"shared_b_trans_both_alpha_bias", Shape{3, 6, 4}, Shape{5, 6},
                 gcfg(true, true, -1.5, true)},
        GemmCase{"rank4_bias", Shape{2, 3, 4, 5}, Shape{2, 3, 5, 6}, gcfg(false, false, 1, true)},
        GemmCase{"alpha_bias_2d", Shape{9, 11}, Shape{11, 13}, gcfg(false, false, 0.125, true)},
        GemmCase{"batch1_vector", Shape{1, 1, 9}, Shape{1, 9, 1}, gcfg(false, false)},
        GemmCase{"attention_scores", Shape{4, 8, 16}, Shape{4, 8, 16}, gcfg(false, true, 0.25)},
        GemmCase{"shared_b_alpha_bias", Shape{2, 5, 7}, Shape{7, 4}, gcfg(false, false, 0.5, true)},
        GemmCase{"2d_trans_a_bias", Shape{7, 5}, Shape{7, 4}, gcfg(true, false, 0.5, true)},
        GemmCase{"2d_trans_b_bias", Shape{5, 7}, Shape{4, 7}, gcfg(false, true, 0.5, true)},
        GemmCase{"2d_trans_both_bias", Shape{7, 5}, Shape{4, 7}, gcfg(true, true, 0.5, true)})),
    CaseOnTarget());

TEST(GemmErrors, WrongRankNamesLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "qk", GemmConfig{}, {TensorDesc{Shape{5}}, TensorDesc{Shape{5, 3}}});
      },
      {"Gemm 'qk'", "input a", "rank", "(5)"});
  expect_error(
      [&] {
        make_layer(*be, "qk", GemmConfig{}, {TensorDesc{Shape{2, 4, 5}}, TensorDesc{Shape{5}}});
      },
      {"Gemm 'qk'", "input b", "rank", "(5)"});
  expect_error(
      [&] {
        make_layer(*be, "qk", GemmConfig{},
                   {TensorDesc{Shape{2, 2, 4, 5}}, TensorDesc{Shape{2, 5, 3}}});
      },
      {"Gemm 'qk'", "input b", "(2, 2, 4, 5)", "(2, 5, 3)"});
}

TEST(GemmErrors, MismatchedAndNonPositiveDimsAreRejected) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "g", GemmConfig{}, {TensorDesc{Shape{4, 5}}, TensorDesc{Shape{6, 3}}});
      },
      {"Gemm 'g'", "inner dims", "(4, 5)", "(6, 3)"});
  expect_error(
      [&] {
        make_layer(*be, "g", gcfg(true, false), {TensorDesc{Shape{4, 5}}, TensorDesc{Shape{5, 3}}});
      },
      {"Gemm 'g'", "inner dims", "transposed"});
  expect_error(
      [&] {
        make_layer(*be, "g", GemmConfig{},
                   {TensorDesc{Shape{2, 4, 5}}, TensorDesc{Shape{3, 5, 3}}});
      },
      {"Gemm 'g'", "batch dims", "(2, 4, 5)", "(3, 5, 3)"});
  expect_error(
      [&] {
        make_layer(*be, "g", GemmConfig{}, {TensorDesc{Shape{0, 5}}, TensorDesc{Shape{5, 3}}});
      },
      {"Gemm 'g'", "a", "(0, 5)"});
  expect_error(
      [&] {
        make_layer(*be, "g", GemmConfig{}, {TensorDesc{Shape{4, 5}}, TensorDesc{Shape{5, -1}}});
      },
      {"Gemm 'g'", "b", "(5, -1)"});
  EXPECT_THROW(make_layer(*be, "g", GemmConfig{}, {TensorDesc{Shape{4, 5}}}), Error);  // one input
}

TEST(GemmFlops, MatchesFormula) {
  auto be = make_cpu_backend();
  GemmConfig cfg = gcfg(false, true, 0.125, true);
  auto layer =
      make_layer(*be, "g", cfg, {TensorDesc{Shape{8, 3, 10, 16}}, TensorDesc{Shape{8, 3, 12, 16}}});
  const double B = 24, M = 10, N = 12, K = 16;
  EXPECT_DOUBLE_EQ(layer->flops().fprop, 2 * B * M * N * K + B * M * N);
  EXPECT_DOUBLE_EQ(layer->flops().dgrad, 4 * B * M * N * K);
  EXPECT_DOUBLE_EQ(layer->flops().wgrad, B * M * N);
  GemmDims d{1, 1024, 1024, 1024, false};
  Flops f = gemm_flops(GemmConfig{}, d);
  EXPECT_DOUBLE_EQ(f.fprop, 2.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(f.wgrad, 0.0);
}

}  // namespace
}  // namespace tbd::test
