// tests/layers/upsample_test.cpp: Upsample2d (nearest) against a float64 reference, in plain
// and nChw16c layouts, on every target, plus its shape errors.
#include <gtest/gtest.h>

#include "layers/upsample.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct UpsampleCase {
  std::string name;
  Shape x;
  int64_t scale = 2;
  Layout layout = Layout::kRowMajor;  // nChw16c: the CPU's blocked path (elsewhere row-major)
};

// y[n, c, h, w] = x[n, c, h / s, w / s]; dx sums each s x s square of dy.
struct RefUpsample {
  int64_t P, H, W, s;
  int64_t at(int64_t pl, int64_t oh, int64_t ow) const { return (pl * H + oh / s) * W + ow / s; }
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>&) const {
    Vec y(P * H * s * W * s);
    for (int64_t pl = 0; pl < P; ++pl)
      for (int64_t oh = 0; oh < H * s; ++oh)
        for (int64_t ow = 0; ow < W * s; ++ow)
          y[(pl * H * s + oh) * W * s + ow] = x[0][at(pl, oh, ow)];
    return {y};
  }
  RefGrads backward(const std::vector<Vec>&, const std::vector<Vec>&,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(P * H * W, 0.0)};
    for (int64_t pl = 0; pl < P; ++pl)
      for (int64_t oh = 0; oh < H * s; ++oh)
        for (int64_t ow = 0; ow < W * s; ++ow)
          g.dx[0][at(pl, oh, ow)] += dy[0][(pl * H * s + oh) * W * s + ow];
    return g;
  }
};

class UpsampleTest : public LayerTest<UpsampleCase> {};

TEST_P(UpsampleTest, MatchesFloat64Reference) {
  const UpsampleCase& tc = tcase();
  Upsample2dConfig cfg;
  cfg.scale = tc.scale;
  auto layer = make("up", cfg, {TensorDesc{tc.x, DType::kF32, tc.layout}});
  const Shape& x = tc.x;
  EXPECT_EQ(layer->output_descs()[0].shape, (Shape{x[0], x[1], x[2] * tc.scale, x[3] * tc.scale}));
  RefUpsample ref{x[0] * x[1], x[2], x[3], tc.scale};
  LayerCheckOptions opt;
  opt.op_class = OpClass::kElementwise;
  check_layer(
      be(), *layer, [&](auto& xs, auto& p) { return ref.forward(xs, p); },
      [&](auto& xs, auto& p, auto& dy) { return ref.backward(xs, p, dy); }, opt);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, UpsampleTest,
    on_all_targets(::testing::Values(
        UpsampleCase{"batch1", Shape{1, 3, 4, 4}}, UpsampleCase{"odd_sizes", Shape{2, 5, 3, 7}},
        UpsampleCase{"scale3", Shape{2, 2, 3, 2}, 3},
        UpsampleCase{"blocked", Shape{2, 32, 4, 3}, 2, Layout::kNChw16c},
        UpsampleCase{"blocked_batch1", Shape{1, 16, 2, 2}, 2, Layout::kNChw16c})),
    CaseOnTarget());

TEST(UpsampleErrors, NameTheLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "g.res1.up", Upsample2dConfig{}, {TensorDesc{Shape{2, 8}}});
      },
      {"Upsample2d 'g.res1.up'", "x", "rank 4", "(2, 8)"});
  Upsample2dConfig bad;
  bad.scale = 0;
  expect_error(
      [&] {
        make_layer(*be, "up", bad, {TensorDesc{Shape{1, 1, 2, 2}}});
      },
      {"Upsample2d 'up'", "scale=0"});
}

TEST(UpsampleFlops, MatchesFormula) {
  const Flops f = upsample2d_flops(Upsample2dConfig{}, Shape{2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(f.fprop, 0);
  EXPECT_DOUBLE_EQ(f.dgrad, 120 * 3);
  EXPECT_DOUBLE_EQ(f.wgrad, 0);
}

}  // namespace
}  // namespace tbd::test
