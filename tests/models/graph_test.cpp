// tests/models/graph_test.cpp: gradients of a tensor with several consumers add up, unused
// paths are skipped, and tied parameters share value and gradient.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/activation.h"
#include "layers/embedding.h"
#include "layers/linear.h"
#include "layers/loss.h"
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
  auto bytes_before = be->allocator().stats().current_of(MemCategory::kWeights);
  g.finalize();
  EXPECT_EQ(g.num_params(), 21);  // counted once
  EXPECT_EQ(bytes_before, 21u * 4);  // the projection's own buffer was released by tie()
  EXPECT_EQ(proj_w.value.raw(), emb_w.value.raw());
  EXPECT_EQ(proj_w.grad.raw(), emb_w.grad.raw());
  EXPECT_EQ(g.params().size(), 1u);
}

}  // namespace
}  // namespace tbd::test
