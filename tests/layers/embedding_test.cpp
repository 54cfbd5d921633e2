// tests/layers/embedding_test.cpp: Embedding gather and scatter-add gradient (padding_idx,
// scale, repeated ids) against a float64 reference on every target, id checks and determinism.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>

#include "layers/embedding.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct EmbeddingCase {
  std::string name;
  Shape ids;
  EmbeddingConfig cfg;
};

EmbeddingConfig ecfg(int64_t v, int64_t d, int64_t pad = -1, double scale = 1.0) {
  EmbeddingConfig c;
  c.num_embeddings = v;
  c.dim = d;
  c.padding_idx = pad;
  c.scale = scale;
  return c;
}

struct RefEmbedding {
  EmbeddingConfig c;
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>& p) const {
    const int64_t M = static_cast<int64_t>(x[0].size()), D = c.dim;
    Vec y(M * D);
    for (int64_t i = 0; i < M; ++i) {
      int64_t id = static_cast<int64_t>(x[0][i]);
      for (int64_t d = 0; d < D; ++d) y[i * D + d] = c.scale * p[0][id * D + d];
    }
    return {y};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>& p,
                    const std::vector<Vec>& dy) const {
    const int64_t M = static_cast<int64_t>(x[0].size()), D = c.dim;
    RefGrads g;
    g.dx = {Vec()};
    g.dparams = {Vec(p[0].size(), 0.0)};
    for (int64_t i = 0; i < M; ++i) {
      int64_t id = static_cast<int64_t>(x[0][i]);
      if (id == c.padding_idx) continue;
      for (int64_t d = 0; d < D; ++d) g.dparams[0][id * D + d] += c.scale * dy[0][i * D + d];
    }
    return g;
  }
};

class EmbeddingTest : public LayerTest<EmbeddingCase> {};

TEST_P(EmbeddingTest, MatchesFloat64Reference) {
  const EmbeddingCase& tc = tcase();
  auto layer = make("emb", tc.cfg, {TensorDesc{tc.ids, DType::kI32}});
  std::vector<int64_t> ydims = tc.ids.dims();
  ydims.push_back(tc.cfg.dim);
  EXPECT_EQ(layer->output_descs()[0].shape, Shape(ydims));
  RefEmbedding ref{tc.cfg};
  LayerCheckOptions opt;
  opt.int_lo = 0;
  opt.int_hi = tc.cfg.num_embeddings;
  // padding_idx rows feed the output but get no gradient by definition, so finite differences
  // of the forward disagree there on purpose; the cases without padding check the reference.
  opt.run_fd = tc.cfg.padding_idx < 0;
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
}

INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingTest,
                         on_all_targets(::testing::Values(
                             EmbeddingCase{"batch1", Shape{1}, ecfg(7, 3)},
                             EmbeddingCase{"odd_sizes_2d", Shape{3, 5}, ecfg(11, 9)},
                             EmbeddingCase{"padding_scaled", Shape{4, 6}, ecfg(5, 13, 2, 2.5)},
                             EmbeddingCase{"padding2_scale2_3x5", Shape{3, 5}, ecfg(10, 6, 2, 2.0)},
                             EmbeddingCase{"repeated_ids", Shape{50}, ecfg(3, 33)},
                             EmbeddingCase{"wide_dim_padding0", Shape{2, 3}, ecfg(4, 70, 0)})),
                         CaseOnTarget());

struct RunResult {
  Vec y, dw;
};
// Forward and backward once on host data (weights, ids, dy); the gradient starts at zero.
RunResult run_once(Backend& be, Layer& layer, const Vec& w, const Vec& ids, const Vec& dy) {
  Tensor x = be.empty(layer.input_descs()[0], MemCategory::kDynamic);
  from_host(be, x, ids);
  from_host(be, layer.params()[0].value, w);
  be.fill(layer.params()[0].grad, 0.f);
  Tensor y = be.empty(layer.output_descs()[0], MemCategory::kFeatureMaps);
  Tensor g = be.empty(layer.output_descs()[0], MemCategory::kDynamic);
  from_host(be, g, dy);
  const Tensor* xp[] = {&x};
  Tensor* yw[] = {&y};
  const Tensor* yp[] = {&y};
  const Tensor* gp[] = {&g};
  Tensor* dx[] = {nullptr};
  layer.forward(yw, xp);
  layer.backward(dx, gp, xp, yp);
  return {to_host(be, y), to_host(be, layer.params()[0].grad)};
}

