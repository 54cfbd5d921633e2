// tests/layers/layer_norm_test.cpp: LayerNorm forward, dx, dgamma and dbeta against a float64
// reference, on every target: over the last dim, and over (C, H, W) with per-channel gamma and
// beta (row-major, and nChw16c on the CPU).
#include <gtest/gtest.h>

#include <cmath>

#include "layers/layer_norm.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct LayerNormCase {
  std::string name;
  Shape x;  // (..., D), or (N, C, H, W) over (C, H, W)
  double eps = 1e-5;
  LayerNormOver over = LayerNormOver::kLastDim;
  Layout layout = Layout::kRowMajor;  // nChw16c: the CPU's blocked path (elsewhere row-major)
};

// Per row: xhat = (x - mean) / sqrt(var + eps) (biased var), y = xhat * gamma + beta, with
// gamma and beta indexed d / G (over the last dim G = 1; over (C, H, W) a row is a sample and
// G = H*W, so the index is the channel).
struct RefLayerNorm {
  int64_t M, D, G;
  double eps;
  RefLayerNorm(const Shape& x, double e, LayerNormOver over = LayerNormOver::kLastDim)
      : M(over == LayerNormOver::kChw ? x[0] : x.numel() / x[-1]),
        D(over == LayerNormOver::kChw ? x.numel() / x[0] : x[-1]),
        G(over == LayerNormOver::kChw ? x[2] * x[3] : 1),
        eps(e) {}
  // xhat and 1/sqrt(var + eps) of row m.
  void normalize(const Vec& x, int64_t m, Vec& xhat, double& inv) const {
    double mean = 0, var = 0;
    for (int64_t d = 0; d < D; ++d) mean += x[m * D + d];
    mean /= D;
    for (int64_t d = 0; d < D; ++d) var += (x[m * D + d] - mean) * (x[m * D + d] - mean);
    var /= D;
    inv = 1.0 / std::sqrt(var + eps);
    xhat.resize(D);
    for (int64_t d = 0; d < D; ++d) xhat[d] = (x[m * D + d] - mean) * inv;
  }
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>& p) const {
    Vec y(M * D), xhat;
    double inv;
    for (int64_t m = 0; m < M; ++m) {
      normalize(x[0], m, xhat, inv);
      for (int64_t d = 0; d < D; ++d) y[m * D + d] = xhat[d] * p[0][d / G] + p[1][d / G];
    }
    return {y};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>& p,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(M * D)};
    g.dparams = {Vec(D / G, 0.0), Vec(D / G, 0.0)};
    Vec xhat;
    double inv;
    for (int64_t m = 0; m < M; ++m) {
      normalize(x[0], m, xhat, inv);
      double s1 = 0, s2 = 0;  // sum dxhat, sum dxhat * xhat
      for (int64_t d = 0; d < D; ++d) {
        double dyv = dy[0][m * D + d];
        double dxh = dyv * p[0][d / G];
        s1 += dxh;
        s2 += dxh * xhat[d];
        g.dparams[0][d / G] += dyv * xhat[d];
        g.dparams[1][d / G] += dyv;
      }
      for (int64_t d = 0; d < D; ++d) {
        double dxh = dy[0][m * D + d] * p[0][d / G];
        g.dx[0][m * D + d] = inv * (dxh - s1 / D - xhat[d] * s2 / D);
      }
    }
    return g;
  }
};

class LayerNormTest : public LayerTest<LayerNormCase> {};

TEST_P(LayerNormTest, MatchesFloat64Reference) {
  const LayerNormCase& tc = tcase();
  LayerNormConfig cfg;
  cfg.eps = tc.eps;
  cfg.over = tc.over;
  auto layer = make("ln", cfg, {TensorDesc{tc.x, DType::kF32, tc.layout}});
  EXPECT_EQ(layer->output_descs()[0].shape, tc.x);
  if (target() == Target::kCpu) {
    EXPECT_EQ(layer->output_descs()[0].layout, tc.layout);
  }
  RefLayerNorm ref(tc.x, tc.eps, tc.over);
  LayerCheckOptions opt;
  opt.op_class = OpClass::kReduction;
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
}

