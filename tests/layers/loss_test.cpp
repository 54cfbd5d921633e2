// tests/layers/loss_test.cpp: SoftmaxCrossEntropy (label smoothing, ignore_index), MseLoss and
// ActorCriticLoss against float64 references on every target, plus label checks and run-to-run
// determinism.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "layers/loss.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

// ---- SoftmaxCrossEntropy ----

struct XentCase {
  std::string name;
  Shape logits;  // (..., V)
  double smoothing = 0.0;
  int64_t ignore_index = -100;
  int64_t label_lo = 0;  // labels drawn from [label_lo, V); -1 with ignore_index -1 mixes in
                         // ignored rows
  double logit_range = 3.0;
  int64_t label_hi = -1;  // -1: V
  Vec labels = {};        // fixed labels instead (rows with ignore_index among them)
  double weight = 1.0;
};

struct RefXent {
  int64_t M, V;
  double ls;
  int64_t ignore;
  double weight;
  RefXent(const Shape& z, double s, int64_t ig, double w = 1.0)
      : M(z.numel() / z[-1]), V(z[-1]), ls(s), ignore(ig), weight(w) {}
  double lse(const Vec& z, int64_t m) const {
    double mx = *std::max_element(z.begin() + m * V, z.begin() + (m + 1) * V);
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(z[m * V + v] - mx);
    return mx + std::log(s);
  }
  int64_t count(const Vec& labels) const {
    return std::count_if(labels.begin(), labels.end(),
                         [&](double l) { return static_cast<int64_t>(l) != ignore; });
  }
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>&) const {
    double total = 0;
    for (int64_t m = 0; m < M; ++m) {
      int64_t label = static_cast<int64_t>(x[1][m]);
      if (label == ignore) continue;
      double l = lse(x[0], m), sum_logp = 0;
      for (int64_t v = 0; v < V; ++v) sum_logp += x[0][m * V + v] - l;
      total += -(1 - ls) * (x[0][m * V + label] - l) - ls / V * sum_logp;
    }
    int64_t n = count(x[1]);
    return {Vec{n ? weight * total / n : 0.0}};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>&,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(M * V, 0.0), Vec()};
    int64_t n = count(x[1]);
    if (n == 0) return g;
    double up = weight * dy[0][0] / n;
    for (int64_t m = 0; m < M; ++m) {
      int64_t label = static_cast<int64_t>(x[1][m]);
      if (label == ignore) continue;
      double l = lse(x[0], m);
      for (int64_t v = 0; v < V; ++v) {
        double p = std::exp(x[0][m * V + v] - l);
        g.dx[0][m * V + v] = up * (p - ls / V - (v == label ? 1 - ls : 0.0));
      }
    }
    return g;
  }
};

Shape leading(const Shape& z) {
  return Shape(std::vector<int64_t>(z.dims().begin(), z.dims().end() - 1));
}

class XentTest : public LayerTest<XentCase> {};

