// tests/layers/ctc_loss_test.cpp: CtcLoss against a brute-force float64 reference (every path
// of every sample enumerated and collapsed), with finite differences of that reference; longer
// sequences and wider alphabets against a float64 alpha-beta reference (itself checked against
// the brute force); a case worked out by hand; repeated labels, label length 0, the impossible
// case; bit-identical reruns; the input checks.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>

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

// The alpha-beta recursion in float64, written plainly (log space, every extended position at
// every frame): the reference for sequences too long to enumerate. Checked against RefCtc below.
struct DpCtc {
  int64_t T, N, C, S, blank = 0;
  static constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  static double lse(std::initializer_list<double> v) {
    double m = kNegInf, s = 0;
    for (double e : v) m = std::max(m, e);
    if (m == kNegInf) return kNegInf;
    for (double e : v) s += std::exp(e - m);
    return m + std::log(s);
  }
  // log p of sample n (-inf when impossible); with `occ`, also the occupancy of each class at
  // each frame, occ[t * C + k] = sum over extended positions s of class k of alpha beta / (y p).
  double sample(const std::vector<Vec>& x, int64_t n, Vec* occ) const {
    const int64_t L = static_cast<int64_t>(x[2][n]), U = static_cast<int64_t>(x[3][n]);
    const int64_t X = 2 * U + 1;
    if (L == 0) return U == 0 ? 0.0 : kNegInf;
    auto ext = [&](int64_t s) {
      return s % 2 == 0 ? blank : static_cast<int64_t>(x[1][n * S + s / 2]);
    };
    Vec lsm(L * C);
    for (int64_t t = 0; t < L; ++t) {
      const double* z = &x[0][(t * N + n) * C];
      double m = kNegInf, sum = 0;
      for (int64_t k = 0; k < C; ++k) m = std::max(m, z[k]);
      for (int64_t k = 0; k < C; ++k) sum += std::exp(z[k] - m);
      for (int64_t k = 0; k < C; ++k) lsm[t * C + k] = z[k] - m - std::log(sum);
    }
    auto skip = [&](int64_t from, int64_t to) {  // may a path jump from `from` to `to` = from+2?
      return ext(to) != blank && ext(to) != ext(from);
    };
    Vec alpha(L * X, kNegInf), beta(L * X, kNegInf);
    for (int64_t s = 0; s < std::min<int64_t>(X, 2); ++s) alpha[s] = lsm[ext(s)];
    for (int64_t t = 1; t < L; ++t) {
      for (int64_t s = 0; s < X; ++s) {
        const double* a = &alpha[(t - 1) * X];
        const double a1 = s >= 1 ? a[s - 1] : kNegInf;
        const double a2 = s >= 2 && skip(s - 2, s) ? a[s - 2] : kNegInf;
        alpha[t * X + s] = lse({a[s], a1, a2}) + lsm[t * C + ext(s)];
      }
    }
    const double logp = lse({alpha[L * X - 1], X > 1 ? alpha[L * X - 2] : kNegInf});
    if (occ == nullptr || logp == kNegInf) return logp;
    for (int64_t s = std::max<int64_t>(X - 2, 0); s < X; ++s) {
      beta[(L - 1) * X + s] = lsm[(L - 1) * C + ext(s)];
    }
    for (int64_t t = L - 2; t >= 0; --t) {
      for (int64_t s = 0; s < X; ++s) {
        const double* b = &beta[(t + 1) * X];
        const double b1 = s + 1 < X ? b[s + 1] : kNegInf;
        const double b2 = s + 2 < X && skip(s, s + 2) ? b[s + 2] : kNegInf;
        beta[t * X + s] = lse({b[s], b1, b2}) + lsm[t * C + ext(s)];
      }
    }
    occ->assign(L * C, 0.0);
    for (int64_t t = 0; t < L; ++t) {
      for (int64_t s = 0; s < X; ++s) {
        const double ab = alpha[t * X + s] + beta[t * X + s];
        if (ab != kNegInf) (*occ)[t * C + ext(s)] += std::exp(ab - lsm[t * C + ext(s)] - logp);
      }
    }
    return logp;
  }
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>&) const {
    double loss = 0;
    for (int64_t n = 0; n < N; ++n) {
      const double logp = sample(x, n, nullptr);
      if (logp != kNegInf) loss -= logp;
    }
    return {Vec{loss / N}};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>&,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(T * N * C, 0.0), Vec(), Vec(), Vec()};
    RefCtc sm{T, N, C, S, blank};
    for (int64_t n = 0; n < N; ++n) {
      Vec occ;
      if (sample(x, n, &occ) == kNegInf) continue;
      const int64_t L = static_cast<int64_t>(x[2][n]);
      for (int64_t t = 0; t < L; ++t) {
        const Vec y = sm.softmax(x[0], t, n);
        for (int64_t k = 0; k < C; ++k)
          g.dx[0][(t * N + n) * C + k] = dy[0][0] / N * (y[k] - occ[t * C + k]);
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

// Small enough to enumerate every path.
std::vector<CtcCase> small_cases() {
  return {
      {"distinct_labels", 5, 4, 2, {1, 2, 3, 1}, {5, 4}, {2, 2}},
      // (1, 1) needs a blank between the repeats: 3 frames at least.
      {"repeated_labels", 5, 3, 3, {1, 1, 2, 2, 2, 0}, {5, 5}, {3, 2}},
      {"varied_lengths", 6, 3, 2, {1, 2, 2, 0, 1, 1}, {6, 3, 2}, {2, 1, 2}},
      {"label_length_0", 4, 3, 2, {0, 0, 1, 0}, {4, 3}, {0, 1}},
      // The second sample's (1, 1) cannot fit in 2 frames: loss 0, gradient 0.
      {"impossible", 4, 3, 2, {2, 1, 1, 1}, {4, 2}, {2, 2}},
      {"zero_frames", 3, 3, 1, {1, 2}, {3, 0}, {1, 0}},
  };
}

// (N, S) labels in [1, C), every fourth a repeat of the one before (the case a path needs a
// blank between).
Vec repeating_labels(int64_t N, int64_t S, int64_t C) {
  Vec v(N * S);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t s = 0; s < S; ++s) {
      v[n * S + s] = s % 4 == 3 ? v[n * S + s - 1]
                                : static_cast<double>(1 + (5 * n + 3 * s + s * s) % (C - 1));
    }
  }
  return v;
}

