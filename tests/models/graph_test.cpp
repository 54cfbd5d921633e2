// tests/models/graph_test.cpp: gradients of a tensor with several consumers add up, unused
// paths are skipped, tied parameters share value and gradient, parameters live in one arena.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/pool2d.h"
#include "layers/tensor_ops.h"
#include "models/graph.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

// h = x W^T + b; y = tanh(h) + sigmoid(h); L = mean((y - t)^2): h feeds two layers.
TEST(Graph, ForkedTensorGradientsAccumulate) {
  auto be = make_cpu_backend();
  Graph g(*be, 5);
  const int64_t M = 3, I = 4, O = 5;
  TensorId x = g.input("x", Shape{M, I});
  TensorId t = g.input("t", Shape{M, O});
  LinearConfig fc;
  fc.out_features = O;
  TensorId h = g.add1("fc", fc, {x});
  TensorId a = g.add1("tanh", ActivationConfig{ActKind::kTanh}, {h});
  TensorId s = g.add1("sigmoid", ActivationConfig{ActKind::kSigmoid}, {h});
  TensorId y = g.add1("sum", AddConfig{}, {a, s});
  g.set_loss(g.add1("mse", MseLossConfig{}, {y, t}));
  g.finalize();
  Vec xv = random_vec(M * I, 11), tv = random_vec(M * O, 12);
  from_host(*be, g.tensor(x), xv);
  from_host(*be, g.tensor(t), tv);
  Param& w = *g.params()[0];
  Param& b = *g.params()[1];
  Vec wv = to_host(*be, w.value), bv = to_host(*be, b.value);
  g.zero_grad();
  g.forward();
  g.backward();

  Vec dw(O * I, 0.0), db(O, 0.0);
  double loss = 0;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t o = 0; o < O; ++o) {
      double hv = bv[o];
      for (int64_t i = 0; i < I; ++i) hv += xv[m * I + i] * wv[o * I + i];
      double th = std::tanh(hv), sg = 1 / (1 + std::exp(-hv));
      double yv = th + sg, diff = yv - tv[m * O + o];
      loss += diff * diff / (M * O);
      double dy = 2 * diff / (M * O);
      double dh = dy * (1 - th * th) + dy * sg * (1 - sg);
      db[o] += dh;
      for (int64_t i = 0; i < I; ++i) dw[o * I + i] += dh * xv[m * I + i];
    }
  }
  EXPECT_NEAR(g.loss_value(), loss, 1e-5);
  expect_close("dW through a forked tensor", to_host(*be, w.grad), dw, kF32);
  expect_close("db through a forked tensor", to_host(*be, b.grad), db, kF32);
}

TEST(Graph, TiedParametersShareValueAndGradient) {
  auto be = make_cpu_backend();
  Graph g(*be, 1);
  TensorId ids = g.input("ids", Shape{6}, DType::kI32);
  EmbeddingConfig e;
  e.num_embeddings = 7;
  e.dim = 3;
  TensorId h = g.add1("emb", e, {ids});
  Param& emb_w = g.nodes().back().layer->params()[0];
  LinearConfig proj;
  proj.out_features = 7;
  proj.bias = false;
  TensorId logits = g.add1("proj", proj, {h});
  Param& proj_w = g.nodes().back().layer->params()[0];
  g.tie(proj_w, emb_w);
  TensorId labels = g.input("labels", Shape{6}, DType::kI32);
  g.set_loss(g.add1("loss", SoftmaxCrossEntropyConfig{}, {logits, labels}));
  // Parameters get storage when the graph binds its arena, in finalize().
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kWeights), 0u);
  g.finalize();
  EXPECT_EQ(g.num_params(), 21);  // counted once
  // One arena; the tied projection never had storage of its own.
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kWeights), 21u * 4);
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kWeightGrads), 21u * 4);
  EXPECT_EQ(proj_w.value.raw(), emb_w.value.raw());
  EXPECT_EQ(proj_w.grad.raw(), emb_w.grad.raw());
  EXPECT_EQ(g.params().size(), 1u);
}

// Every parameter's value and gradient is a view into the graph's two arenas: packed without
// padding (weights = 4 x parameters), the sizes that are multiples of 16 floats first and
// 64-byte aligned, and zero_grad is one fill.
TEST(Graph, ParametersLiveInOneArena) {
  auto be = make_cpu_backend();
  Graph g(*be, 1);
  TensorId x = g.input("x", Shape{2, 3, 8, 8});
  TensorId h = g.add1("conv", Conv2dConfig::square(16, 3, 1, 1, /*bias=*/true), {x});
  h = g.add1("pool", GlobalAvgPool2dConfig{}, {h});
  LinearConfig fc;
  fc.out_features = 5;  // weight (5, 16): 80 floats; bias 5 floats (not a multiple of 16)
  h = g.add1("fc", fc, {h});
  TensorId labels = g.input("labels", Shape{2}, DType::kI32);
  g.set_loss(g.add1("loss", SoftmaxCrossEntropyConfig{}, {h, labels}));
  g.finalize();
  const ParamArena& a = g.arena();
  const int64_t n = g.num_params();
  ASSERT_EQ(n, 16 * 3 * 9 + 16 + 80 + 5);
  EXPECT_EQ(a.values.numel(), n);
  EXPECT_EQ(a.grads.numel(), n);
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kWeights), 4u * n);
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kWeightGrads), 4u * n);
  const char* base = static_cast<const char*>(a.values.raw());
  for (Param* p : g.params()) {
    const char* v = static_cast<const char*>(p->value.raw());
    ASSERT_GE(v, base) << p->name;
    ASSERT_LE(v + p->value.bytes(), base + a.values.bytes()) << p->name;
    EXPECT_EQ(static_cast<const char*>(p->grad.raw()) - static_cast<const char*>(a.grads.raw()),
              v - base)
        << p->name;
    if (p->value.numel() % 16 == 0) {
      EXPECT_EQ((v - base) % 64, 0) << p->name;
    }
  }
  be->fill(a.grads, 3.f);
  g.zero_grad();
  for (Param* p : g.params()) {
    for (double v : to_host(*be, p->grad)) ASSERT_EQ(v, 0.0) << p->name;
  }
}

}  // namespace
}  // namespace tbd::test
