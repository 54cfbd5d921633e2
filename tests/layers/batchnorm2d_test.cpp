// tests/layers/batchnorm2d_test.cpp: BatchNorm2d training forward/backward, running statistics
// and eval mode against a float64 reference, in plain and nChw16c layouts, on every target.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/batchnorm2d.h"
#include "tests/layers/layer_steps.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

// Naive float64 batch normalisation over (N, H, W) per channel; tensors plain NCHW.
struct RefBn {
  int64_t N, C, HW;
  double eps;
  RefBn(const Shape& x, double e) : N(x[0]), C(x[1]), HW(x[2] * x[3]), eps(e) {}

  int64_t at(int64_t n, int64_t c, int64_t i) const { return (n * C + c) * HW + i; }
  double count() const { return static_cast<double>(N * HW); }

  // Batch mean and biased variance.
  void stats(const Vec& x, Vec& mean, Vec& var) const {
    mean.assign(C, 0.0);
    var.assign(C, 0.0);
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < HW; ++i) mean[c] += x[at(n, c, i)];
      mean[c] /= count();
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < HW; ++i) var[c] += std::pow(x[at(n, c, i)] - mean[c], 2);
      var[c] /= count();
    }
  }
  // y = gamma * (x - mean) / sqrt(var + eps) + beta.
  Vec normalize(const Vec& x, const Vec& g, const Vec& b, const Vec& mean, const Vec& var) const {
    Vec y(x.size());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < HW; ++i) {
          int64_t k = at(n, c, i);
          y[k] = g[c] * (x[k] - mean[c]) / std::sqrt(var[c] + eps) + b[c];
        }
    return y;
  }
  std::vector<Vec> forward_train(const std::vector<Vec>& x, const std::vector<Vec>& p) const {
    Vec mean, var;
    stats(x[0], mean, var);
    return {normalize(x[0], p[0], p[1], mean, var)};
  }
  // dx = g*rstd/M * (M*dy - sum(dy) - xhat*sum(dy*xhat)); dgamma = sum dy*xhat; dbeta = sum dy.
  RefGrads backward_train(const std::vector<Vec>& x, const std::vector<Vec>& p,
                          const std::vector<Vec>& dy) const {
    Vec mean, var;
    stats(x[0], mean, var);
    RefGrads r;
    r.dx = {Vec(x[0].size())};
    r.dparams = {Vec(C, 0.0), Vec(C, 0.0)};
    for (int64_t c = 0; c < C; ++c) {
      double rstd = 1.0 / std::sqrt(var[c] + eps), sdy = 0, sdyx = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < HW; ++i) {
          int64_t k = at(n, c, i);
          double xh = (x[0][k] - mean[c]) * rstd;
          sdy += dy[0][k];
          sdyx += dy[0][k] * xh;
        }
      r.dparams[0][c] = sdyx;
      r.dparams[1][c] = sdy;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < HW; ++i) {
          int64_t k = at(n, c, i);
          double xh = (x[0][k] - mean[c]) * rstd;
          r.dx[0][k] = p[0][c] * rstd / count() * (count() * dy[0][k] - sdy - xh * sdyx);
        }
    }
    return r;
  }
  // Eval: fixed statistics, so y is affine in x.
  RefGrads backward_eval(const std::vector<Vec>& x, const std::vector<Vec>& p,
                         const std::vector<Vec>& dy, const Vec& mean, const Vec& var) const {
    RefGrads r;
    r.dx = {Vec(x[0].size())};
    r.dparams = {Vec(C, 0.0), Vec(C, 0.0)};
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < HW; ++i) {
          int64_t k = at(n, c, i);
          double rstd = 1.0 / std::sqrt(var[c] + eps);
          r.dx[0][k] = dy[0][k] * p[0][c] * rstd;
          r.dparams[0][c] += dy[0][k] * (x[0][k] - mean[c]) * rstd;
          r.dparams[1][c] += dy[0][k];
        }
    return r;
  }
};

struct BnCase {
  std::string name;
  Shape x;
  Layout layout = Layout::kRowMajor;
};

class BatchNorm2dTest : public LayerTest<BnCase> {
 protected:
  std::unique_ptr<Layer> make_bn(BatchNorm2dConfig cfg = {}) const {
    return make("bn", cfg, {TensorDesc{tcase().x, DType::kF32, tcase().layout}});
  }
  static LayerCheckOptions options() {
    LayerCheckOptions o;
    o.op_class = OpClass::kReduction;
    return o;
  }
};

