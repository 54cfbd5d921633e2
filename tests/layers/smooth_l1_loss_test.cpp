// tests/layers/smooth_l1_loss_test.cpp: SmoothL1Loss (MXNet's smooth_l1 with sigma, weighted
// and scaled) against a float64 reference on every target, and its errors.
#include <gtest/gtest.h>

#include <cmath>

#include "core/random.h"
#include "layers/smooth_l1_loss.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct SmoothL1Case {
  std::string name;
  Shape pred;
  double sigma = 1.0;
  double scale = 1.0;
};

// Weights in [0, 1] with every third one 0 (MXNet's bbox_weights: zero for unsampled anchors).
Vec weights(int64_t n) {
  Vec w = random_vec(n, 99, 0.0, 1.0);
  for (int64_t i = 0; i < n; i += 3) w[i] = 0.0;
  for (double& e : w) e = static_cast<double>(static_cast<float>(e));
  return w;
}

// gtest prints the case by its name.
void PrintTo(const SmoothL1Case& c, std::ostream* os) { *os << c.name; }

class SmoothL1LossTest : public LayerTest<SmoothL1Case> {};

TEST_P(SmoothL1LossTest, MatchesFloat64Reference) {
  const SmoothL1Case& tc = tcase();
  SmoothL1LossConfig cfg;
  cfg.sigma = tc.sigma;
  cfg.scale = tc.scale;
  const TensorDesc d{tc.pred};
  auto layer = make("rpn.bbox_loss", cfg, {d, d, d});
  EXPECT_EQ(layer->output_descs()[0].shape, (Shape{1}));
  EXPECT_TRUE(layer->input_grad(0));
  EXPECT_FALSE(layer->input_grad(1));
  EXPECT_FALSE(layer->input_grad(2));
  const double s2 = tc.sigma * tc.sigma;
  LayerCheckOptions opt;
  opt.op_class = OpClass::kReduction;
  opt.x_needs_grad = {true, false, false};
  opt.x_values[2] = weights(tc.pred.numel());
  // pred and target in [-1, 1): differences up to 2, on both sides of 1 / sigma^2.
  check_layer(
      be(), *layer,
      [&](auto& x, auto&) {
        double s = 0;
        for (std::size_t i = 0; i < x[0].size(); ++i) {
          const double d = x[0][i] - x[1][i];
          const double f = std::abs(d) < 1 / s2 ? 0.5 * s2 * d * d : std::abs(d) - 0.5 / s2;
          s += x[2][i] * f;
        }
        return std::vector<Vec>{Vec{tc.scale * s}};
      },
      [&](auto& x, auto&, auto& dy) {
        RefGrads g;
        g.dx = {Vec(x[0].size()), Vec(), Vec()};
        for (std::size_t i = 0; i < x[0].size(); ++i) {
          const double d = x[0][i] - x[1][i];
          const double fp = std::abs(d) < 1 / s2 ? s2 * d : (d < 0 ? -1.0 : 1.0);
          g.dx[0][i] = dy[0][0] * tc.scale * x[2][i] * fp;
        }
        return g;
      },
      opt);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SmoothL1LossTest,
    on_all_targets(::testing::Values(SmoothL1Case{"rcnn", Shape{16, 84}, 1.0, 1.0 / 128},
                                     SmoothL1Case{"rpn", Shape{2, 36, 5, 7}, 3.0, 1.0 / 256},
                                     SmoothL1Case{"one", Shape{1}, 1.0, 1.0},
                                     SmoothL1Case{"chunks", Shape{3, 7001}, 0.5,
                                                  2.0})),  // 21003 elements: 3 chunks
    CaseOnTarget());

TEST(SmoothL1LossErrors, NameTheLayerAndTheArgument) {
  auto be = make_cpu_backend();
  const TensorDesc d{Shape{4, 8}};
  expect_error(
      [&] {
        make_layer(*be, "rpn.bbox_loss", SmoothL1LossConfig{}, {d, TensorDesc{Shape{4, 9}}, d});
      },
      {"SmoothL1Loss 'rpn.bbox_loss'", "target", "(4, 8)", "(4, 9)"});
  expect_error(
      [&] {
        make_layer(*be, "l", SmoothL1LossConfig{}, {d, d, TensorDesc{Shape{4, 8}, DType::kI32}});
      },
      {"SmoothL1Loss 'l'", "weight", "f32"});
  expect_error(
      [&] {
        make_layer(*be, "l", SmoothL1LossConfig{}, {d, d});
      },
      {"SmoothL1Loss 'l'", "(pred, target, weight)"});
  SmoothL1LossConfig bad;
  bad.sigma = 0;
  expect_error([&] { make_layer(*be, "l", bad, {d, d, d}); }, {"SmoothL1Loss 'l'", "sigma=0"});
  bad = SmoothL1LossConfig{};
  bad.scale = std::nan("");
  expect_error([&] { make_layer(*be, "l", bad, {d, d, d}); }, {"scale=nan"});
}

// A value worked by hand: sigma 2 (threshold 1/4), d = 0.1 -> 0.5 * 4 * 0.01 = 0.02, d = -1 ->
// 1 - 0.125 = 0.875; weights 1 and 2, scale 0.5: 0.5 * (0.02 + 1.75) = 0.885.
TEST(SmoothL1LossValues, ByHand) {
  auto be = make_cpu_backend();
  SmoothL1LossConfig cfg;
  cfg.sigma = 2;
  cfg.scale = 0.5;
  const TensorDesc d{Shape{2}};
  auto layer = make_layer(*be, "l", cfg, {d, d, d});
  const std::vector<Vec> y = forward_values(*be, *layer, {Vec{0.6, 0.0}, Vec{0.5, 1.0}, Vec{1, 2}});
  EXPECT_NEAR(y[0][0], 0.885, 1e-6);
}

TEST(SmoothL1LossFlops, MatchesFormula) {
  const Flops f = smooth_l1_loss_flops(Shape{2, 3});
  EXPECT_DOUBLE_EQ(f.fprop, 37);
  EXPECT_DOUBLE_EQ(f.dgrad, 30);
  EXPECT_DOUBLE_EQ(f.wgrad, 0);
}

}  // namespace
}  // namespace tbd::test
