// tests/layers/dropout_test.cpp: Dropout against a float64 reference that rebuilds the mask
// from the shared hash on every target (so each backend draws the same mask bit for bit), plus
// mask statistics, mask reuse in backward, fresh masks per step, reruns, eval mode and blocked
// layouts.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/dropout.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

DropoutConfig dcfg(double p, uint64_t seed = 0) {
  DropoutConfig c;
  c.p = p;
  c.seed = seed;
  return c;
}

// y = x * keep / (1 - p) with keep from dropout_keep at step 0 (the layer's first forward);
// in eval mode y = x.
struct RefDropout {
  double p, scale;
  uint64_t base;
  uint32_t thr;
  bool training;
  RefDropout(const DropoutConfig& c, const std::string& name, bool train = true)
      : p(c.p),
        scale(c.p < 1 ? 1 / (1 - c.p) : 0.0),
        base(dropout_step_base(dropout_key(c, name), 0)),
        thr(dropout_threshold(c.p)),
        training(train) {}
  double m(int64_t i) const {
    if (!training) return 1.0;
    return dropout_keep(base, i, thr) ? scale : 0.0;
  }
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>&) const {
    Vec y(x[0].size());
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] * m(i);
    return {y};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>&,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(x[0].size())};
    for (std::size_t i = 0; i < dy[0].size(); ++i) g.dx[0][i] = dy[0][i] * m(i);
    return g;
  }
};

struct DropoutCase {
  std::string name;
  Shape x;
  double p;
  bool training = true;
  uint64_t seed = 7;
};

class DropoutTest : public LayerTest<DropoutCase> {};

// The mask is a counter-based hash of (seed, layer name, step, element): every backend draws
// the same one, so a target whose mask differs by one element fails here by O(1).
TEST_P(DropoutTest, MatchesFloat64Reference) {
  const DropoutCase& tc = tcase();
  auto layer = make("drop", dcfg(tc.p, tc.seed), {TensorDesc{tc.x}});
  EXPECT_EQ(layer->output_descs()[0].shape, tc.x);
  RefDropout ref(dcfg(tc.p, tc.seed), "drop", tc.training);
  LayerCheckOptions opt;
  opt.op_class = OpClass::kElementwise;
  opt.training = tc.training;
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DropoutTest,
    on_all_targets(::testing::Values(DropoutCase{"batch1_half", Shape{1, 7}, 0.5},
                                     DropoutCase{"odd_sizes_3d", Shape{3, 5, 17}, 0.1},
                                     DropoutCase{"rank4", Shape{2, 3, 4, 5}, 0.3},
                                     DropoutCase{"rows_7x37_seed42", Shape{7, 37}, 0.3, true, 42},
                                     DropoutCase{"eval_identity", Shape{7, 37}, 0.3, false, 42},
                                     DropoutCase{"p0_identity", Shape{4, 9}, 0.0},
                                     DropoutCase{"p1_drops_all", Shape{4, 9}, 1.0})),
    CaseOnTarget());

// One training step on host data: y, dx and the mask as seen through y / x.
struct Step {
  Vec x, y, dy, dx;
};
Step step(Backend& be, Layer& layer, uint64_t data_seed) {
  const TensorDesc& d = layer.input_descs()[0];
  Step s;
  s.x = random_vec(d.shape.numel(), data_seed, 0.5, 1.5);  // never 0: the mask is y / x
  s.dy = random_vec(d.shape.numel(), data_seed + 1);
  Tensor x = be.empty(d, MemCategory::kDynamic), y = be.empty(d, MemCategory::kFeatureMaps);
  Tensor dy = be.empty(d, MemCategory::kDynamic), dx = be.empty(d, MemCategory::kDynamic);
  from_host(be, x, s.x);
  from_host(be, dy, s.dy);
  const Tensor* xp[] = {&x};
  const Tensor* yp[] = {&y};
  const Tensor* dyp[] = {&dy};
  Tensor* yw[] = {&y};
  Tensor* dxw[] = {&dx};
  layer.forward(yw, xp);
  layer.backward(dxw, dyp, xp, yp);
  s.y = to_host(be, y);
  s.dx = to_host(be, dx);
  return s;
}