TEST_P(XentTest, MatchesFloat64Reference) {
  const XentCase& tc = tcase();
  SoftmaxCrossEntropyConfig cfg;
  cfg.label_smoothing = tc.smoothing;
  cfg.ignore_index = tc.ignore_index;
  cfg.weight = tc.weight;
  auto layer =
      make("xent", cfg, {TensorDesc{tc.logits}, TensorDesc{leading(tc.logits), DType::kI32}});
  EXPECT_EQ(layer->output_descs()[0].shape, (Shape{1}));
  RefXent ref(tc.logits, tc.smoothing, tc.ignore_index, tc.weight);
  LayerCheckOptions opt;
  opt.op_class = OpClass::kReduction;
  opt.int_lo = tc.label_lo;
  opt.int_hi = tc.label_hi >= 0 ? tc.label_hi : tc.logits[-1];
  if (!tc.labels.empty()) opt.x_values[1] = tc.labels;
  opt.x_lo = -tc.logit_range;
  opt.x_hi = tc.logit_range;
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, XentTest,
    on_all_targets(::testing::Values(
        XentCase{"batch1", Shape{1, 5}}, XentCase{"odd_sizes", Shape{7, 13}},
        XentCase{"label_smoothing", Shape{6, 11}, 0.1},
        XentCase{"ignore_index", Shape{9, 7}, 0.0, -1, -1, 3.0, 2},  // 1 in 3 ignored
        XentCase{"smoothing_ignore_3d", Shape{2, 5, 10}, 0.2, -1, -1},
        XentCase{"large_logits", Shape{4, 300}, 0.0, -100, 0, 60.0},
        XentCase{"vocab_1", Shape{3, 1}}, XentCase{"all_ignored", Shape{3, 4}, 0.1, -1, -1, 3.0, 0},
        // The default ignore_index (-100) on two of nine rows, with and without smoothing.
        XentCase{"default_ignore_index", Shape{9, 11}, 0.0, -100, 0, 3.0, -1,
                 Vec{3, 0, 10, -100, 7, 7, 1, -100, 5}},
        XentCase{"default_ignore_index_smoothing", Shape{9, 11}, 0.1, -100, 0, 3.0, -1,
                 Vec{3, 0, 10, -100, 7, 7, 1, -100, 5}},
        XentCase{"all_default_ignored", Shape{4, 11}, 0.1, -100, 0, 3.0, -1, Vec(4, -100.0)},
        XentCase{"3d_logits_smoothing", Shape{2, 3, 11}, 0.1},
        XentCase{"vocab_1000", Shape{4, 1000}},
        XentCase{"weight", Shape{5, 9}, 0.1, -100, 0, 3.0, -1, {}, 0.4})),
    CaseOnTarget());

// Runs forward once on host data; returns the loss.
float run_forward(Backend& be, Layer& layer, const std::vector<Vec>& inputs) {
  std::vector<Tensor> x;
  std::vector<const Tensor*> xp;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    x.push_back(be.empty(layer.input_descs()[k], MemCategory::kDynamic));
    from_host(be, x.back(), inputs[k]);
  }
  for (auto& t : x) xp.push_back(&t);
  Tensor y = be.empty(layer.output_descs()[0], MemCategory::kFeatureMaps);
  std::vector<Tensor*> yw{&y};
  layer.forward(yw, xp);
  float v;
  be.copy_to_host(&v, y);
  return v;
}

TEST(XentLabels, OutOfRangeLabelThrowsNamingRowAndLabel) {
  auto be = make_cpu_backend();
  auto layer = make_layer(*be, "loss", SoftmaxCrossEntropyConfig{},
                          {TensorDesc{Shape{3, 5}}, TensorDesc{Shape{3}, DType::kI32}});
  Vec z = random_vec(15, 3);
  try {
    run_forward(*be, *layer, {z, Vec{0, 7, 1}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("SoftmaxCrossEntropy 'loss'"), std::string::npos) << m;
    EXPECT_NE(m.find("row 1 has label 7"), std::string::npos) << m;
  }
  EXPECT_THROW(run_forward(*be, *layer, {z, Vec{0, -3, 1}}), Error);  // negative, not ignored
  EXPECT_NO_THROW(run_forward(*be, *layer, {z, Vec{0, -100, 4}}));    // ignore_index is fine
}

// The loss is bit-identical whatever the thread count (fixed summation order).
TEST(XentDeterminism, SameLossForAnyThreadCount) {
  auto be = make_cpu_backend();
  const int64_t M = 257, V = 301;
  SoftmaxCrossEntropyConfig cfg;
  cfg.label_smoothing = 0.1;
  auto layer =
      make_layer(*be, "loss", cfg, {TensorDesc{Shape{M, V}}, TensorDesc{Shape{M}, DType::kI32}});
  Vec z = random_vec(M * V, 5, -4, 4), labels(M);
  for (int64_t m = 0; m < M; ++m) labels[m] = static_cast<double>((m * 37) % V);
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  float one = run_forward(*be, *layer, {z, labels});
  omp_set_num_threads(std::max(2, saved));
  float many = run_forward(*be, *layer, {z, labels});
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(&one, &many, sizeof(float)), 0) << one << " vs " << many;
  RefXent ref(Shape{M, V}, 0.1, -100);
  EXPECT_NEAR(one, ref.forward({z, labels}, {})[0][0], 1e-5);
}

