// tests/layers/mlp_attention_test.cpp: MlpAttention against a float64 reference (with finite
// differences of it), on every target: full and masked lengths, one position, and the input
// checks.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/mlp_attention.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

class MlpAttentionTest : public TargetTest {};
INSTANTIATE_TEST_SUITE_P(Targets, MlpAttentionTest, ::testing::ValuesIn(kAllTargets), TargetName());

// x: query (N, A), keys (N, S, A), memory (N, S, D), lengths (N); p: v (A).
struct RefMlpAttention {
  int64_t N, S, A, D;
  // Per sample: t (S, A) and alpha (S) over the valid positions.
  void scores(const std::vector<Vec>& x, const Vec& v, int64_t n, Vec& t, Vec& alpha) const {
    const int64_t L = static_cast<int64_t>(x[3][n]);
    t.assign(S * A, 0.0);
    alpha.assign(S, 0.0);
    double mx = -1e300, sum = 0;
    for (int64_t s = 0; s < L; ++s) {
      double e = 0;
      for (int64_t a = 0; a < A; ++a) {
        t[s * A + a] = std::tanh(x[1][(n * S + s) * A + a] + x[0][n * A + a]);
        e += v[a] * t[s * A + a];
      }
      alpha[s] = e;
      mx = std::max(mx, e);
    }
    for (int64_t s = 0; s < L; ++s) sum += alpha[s] = std::exp(alpha[s] - mx);
    for (int64_t s = 0; s < L; ++s) alpha[s] /= sum;
  }
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>& p) const {
    Vec ctx(N * D, 0.0), t, alpha;
    for (int64_t n = 0; n < N; ++n) {
      scores(x, p[0], n, t, alpha);
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d) ctx[n * D + d] += alpha[s] * x[2][(n * S + s) * D + d];
    }
    return {ctx};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>& p,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(N * A, 0.0), Vec(N * S * A, 0.0), Vec(N * S * D, 0.0), Vec{}};
    g.dparams = {Vec(A, 0.0)};
    Vec t, alpha;
    for (int64_t n = 0; n < N; ++n) {
      scores(x, p[0], n, t, alpha);
      Vec dalpha(S, 0.0);
      double dot = 0;
      for (int64_t s = 0; s < S; ++s) {
        for (int64_t d = 0; d < D; ++d) {
          dalpha[s] += dy[0][n * D + d] * x[2][(n * S + s) * D + d];
          g.dx[2][(n * S + s) * D + d] = alpha[s] * dy[0][n * D + d];
        }
        dot += alpha[s] * dalpha[s];
      }
      for (int64_t s = 0; s < S; ++s) {
        const double de = alpha[s] * (dalpha[s] - dot);
        for (int64_t a = 0; a < A; ++a) {
          const double ts = t[s * A + a], gs = de * p[0][a] * (1 - ts * ts);
          g.dx[1][(n * S + s) * A + a] = gs;
          g.dx[0][n * A + a] += gs;
          g.dparams[0][a] += de * ts;
        }
      }
    }
    return g;
  }
};

struct MlpCase {
  std::string name;
  int64_t S, A, D;
  Vec lengths;  // N = lengths.size()
};

TEST_P(MlpAttentionTest, MatchesFloat64Reference) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(MlpAttentionConfig, be());
  const std::vector<MlpCase> cases{
      {"full_lengths", 5, 8, 6, {5, 5, 5}},
      {"masked", 7, 16, 12, {7, 3, 1, 5}},
      {"one_position", 1, 4, 3, {1, 1}},
      // Wide enough for the vector loops' main bodies and remainders.
      {"wide", 4, 37, 33, {2, 4}},
  };
  for (const MlpCase& tc : cases) {
    SCOPED_TRACE(tc.name);
    const int64_t N = static_cast<int64_t>(tc.lengths.size());
    auto layer = make("attn", MlpAttentionConfig{},
                      {TensorDesc{Shape{N, tc.A}}, TensorDesc{Shape{N, tc.S, tc.A}},
                       TensorDesc{Shape{N, tc.S, tc.D}}, TensorDesc{Shape{N}, DType::kI32}});
    EXPECT_FALSE(layer->input_grad(3));
    RefMlpAttention ref{N, tc.S, tc.A, tc.D};
    LayerCheckOptions opt;
    opt.op_class = OpClass::kTranscendental;
    opt.x_needs_grad = {true, true, true, false};
    opt.x_values[3] = tc.lengths;
    check_layer(
        be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
        [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
  }
}

TEST_P(MlpAttentionTest, BadInputsNameTheLayerTheArgumentAndTheValue) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(MlpAttentionConfig, be());
  const TensorDesc len{Shape{2}, DType::kI32};
  expect_error(
      [&] {
        make(
            "attn", MlpAttentionConfig{},
            {TensorDesc{Shape{2, 8}}, TensorDesc{Shape{2, 5, 4}}, TensorDesc{Shape{2, 5, 3}}, len});
      },
      {"MlpAttention 'attn'", "keys", "(2, 5, 4)", "A=8"});
  expect_error(
      [&] {
        make(
            "attn", MlpAttentionConfig{},
            {TensorDesc{Shape{2, 4}}, TensorDesc{Shape{2, 5, 4}}, TensorDesc{Shape{2, 6, 3}}, len});
      },
      {"MlpAttention 'attn'", "memory", "(2, 6, 3)", "S=5"});
  expect_error(
      [&] {
        make("attn", MlpAttentionConfig{},
             {TensorDesc{Shape{2, 4}}, TensorDesc{Shape{2, 5, 4}}, TensorDesc{Shape{2, 5, 3}},
              TensorDesc{Shape{2}}});
      },
      {"MlpAttention 'attn'", "lengths", "i32"});
  if (be().kind() != DeviceKind::kCpu) return;  // a kernel cannot throw: CUDA writes NaN
  auto layer =
      make("attn", MlpAttentionConfig{},
           {TensorDesc{Shape{2, 4}}, TensorDesc{Shape{2, 5, 4}}, TensorDesc{Shape{2, 5, 3}}, len});
  for (double bad : {0.0, 6.0}) {
    expect_error(
        [&] {
          forward_values(be(), *layer, {Vec(8, 0.1), Vec(40, 0.2), Vec(30, 0.3), {5, bad}});
        },
        {"MlpAttention 'attn'", "sample 1", "length " + std::to_string(int(bad)), "S=5"});
  }
}

}  // namespace
}  // namespace tbd::test