double dropped_fraction(const Vec& y) {
  double n = 0;
  for (double v : y) n += v == 0.0;
  return n / static_cast<double>(y.size());
}

// Every element is x * scale or 0, and backward applies exactly the forward's mask.
void expect_consistent(const Step& s, double p) {
  const double scale = 1 / (1 - p);
  int64_t bad = 0;
  for (std::size_t i = 0; i < s.y.size(); ++i) {
    bool kept = s.y[i] != 0.0;
    double want_y = kept ? static_cast<float>(s.x[i] * scale) : 0.0;
    double want_dx = kept ? s.dy[i] * scale : 0.0;
    bad += std::fabs(s.y[i] - want_y) > 1e-6 * std::fabs(want_y) ||
           std::fabs(s.dx[i] - want_dx) > 1e-6 + 1e-6 * std::fabs(want_dx);
  }
  EXPECT_EQ(bad, 0) << "elements whose y or dx disagree with the mask";
}

TEST(DropoutMask, FractionMatchesP) {
  auto be = make_cpu_backend();
  for (double p : {0.1, 0.3, 0.5}) {
    auto layer = make_layer(*be, "drop", dcfg(p, 3), {TensorDesc{Shape{200, 1001}}});
    Step s = step(*be, *layer, 11);
    // 200k Bernoulli draws: standard deviation <= 0.0012; allow 5 sigma.
    EXPECT_NEAR(dropped_fraction(s.y), p, 0.006) << "p = " << p;
    expect_consistent(s, p);
  }
}

TEST(DropoutMask, NewMaskEachForwardSameSequenceOnRerun) {
  auto be = make_cpu_backend();
  Shape xs{64, 33};
  auto a = make_layer(*be, "enc.0.drop", dcfg(0.2, 42), {TensorDesc{xs}});
  Step a1 = step(*be, *a, 5), a2 = step(*be, *a, 5);  // same data, next step
  EXPECT_NE(a1.y, a2.y) << "the mask must change every forward";
  expect_consistent(a2, 0.2);
  auto b = make_layer(*be, "enc.0.drop", dcfg(0.2, 42), {TensorDesc{xs}});
  Step b1 = step(*be, *b, 5), b2 = step(*be, *b, 5);
  EXPECT_EQ(a1.y, b1.y) << "a rerun with the same seed repeats the masks";
  EXPECT_EQ(a2.y, b2.y);
  EXPECT_EQ(a2.dx, b2.dx);
  // Another layer with the same seed draws an independent mask; another seed too.
  auto c = make_layer(*be, "enc.1.drop", dcfg(0.2, 42), {TensorDesc{xs}});
  EXPECT_NE(step(*be, *c, 5).y, a1.y);
  auto d = make_layer(*be, "enc.0.drop", dcfg(0.2, 43), {TensorDesc{xs}});
  EXPECT_NE(step(*be, *d, 5).y, a1.y);
}

// Layer::set_call_numbering (a data-parallel rank r of P numbers its forwards r, r + P, ...):
// two layers numbered (2, 0) and (2, 1) draw, between them, the masks of one default layer's
// forwards 0, 1, 2, 3, on every backend (the CUDA count lives in device memory).
class DropoutNumbering : public ::testing::TestWithParam<Target> {};

TEST_P(DropoutNumbering, RanksDrawTheInterleavedSequence) {
  Backend* be = nullptr;
  TBD_USE_TARGET(be, GetParam());
  const std::vector<TensorDesc> in{TensorDesc{Shape{16, 37}}};
  auto one = make_layer(*be, "dec.drop", dcfg(0.3, 9), in);
  std::vector<Step> seq;
  for (int s = 0; s < 4; ++s) seq.push_back(step(*be, *one, 5));
  for (uint64_t r = 0; r < 2; ++r) {
    auto rank = make_layer(*be, "dec.drop", dcfg(0.3, 9), in);
    rank->set_call_numbering(2, r);
    for (uint64_t c = 0; c < 2; ++c) {
      Step got = step(*be, *rank, 5);
      EXPECT_EQ(got.y, seq[2 * c + r].y) << "rank " << r << " of 2, forward " << c;
      EXPECT_EQ(got.dx, seq[2 * c + r].dx) << "rank " << r << " of 2, forward " << c;
    }
  }
  EXPECT_NE(seq[0].y, seq[1].y);
}
INSTANTIATE_TEST_SUITE_P(Targets, DropoutNumbering,
                         ::testing::Values(Target::kCpu, Target::kCudaFp32), TargetName());