// Masked vocabulary entries (-inf logits) contribute exp(-inf) = 0: the loss stays finite.
TEST(XentMasking, MinusInfinityLogitsStayFinite) {
  auto be = make_cpu_backend();
  auto layer = make_layer(*be, "loss", SoftmaxCrossEntropyConfig{},
                          {TensorDesc{Shape{2, 4}}, TensorDesc{Shape{2}, DType::kI32}});
  const double inf = std::numeric_limits<double>::infinity();
  Vec z{0.5, -inf, 1.0, -inf, -inf, 2.0, -inf, 0.0};
  float got = run_forward(*be, *layer, {z, Vec{0, 1}});
  double l0 = std::log(std::exp(0.5) + std::exp(1.0)) - 0.5;
  double l1 = std::log(std::exp(2.0) + std::exp(0.0)) - 2.0;
  EXPECT_NEAR(got, (l0 + l1) / 2, 1e-6);
}

TEST(XentErrors, WrongRankNamesLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  SoftmaxCrossEntropyConfig cfg;
  expect_error(
      [&] {
        make_layer(*be, "lm_loss", cfg,
                   {TensorDesc{Shape{10}}, TensorDesc{Shape{10}, DType::kI32}});
      },
      {"SoftmaxCrossEntropy 'lm_loss'", "input logits", "rank", "(10)"});
  expect_error(
      [&] {
        make_layer(*be, "lm_loss", cfg,
                   {TensorDesc{Shape{4, 10}}, TensorDesc{Shape{4, 1}, DType::kI32}});
      },
      {"SoftmaxCrossEntropy 'lm_loss'", "input labels", "(4)", "(4, 1)"});
}

TEST(XentErrors, MismatchedShapesTypesAndConfigAreRejected) {
  auto be = make_cpu_backend();
  SoftmaxCrossEntropyConfig cfg;
  expect_error(
      [&] {
        make_layer(*be, "l", cfg, {TensorDesc{Shape{4, 10}}, TensorDesc{Shape{5}, DType::kI32}});
      },
      {"SoftmaxCrossEntropy 'l'", "labels", "(4, 10)", "(5)"});
  expect_error(
      [&] {
        make_layer(*be, "l", cfg, {TensorDesc{Shape{4, 10}}, TensorDesc{Shape{4}}});
      },
      {"SoftmaxCrossEntropy 'l'", "labels", "i32", "f32"});
  expect_error(
      [&] {
        make_layer(*be, "l", cfg, {TensorDesc{Shape{4, 0}}, TensorDesc{Shape{4}, DType::kI32}});
      },
      {"SoftmaxCrossEntropy 'l'", "logits", "(4, 0)"});
  cfg.label_smoothing = 1.5;
  expect_error(
      [&] {
        make_layer(*be, "l", cfg, {TensorDesc{Shape{4, 10}}, TensorDesc{Shape{4}, DType::kI32}});
      },
      {"SoftmaxCrossEntropy 'l'", "label_smoothing"});
  cfg.label_smoothing = 0;
  cfg.weight = std::nan("");
  expect_error(
      [&] {
        make_layer(*be, "l", cfg, {TensorDesc{Shape{4, 10}}, TensorDesc{Shape{4}, DType::kI32}});
      },
      {"SoftmaxCrossEntropy 'l'", "weight"});
  EXPECT_THROW(make_layer(*be, "l", SoftmaxCrossEntropyConfig{}, {TensorDesc{Shape{4, 10}}}),
               Error);  // labels missing
}

TEST(XentFlops, MatchesFormula) {
  Flops f = softmax_cross_entropy_flops(Shape{64, 20, 32000});
  const double e = 64.0 * 20 * 32000;
  EXPECT_DOUBLE_EQ(f.fprop, 4 * e);
  EXPECT_DOUBLE_EQ(f.dgrad, 3 * e);
  EXPECT_DOUBLE_EQ(f.wgrad, 0.0);
}

// ---- MseLoss ----

