// tests/layers/swiglu_test.cpp: SwiGLU forward and dx against a float64 reference with finite
// differences, on every target (gates far into both tails of the sigmoid); FLOPs and input
// checks.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/swiglu.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct SwiGluCase {
  std::string name;
  Shape x;  // (..., 2F)
  double range = 1.0;
};
void PrintTo(const SwiGluCase& c, std::ostream* os) { *os << c.name; }

struct RefSwiGlu {
  int64_t M, F;
  static double sig(double g) { return 1.0 / (1.0 + std::exp(-g)); }
  std::vector<Vec> forward(const std::vector<Vec>& x) const {
    Vec y(static_cast<std::size_t>(M * F));
    for (int64_t r = 0; r < M; ++r)
      for (int64_t j = 0; j < F; ++j) {
        const double g = x[0][r * 2 * F + j];
        y[r * F + j] = g * sig(g) * x[0][r * 2 * F + F + j];
      }
    return {y};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>& dy) const {
    RefGrads gr;
    gr.dx = {Vec(static_cast<std::size_t>(M * 2 * F))};
    for (int64_t r = 0; r < M; ++r)
      for (int64_t j = 0; j < F; ++j) {
        const double g = x[0][r * 2 * F + j], up = x[0][r * 2 * F + F + j], s = sig(g);
        const double d = dy[0][r * F + j];
        gr.dx[0][r * 2 * F + F + j] = d * g * s;
        gr.dx[0][r * 2 * F + j] = d * up * (s + g * s * (1 - s));  // d(g s)/dg
      }
    return gr;
  }
};

class SwiGluTest : public LayerTest<SwiGluCase> {};

TEST_P(SwiGluTest, MatchesFloat64Reference) {
  const SwiGluCase& tc = tcase();
  auto layer = make("mlp.swiglu", SwiGluConfig{}, {TensorDesc{tc.x}});
  std::vector<int64_t> yd = tc.x.dims();
  yd.back() /= 2;
  EXPECT_EQ(layer->output_descs()[0].shape, Shape(yd));
  RefSwiGlu ref{tc.x.numel() / tc.x[-1], tc.x[-1] / 2};
  LayerCheckOptions opt;
  opt.x_lo = -tc.range;
  opt.x_hi = tc.range;
  check_layer(
      be(), *layer, [&](auto& x, auto&) { return ref.forward(x); },
      [&](auto& x, auto&, auto& dy) { return ref.backward(x, dy); }, opt);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwiGluTest,
                         on_all_targets(::testing::Values(SwiGluCase{"rows", Shape{4, 10}},
                                                          SwiGluCase{"seq", Shape{2, 3, 34}},
                                                          SwiGluCase{"tails", Shape{3, 66}, 12.0})),
                         CaseOnTarget());

TEST(SwiGluWork, FlopsAndBytes) {
  auto be = make_cpu_backend();
  auto l = make_layer(*be, "s", SwiGluConfig{}, {TensorDesc{Shape{2, 5, 12}}});
  EXPECT_DOUBLE_EQ(l->flops().fprop, 5 * 60.0);
  EXPECT_DOUBLE_EQ(l->flops().dgrad, 10 * 60.0);
  EXPECT_DOUBLE_EQ(l->bytes().dgrad, 4 * 5 * 60.0);
}

TEST(SwiGluErrors, OddWidthNamesTheLayer) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "h.0.mlp.swiglu", SwiGluConfig{}, {TensorDesc{Shape{2, 7}}});
      },
      {"SwiGLU 'h.0.mlp.swiglu'", "(2, 7)", "must be even"});
}

}  // namespace
}  // namespace tbd::test
