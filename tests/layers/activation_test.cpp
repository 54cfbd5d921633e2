// tests/layers/activation_test.cpp: relu, leaky relu, clipped relu, tanh, sigmoid, gelu (erf) and
// gelu with the tanh approximation, forward and backward against float64 references, in plain
// (any rank) and nChw16c layouts, on every target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "layers/activation.h"
#include "tests/layers/layer_steps.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

// f(x) and f'(x) in float64; `a` is leaky relu's slope or clipped relu's ceiling.
double act_f(ActKind k, double a, double x) {
  switch (k) {
    case ActKind::kRelu:
      return x > 0 ? x : 0.0;
    case ActKind::kLeakyRelu:
      return x > 0 ? x : a * x;
    case ActKind::kClippedRelu:
      return std::min(std::max(x, 0.0), a);
    case ActKind::kTanh:
      return std::tanh(x);
    case ActKind::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case ActKind::kGelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case ActKind::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return 0;
}
double act_df(ActKind k, double a, double x) {
  switch (k) {
    case ActKind::kRelu:
      return x > 0 ? 1.0 : 0.0;
    case ActKind::kLeakyRelu:
      return x > 0 ? 1.0 : a;
    case ActKind::kClippedRelu:
      return x > 0 && x < a ? 1.0 : 0.0;
    case ActKind::kTanh:
      return 1.0 - std::tanh(x) * std::tanh(x);
    case ActKind::kSigmoid: {
      double s = 1.0 / (1.0 + std::exp(-x));
      return s * (1.0 - s);
    }
    case ActKind::kGelu:
      return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))) +
             x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    case ActKind::kGeluTanh: {
      const double c = std::sqrt(2.0 / M_PI);
      const double t = std::tanh(c * (x + 0.044715 * x * x * x));
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x);
    }
  }
  return 0;
}

struct ActCase {
  std::string name;
  ActKind act;
  Shape x;
  Layout layout = Layout::kRowMajor;
  double alpha = 0.01;  // leaky relu's slope, or clipped relu's ceiling
};

class ActivationTest : public LayerTest<ActCase> {};
class ActivationOnTarget : public TargetTest {};

TEST_P(ActivationTest, MatchesFloat64Reference) {
  const ActCase& tc = tcase();
  ActivationConfig cfg;
  cfg.act = tc.act;
  cfg.alpha = tc.alpha;
  cfg.ceiling = tc.alpha;
  auto layer = make("act", cfg, {TensorDesc{tc.x, DType::kF32, tc.layout}});
  EXPECT_EQ(layer->output_descs()[0].shape, tc.x);
  EXPECT_EQ(layer->output_descs()[0].layout, layer->input_descs()[0].layout);
  LayerCheckOptions opt;
  const bool piecewise_linear =
      tc.act == ActKind::kRelu || tc.act == ActKind::kLeakyRelu || tc.act == ActKind::kClippedRelu;
  opt.op_class = OpClass::kElementwise;
  if (tc.act == ActKind::kClippedRelu) {
    // A third of the inputs below 0, a third above the ceiling: both kinks are crossed.
    opt.x_lo = -tc.alpha, opt.x_hi = 2 * tc.alpha;
  }
  if (!piecewise_linear) {
    // Wider inputs reach the saturating parts; oneDNN's vectorised exp/tanh/erf are
    // polynomial approximations (OpClass::kTranscendental).
    opt.x_lo = -4, opt.x_hi = 4;
    opt.op_class = OpClass::kTranscendental;
  }
  // relu kinks at 0 (clipped relu also at its ceiling): uniform f32 inputs land within the FD
  // step (1e-6) of a kink with negligible probability, and the seeds are fixed.
  check_layer(
      be(), *layer,
      [&](auto& x, auto&) {
        Vec y(x[0].size());
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = act_f(tc.act, tc.alpha, x[0][i]);
        return std::vector<Vec>{y};
      },
      [&](auto& x, auto&, auto& dy) {
        RefGrads g;
        g.dx = {Vec(x[0].size())};
        for (std::size_t i = 0; i < dy[0].size(); ++i) {
          g.dx[0][i] = dy[0][i] * act_df(tc.act, tc.alpha, x[0][i]);
        }
        return g;
      },
      opt);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, ActivationTest,
    on_all_targets(::testing::Values(
        ActCase{"relu_odd_4d", ActKind::kRelu, Shape{1, 3, 5, 7}},
        ActCase{"relu_blocked", ActKind::kRelu, Shape{2, 16, 3, 5}, Layout::kNChw16c},
        ActCase{"relu_channels_last", ActKind::kRelu, Shape{2, 5, 3, 4}, Layout::kNhwc},
        ActCase{"relu_rank1", ActKind::kRelu, Shape{37}},
        ActCase{"leaky_relu_2d", ActKind::kLeakyRelu, Shape{7, 9}, Layout::kRowMajor, 0.1},
        ActCase{"leaky_relu_blocked", ActKind::kLeakyRelu, Shape{1, 32, 2, 3}, Layout::kNChw16c,
                0.2},
        // Negative slope: y no longer keeps x's sign, so backward reads x.
        ActCase{"leaky_relu_negative_alpha", ActKind::kLeakyRelu, Shape{3, 11}, Layout::kRowMajor,
                -0.5},
        ActCase{"clipped_relu_2d", ActKind::kClippedRelu, Shape{7, 9}, Layout::kRowMajor, 0.5},
        ActCase{"clipped_relu_blocked", ActKind::kClippedRelu, Shape{2, 16, 3, 5}, Layout::kNChw16c,
                0.25},
        // Deep Speech 2's ceiling, 20, with inputs in [-20, 40).
        ActCase{"clipped_relu_default_ceiling", ActKind::kClippedRelu, Shape{3, 4, 11},
                Layout::kRowMajor, 20.0},
        ActCase{"tanh_3d", ActKind::kTanh, Shape{2, 5, 13}},
        ActCase{"tanh_blocked", ActKind::kTanh, Shape{2, 16, 4, 4}, Layout::kNChw16c},
        ActCase{"sigmoid_rank5", ActKind::kSigmoid, Shape{2, 3, 1, 4, 5}},
        ActCase{"sigmoid_blocked", ActKind::kSigmoid, Shape{1, 16, 3, 3}, Layout::kNChw16c},
        ActCase{"gelu_2d", ActKind::kGelu, Shape{3, 31}},
        ActCase{"gelu_blocked", ActKind::kGelu, Shape{2, 32, 3, 1}, Layout::kNChw16c},
        ActCase{"gelu_tanh_2d", ActKind::kGeluTanh, Shape{4, 37}},
        ActCase{"gelu_tanh_blocked", ActKind::kGeluTanh, Shape{2, 16, 3, 3}, Layout::kNChw16c})),
    CaseOnTarget());