struct RefMse {
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>&) const {
    double s = 0;
    for (std::size_t i = 0; i < x[0].size(); ++i) s += (x[0][i] - x[1][i]) * (x[0][i] - x[1][i]);
    return {Vec{s / static_cast<double>(x[0].size())}};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>&,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    const double e = static_cast<double>(x[0].size());
    g.dx = {Vec(x[0].size()), Vec(x[0].size())};
    for (std::size_t i = 0; i < x[0].size(); ++i) {
      g.dx[0][i] = dy[0][0] * 2 * (x[0][i] - x[1][i]) / e;
      g.dx[1][i] = -g.dx[0][i];
    }
    return g;
  }
};

struct MseCase {
  std::string name;
  Shape x;
  std::vector<bool> needs_grad{true, true};
};

class MseTest : public LayerTest<MseCase> {};

TEST_P(MseTest, MatchesFloat64Reference) {
  const MseCase& tc = tcase();
  auto layer = make("mse", MseLossConfig{}, {TensorDesc{tc.x}, TensorDesc{tc.x}});
  EXPECT_EQ(layer->output_descs()[0].shape, (Shape{1}));
  RefMse ref;
  LayerCheckOptions opt;
  opt.op_class = OpClass::kReduction;
  opt.x_needs_grad = tc.needs_grad;
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MseTest,
                         on_all_targets(::testing::Values(
                             MseCase{"single", Shape{1}}, MseCase{"odd_sizes", Shape{3, 5}},
                             MseCase{"small_2d", Shape{4, 6}}, MseCase{"rank4", Shape{2, 3, 4, 5}},
                             MseCase{"several_blocks", Shape{3, 4099}},  // > one block
                             MseCase{"long_100000", Shape{100000}},
                             MseCase{"pred_grad_only", Shape{7, 3}, {true, false}},
                             MseCase{"target_grad_only", Shape{7, 3}, {false, true}})),
                         CaseOnTarget());

TEST(MseDeterminism, SameLossForAnyThreadCount) {
  auto be = make_cpu_backend();
  const int64_t E = 50001;
  auto layer =
      make_layer(*be, "mse", MseLossConfig{}, {TensorDesc{Shape{E}}, TensorDesc{Shape{E}}});
  Vec p = random_vec(E, 8), t = random_vec(E, 9);
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  float one = run_forward(*be, *layer, {p, t});
  omp_set_num_threads(std::max(2, saved));
  float many = run_forward(*be, *layer, {p, t});
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(&one, &many, sizeof(float)), 0) << one << " vs " << many;
}

TEST(MseErrors, MismatchedShapesNameLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "value_loss", MseLossConfig{},
                   {TensorDesc{Shape{4, 1}}, TensorDesc{Shape{4}}});
      },
      {"MseLoss 'value_loss'", "input target", "(4, 1)", "(4)"});
  expect_error(
      [&] {
        make_layer(*be, "m", MseLossConfig{}, {TensorDesc{Shape{4, 0}}, TensorDesc{Shape{4, 0}}});
      },
      {"MseLoss 'm'", "pred", "(4, 0)"});
  expect_error(
      [&] {
        make_layer(*be, "m", MseLossConfig{}, {TensorDesc{Shape{}}, TensorDesc{Shape{}}});
      },
      {"MseLoss 'm'", "rank"});
  expect_error(
      [&] {
        make_layer(*be, "m", MseLossConfig{},
                   {TensorDesc{Shape{4}}, TensorDesc{Shape{4}, DType::kI32}});
      },
      {"MseLoss 'm'", "i32"});
}

TEST(MseFlops, MatchesFormula) {
  Flops f = mse_loss_flops(Shape{32, 100});
  EXPECT_DOUBLE_EQ(f.fprop, 3 * 3200.0);
  EXPECT_DOUBLE_EQ(f.dgrad, 3 * 3200.0);
}

// ---- ActorCriticLoss ----

