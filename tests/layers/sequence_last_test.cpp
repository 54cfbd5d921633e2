// tests/layers/sequence_last_test.cpp: SequenceLast against a float64 reference on every target:
// varied lengths, length 1 and T, feature dims beyond one, and the input checks.
#include <gtest/gtest.h>

#include "layers/sequence_last.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

class SequenceLastTest : public TargetTest {};
INSTANTIATE_TEST_SUITE_P(Targets, SequenceLastTest, ::testing::ValuesIn(kAllTargets), TargetName());

TEST_P(SequenceLastTest, MatchesFloat64Reference) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(SequenceLastConfig, be());
  struct Case {
    Shape x;
    Vec lengths;
  };
  for (const Case& tc : {Case{Shape{5, 3, 4}, {5, 1, 3}}, Case{Shape{4, 2, 2, 3}, {2, 4}},
                         Case{Shape{1, 2, 3}, {1, 1}}}) {
    SCOPED_TRACE(tc.x.to_string());
    const int64_t T = tc.x[0], N = tc.x[1], R = tc.x.numel() / (T * N);
    auto layer =
        make("last", SequenceLastConfig{}, {TensorDesc{tc.x}, TensorDesc{Shape{N}, DType::kI32}});
    EXPECT_FALSE(layer->input_grad(1));
    auto at = [&](const Vec& l, int64_t n, int64_t r) {
      return ((static_cast<int64_t>(l[n]) - 1) * N + n) * R + r;
    };
    LayerCheckOptions opt;
    opt.x_needs_grad = {true, false};
    opt.x_values[1] = tc.lengths;
    check_layer(
        be(), *layer,
        [&](const std::vector<Vec>& x, const std::vector<Vec>&) {
          Vec y(N * R);
          for (int64_t n = 0; n < N; ++n)
            for (int64_t r = 0; r < R; ++r) y[n * R + r] = x[0][at(x[1], n, r)];
          return std::vector<Vec>{y};
        },
        [&](const std::vector<Vec>& x, const std::vector<Vec>&, const std::vector<Vec>& dy) {
          RefGrads g;
          g.dx = {Vec(tc.x.numel(), 0.0), Vec{}};
          for (int64_t n = 0; n < N; ++n)
            for (int64_t r = 0; r < R; ++r) g.dx[0][at(x[1], n, r)] = dy[0][n * R + r];
          return g;
        },
        opt);
  }
}

TEST_P(SequenceLastTest, BadInputsNameTheLayerTheArgumentAndTheValue) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(SequenceLastConfig, be());
  expect_error(
      [&] {
        make("last", SequenceLastConfig{},
             {TensorDesc{Shape{4, 2, 3}}, TensorDesc{Shape{3}, DType::kI32}});
      },
      {"SequenceLast 'last'", "lengths", "(2) i32", "(3)"});
  expect_error(
      [&] {
        make("last", SequenceLastConfig{}, {TensorDesc{Shape{4}}, TensorDesc{}});
      },
      {"SequenceLast 'last'", "rank >= 2", "(4)"});
  if (be().kind() != DeviceKind::kCpu) return;  // a kernel cannot throw: CUDA writes NaN
  auto layer = make("last", SequenceLastConfig{},
                    {TensorDesc{Shape{4, 2, 3}}, TensorDesc{Shape{2}, DType::kI32}});
  expect_error(
      [&] {
        forward_values(be(), *layer, {Vec(24, 1.0), {2, 5}});
      },
      {"SequenceLast 'last'", "sample 1", "length 5", "T=4"});
}

}  // namespace
}  // namespace tbd::test