// Longer than an alignment can be enumerated for, alphabets wider than a vector register (and
// not a multiple of one), extended labels of tens of positions.
std::vector<CtcCase> long_cases() {
  return {
      {"long_labels", 40, 6, 12, repeating_labels(3, 12, 6), {40, 33, 25}, {12, 9, 12}},
      {"wide_alphabet", 24, 37, 7, repeating_labels(2, 7, 37), {24, 17}, {7, 5}},
      // One sample of each kind: impossible (8 frames for 10 labels), label length 0, no
      // frames, and an ordinary one.
      {"every_kind", 30, 5, 10, repeating_labels(4, 10, 5), {8, 30, 0, 29}, {10, 0, 0, 10}},
  };
}

template <class Ref>
void check_ctc_case(Backend& be, Layer& layer, const CtcCase& tc, const Ref& ref) {
  LayerCheckOptions opt;
  opt.op_class = OpClass::kReduction;
  opt.x_needs_grad = {true, false, false, false};
  opt.x_values[1] = tc.labels;
  opt.x_values[2] = tc.input_lengths;
  opt.x_values[3] = tc.label_lengths;
  opt.x_lo = -2.0, opt.x_hi = 2.0;
  check_layer(
      be, layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
}

std::vector<TensorDesc> ctc_inputs(const CtcCase& tc) {
  const int64_t N = static_cast<int64_t>(tc.input_lengths.size());
  return {TensorDesc{Shape{tc.T, N, tc.C}}, TensorDesc{Shape{N, tc.S}, DType::kI32},
          TensorDesc{Shape{N}, DType::kI32}, TensorDesc{Shape{N}, DType::kI32}};
}

// One forward (and, with `dy`, one backward) on inputs of the given values: the loss, then
// dlogits when there was a backward.
Vec run_once(Backend& be, Layer& layer, const std::vector<Vec>& values, const double* dy) {
  std::vector<Tensor> x;
  for (std::size_t k = 0; k < values.size(); ++k) {
    x.push_back(be.empty(layer.input_descs()[k], MemCategory::kDynamic));
    from_host(be, x.back(), values[k]);
  }
  Tensor y = be.empty(layer.output_descs()[0], MemCategory::kDynamic);
  const Tensor* xs[] = {&x[0], &x[1], &x[2], &x[3]};
  Tensor* ys[] = {&y};
  layer.forward(ys, xs);
  Vec out;
  if (dy != nullptr) {
    Tensor dyt = be.empty(layer.output_descs()[0], MemCategory::kDynamic);
    Tensor dz = be.empty(layer.input_descs()[0], MemCategory::kDynamic);
    from_host(be, dyt, {*dy});
    const Tensor* dys[] = {&dyt};
    const Tensor* yc[] = {&y};
    Tensor* dxs[] = {&dz, nullptr, nullptr, nullptr};
    layer.backward(dxs, dys, xs, yc);
    out = to_host(be, dz);
  }
  be.synchronize();
  out.insert(out.begin(), to_host(be, y)[0]);
  return out;
}

TEST_P(CtcLossTest, MatchesBruteForceFloat64Reference) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(CtcLossConfig, be());
  for (const CtcCase& tc : small_cases()) {
    SCOPED_TRACE(tc.name);
    auto layer = make("ctc", CtcLossConfig{}, ctc_inputs(tc));
    EXPECT_FALSE(layer->input_grad(1));
    const int64_t N = static_cast<int64_t>(tc.input_lengths.size());
    check_ctc_case(be(), *layer, tc, RefCtc{tc.T, N, tc.C, tc.S});
  }
}