// The loss of layers/loss.h in float64, written out from its definition: sum over rows of
// -log(q_a) * adv - beta * H + c * (v - R)^2 with q = softmax + eps and adv = R - v constant.
struct RefActorCritic {
  int64_t N, A;
  double beta = 0.01, c = 1.0, eps = 1e-8;
  Vec softmax(const Vec& z, int64_t n) const {
    double mx = z[n * A];
    for (int64_t j = 1; j < A; ++j) mx = std::max(mx, z[n * A + j]);
    Vec p(A);
    double s = 0;
    for (int64_t j = 0; j < A; ++j) s += p[j] = std::exp(z[n * A + j] - mx);
    for (auto& v : p) v /= s;
    return p;
  }
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>&) const {
    double loss = 0;
    for (int64_t n = 0; n < N; ++n) {
      const Vec p = softmax(x[0], n);
      const auto a = static_cast<int64_t>(x[2][n]);
      double h = 0;
      for (double pj : p) h -= (pj + eps) * std::log(pj + eps);
      const double adv = x[3][n] - x[1][n];
      loss +=
          -std::log(p[a] + eps) * adv - beta * h + c * (x[1][n] - x[3][n]) * (x[1][n] - x[3][n]);
    }
    return {Vec{loss}};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>&,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(N * A), Vec(N), Vec{}, Vec{}};
    for (int64_t n = 0; n < N; ++n) {
      const Vec p = softmax(x[0], n);
      const auto a = static_cast<int64_t>(x[2][n]);
      const double adv = x[3][n] - x[1][n];
      // d/dz_i of -log q_a * adv: -adv (p_i [i = a] - p_a p_i) / q_a; of -beta H with
      // dH/dq_j = -(log q_j + 1): beta sum_j (log q_j + 1) p_j ([i = j] - p_i).
      for (int64_t i = 0; i < A; ++i) {
        double d = -adv * ((i == a ? p[i] : 0.0) - p[a] * p[i]) / (p[a] + eps);
        for (int64_t j = 0; j < A; ++j) {
          d += beta * (std::log(p[j] + eps) + 1) * p[j] * ((i == j ? 1.0 : 0.0) - p[i]);
        }
        g.dx[0][n * A + i] = dy[0][0] * d;
      }
      g.dx[1][n] = dy[0][0] * 2 * c * (x[1][n] - x[3][n]);  // adv is a constant
    }
    return g;
  }
};

struct AcCase {
  std::string name;
  int64_t N, A;
  // Finite differences check dlogits; the value's gradient, which leaves the advantage
  // constant, is not the derivative of the forward and is checked against the reference
  // and by ValueGradientIgnoresTheAdvantage below.
  bool value_grad = false;
};

class ActorCriticTest : public LayerTest<AcCase> {};

TEST_P(ActorCriticTest, MatchesFloat64Reference) {
  const AcCase& tc = tcase();
  auto layer = make("a3c_loss", ActorCriticLossConfig{},
                    {TensorDesc{Shape{tc.N, tc.A}}, TensorDesc{Shape{tc.N, 1}},
                     TensorDesc{Shape{tc.N}, DType::kI32}, TensorDesc{Shape{tc.N}}});
  EXPECT_EQ(layer->output_descs()[0].shape, (Shape{1}));
  RefActorCritic ref{tc.N, tc.A};
  LayerCheckOptions opt;
  opt.op_class = OpClass::kTranscendental;
  opt.x_lo = -2;
  opt.x_hi = 2;
  opt.int_lo = 0;
  opt.int_hi = tc.A;
  opt.x_needs_grad = {true, tc.value_grad, false, false};
  opt.run_fd = !tc.value_grad;
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ActorCriticTest,
    on_all_targets(::testing::Values(AcCase{"one_row", 1, 4}, AcCase{"a3c_rollout", 5, 4},
                                     AcCase{"atari_18_actions", 7, 18}, AcCase{"many_rows", 300, 6},
                                     AcCase{"with_value_grad", 5, 4, true})),
    CaseOnTarget());

