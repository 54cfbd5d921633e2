// tests/layers/sequence_batchnorm_test.cpp: SequenceBatchNorm (statistics per feature over every
// leading position: (T, N, C) sequences, (M, C) rows) training forward/backward, running
// statistics and eval mode against the float64 batch normalisation reference, on every target;
// its parameters, FLOPs, errors and allocations.
#include <gtest/gtest.h>

#include "layers/sequence_batchnorm.h"
#include "tests/layers/batchnorm_ref.h"
#include "tests/layers/layer_steps.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

// x (..., C) row-major is (M, C): M rows of C features, i.e. (N = M, C, HW = 1).
RefBn ref_of(const Shape& x, double eps) {
  const int64_t C = x[x.rank() - 1];
  return RefBn(x.numel() / C, C, 1, eps);
}

struct SeqBnCase {
  std::string name;
  Shape x;
};

class SequenceBatchNormTest : public LayerTest<SeqBnCase> {
 protected:
  std::unique_ptr<Layer> make_bn(SequenceBatchNormConfig cfg = {}) const {
    return make("bn", cfg, {TensorDesc{tcase().x}});
  }
};

TEST_P(SequenceBatchNormTest, TrainingMatchesFloat64Reference) {
  const SeqBnCase& tc = tcase();
  auto layer = make_bn();
  EXPECT_EQ(layer->output_descs()[0].shape, tc.x);
  EXPECT_EQ(layer->output_descs()[0].layout, Layout::kRowMajor);
  check_bn_training(be(), *layer, ref_of(tc.x, 1e-5), /*x_needs_grad=*/true);
}

// x is data (no input gradient): weight and bias gradients from the layer's own reduction.
TEST_P(SequenceBatchNormTest, ParamGradientsWithoutInputGradient) {
  auto layer = make_bn();
  check_bn_training(be(), *layer, ref_of(tcase().x, 1e-5), /*x_needs_grad=*/false);
}

TEST_P(SequenceBatchNormTest, RunningStatisticsAndEvalMode) {
  SequenceBatchNormConfig cfg;
  cfg.momentum = 0.3;
  cfg.eps = 1e-3;
  auto layer = make_bn(cfg);
  check_running_stats_and_eval(be(), target(), *layer, ref_of(tcase().x, cfg.eps), cfg.momentum);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SequenceBatchNormTest,
                         on_all_targets(::testing::Values(
                             // Deep Speech 2's layout: time-major (T, N, C), statistics over N x T.
                             SeqBnCase{"time_major", Shape{5, 3, 6}},
                             SeqBnCase{"batch1", Shape{7, 1, 4}}, SeqBnCase{"rows", Shape{9, 5}},
                             SeqBnCase{"rank4", Shape{2, 3, 2, 7}},
                             SeqBnCase{"many_rows_odd_c", Shape{40, 3, 17}},
                             // A single row: the batch variance is 0 and the running variance takes
                             // the biased one (the unbiased one is undefined).
                             SeqBnCase{"one_row", Shape{1, 1, 3}})),
                         CaseOnTarget());

TEST(SequenceBatchNormParams, WeightOnesBiasZerosNoDecay) {
  auto be = make_cpu_backend();
  auto layer = make_layer(*be, "bn", SequenceBatchNormConfig{}, {TensorDesc{Shape{6, 2, 8}}});
  EXPECT_STREQ(layer->kind(), "SequenceBatchNorm");
  ASSERT_EQ(layer->params().size(), 2u);
  EXPECT_EQ(layer->params()[0].name, "bn.weight");
  EXPECT_EQ(layer->params()[0].init, Init::kOnes);
  EXPECT_EQ(layer->params()[1].name, "bn.bias");
  EXPECT_EQ(layer->params()[1].init, Init::kZeros);
  EXPECT_FALSE(layer->params()[0].decay);
  EXPECT_FALSE(layer->params()[1].decay);
  EXPECT_EQ(layer->params()[1].value.shape(), (Shape{8}));
  auto* bn = dynamic_cast<BatchNormLayer*>(layer.get());
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(bn->running_var().shape(), (Shape{8}));
}

TEST(SequenceBatchNormErrors, WrongRankNamesLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  expect_error(
      [&] { make_layer(*be, "rnn.0.bn", SequenceBatchNormConfig{}, {TensorDesc{Shape{7}}}); },
      {"SequenceBatchNorm 'rnn.0.bn'", "input x", "rank >= 2", "(7)"});
}

TEST(SequenceBatchNormErrors, BadShapesLayoutsAndConfigsAreRejected) {
  auto be = make_cpu_backend();
  SequenceBatchNormConfig ok;
  auto rejects = [&](const SequenceBatchNormConfig& cfg, const std::vector<TensorDesc>& in,
                     const std::vector<std::string>& parts) {
    std::vector<std::string> all{"SequenceBatchNorm 'bn'"};
    all.insert(all.end(), parts.begin(), parts.end());
    expect_error([&] { make_layer(*be, "bn", cfg, in); }, all);
  };
  rejects(ok, {TensorDesc{Shape{4, 0, 3}}}, {"input x", "(4, 0, 3)"});
  rejects(ok, {TensorDesc{Shape{4, 3}, DType::kI32}}, {"input x", "f32"});
  rejects(ok, {TensorDesc{Shape{2, 16, 2, 2}, DType::kF32, Layout::kNChw16c}}, {"row-major"});
  rejects(ok, {TensorDesc{Shape{4, 3}}, TensorDesc{Shape{4, 3}}}, {"expected 1"});
  SequenceBatchNormConfig bad_eps;
  bad_eps.eps = 0;
  rejects(bad_eps, {TensorDesc{Shape{4, 3}}}, {"eps=0"});
  SequenceBatchNormConfig bad_m;
  bad_m.momentum = 1.5;
  rejects(bad_m, {TensorDesc{Shape{4, 3}}}, {"momentum=1.5"});
}

// BatchNorm2d's counts with E = M*C.
TEST(SequenceBatchNormFlops, AreBatchNorm2dsOverTheRows) {
  const Shape x{6, 4, 5};  // M = 24, C = 5, E = 120
  Flops f = sequence_batchnorm_flops(x);
  EXPECT_DOUBLE_EQ(f.fprop, 8 * 120.0);
  EXPECT_DOUBLE_EQ(f.dgrad, 10 * 120.0);
  EXPECT_DOUBLE_EQ(f.wgrad, 4 * 120.0);
  Bytes b = sequence_batchnorm_bytes(x), b2 = batchnorm2d_bytes(Shape{24, 5, 1, 1});
  EXPECT_DOUBLE_EQ(b.fprop, b2.fprop);
  EXPECT_DOUBLE_EQ(b.dgrad, b2.dgrad);
  EXPECT_DOUBLE_EQ(b.wgrad, b2.wgrad);
  auto be = make_cpu_backend();
  auto layer = make_layer(*be, "bn", SequenceBatchNormConfig{}, {TensorDesc{x}});
  EXPECT_DOUBLE_EQ(layer->flops().fprop, f.fprop);
  EXPECT_DOUBLE_EQ(layer->bytes().fprop, b.fprop);
}

TEST(SequenceBatchNormSteps, AllocateNothing) {
  auto be = make_cpu_backend();
  auto layer = make_layer(*be, "bn", SequenceBatchNormConfig{}, {TensorDesc{Shape{5, 2, 16}}});
  EXPECT_EQ(allocations_in_step(*be, *layer), 0u);
  layer->set_training(false);
  EXPECT_EQ(allocations_in_step(*be, *layer), 0u) << "eval";
}

}  // namespace
}  // namespace tbd::test
