// tests/layers/positional_encoding_test.cpp: PositionalEncoding (the sinusoid table added to
// x) forward and backward against a float64 reference on every target, errors and FLOPs.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/positional_encoding.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct PeCase {
  std::string name;
  Shape x;  // (N, T, D)
};

// y[n, t, d] = x[n, t, d] + sin or cos of t / 10000^(2*(d/2)/D), written out here rather than
// through sinusoid() so that a wrong table in layers/ shows.
double table(int64_t t, int64_t d, int64_t D) {
  const double angle =
      static_cast<double>(t) / std::pow(10000.0, static_cast<double>(d - d % 2) / D);
  return d % 2 == 0 ? std::sin(angle) : std::cos(angle);
}

class PositionalEncodingTest : public LayerTest<PeCase> {};

TEST_P(PositionalEncodingTest, MatchesFloat64Reference) {
  const PeCase& tc = tcase();
  auto layer = make("pe", PositionalEncodingConfig{}, {TensorDesc{tc.x}});
  EXPECT_EQ(layer->output_descs()[0].shape, tc.x);
  EXPECT_TRUE(layer->params().empty());
  const int64_t T = tc.x[1], D = tc.x[2];
  LayerCheckOptions opt;
  opt.op_class = OpClass::kElementwise;
  check_layer(
      be(), *layer,
      [&](auto& x, auto&) {
        Vec y(x[0].size());
        for (std::size_t i = 0; i < y.size(); ++i) {
          const int64_t td = static_cast<int64_t>(i) % (T * D);
          y[i] = x[0][i] + table(td / D, td % D, D);
        }
        return std::vector<Vec>{y};
      },
      [](auto&, auto&, auto& dy) {
        RefGrads g;
        g.dx = {dy[0]};
        return g;
      },
      opt);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PositionalEncodingTest,
                         on_all_targets(::testing::Values(PeCase{"batch1_one_step", Shape{1, 1, 4}},
                                                          PeCase{"odd_dim", Shape{2, 5, 7}},
                                                          PeCase{"batch2_7x12", Shape{2, 7, 12}},
                                                          PeCase{"long_wide", Shape{3, 40, 64}})),
                         CaseOnTarget());

TEST(PositionalEncodingErrors, WrongRankAndTypeNameLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "src_pe", PositionalEncodingConfig{}, {TensorDesc{Shape{7, 12}}});
      },
      {"PositionalEncoding 'src_pe'", "x", "(7, 12)"});
  expect_error(
      [&] {
        make_layer(*be, "src_pe", PositionalEncodingConfig{},
                   {TensorDesc{Shape{2, 7, 12}, DType::kI32}});
      },
      {"PositionalEncoding 'src_pe'", "x", "i32"});
}

TEST(PositionalEncodingFlops, MatchesFormula) {
  Flops f = positional_encoding_flops(Shape{32, 20, 512});
  EXPECT_DOUBLE_EQ(f.fprop, 32.0 * 20 * 512);
  EXPECT_DOUBLE_EQ(f.dgrad, 0);
  EXPECT_DOUBLE_EQ(f.wgrad, 0);
}

}  // namespace
}  // namespace tbd::test
