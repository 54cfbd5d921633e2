// tests/layers/random_interpolation_test.cpp: RandomInterpolation against a float64 reference
// that redraws alpha from the shared hash (so every target draws the same values), alpha's
// range and freshness per step, reruns, and its shape errors.
#include <gtest/gtest.h>

#include "layers/random_interpolation.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct InterpCase {
  std::string name;
  Shape x;
};

// y_n = x0_n + alpha_n (x1_n - x0_n), alpha of the layer's first forward (step 0).
struct RefInterp {
  int64_t N, S;
  uint64_t key;
  double alpha(int64_t n) const { return random_interpolation_alpha(key, 0, n); }
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>&) const {
    Vec y(N * S);
    for (int64_t k = 0; k < N * S; ++k) y[k] = x[0][k] + alpha(k / S) * (x[1][k] - x[0][k]);
    return {y};
  }
  RefGrads backward(const std::vector<Vec>&, const std::vector<Vec>&,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(N * S), Vec(N * S)};
    for (int64_t k = 0; k < N * S; ++k) {
      g.dx[0][k] = (1 - alpha(k / S)) * dy[0][k];
      g.dx[1][k] = alpha(k / S) * dy[0][k];
    }
    return g;
  }
};

class RandomInterpolationTest : public LayerTest<InterpCase> {};

TEST_P(RandomInterpolationTest, MatchesFloat64Reference) {
  const InterpCase& tc = tcase();
  RandomInterpolationConfig cfg;
  cfg.seed = 5;
  auto layer = make("gp.mix", cfg, {TensorDesc{tc.x}, TensorDesc{tc.x}});
  RefInterp ref{tc.x[0], tc.x.numel() / tc.x[0], random_interpolation_key(cfg, "gp.mix")};
  LayerCheckOptions opt;
  opt.op_class = OpClass::kElementwise;
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RandomInterpolationTest,
                         on_all_targets(::testing::Values(InterpCase{"batch1", Shape{1, 7}},
                                                          InterpCase{"images", Shape{3, 2, 5, 4}},
                                                          InterpCase{"many", Shape{300, 3}})),
                         CaseOnTarget());

// Every alpha in [0, 1), spread over it, and different in the next step; a rerun of the same
// seed draws the same sequence; numbered (2, 1) (Layer::set_call_numbering, data-parallel rank
// 1 of 2) a layer draws that sequence's steps 1 and 3.
TEST(RandomInterpolationDraws, UniformFreshPerStepAndReproducible) {
  auto be = make_cpu_backend();
  const int64_t N = 4000;
  RandomInterpolationConfig cfg;
  auto run = [&](int steps, uint64_t stride = 1, uint64_t offset = 0) {
    auto layer = make_layer(*be, "mix", cfg, {TensorDesc{Shape{N, 1}}, TensorDesc{Shape{N, 1}}});
    layer->set_call_numbering(stride, offset);
    Tensor a = be->empty(Shape{N, 1}, MemCategory::kDynamic);
    Tensor b = be->empty(Shape{N, 1}, MemCategory::kDynamic);
    Tensor y = be->empty(Shape{N, 1}, MemCategory::kDynamic);
    from_host(*be, a, Vec(N, 0.0));
    from_host(*be, b, Vec(N, 1.0));  // y = alpha
    std::vector<Vec> out;
    for (int s = 0; s < steps; ++s) {
      const Tensor* xs[] = {&a, &b};
      Tensor* ys[] = {&y};
      layer->forward(ys, xs);
      out.push_back(to_host(*be, y));
    }
    return out;
  };
  const std::vector<Vec> first = run(4);
  double mean = 0;
  int same = 0;
  for (int64_t n = 0; n < N; ++n) {
    EXPECT_GE(first[0][n], 0.0);
    EXPECT_LT(first[0][n], 1.0);
    mean += first[0][n] / N;
    same += first[0][n] == first[1][n];
  }
  EXPECT_NEAR(mean, 0.5, 0.03);  // 0.5 +- 6.5 standard errors of the mean of 4000 uniforms
  EXPECT_LT(same, 5);
  EXPECT_EQ(run(4), first);
  EXPECT_EQ(run(2, 2, 1), (std::vector<Vec>{first[1], first[3]}));
}

TEST(RandomInterpolationErrors, NameTheLayerAndTheShapes) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "gp.mix", RandomInterpolationConfig{},
                   {TensorDesc{Shape{2, 3}}, TensorDesc{Shape{2, 4}}});
      },
      {"RandomInterpolation 'gp.mix'", "(2, 3)", "(2, 4)", "same shape"});
  expect_error(
      [&] {
        make_layer(*be, "gp.mix", RandomInterpolationConfig{}, {TensorDesc{Shape{2, 3}}});
      },
      {"RandomInterpolation 'gp.mix'", "inputs"});
}

}  // namespace
}  // namespace tbd::test