TEST(DropoutMask, EvalIsIdentity) {
  auto be = make_cpu_backend();
  auto layer = make_layer(*be, "drop", dcfg(0.5), {TensorDesc{Shape{3, 50}}});
  layer->set_training(false);
  Step s = step(*be, *layer, 9);
  for (std::size_t i = 0; i < s.x.size(); ++i) {
    ASSERT_EQ(s.y[i], static_cast<double>(static_cast<float>(s.x[i])));
    ASSERT_EQ(s.dx[i], static_cast<double>(static_cast<float>(s.dy[i])));
  }
}

TEST(DropoutMask, BlockedLayoutIsElementwise) {
  auto be = make_cpu_backend();
  auto layer = make_layer(*be, "drop", dcfg(0.25, 1),
                          {TensorDesc{Shape{2, 32, 5, 3}, DType::kF32, Layout::kNChw16c}});
  EXPECT_EQ(layer->output_descs()[0].layout, Layout::kNChw16c);
  Step s = step(*be, *layer, 21);  // host data is plain; the layer sees blocked memory
  EXPECT_NEAR(dropped_fraction(s.y), 0.25, 0.05);
  expect_consistent(s, 0.25);
}

TEST(DropoutMask, SavedAsOneByteFeatureMapPerElement) {
  auto be = make_cpu_backend();
  std::size_t fm0 = be->allocator().stats().current_of(MemCategory::kFeatureMaps);
  auto layer = make_layer(*be, "drop", dcfg(0.1), {TensorDesc{Shape{10, 1000}}});
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kFeatureMaps) - fm0, 10000u);
  EXPECT_TRUE(layer->params().empty());
}

TEST(DropoutErrors, WrongRankNamesLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  expect_error([&] { make_layer(*be, "attn.drop", dcfg(0.1), {TensorDesc{Shape{}}}); },
               {"Dropout 'attn.drop'", "input x", "rank", "()"});
  expect_error(
      [&] {
        make_layer(*be, "attn.drop", dcfg(0.1),
                   {TensorDesc{Shape{2, 8, 4, 4}, DType::kF32, Layout::kNChw16c}});
      },
      {"Dropout 'attn.drop'", "input x", "C % 16", "(2, 8, 4, 4)"});
}

TEST(DropoutErrors, NonPositiveDimsAndBadConfigAreRejected) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "d", dcfg(0.1), {TensorDesc{Shape{4, 0}}});
      },
      {"Dropout 'd'", "x", "(4, 0)"});
  expect_error(
      [&] {
        make_layer(*be, "d", dcfg(1.5), {TensorDesc{Shape{4, 2}}});
      },
      {"Dropout 'd'", "p=1.5"});
  expect_error(
      [&] {
        make_layer(*be, "d", dcfg(-0.1), {TensorDesc{Shape{4, 2}}});
      },
      {"Dropout 'd'", "p=-0.1"});
  expect_error(
      [&] {
        make_layer(*be, "d", dcfg(0.1), {TensorDesc{Shape{4, 2}, DType::kI32}});
      },
      {"Dropout 'd'", "x", "i32"});
}

TEST(DropoutFlops, MatchesFormula) {
  Flops f = dropout_flops(Shape{32, 20, 512});
  const double e = 32.0 * 20 * 512;
  EXPECT_DOUBLE_EQ(f.fprop, 2 * e);
  EXPECT_DOUBLE_EQ(f.dgrad, e);
  EXPECT_DOUBLE_EQ(f.wgrad, 0.0);
}

}  // namespace
}  // namespace tbd::test
