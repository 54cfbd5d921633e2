// tests/layers/rope_test.cpp: RoPE forward and dx against a float64 reference with finite
// differences, on every target (all heads; the first heads of a packed q|k|v with v copied);
// position 0 is the identity; a rotation keeps each pair's norm; FLOPs and input checks.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/rope.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct RopeCase {
  std::string name;
  Shape x;  // (N, T, W)
  RopeConfig cfg;
};
void PrintTo(const RopeCase& c, std::ostream* os) { *os << c.name; }

RopeConfig rope(int64_t d, int64_t rotate_heads = 0, double theta = 500000.0) {
  RopeConfig c;
  c.head_dim = d;
  c.rotate_heads = rotate_heads;
  c.theta = theta;
  return c;
}

struct RefRope {
  Shape x;
  RopeConfig c;
  // y = R(sign * angle) x.
  Vec rotate(const Vec& in, double sign) const {
    const int64_t N = x[0], T = x[1], W = x[2], d = c.head_dim;
    const int64_t rot = (c.rotate_heads ? c.rotate_heads : W / d) * d;
    Vec y = in;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t col = 0; col < rot; col += 2) {
          const int64_t i = (col % d) / 2;
          const double a = sign * t * std::pow(c.theta, -2.0 * i / static_cast<double>(d));
          const int64_t o = (n * T + t) * W + col;
          y[o] = in[o] * std::cos(a) - in[o + 1] * std::sin(a);
          y[o + 1] = in[o] * std::sin(a) + in[o + 1] * std::cos(a);
        }
    return y;
  }
};

class RopeTest : public LayerTest<RopeCase> {};

TEST_P(RopeTest, MatchesFloat64Reference) {
  const RopeCase& tc = tcase();
  auto layer = make("rope", tc.cfg, {TensorDesc{tc.x}});
  RefRope ref{tc.x, tc.cfg};
  check_layer(
      be(), *layer, [&](auto& x, auto&) { return std::vector<Vec>{ref.rotate(x[0], 1)}; },
      [&](auto&, auto&, auto& dy) {
        RefGrads g;
        g.dx = {ref.rotate(dy[0], -1)};  // the transpose of a rotation
        return g;
      });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RopeTest,
    on_all_targets(::testing::Values(RopeCase{"all_heads", Shape{2, 5, 16}, rope(8)},
                                     RopeCase{"llama2_theta", Shape{1, 9, 12}, rope(4, 0, 10000)},
                                     // q (2 heads) and k (1 head) rotated, v (1 head) copied.
                                     RopeCase{"packed_qkv", Shape{2, 7, 32}, rope(8, 3)},
                                     RopeCase{"long", Shape{1, 300, 8}, rope(8)})),
    CaseOnTarget());

TEST(RopeProperties, PositionZeroIsIdentityAndPairsKeepTheirNorm) {
  auto be = make_cpu_backend();
  const TensorDesc d{Shape{1, 40, 16}};
  auto l = make_layer(*be, "r", rope(16), {d});
  Tensor x = be->empty(d, MemCategory::kDynamic), y = be->empty(d, MemCategory::kDynamic);
  const Vec xv = random_vec(d.shape.numel(), 5);
  from_host(*be, x, xv);
  std::vector<const Tensor*> xp{&x};
  std::vector<Tensor*> yp{&y};
  l->forward(yp, xp);
  const Vec yv = to_host(*be, y);
  for (int64_t j = 0; j < 16; ++j) EXPECT_FLOAT_EQ(yv[j], static_cast<float>(xv[j]));
  bool moved = false;
  for (std::size_t k = 16; k < yv.size(); k += 2) {
    const double a = xv[k] * xv[k] + xv[k + 1] * xv[k + 1];
    EXPECT_NEAR(yv[k] * yv[k] + yv[k + 1] * yv[k + 1], a, 1e-5 * (1 + a));
    moved = moved || std::abs(yv[k] - xv[k]) > 1e-3;
  }
  EXPECT_TRUE(moved);
}

TEST(RopeWork, FlopsCountTheRotatedElements) {
  auto be = make_cpu_backend();
  auto l = make_layer(*be, "r", rope(8, 3), {TensorDesc{Shape{2, 7, 32}}});
  EXPECT_DOUBLE_EQ(l->flops().fprop, 3.0 * 2 * 7 * 24);
  EXPECT_DOUBLE_EQ(l->flops().dgrad, 3.0 * 2 * 7 * 24);
  EXPECT_DOUBLE_EQ(l->bytes().fprop, 4.0 * (2 * 2 * 7 * 32 + 7 * 8));
}

TEST(RopeErrors, BadConfigsAndShapesNameTheLayer) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "h.0.rope_q", rope(7), {TensorDesc{Shape{1, 3, 14}}});
      },
      {"RoPE 'h.0.rope_q'", "head_dim=7"});
  expect_error(
      [&] {
        make_layer(*be, "r", rope(8), {TensorDesc{Shape{1, 3, 12}}});
      },
      {"(1, 3, 12)", "multiple of head_dim=8"});
  expect_error(
      [&] {
        make_layer(*be, "r", rope(4, 4), {TensorDesc{Shape{1, 3, 12}}});
      },
      {"rotate_heads=4", "3 heads"});
  expect_error(
      [&] {
        make_layer(*be, "r", rope(4), {TensorDesc{Shape{3, 12}}});
      },
      {"rank 3", "(N, T, W)"});
}

}  // namespace
}  // namespace tbd::test