// The advantage is not back-propagated: dvalue is 2c (v - R) whatever the logits and actions.
TEST(ActorCriticLoss, ValueGradientIgnoresTheAdvantage) {
  auto be = make_cpu_backend();
  const int64_t N = 5, A = 4;
  auto layer = make_layer(*be, "loss", ActorCriticLossConfig{},
                          {TensorDesc{Shape{N, A}}, TensorDesc{Shape{N, 1}},
                           TensorDesc{Shape{N}, DType::kI32}, TensorDesc{Shape{N}}});
  const Vec v{0.5, -1, 2, 0, 0.25}, R{1, 1, -1, 0.5, 0};
  for (int trial = 0; trial < 2; ++trial) {
    std::vector<Tensor> x;
    for (const TensorDesc& d : layer->input_descs())
      x.push_back(be->empty(d, MemCategory::kDynamic));
    from_host(*be, x[0], random_vec(N * A, 10 + trial, -3, 3));
    from_host(*be, x[1], v);
    from_host(*be, x[2], trial == 0 ? Vec{0, 1, 2, 3, 0} : Vec{3, 3, 1, 0, 2});
    from_host(*be, x[3], R);
    Tensor y = be->empty(layer->output_descs()[0], MemCategory::kDynamic);
    Tensor dy = be->empty(Shape{1}, MemCategory::kDynamic);
    be->fill(dy, 1.f);
    Tensor dz = be->empty(Shape{N, A}, MemCategory::kDynamic);
    Tensor dv = be->empty(Shape{N, 1}, MemCategory::kDynamic);
    std::vector<const Tensor*> xp{&x[0], &x[1], &x[2], &x[3]};
    std::vector<Tensor*> yw{&y};
    std::vector<Tensor*> dxw{&dz, &dv, nullptr, nullptr};
    std::vector<const Tensor*> dyp{&dy}, yp{&y};
    layer->forward(yw, xp);
    layer->backward(dxw, dyp, xp, yp);
    const Vec got = to_host(*be, dv);
    for (int64_t n = 0; n < N; ++n) EXPECT_NEAR(got[n], 2 * (v[n] - R[n]), 1e-6) << "row " << n;
  }
}

TEST(ActorCriticLoss, OutOfRangeActionThrowsNamingRow) {
  auto be = make_cpu_backend();
  auto layer = make_layer(*be, "loss", ActorCriticLossConfig{},
                          {TensorDesc{Shape{3, 4}}, TensorDesc{Shape{3, 1}},
                           TensorDesc{Shape{3}, DType::kI32}, TensorDesc{Shape{3}}});
  expect_error(
      [&] {
        run_forward(*be, *layer, {Vec(12, 0.1), Vec(3), Vec{0, 4, 1}, Vec(3)});
      },
      {"ActorCriticLoss 'loss'", "row 1", "action 4", "[0, 4)"});
}

TEST(ActorCriticLoss, ErrorsNameLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  ActorCriticLossConfig cfg;
  const TensorDesc z{Shape{5, 4}}, v{Shape{5, 1}}, a{Shape{5}, DType::kI32}, r{Shape{5}};
  expect_error([&] { make_layer(*be, "l", cfg, {z, v, a}); }, {"ActorCriticLoss 'l'", "4"});
  expect_error(
      [&] {
        make_layer(*be, "l", cfg, {z, TensorDesc{Shape{5}}, a, r});
      },
      {"ActorCriticLoss 'l'", "value", "(5, 1)", "(5)"});
  expect_error(
      [&] {
        make_layer(*be, "l", cfg, {z, v, TensorDesc{Shape{5}}, r});
      },
      {"ActorCriticLoss 'l'", "actions", "i32", "f32"});
  expect_error(
      [&] {
        make_layer(*be, "l", cfg, {z, v, a, TensorDesc{Shape{4}}});
      },
      {"ActorCriticLoss 'l'", "returns", "(4)"});
  cfg.entropy_beta = -1;
  expect_error(
      [&] {
        make_layer(*be, "l", cfg, {z, v, a, r});
      },
      {"ActorCriticLoss 'l'", "entropy_beta"});
}

TEST(ActorCriticLoss, FlopsMatchFormula) {
  const Flops f = actor_critic_loss_flops(Shape{5, 4});
  EXPECT_DOUBLE_EQ(f.fprop, 5 * (8 * 4 + 8));
  EXPECT_DOUBLE_EQ(f.dgrad, 5 * (12 * 4 + 4));
  EXPECT_DOUBLE_EQ(f.wgrad, 0);
}

}  // namespace
}  // namespace tbd::test
