// tests/layers/linear_test.cpp: Linear forward, dx, dw and db against a float64 reference, on
// every target.
#include <gtest/gtest.h>

#include "layers/linear.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct LinearCase {
  std::string name;
  Shape x;  // (..., D_in)
  int64_t out = 0;
  bool bias = true;
};

// y[m, n] = b[n] + sum_k x[m, k] w[n, k]
struct RefLinear {
  int64_t M, K, N;
  bool bias;
  RefLinear(const Shape& x, int64_t out, bool b)
      : M(x.numel() / x[-1]), K(x[-1]), N(out), bias(b) {}
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>& p) const {
    Vec y(M * N);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = bias ? p[1][n] : 0.0;
        for (int64_t k = 0; k < K; ++k) s += x[0][m * K + k] * p[0][n * K + k];
        y[m * N + n] = s;
      }
    return {y};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>& p,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(M * K, 0.0)};
    g.dparams = {Vec(N * K, 0.0)};
    if (bias) g.dparams.push_back(Vec(N, 0.0));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double d = dy[0][m * N + n];
        for (int64_t k = 0; k < K; ++k) {
          g.dx[0][m * K + k] += d * p[0][n * K + k];
          g.dparams[0][n * K + k] += d * x[0][m * K + k];
        }
        if (bias) g.dparams[1][n] += d;
      }
    return g;
  }
};

class LinearTest : public LayerTest<LinearCase> {};

TEST_P(LinearTest, MatchesFloat64Reference) {
  const LinearCase& tc = tcase();
  LinearConfig cfg;
  cfg.out_features = tc.out;
  cfg.bias = tc.bias;
  auto layer = make("fc", cfg, {TensorDesc{tc.x}});
  std::vector<int64_t> ydims = tc.x.dims();
  ydims.back() = tc.out;
  EXPECT_EQ(layer->output_descs()[0].shape, Shape(ydims));
  RefLinear ref(tc.x, tc.out, tc.bias);
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); });
}

TEST_P(LinearTest, WithoutInputGradient) {
  const LinearCase& tc = tcase();
  LinearConfig cfg;
  cfg.out_features = tc.out;
  cfg.bias = tc.bias;
  auto layer = make("fc", cfg, {TensorDesc{tc.x}});
  RefLinear ref(tc.x, tc.out, tc.bias);
  LayerCheckOptions opt;
  opt.x_needs_grad = {false};
  opt.run_fd = false;
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearTest,
    on_all_targets(::testing::Values(LinearCase{"batch1", Shape{1, 7}, 5},
                                     LinearCase{"odd_sizes_3d", Shape{2, 3, 13}, 9},
                                     LinearCase{"no_bias", Shape{5, 16}, 32, false},
                                     LinearCase{"no_bias_3d", Shape{2, 5, 16}, 8, false},
                                     LinearCase{"rank4", Shape{2, 2, 3, 5}, 4},
                                     LinearCase{"wide", Shape{33, 65}, 17},
                                     LinearCase{"to_one_output", Shape{6, 10}, 1},
                                     LinearCase{"batch1_to_one_output", Shape{1, 33}, 1},
                                     // K = 128, wgrad over 96 rows: TF32's error is largest.
                                     LinearCase{"large_96x128_to_64", Shape{96, 128}, 64})),
    CaseOnTarget());

TEST(LinearParams, ShapesInitAndDecay) {
  auto be = make_cpu_backend();
  LinearConfig cfg;
  cfg.out_features = 10;
  cfg.init = Init::kHeNormal;
  auto layer = make_layer(*be, "head", cfg, {TensorDesc{Shape{4, 3, 20}}});
  ASSERT_EQ(layer->params().size(), 2u);
  const Param& w = layer->params()[0];
  const Param& b = layer->params()[1];
  EXPECT_EQ(w.name, "head.weight");
  EXPECT_EQ(w.value.shape(), (Shape{10, 20}));
  EXPECT_EQ(w.init, Init::kHeNormal);
  EXPECT_EQ(w.fan_in, 20);
  EXPECT_EQ(w.fan_out, 10);
  EXPECT_TRUE(w.decay);
  EXPECT_EQ(b.value.shape(), (Shape{10}));
  EXPECT_EQ(b.init, Init::kZeros);
  EXPECT_FALSE(b.decay);
}

TEST(LinearErrors, WrongRankNamesLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  LinearConfig cfg;
  cfg.out_features = 4;
  expect_error([&] { make_layer(*be, "fc1", cfg, {TensorDesc{Shape{7}}}); },
               {"Linear 'fc1'", "input x", "rank", "(7)"});
}

TEST(LinearErrors, NonPositiveDimsAndBadConfigAreRejected) {
  auto be = make_cpu_backend();
  LinearConfig cfg;
  cfg.out_features = 4;
  expect_error(
      [&] {
        make_layer(*be, "fc", cfg, {TensorDesc{Shape{0, 3}}});
      },
      {"Linear 'fc'", "x", "(0, 3)"});
  expect_error(
      [&] {
        make_layer(*be, "fc", cfg, {TensorDesc{Shape{2, -3}}});
      },
      {"Linear 'fc'", "(2, -3)"});
  cfg.out_features = 0;
  expect_error(
      [&] {
        make_layer(*be, "fc", cfg, {TensorDesc{Shape{2, 3}}});
      },
      {"Linear 'fc'", "out_features=0"});
  cfg.out_features = 4;
  expect_error(
      [&] {
        make_layer(*be, "fc", cfg, {TensorDesc{Shape{2, 3}, DType::kI32}});
      },
      {"Linear 'fc'", "x", "i32"});
  EXPECT_THROW(make_layer(*be, "fc", cfg, {TensorDesc{Shape{2, 3}}, TensorDesc{Shape{2, 3}}}),
               Error);  // two inputs
}

TEST(LinearFlops, MatchesFormula) {
  LinearConfig cfg;
  cfg.out_features = 2048;
  Flops f = linear_flops(cfg, Shape{32, 10, 512});
  const double M = 320, K = 512, N = 2048;
  EXPECT_DOUBLE_EQ(f.fprop, 2 * M * K * N + M * N);
  EXPECT_DOUBLE_EQ(f.dgrad, 2 * M * K * N);
  EXPECT_DOUBLE_EQ(f.wgrad, 2 * M * K * N + M * N);
  cfg.bias = false;
  f = linear_flops(cfg, Shape{320, 512});
  EXPECT_DOUBLE_EQ(f.fprop, 2 * M * K * N);
  EXPECT_DOUBLE_EQ(f.wgrad, 2 * M * K * N);
}

}  // namespace
}  // namespace tbd::test