TEST_P(CtcLossTest, MatchesAlphaBetaFloat64ReferenceOnLongerSequences) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(CtcLossConfig, be());
  for (const CtcCase& tc : long_cases()) {
    SCOPED_TRACE(tc.name);
    auto layer = make("ctc", CtcLossConfig{}, ctc_inputs(tc));
    const int64_t N = static_cast<int64_t>(tc.input_lengths.size());
    check_ctc_case(be(), *layer, tc, DpCtc{tc.T, N, tc.C, tc.S});
  }
}

// The alpha-beta reference agrees with the enumeration of every path wherever both can run.
TEST(CtcLossReference, AlphaBetaMatchesBruteForce) {
  for (const CtcCase& tc : small_cases()) {
    SCOPED_TRACE(tc.name);
    const int64_t N = static_cast<int64_t>(tc.input_lengths.size());
    const RefCtc brute{tc.T, N, tc.C, tc.S};
    const DpCtc dp{tc.T, N, tc.C, tc.S};
    const std::vector<Vec> x{random_vec(tc.T * N * tc.C, 3, -2, 2), tc.labels, tc.input_lengths,
                             tc.label_lengths};
    const std::vector<Vec> dy{{0.7}};
    expect_close("loss", dp.forward(x, {})[0], brute.forward(x, {})[0], Tol{1e-12, 1e-12});
    expect_close("dlogits", dp.backward(x, {}, dy).dx[0], brute.backward(x, {}, dy).dx[0],
                 Tol{1e-12, 1e-12});
  }
}

// Forward and backward twice on the same inputs give the same bits (samples run in parallel
// on the CPU, but each sample's arithmetic and the sum over samples are in a fixed order).
TEST_P(CtcLossTest, RepeatsBitIdentically) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(CtcLossConfig, be());
  const CtcCase tc = long_cases()[2];
  auto layer = make("ctc", CtcLossConfig{}, ctc_inputs(tc));
  const int64_t N = static_cast<int64_t>(tc.input_lengths.size());
  const std::vector<Vec> values{random_vec(tc.T * N * tc.C, 9, -2, 2), tc.labels, tc.input_lengths,
                                tc.label_lengths};
  const double dy = 0.5;
  const std::vector<Vec> runs{run_once(be(), *layer, values, &dy),
                              run_once(be(), *layer, values, &dy)};
  EXPECT_TRUE(runs[0] == runs[1]) << "a second run gave other bits";
}

