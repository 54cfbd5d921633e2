// tests/layers/mean_loss_test.cpp: MeanLoss (weight * mean) against a float64 reference on
// every target, and its errors.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/mean_loss.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct MeanCase {
  std::string name;
  Shape x;
  double weight;
};

class MeanLossTest : public LayerTest<MeanCase> {};

TEST_P(MeanLossTest, MatchesFloat64Reference) {
  const MeanCase& tc = tcase();
  MeanLossConfig cfg;
  cfg.weight = tc.weight;
  auto layer = make("critic.loss_fake", cfg, {TensorDesc{tc.x}});
  EXPECT_EQ(layer->output_descs()[0].shape, (Shape{1}));
  const double E = static_cast<double>(tc.x.numel());
  LayerCheckOptions opt;
  opt.op_class = OpClass::kReduction;
  check_layer(
      be(), *layer,
      [&](auto& x, auto&) {
        double s = 0;
        for (double v : x[0]) s += v;
        return std::vector<Vec>{Vec{tc.weight * s / E}};
      },
      [&](auto& x, auto&, auto& dy) {
        RefGrads g;
        g.dx = {Vec(x[0].size(), dy[0][0] * tc.weight / E)};
        return g;
      },
      opt);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MeanLossTest,
                         on_all_targets(::testing::Values(MeanCase{"scores", Shape{16, 1}, -1.0},
                                                          MeanCase{"one", Shape{1, 1}, 1.0},
                                                          MeanCase{"long", Shape{3, 700}, 0.4})),
                         CaseOnTarget());

TEST(MeanLossErrors, NameTheLayerAndTheArgument) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "m", MeanLossConfig{}, {TensorDesc{Shape{4}, DType::kI32}});
      },
      {"MeanLoss 'm'", "x", "i32"});
  MeanLossConfig bad;
  bad.weight = std::nan("");
  expect_error([&] { make_layer(*be, "m", bad, {TensorDesc{Shape{4}}}); },
               {"MeanLoss 'm'", "weight"});
}

}  // namespace
}  // namespace tbd::test