// dx not wanted: the parameter gradients come from the own-code path.
TEST_P(LayerNormTest, ParameterGradientsWithoutInputGradient) {
  const LayerNormCase& tc = tcase();
  LayerNormConfig cfg;
  cfg.eps = tc.eps;
  cfg.over = tc.over;
  auto layer = make("ln", cfg, {TensorDesc{tc.x, DType::kF32, tc.layout}});
  RefLayerNorm ref(tc.x, tc.eps, tc.over);
  LayerCheckOptions opt;
  opt.op_class = OpClass::kReduction;
  opt.x_needs_grad = {false};
  opt.run_fd = false;
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LayerNormTest,
    on_all_targets(::testing::Values(
        LayerNormCase{"batch1", Shape{1, 7}}, LayerNormCase{"odd_sizes_3d", Shape{3, 5, 33}},
        LayerNormCase{"wide_eps", Shape{2, 130}, 1e-3}, LayerNormCase{"rank4", Shape{2, 3, 2, 16}},
        LayerNormCase{"many_rows", Shape{67, 9}}, LayerNormCase{"rows_of_32", Shape{4, 7, 32}},
        LayerNormCase{"rows_of_100", Shape{3, 100}}, LayerNormCase{"300_short_rows", Shape{300, 5}},
        LayerNormCase{"chw", Shape{3, 5, 4, 3}, 1e-5, LayerNormOver::kChw},
        LayerNormCase{"chw_batch1", Shape{1, 2, 7, 9}, 1e-5, LayerNormOver::kChw},
        LayerNormCase{"chw_blocked", Shape{2, 32, 3, 5}, 1e-5, LayerNormOver::kChw,
                      Layout::kNChw16c},
        LayerNormCase{"chw_blocked_batch1", Shape{1, 16, 4, 4}, 1e-5, LayerNormOver::kChw,
                      Layout::kNChw16c})),
    CaseOnTarget());

TEST(LayerNormParams, InitDecayAndSavedStatistics) {
  auto be = make_cpu_backend();
  std::size_t fm0 = be->allocator().stats().current_of(MemCategory::kFeatureMaps);
  auto layer = make_layer(*be, "enc.ln1", LayerNormConfig{}, {TensorDesc{Shape{4, 10, 32}}});
  ASSERT_EQ(layer->params().size(), 2u);
  const Param& g = layer->params()[0];
  const Param& b = layer->params()[1];
  EXPECT_EQ(g.name, "enc.ln1.gamma");
  EXPECT_EQ(b.name, "enc.ln1.beta");
  EXPECT_EQ(g.value.shape(), (Shape{32}));
  EXPECT_EQ(g.init, Init::kOnes);
  EXPECT_EQ(b.init, Init::kZeros);
  EXPECT_FALSE(g.decay);
  EXPECT_FALSE(b.decay);
  // Mean and variance per row (M = 40), kept for backward.
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kFeatureMaps) - fm0, 2u * 40 * 4);
}

TEST(LayerNormErrors, WrongRankNamesLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  expect_error([&] { make_layer(*be, "dec.ln", LayerNormConfig{}, {TensorDesc{Shape{512}}}); },
               {"LayerNorm 'dec.ln'", "input x", "rank", "(512)"});
}

TEST(LayerNormErrors, NonPositiveDimsAndBadConfigAreRejected) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "ln", LayerNormConfig{}, {TensorDesc{Shape{4, 0}}});
      },
      {"LayerNorm 'ln'", "x", "(4, 0)"});
  LayerNormConfig bad;
  bad.eps = 0;
  expect_error(
      [&] {
        make_layer(*be, "ln", bad, {TensorDesc{Shape{4, 8}}});
      },
      {"LayerNorm 'ln'", "eps"});
  expect_error(
      [&] {
        make_layer(*be, "ln", LayerNormConfig{}, {TensorDesc{Shape{4, 8}, DType::kI32}});
      },
      {"LayerNorm 'ln'", "x", "i32"});
}

TEST(LayerNormParams, OverChwHasPerChannelAffineAndSavesPerSample) {
  auto be = make_cpu_backend();
  std::size_t fm0 = be->allocator().stats().current_of(MemCategory::kFeatureMaps);
  LayerNormConfig cfg;
  cfg.over = LayerNormOver::kChw;
  auto layer = make_layer(*be, "res1.ln1", cfg, {TensorDesc{Shape{4, 6, 5, 5}}});
  EXPECT_EQ(layer->params()[0].value.shape(), (Shape{6}));
  EXPECT_EQ(layer->params()[1].value.shape(), (Shape{6}));
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kFeatureMaps) - fm0, 2u * 4 * 4);
  expect_error(
      [&] {
        make_layer(*be, "ln", cfg, {TensorDesc{Shape{4, 6, 5}}});
      },
      {"LayerNorm 'ln'", "rank 4", "(C, H, W)", "(4, 6, 5)"});
}

TEST(LayerNormFlops, MatchesFormula) {
  Flops f = layer_norm_flops(Shape{32, 20, 512});
  const double e = 32.0 * 20 * 512;
  EXPECT_DOUBLE_EQ(f.fprop, 8 * e);
  EXPECT_DOUBLE_EQ(f.dgrad, 12 * e);
  EXPECT_DOUBLE_EQ(f.wgrad, 4 * e);
}

}  // namespace
}  // namespace tbd::test