TEST_P(BatchNorm2dTest, TrainingMatchesFloat64Reference) {
  const BnCase& tc = tcase();
  auto layer = make_bn();
  EXPECT_EQ(layer->output_descs()[0].shape, tc.x);
  EXPECT_EQ(layer->output_descs()[0].layout, layer->input_descs()[0].layout);
  RefBn ref(tc.x, 1e-5);
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward_train(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward_train(x, p, dy); }, options());
}

// x is data (no input gradient): gamma and beta gradients come from the layer's own reduction.
TEST_P(BatchNorm2dTest, ParamGradientsWithoutInputGradient) {
  const BnCase& tc = tcase();
  auto layer = make_bn();
  RefBn ref(tc.x, 1e-5);
  LayerCheckOptions opt = options();
  opt.x_needs_grad = {false};
  opt.run_fd = false;  // the reference is checked in the test above
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward_train(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward_train(x, p, dy); }, opt);
}

// Two training steps update the running statistics (momentum, unbiased variance); eval mode
// then normalises with them, forward and backward.
TEST_P(BatchNorm2dTest, RunningStatisticsAndEvalMode) {
  const BnCase& tc = tcase();
  Backend* be = &this->be();
  const Tol tol = tolerance(target(), Phase::kFprop, OpClass::kReduction);
  BatchNorm2dConfig cfg;
  cfg.momentum = 0.3;
  auto layer = make_bn(cfg);
  auto* bn = dynamic_cast<BatchNorm2dLayer*>(layer.get());
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(bn->running_mean().category(), MemCategory::kDynamic);
  RefBn ref(tc.x, cfg.eps);
  const int64_t C = tc.x[1];
  Vec rm(C, 0.0), rv(C, 1.0);
  EXPECT_TRUE(expect_close("initial running mean", to_host(*be, bn->running_mean()), rm, tol));
  EXPECT_TRUE(expect_close("initial running var", to_host(*be, bn->running_var()), rv, tol));

  Tensor x = be->empty(layer->input_descs()[0], MemCategory::kDynamic);
  Tensor y = be->empty(layer->output_descs()[0], MemCategory::kFeatureMaps);
  const double m = cfg.momentum, M = ref.count();
  for (int step = 0; step < 2; ++step) {
    // Shifted, scaled inputs so the statistics are far from the initial 0 and 1.
    Vec xv = random_vec(tc.x.numel(), 50 + step, -1.0 + step, 2.0 + 2 * step);
    for (auto& v : xv) v = static_cast<float>(v);
    from_host(*be, x, xv);
    const Tensor* xp[] = {&x};
    Tensor* yp[] = {&y};
    layer->forward(yp, xp);
    Vec mean, var;
    ref.stats(xv, mean, var);
    for (int64_t c = 0; c < C; ++c) {
      rm[c] = (1 - m) * rm[c] + m * mean[c];
      rv[c] = (1 - m) * rv[c] + m * var[c] * (M > 1 ? M / (M - 1) : 1.0);
    }
  }
  EXPECT_TRUE(expect_close("running mean", to_host(*be, bn->running_mean()), rm, tol));
  EXPECT_TRUE(expect_close("running var", to_host(*be, bn->running_var()), rv, tol));

  Vec rm_f = to_host(*be, bn->running_mean()), rv_f = to_host(*be, bn->running_var());
  LayerCheckOptions opt = options();
  opt.training = false;
  check_layer(
      *be, *layer,
      [&](auto& xs, auto& p) {
        return std::vector<Vec>{ref.normalize(xs[0], p[0], p[1], rm_f, rv_f)};
      },
      [&](auto& xs, auto& p, auto& dy) { return ref.backward_eval(xs, p, dy, rm_f, rv_f); }, opt);
  // Eval mode leaves the running statistics alone.
  EXPECT_TRUE(
      expect_close("running mean after eval", to_host(*be, bn->running_mean()), rm_f, Tol{0, 0}));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BatchNorm2dTest,
    on_all_targets(::testing::Values(
        BnCase{"batch1_odd", Shape{1, 3, 5, 7}}, BnCase{"plain", Shape{4, 6, 3, 2}},
        BnCase{"plain_5x5", Shape{4, 6, 5, 5}}, BnCase{"spatial_1x1", Shape{5, 3, 1, 1}},
        // One value per channel: the batch variance is 0 and the running variance takes the
        // biased one (the unbiased one is undefined).
        BnCase{"one_value_per_channel", Shape{1, 3, 1, 1}},
        BnCase{"blocked", Shape{2, 16, 5, 3}, Layout::kNChw16c},
        BnCase{"blocked_32c_batch1", Shape{1, 32, 3, 3}, Layout::kNChw16c})),
    CaseOnTarget());

