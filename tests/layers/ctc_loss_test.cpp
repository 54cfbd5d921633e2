// tests/layers/ctc_loss_test.cpp: CtcLoss against a brute-force float64 reference (every path
// of every sample enumerated and collapsed), with finite differences of that reference; a case
// worked out by hand; repeated labels, label length 0, the impossible case; the input checks.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/ctc_loss.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

class CtcLossTest : public TargetTest {};
INSTANTIATE_TEST_SUITE_P(Targets, CtcLossTest, ::testing::ValuesIn(kAllTargets), TargetName());

// Brute force: p_n = sum over all C^L paths whose collapse is the label of prod_t y_t(path_t);
// d(-log p_n)/dz_tk = y_tk - (sum of the matching paths' probabilities with path_t = k) / p_n.
// Impossible samples (p_n = 0) count 0 in the loss and get no gradient, as the layer documents.
struct RefCtc {
  int64_t T, N, C, S, blank = 0;
  Vec softmax(const Vec& z, int64_t t, int64_t n) const {
    Vec y(C);
    double m = -1e300, s = 0;
    for (int64_t k = 0; k < C; ++k) m = std::max(m, z[(t * N + n) * C + k]);
    for (int64_t k = 0; k < C; ++k) s += y[k] = std::exp(z[(t * N + n) * C + k] - m);
    for (double& e : y) e /= s;
    return y;
  }
  // Calls f(path, probability) for every path of sample n that collapses to its label.
  template <class F>
  void paths(const std::vector<Vec>& x, int64_t n, F&& f) const {
    const int64_t L = static_cast<int64_t>(x[2][n]), U = static_cast<int64_t>(x[3][n]);
    std::vector<Vec> y;
    for (int64_t t = 0; t < L; ++t) y.push_back(softmax(x[0], t, n));
    std::vector<int64_t> path(L, 0);
    int64_t total = 1;
    for (int64_t t = 0; t < L; ++t) total *= C;
    for (int64_t code = 0; code < total; ++code) {
      int64_t c = code;
      double prob = 1;
      std::vector<int64_t> out;
      for (int64_t t = 0; t < L; ++t) {
        path[t] = c % C, c /= C;
        prob *= y[t][path[t]];
        if (path[t] != blank && (t == 0 || path[t] != path[t - 1])) out.push_back(path[t]);
      }
      bool match = static_cast<int64_t>(out.size()) == U;
      for (int64_t u = 0; match && u < U; ++u) match = out[u] == x[1][n * S + u];
      if (match) f(path, prob);
    }
  }
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>&) const {
    double loss = 0;
    for (int64_t n = 0; n < N; ++n) {
      double p = 0;
      paths(x, n, [&](const std::vector<int64_t>&, double prob) { p += prob; });
      if (p > 0) loss += -std::log(p);
    }
    return {Vec{loss / N}};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>&,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(T * N * C, 0.0), Vec(), Vec(), Vec()};
    for (int64_t n = 0; n < N; ++n) {
      const int64_t L = static_cast<int64_t>(x[2][n]);
      double p = 0;
      Vec occ(L * C, 0.0);
      paths(x, n, [&](const std::vector<int64_t>& path, double prob) {
        p += prob;
        for (int64_t t = 0; t < L; ++t) occ[t * C + path[t]] += prob;
      });
      if (p == 0) continue;
      for (int64_t t = 0; t < L; ++t) {
        Vec y = softmax(x[0], t, n);
        for (int64_t k = 0; k < C; ++k)
          g.dx[0][(t * N + n) * C + k] = dy[0][0] / N * (y[k] - occ[t * C + k] / p);
      }
    }
    return g;
  }
};

struct CtcCase {
  std::string name;
  int64_t T, C, S;
  Vec labels, input_lengths, label_lengths;  // N = input_lengths.size()
};