TEST(ActivationNames, ToString) {
  EXPECT_STREQ(to_string(ActKind::kRelu), "relu");
  EXPECT_STREQ(to_string(ActKind::kLeakyRelu), "leaky_relu");
  EXPECT_STREQ(to_string(ActKind::kTanh), "tanh");
  EXPECT_STREQ(to_string(ActKind::kSigmoid), "sigmoid");
  EXPECT_STREQ(to_string(ActKind::kGelu), "gelu");
  EXPECT_STREQ(to_string(ActKind::kClippedRelu), "clipped_relu");
  EXPECT_STREQ(to_string(ActKind::kGeluTanh), "gelu_tanh");
}

// Values on and beside both kinks: y and the gradient's mask exactly (0 < x < ceiling), on
// every target.
TEST_P(ActivationOnTarget, ClippedReluAtItsBounds) {
  ActivationConfig cfg;
  cfg.act = ActKind::kClippedRelu;
  cfg.ceiling = 2.0;
  EXPECT_EQ(ActivationConfig{}.ceiling, 20.0);
  auto layer = make("crelu", cfg, {TensorDesc{Shape{8}}});
  const Vec xv{-3.0, -0.0, 0.0, 1e-3, 1.5, 2.0 - 1e-3, 2.0, 7.0};
  const Vec want_y{0.0, 0.0, 0.0, 1e-3, 1.5, 2.0 - 1e-3, 2.0, 2.0};
  const Vec want_dx{0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0};
  Backend& b = be();
  Tensor x = b.empty(layer->input_descs()[0], MemCategory::kDynamic);
  Tensor y = b.empty(layer->output_descs()[0], MemCategory::kFeatureMaps);
  Tensor dy = b.empty(layer->output_descs()[0], MemCategory::kDynamic);
  Tensor dx = b.empty(layer->input_descs()[0], MemCategory::kDynamic);
  from_host(b, x, xv);
  b.fill(dy, 1.f);
  const Tensor* xp[] = {&x};
  const Tensor* yp[] = {&y};
  const Tensor* dyp[] = {&dy};
  Tensor* yw[] = {&y};
  Tensor* dxw[] = {&dx};
  layer->forward(yw, xp);
  layer->backward(dxw, dyp, xp, yp);
  b.synchronize();
  Vec want_y_f32 = want_y;
  for (auto& v : want_y_f32) v = static_cast<float>(v);
  EXPECT_EQ(to_host(b, y), want_y_f32);
  EXPECT_EQ(to_host(b, dx), want_dx);
}

