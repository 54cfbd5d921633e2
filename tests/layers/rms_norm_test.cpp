// tests/layers/rms_norm_test.cpp: RMSNorm forward, dx and dweight against a float64 reference
// with finite differences, on every target; FLOPs, saved state and input checks.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/rms_norm.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct RmsCase {
  std::string name;
  Shape x;
  double eps = 1e-5;
};
void PrintTo(const RmsCase& c, std::ostream* os) { *os << c.name; }

// y = x / sqrt(mean(x^2) + eps) * w per row; gradients by the chain rule written out.
struct RefRms {
  int64_t M, D;
  double eps;
  double rstd(const Vec& x, int64_t m) const {
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += x[m * D + d] * x[m * D + d];
    return 1.0 / std::sqrt(ss / static_cast<double>(D) + eps);
  }
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>& p) const {
    Vec y(static_cast<std::size_t>(M * D));
    for (int64_t m = 0; m < M; ++m) {
      const double r = rstd(x[0], m);
      for (int64_t d = 0; d < D; ++d) y[m * D + d] = x[0][m * D + d] * r * p[0][d];
    }
    return {y};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>& p,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(static_cast<std::size_t>(M * D))};
    g.dparams = {Vec(static_cast<std::size_t>(D), 0.0)};
    for (int64_t m = 0; m < M; ++m) {
      const double r = rstd(x[0], m);
      // y_d = x_d r w_d, dr/dx_k = -r^3 x_k / D.
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += dy[0][m * D + d] * w(p, d) * x[0][m * D + d];
      for (int64_t k = 0; k < D; ++k) {
        g.dx[0][m * D + k] = dy[0][m * D + k] * w(p, k) * r -
                             r * r * r * x[0][m * D + k] * dot / static_cast<double>(D);
        g.dparams[0][k] += dy[0][m * D + k] * x[0][m * D + k] * r;
      }
    }
    return g;
  }
  static double w(const std::vector<Vec>& p, int64_t d) { return p[0][d]; }
};

class RmsNormTest : public LayerTest<RmsCase> {};

TEST_P(RmsNormTest, MatchesFloat64Reference) {
  const RmsCase& tc = tcase();
  RmsNormConfig cfg;
  cfg.eps = tc.eps;
  auto layer = make("norm", cfg, {TensorDesc{tc.x}});
  ASSERT_EQ(layer->params().size(), 1u);
  EXPECT_FALSE(layer->params()[0].decay);
  RefRms ref{tc.x.numel() / tc.x[-1], tc.x[-1], tc.eps};
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); });
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormTest,
                         on_all_targets(::testing::Values(RmsCase{"rows", Shape{5, 8}},
                                                          RmsCase{"seq", Shape{2, 3, 7}},
                                                          RmsCase{"wide_eps", Shape{3, 130}, 0.1},
                                                          RmsCase{"one_row", Shape{1, 33}})),
                         CaseOnTarget());

TEST(RmsNormWork, FlopsBytesAndSavedState) {
  auto be = make_cpu_backend();
  const std::size_t before = be->allocator().stats().current_of(MemCategory::kFeatureMaps);
  auto l = make_layer(*be, "n", RmsNormConfig{}, {TensorDesc{Shape{4, 6, 10}}});
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kFeatureMaps) - before, 4u * 24);
  EXPECT_DOUBLE_EQ(l->flops().fprop, 4 * 240.0);
  EXPECT_DOUBLE_EQ(l->flops().dgrad, 6 * 240.0);
  EXPECT_DOUBLE_EQ(l->flops().wgrad, 3 * 240.0);
  EXPECT_DOUBLE_EQ(l->bytes().fprop, 4 * (2 * 240.0 + 10 + 24));
}

TEST(RmsNormErrors, BadInputsNameTheLayer) {
  auto be = make_cpu_backend();
  expect_error(
      [&] { make_layer(*be, "h.0.attention_norm", RmsNormConfig{}, {TensorDesc{Shape{7}}}); },
      {"RMSNorm 'h.0.attention_norm'", "rank >= 2", "(7)"});
  RmsNormConfig bad;
  bad.eps = 0;
  expect_error([&] { make_layer(*be, "n", bad, {TensorDesc{Shape{2, 7}}}); }, {"eps=0"});
}

}  // namespace
}  // namespace tbd::test