TEST_P(CtcLossTest, MatchesBruteForceFloat64Reference) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(CtcLossConfig, be());
  const std::vector<CtcCase> cases{
      {"distinct_labels", 5, 4, 2, {1, 2, 3, 1}, {5, 4}, {2, 2}},
      // (1, 1) needs a blank between the repeats: 3 frames at least.
      {"repeated_labels", 5, 3, 3, {1, 1, 2, 2, 2, 0}, {5, 5}, {3, 2}},
      {"varied_lengths", 6, 3, 2, {1, 2, 2, 0, 1, 1}, {6, 3, 2}, {2, 1, 2}},
      {"label_length_0", 4, 3, 2, {0, 0, 1, 0}, {4, 3}, {0, 1}},
      // The second sample's (1, 1) cannot fit in 2 frames: loss 0, gradient 0.
      {"impossible", 4, 3, 2, {2, 1, 1, 1}, {4, 2}, {2, 2}},
      {"zero_frames", 3, 3, 1, {1, 2}, {3, 0}, {1, 0}},
  };
  for (const CtcCase& tc : cases) {
    SCOPED_TRACE(tc.name);
    const int64_t N = static_cast<int64_t>(tc.input_lengths.size());
    auto layer = make("ctc", CtcLossConfig{},
                      {TensorDesc{Shape{tc.T, N, tc.C}}, TensorDesc{Shape{N, tc.S}, DType::kI32},
                       TensorDesc{Shape{N}, DType::kI32}, TensorDesc{Shape{N}, DType::kI32}});
    EXPECT_FALSE(layer->input_grad(1));
    RefCtc ref{tc.T, N, tc.C, tc.S};
    LayerCheckOptions opt;
    opt.op_class = OpClass::kReduction;
    opt.x_needs_grad = {true, false, false, false};
    opt.x_values[1] = tc.labels;
    opt.x_values[2] = tc.input_lengths;
    opt.x_values[3] = tc.label_lengths;
    opt.x_lo = -2.0, opt.x_hi = 2.0;
    check_layer(
        be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
        [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
  }
}

// Worked out by hand: T = 2, C = 2 (blank 0), label (1), all logits 0, so every y = 1/2. The
// paths that collapse to (1) are 11, 01 and 10: p = 3/4, loss = -log(3/4) = 0.2876821. The
// gradient at frame 0 is y - occupancy: class 1 is on 11 and 10 (1/2 of p = 3/4: 2/3 of the
// mass), so dz_01 = 1/2 - 2/3 = -1/6 and dz_00 = 1/2 - 1/3 = +1/6; frame 1 likewise.
TEST_P(CtcLossTest, SmallCaseWorkedOutByHand) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(CtcLossConfig, be());
  auto layer = make("ctc", CtcLossConfig{},
                    {TensorDesc{Shape{2, 1, 2}}, TensorDesc{Shape{1, 1}, DType::kI32},
                     TensorDesc{Shape{1}, DType::kI32}, TensorDesc{Shape{1}, DType::kI32}});
  std::vector<Tensor> x;
  const std::vector<Vec> values{{0, 0, 0, 0}, {1}, {2}, {1}};
  for (std::size_t k = 0; k < values.size(); ++k) {
    x.push_back(be().empty(layer->input_descs()[k], MemCategory::kDynamic));
    from_host(be(), x.back(), values[k]);
  }
  Tensor y = be().empty(layer->output_descs()[0], MemCategory::kDynamic);
  Tensor dy = be().empty(layer->output_descs()[0], MemCategory::kDynamic);
  Tensor dz = be().empty(layer->input_descs()[0], MemCategory::kDynamic);
  from_host(be(), dy, {1.0});
  const Tensor* xs[] = {&x[0], &x[1], &x[2], &x[3]};
  Tensor* ys[] = {&y};
  const Tensor* dys[] = {&dy};
  const Tensor* yc[] = {&y};
  Tensor* dxs[] = {&dz, nullptr, nullptr, nullptr};
  layer->forward(ys, xs);
  layer->backward(dxs, dys, xs, yc);
  be().synchronize();
  EXPECT_NEAR(to_host(be(), y)[0], -std::log(0.75), 1e-6);
  const Vec g = to_host(be(), dz);
  for (int t = 0; t < 2; ++t) {
    EXPECT_NEAR(g[t * 2 + 0], 1.0 / 6, 1e-6) << "frame " << t << " blank";
    EXPECT_NEAR(g[t * 2 + 1], -1.0 / 6, 1e-6) << "frame " << t << " class 1";
  }
}

TEST_P(CtcLossTest, BadInputsNameTheLayerTheArgumentAndTheValue) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(CtcLossConfig, be());
  expect_error(
      [&] {
        make("ctc", CtcLossConfig{},
             {TensorDesc{Shape{4, 2, 3}}, TensorDesc{Shape{3, 2}, DType::kI32},
              TensorDesc{Shape{2}, DType::kI32}, TensorDesc{Shape{2}, DType::kI32}});
      },
      {"CtcLoss 'ctc'", "labels", "(N, S)", "(3, 2)"});
  expect_error(
      [&] {
        make("ctc", CtcLossConfig{5},
             {TensorDesc{Shape{4, 2, 3}}, TensorDesc{Shape{2, 2}, DType::kI32},
              TensorDesc{Shape{2}, DType::kI32}, TensorDesc{Shape{2}, DType::kI32}});
      },
      {"CtcLoss 'ctc'", "blank=5"});
  if (be().kind() != DeviceKind::kCpu) return;  // the value checks below are the CPU's
  auto layer = make("ctc", CtcLossConfig{},
                    {TensorDesc{Shape{3, 1, 3}}, TensorDesc{Shape{1, 2}, DType::kI32},
                     TensorDesc{Shape{1}, DType::kI32}, TensorDesc{Shape{1}, DType::kI32}});
  auto run = [&](const Vec& labels, double in_len, double lab_len) {
    forward_values(be(), *layer, {Vec(9, 0.0), labels, {in_len}, {lab_len}});
  };
  expect_error([&] { run({1, 0}, 4, 1); }, {"CtcLoss 'ctc'", "input_lengths[0] = 4", "T=3"});
  expect_error([&] { run({1, 0}, 3, 3); }, {"CtcLoss 'ctc'", "label_lengths[0] = 3", "S=2"});
  expect_error([&] { run({1, 0}, 3, 2); }, {"CtcLoss 'ctc'", "labels[0, 1] = 0", "blank"});
  expect_error([&] { run({7, 1}, 3, 1); }, {"CtcLoss 'ctc'", "labels[0, 0] = 7", "C=3"});
}

}  // namespace
}  // namespace tbd::test
