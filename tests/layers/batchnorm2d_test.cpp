// tests/layers/batchnorm2d_test.cpp: BatchNorm2d training forward/backward, running statistics
// and eval mode against a float64 reference, in plain, nChw16c and nhwc layouts, on every target.
#include <gtest/gtest.h>

#include "layers/batchnorm2d.h"
#include "tests/layers/batchnorm_ref.h"
#include "tests/layers/layer_steps.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

// The reference of x (N, C, H, W).
RefBn ref_of(const Shape& x, double eps, bool relu) {
  return RefBn(x[0], x[1], x[2] * x[3], eps, relu);
}

struct BnCase {
  std::string name;
  Shape x;
  Layout layout = Layout::kRowMajor;
  bool relu = false;  // fused ReLU
};

class BatchNorm2dTest : public LayerTest<BnCase> {
 protected:
  std::unique_ptr<Layer> make_bn(BatchNorm2dConfig cfg = {}) const {
    cfg.relu = tcase().relu;
    return make("bn", cfg, {TensorDesc{tcase().x, DType::kF32, tcase().layout}});
  }
};

TEST_P(BatchNorm2dTest, TrainingMatchesFloat64Reference) {
  const BnCase& tc = tcase();
  auto layer = make_bn();
  EXPECT_EQ(layer->output_descs()[0].shape, tc.x);
  EXPECT_EQ(layer->output_descs()[0].layout, layer->input_descs()[0].layout);
  check_bn_training(be(), *layer, ref_of(tc.x, 1e-5, tc.relu), /*x_needs_grad=*/true);
}

// x is data (no input gradient): gamma and beta gradients come from the layer's own reduction.
TEST_P(BatchNorm2dTest, ParamGradientsWithoutInputGradient) {
  auto layer = make_bn();
  check_bn_training(be(), *layer, ref_of(tcase().x, 1e-5, tcase().relu), /*x_needs_grad=*/false);
}

// Two training steps update the running statistics (momentum, unbiased variance); eval mode
// then normalises with them, forward and backward.
TEST_P(BatchNorm2dTest, RunningStatisticsAndEvalMode) {
  BatchNorm2dConfig cfg;
  cfg.momentum = 0.3;
  auto layer = make_bn(cfg);
  check_running_stats_and_eval(be(), target(), *layer, ref_of(tcase().x, cfg.eps, tcase().relu),
                               cfg.momentum);
}

// Frozen: an affine with the running statistics whatever the mode, no parameter gradients, the
// statistics never updated (a detection backbone's BatchNorm).
TEST_P(BatchNorm2dTest, FrozenIsAnAffineWithFixedStatistics) {
  const BnCase& tc = tcase();
  BatchNorm2dConfig cfg;
  cfg.frozen = true;
  cfg.eps = 2e-5;
  auto layer = make_bn(cfg);
  auto* bn = dynamic_cast<BatchNormLayer*>(layer.get());
  ASSERT_NE(bn, nullptr);
  EXPECT_TRUE(bn->frozen());
  EXPECT_FALSE(layer->param_grads());
  layer->set_training(true);
  EXPECT_FALSE(layer->training());
  EXPECT_NE(layer->describe().find("frozen"), std::string::npos) << layer->describe();
  const double E = static_cast<double>(tc.x.numel()), r = tc.relu ? E : 0;
  EXPECT_EQ(layer->flops().fprop, 2 * E + r);
  EXPECT_EQ(layer->flops().dgrad, E + r);
  EXPECT_EQ(layer->flops().wgrad, 0);

  // Statistics far from the initial 0 and 1, exactly representable as floats.
  const int64_t C = tc.x[1];
  Vec rm = random_vec(C, 7, -0.5, 0.5), rv = random_vec(C, 8, 0.5, 2.0);
  for (auto* v : {&rm, &rv})
    for (double& e : *v) e = static_cast<float>(e);
  from_host(be(), const_cast<Tensor&>(bn->running_mean()), rm);
  from_host(be(), const_cast<Tensor&>(bn->running_var()), rv);
  const RefBn ref = ref_of(tc.x, cfg.eps, tc.relu);
  LayerCheckOptions opt = bn_options();
  opt.training = true;  // asked for; a frozen layer stays in eval mode
  // The reference's parameter gradients are zeroed (the layer computes none), so its finite
  // differences would not match them; eval mode's backward is finite-difference checked above.
  opt.run_fd = false;
  check_layer(
      be(), *layer,
      [&](auto& xs, auto& p) {
        return std::vector<Vec>{ref.out(ref.normalize(xs[0], p[0], p[1], rm, rv))};
      },
      [&](auto& xs, auto& p, auto& dy) {
        RefGrads g = ref.backward_eval(xs, p, dy, rm, rv);
        for (Vec& d : g.dparams) std::fill(d.begin(), d.end(), 0.0);
        return g;
      },
      opt);
  const Tol exact{0, 0};
  EXPECT_TRUE(
      expect_close("running mean after steps", to_host(be(), bn->running_mean()), rm, exact));
  EXPECT_TRUE(expect_close("running var after steps", to_host(be(), bn->running_var()), rv, exact));
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
        BnCase{"blocked_32c_batch1", Shape{1, 32, 3, 3}, Layout::kNChw16c},
        BnCase{"relu_plain", Shape{3, 5, 4, 3}, Layout::kRowMajor, true},
        BnCase{"relu_blocked", Shape{2, 32, 5, 3}, Layout::kNChw16c, true},
        BnCase{"channels_last", Shape{2, 6, 5, 3}, Layout::kNhwc},
        BnCase{"relu_channels_last", Shape{3, 5, 4, 3}, Layout::kNhwc, true},
        // Rows (N H W = 900) over several blocks of the own nhwc passes' sums, one partial.
        BnCase{"relu_channels_last_many_rows", Shape{3, 7, 20, 15}, Layout::kNhwc, true})),
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
  Flops r = batchnorm2d_flops(Shape{32, 64, 56, 56}, /*relu=*/true);
  EXPECT_DOUBLE_EQ(r.fprop, 9 * e);
  EXPECT_DOUBLE_EQ(r.dgrad, 11 * e);
  EXPECT_DOUBLE_EQ(r.wgrad, 4 * e);
}

TEST(BatchNorm2dSteps, AllocateNothing) {
  auto be = make_cpu_backend();
  for (bool relu : {false, true}) {
    for (Layout l : {Layout::kRowMajor, Layout::kNChw16c, Layout::kNhwc}) {
      BatchNorm2dConfig cfg;
      cfg.relu = relu;
      auto layer = make_layer(*be, "bn", cfg, {TensorDesc{Shape{2, 16, 3, 3}, DType::kF32, l}});
      EXPECT_EQ(allocations_in_step(*be, *layer), 0u) << to_string(l) << " relu " << relu;
      layer->set_training(false);
      EXPECT_EQ(allocations_in_step(*be, *layer), 0u) << to_string(l) << " eval relu " << relu;
    }
  }
}

}  // namespace
}  // namespace tbd::test
