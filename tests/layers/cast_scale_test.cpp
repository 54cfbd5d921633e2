// tests/layers/cast_scale_test.cpp: CastScale (u8 -> f32 times a scale) against a float64
// reference on every target, its errors and its counts.
#include <gtest/gtest.h>

#include "layers/cast_scale.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct CastCase {
  std::string name;
  Shape x;
  double scale = 1.0 / 255.0;
};

class CastScaleTest : public LayerTest<CastCase> {};

// Every byte value 0..255 appears (int range [0, 256)); nothing flows back (x is u8), which
// the harness checks by passing no gradient for x, and the finite differences have nothing to
// differentiate.
TEST_P(CastScaleTest, MatchesFloat64Reference) {
  const CastCase& tc = tcase();
  CastScaleConfig cfg;
  cfg.scale = tc.scale;
  auto layer = make("scale", cfg, {TensorDesc{tc.x, DType::kU8}});
  EXPECT_EQ(layer->output_descs()[0].shape, tc.x);
  EXPECT_EQ(layer->output_descs()[0].dtype, DType::kF32);
  EXPECT_FALSE(layer->input_grad(0));
  LayerCheckOptions opt;
  opt.op_class = OpClass::kElementwise;
  opt.int_lo = 0;
  opt.int_hi = 256;
  check_layer(
      be(), *layer,
      [&](auto& x, auto&) {
        Vec y(x[0].size());
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = tc.scale * x[0][i];
        return std::vector<Vec>{y};
      },
      [](auto& x, auto&, auto&) {
        RefGrads g;
        g.dx = {Vec{}};
        (void)x;
        return g;
      },
      opt);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CastScaleTest,
                         on_all_targets(::testing::Values(CastCase{"one", Shape{1}},
                                                          CastCase{"atari_state",
                                                                   Shape{1, 4, 84, 84}},
                                                          CastCase{"odd", Shape{3, 5, 7}},
                                                          CastCase{"scale_2", Shape{2, 9}, 2.0})),
                         CaseOnTarget());

TEST(CastScaleErrors, NameLayerArgumentAndDtype) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "frames", CastScaleConfig{}, {TensorDesc{Shape{2, 3}}});
      },
      {"CastScale 'frames'", "input x", "u8", "f32"});
  expect_error(
      [&] {
        make_layer(*be, "frames", CastScaleConfig{}, {TensorDesc{Shape{2, 0}, DType::kU8}});
      },
      {"CastScale 'frames'", "(2, 0)"});
}

TEST(CastScaleCounts, MatchFormula) {
  // (2, 3, 4) = 24 elements: 24 multiplies; read 24 bytes, write 24 floats.
  const Flops f = cast_scale_flops(Shape{2, 3, 4});
  EXPECT_DOUBLE_EQ(f.fprop, 24);
  EXPECT_DOUBLE_EQ(f.dgrad + f.wgrad, 0);
  const Bytes b = cast_scale_bytes(Shape{2, 3, 4});
  EXPECT_DOUBLE_EQ(b.fprop, 24 + 4 * 24);
  EXPECT_DOUBLE_EQ(b.dgrad + b.wgrad, 0);
}

}  // namespace
}  // namespace tbd::test