INSTANTIATE_TEST_SUITE_P(Targets, ActivationOnTarget, ::testing::ValuesIn(kAllTargets),
                         TargetName());

TEST(ActivationErrors, ClippedReluNeedsAPositiveCeiling) {
  auto be = make_cpu_backend();
  for (double c : {0.0, -1.0, std::nan("")}) {
    ActivationConfig cfg;
    cfg.act = ActKind::kClippedRelu;
    cfg.ceiling = c;
    expect_error(
        [&] {
          make_layer(*be, "rnn.crelu", cfg, {TensorDesc{Shape{2, 3}}});
        },
        {"Activation 'rnn.crelu'", "ceiling"});
  }
  // The ceiling is clipped relu's alone: other kinds ignore it.
  ActivationConfig relu;
  relu.ceiling = -1;
  EXPECT_NO_THROW(make_layer(*be, "relu", relu, {TensorDesc{Shape{2, 3}}}));
}

TEST(ActivationErrors, NonPositiveDimNamesLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  try {
    make_layer(*be, "block.relu", ActivationConfig{}, {TensorDesc{Shape{4, 0, 3}}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("Activation 'block.relu'"), std::string::npos) << m;
    EXPECT_NE(m.find("input x"), std::string::npos) << m;
    EXPECT_NE(m.find("(4, 0, 3)"), std::string::npos) << m;
  }
}

TEST(ActivationErrors, BadInputsAreRejected) {
  auto be = make_cpu_backend();
  ActivationConfig c;
  EXPECT_THROW(make_layer(*be, "a", c, {TensorDesc{Shape{}}}), Error);  // rank 0
  EXPECT_THROW(make_layer(*be, "a", c, {TensorDesc{Shape{2, -3}}}), Error);
  EXPECT_THROW(make_layer(*be, "a", c, {TensorDesc{Shape{2, 3}, DType::kI32}}), Error);
  EXPECT_THROW(make_layer(*be, "a", c, {TensorDesc{Shape{2, 3}}, TensorDesc{Shape{2, 3}}}), Error);
}

TEST(ActivationFlops, MatchesFormula) {
  Shape x{8, 16, 4, 4};
  const double e = 8.0 * 16 * 4 * 4;
  auto f = [&](ActKind k) {
    ActivationConfig c;
    c.act = k;
    return activation_flops(c, x);
  };
  EXPECT_DOUBLE_EQ(f(ActKind::kRelu).fprop, e);
  EXPECT_DOUBLE_EQ(f(ActKind::kRelu).dgrad, e);
  EXPECT_DOUBLE_EQ(f(ActKind::kLeakyRelu).fprop, 2 * e);
  EXPECT_DOUBLE_EQ(f(ActKind::kLeakyRelu).dgrad, 2 * e);
  EXPECT_DOUBLE_EQ(f(ActKind::kTanh).fprop, 4 * e);
  EXPECT_DOUBLE_EQ(f(ActKind::kSigmoid).dgrad, 3 * e);
  EXPECT_DOUBLE_EQ(f(ActKind::kGelu).fprop, 8 * e);
  EXPECT_DOUBLE_EQ(f(ActKind::kGelu).dgrad, 10 * e);
  EXPECT_DOUBLE_EQ(f(ActKind::kGelu).wgrad, 0);
  EXPECT_DOUBLE_EQ(f(ActKind::kClippedRelu).fprop, 2 * e);
  EXPECT_DOUBLE_EQ(f(ActKind::kClippedRelu).dgrad, 2 * e);
  EXPECT_DOUBLE_EQ(f(ActKind::kGeluTanh).fprop, 12 * e);
  EXPECT_DOUBLE_EQ(f(ActKind::kGeluTanh).dgrad, 20 * e);
}

TEST(ActivationSteps, AllocateNothing) {
  auto be = make_cpu_backend();
  for (ActKind k : {ActKind::kRelu, ActKind::kLeakyRelu, ActKind::kTanh, ActKind::kSigmoid,
                    ActKind::kGelu, ActKind::kClippedRelu, ActKind::kGeluTanh}) {
    ActivationConfig c;
    c.act = k;
    auto layer =
        make_layer(*be, "act", c, {TensorDesc{Shape{2, 16, 3, 3}, DType::kF32, Layout::kNChw16c}});
    EXPECT_EQ(allocations_in_step(*be, *layer), 0u) << to_string(k);
  }
}

}  // namespace
}  // namespace tbd::test