TEST(EmbeddingIds, OutOfRangeIdThrowsNamingElementAndId) {
  auto be = make_cpu_backend();
  auto layer = make_layer(*be, "tok", ecfg(10, 4), {TensorDesc{Shape{2, 3}, DType::kI32}});
  Vec w = random_vec(40, 1), dy = random_vec(24, 2);
  try {
    run_once(*be, *layer, w, Vec{0, 1, 2, 3, 10, 5}, dy);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("Embedding 'tok'"), std::string::npos) << m;
    EXPECT_NE(m.find("element 4 is 10"), std::string::npos) << m;
  }
  EXPECT_THROW(run_once(*be, *layer, w, Vec{0, -1, 2, 3, 4, 5}, dy), Error);
}

// Many repeats of few ids: the scatter-add is race-free and identical for any thread count.
TEST(EmbeddingDeterminism, GradientIdenticalForAnyThreadCount) {
  auto be = make_cpu_backend();
  const int64_t M = 4001, V = 5, D = 37;
  auto layer = make_layer(*be, "emb", ecfg(V, D, 1, 0.5), {TensorDesc{Shape{M}, DType::kI32}});
  Vec w = random_vec(V * D, 3), dy = random_vec(M * D, 4), ids(M);
  for (int64_t i = 0; i < M; ++i) ids[i] = static_cast<double>((i * 7) % V);
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  RunResult one = run_once(*be, *layer, w, ids, dy);
  omp_set_num_threads(std::max(2, saved));
  RunResult many = run_once(*be, *layer, w, ids, dy);
  omp_set_num_threads(saved);
  EXPECT_EQ(one.y, many.y);
  EXPECT_EQ(one.dw, many.dw);
  for (int64_t d = 0; d < D; ++d) EXPECT_EQ(one.dw[1 * D + d], 0.0) << "padding row";
  RefEmbedding ref{ecfg(V, D, 1, 0.5)};
  expect_close("dw", one.dw, ref.backward({ids}, {w}, {dy}).dparams[0], kF32Reduction);
}

TEST(EmbeddingParams, ShapeAndInit) {
  auto be = make_cpu_backend();
  EmbeddingConfig cfg = ecfg(1000, 64);
  cfg.init = Init::kXavierUniform;
  auto layer = make_layer(*be, "src_emb", cfg, {TensorDesc{Shape{8, 20}, DType::kI32}});
  ASSERT_EQ(layer->params().size(), 1u);
  const Param& w = layer->params()[0];
  EXPECT_EQ(w.name, "src_emb.weight");
  EXPECT_EQ(w.value.shape(), (Shape{1000, 64}));
  EXPECT_EQ(w.init, Init::kXavierUniform);
  EXPECT_EQ(w.fan_in, 64);
  EXPECT_EQ(w.fan_out, 1000);
}

TEST(EmbeddingErrors, WrongRankAndTypeNameLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "tok", ecfg(10, 4), {TensorDesc{Shape{}, DType::kI32}});
      },
      {"Embedding 'tok'", "input ids", "rank", "()"});
  expect_error(
      [&] {
        make_layer(*be, "tok", ecfg(10, 4), {TensorDesc{Shape{3, 4}}});
      },
      {"Embedding 'tok'", "input ids", "i32", "(3, 4) f32"});
}

TEST(EmbeddingErrors, NonPositiveDimsAndBadConfigAreRejected) {
  auto be = make_cpu_backend();
  TensorDesc ids{Shape{3, 4}, DType::kI32};
  expect_error(
      [&] {
        make_layer(*be, "e", ecfg(10, 4), {TensorDesc{Shape{3, 0}, DType::kI32}});
      },
      {"Embedding 'e'", "ids", "(3, 0)"});
  expect_error([&] { make_layer(*be, "e", ecfg(0, 4), {ids}); },
               {"Embedding 'e'", "num_embeddings=0"});
  expect_error([&] { make_layer(*be, "e", ecfg(10, -4), {ids}); }, {"Embedding 'e'", "dim=-4"});
  expect_error([&] { make_layer(*be, "e", ecfg(10, 4, 10), {ids}); },
               {"Embedding 'e'", "padding_idx=10"});
}

TEST(EmbeddingFlops, MatchesFormula) {
  Flops f = embedding_flops(ecfg(32000, 512), Shape{64, 25});
  EXPECT_DOUBLE_EQ(f.fprop, 0.0);
  EXPECT_DOUBLE_EQ(f.wgrad, 64.0 * 25 * 512);
  f = embedding_flops(ecfg(32000, 512, -1, 22.6), Shape{64, 25});
  EXPECT_DOUBLE_EQ(f.fprop, 64.0 * 25 * 512);
  EXPECT_DOUBLE_EQ(f.wgrad, 2 * 64.0 * 25 * 512);
}

}  // namespace
}  // namespace tbd::test