// On the CPU the samples run on as many threads as the layer was built for: one thread or
// several give the same bits.
TEST(CtcLossDeterminism, SameResultForAnyThreadCount) {
  auto be = make_cpu_backend();
  const CtcCase tc = long_cases()[0];
  const int64_t N = static_cast<int64_t>(tc.input_lengths.size());
  const std::vector<Vec> values{random_vec(tc.T * N * tc.C, 4, -3, 3), tc.labels, tc.input_lengths,
                                tc.label_lengths};
  const double dy = 1.0;
  const int saved = omp_get_max_threads();
  std::vector<Vec> runs;
  for (int threads : {1, std::max(2, saved)}) {
    omp_set_num_threads(threads);
    auto layer = make_layer(*be, "ctc", CtcLossConfig{}, ctc_inputs(tc));
    runs.push_back(run_once(*be, *layer, values, &dy));
  }
  omp_set_num_threads(saved);
  EXPECT_TRUE(runs[0] == runs[1]) << "1 thread and " << std::max(2, saved) << " differ";
}

// cuDNN's limits (docs/cuda.md) are the CUDA implementation's own: checked when it is built,
// naming the layer and the limit.
TEST_P(CtcLossTest, CudnnLimitsAreCheckedAtBuild) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(CtcLossConfig, be());
  if (be().kind() != DeviceKind::kCuda) GTEST_SKIP() << "cuDNN's limits bind only on CUDA";
  auto inputs = [](int64_t S) {
    return std::vector<TensorDesc>{
        TensorDesc{Shape{300, 2, 5}}, TensorDesc{Shape{2, S}, DType::kI32},
        TensorDesc{Shape{2}, DType::kI32}, TensorDesc{Shape{2}, DType::kI32}};
  };
  EXPECT_NO_THROW(make("ctc", CtcLossConfig{}, inputs(255)));
  expect_error([&] { make("ctc", CtcLossConfig{}, inputs(256)); },
               {"CtcLoss 'ctc'", "S=256", "255 labels per sample", "cuDNN"});
  expect_error([&] { make("ctc", CtcLossConfig{1}, inputs(4)); },
               {"CtcLoss 'ctc'", "blank=1", "cuDNN", "class 0"});
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
  const double dy = 1.0;
  const Vec out = run_once(be(), *layer, {{0, 0, 0, 0}, {1}, {2}, {1}}, &dy);
  EXPECT_NEAR(out[0], -std::log(0.75), 1e-6);
  const Vec g(out.begin() + 1, out.end());
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
  auto layer = make("ctc", CtcLossConfig{},
                    {TensorDesc{Shape{3, 1, 3}}, TensorDesc{Shape{1, 2}, DType::kI32},
                     TensorDesc{Shape{1}, DType::kI32}, TensorDesc{Shape{1}, DType::kI32}});
  auto run = [&](const Vec& labels, double in_len, double lab_len) {
    return run_once(be(), *layer, {Vec(9, 0.0), labels, {in_len}, {lab_len}}, nullptr)[0];
  };
  if (be().kind() != DeviceKind::kCpu) {
    // On CUDA the values live on the device: instead of an error (a synchronisation per step),
    // the loss is NaN.
    EXPECT_TRUE(std::isnan(run({1, 0}, 4, 1))) << "input length past T";
    EXPECT_TRUE(std::isnan(run({1, 0}, 3, 3))) << "label length past S";
    EXPECT_TRUE(std::isnan(run({1, 0}, 3, 2))) << "the blank as a label";
    EXPECT_TRUE(std::isnan(run({7, 1}, 3, 1))) << "a label past C";
    EXPECT_FALSE(std::isnan(run({1, 2}, 3, 2))) << "valid";
    return;
  }
  expect_error([&] { run({1, 0}, 4, 1); }, {"CtcLoss 'ctc'", "input_lengths[0] = 4", "T=3"});
  expect_error([&] { run({1, 0}, 3, 3); }, {"CtcLoss 'ctc'", "label_lengths[0] = 3", "S=2"});
  expect_error([&] { run({1, 0}, 3, 2); }, {"CtcLoss 'ctc'", "labels[0, 1] = 0", "blank"});
  expect_error([&] { run({7, 1}, 3, 1); }, {"CtcLoss 'ctc'", "labels[0, 0] = 7", "C=3"});
}

}  // namespace
}  // namespace tbd::test