TEST(BatchNorm2dParams, GammaOnesBetaZerosNoDecay) {
  auto be = make_cpu_backend();
  auto layer = make_layer(*be, "bn", BatchNorm2dConfig{}, {TensorDesc{Shape{2, 8, 4, 4}}});
  ASSERT_EQ(layer->params().size(), 2u);
  EXPECT_EQ(layer->params()[0].name, "bn.weight");
  EXPECT_EQ(layer->params()[0].init, Init::kOnes);
  EXPECT_EQ(layer->params()[1].init, Init::kZeros);
  EXPECT_FALSE(layer->params()[0].decay);
  EXPECT_EQ(layer->params()[1].value.shape(), (Shape{8}));
}

TEST(BatchNorm2dErrors, WrongRankNamesLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  try {
    make_layer(*be, "layer1.0.bn1", BatchNorm2dConfig{}, {TensorDesc{Shape{3, 8, 8}}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("BatchNorm2d 'layer1.0.bn1'"), std::string::npos) << m;
    EXPECT_NE(m.find("input x"), std::string::npos) << m;
    EXPECT_NE(m.find("(3, 8, 8)"), std::string::npos) << m;
  }
}

TEST(BatchNorm2dErrors, BadShapesAndConfigsAreRejected) {
  auto be = make_cpu_backend();
  BatchNorm2dConfig ok;
  EXPECT_THROW(make_layer(*be, "bn", ok, {TensorDesc{Shape{2, 0, 4, 4}}}), Error);   // zero C
  EXPECT_THROW(make_layer(*be, "bn", ok, {TensorDesc{Shape{-2, 3, 4, 4}}}), Error);  // negative N
  EXPECT_THROW(make_layer(*be, "bn", ok, {TensorDesc{Shape{2, 3, 4, 4}, DType::kI32}}), Error);
  EXPECT_THROW(
      make_layer(*be, "bn", ok, {TensorDesc{Shape{2, 3, 4, 4}}, TensorDesc{Shape{2, 3, 4, 4}}}),
      Error);  // two inputs
  BatchNorm2dConfig bad_eps;
  bad_eps.eps = 0;
  EXPECT_THROW(make_layer(*be, "bn", bad_eps, {TensorDesc{Shape{2, 3, 4, 4}}}), Error);
  BatchNorm2dConfig bad_m;
  bad_m.momentum = 1.5;
  EXPECT_THROW(make_layer(*be, "bn", bad_m, {TensorDesc{Shape{2, 3, 4, 4}}}), Error);
}

TEST(BatchNorm2dFlops, MatchesFormula) {
  Flops f = batchnorm2d_flops(Shape{32, 64, 56, 56});
  const double e = 32.0 * 64 * 56 * 56;
  EXPECT_DOUBLE_EQ(f.fprop, 8 * e);
  EXPECT_DOUBLE_EQ(f.dgrad, 10 * e);
  EXPECT_DOUBLE_EQ(f.wgrad, 4 * e);
  auto be = make_cpu_backend();
  auto layer = make_layer(*be, "bn", BatchNorm2dConfig{}, {TensorDesc{Shape{2, 3, 4, 5}}});
  EXPECT_DOUBLE_EQ(layer->flops().fprop, 8.0 * 2 * 3 * 4 * 5);
}

TEST(BatchNorm2dSteps, AllocateNothing) {
  auto be = make_cpu_backend();
  for (Layout l : {Layout::kRowMajor, Layout::kNChw16c}) {
    auto layer = make_layer(*be, "bn", BatchNorm2dConfig{},
                            {TensorDesc{Shape{2, 16, 3, 3}, DType::kF32, l}});
    EXPECT_EQ(allocations_in_step(*be, *layer), 0u) << to_string(l);
    layer->set_training(false);
    EXPECT_EQ(allocations_in_step(*be, *layer), 0u) << to_string(l) << " eval";
  }
}

}  // namespace
}  // namespace tbd::test
