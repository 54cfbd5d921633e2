// tests/models/graph_test.cpp: gradients of a tensor with several consumers add up, unused
// paths are skipped, tied parameters share value and gradient, parameters live in one arena.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backends.h"
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

// fc_a -> Detach -> fc_b -> MSE: no gradient reaches fc_a; fc_b trains.
TEST(Graph, DetachStopsTheGradient) {
  auto be = make_cpu_backend();
  Graph g(*be, 3);
  TensorId x = g.input("x", Shape{4, 3});
  TensorId t = g.input("t", Shape{4, 2});
  LinearConfig a;
  a.out_features = 5;
  TensorId h = g.add1("fc_a", a, {x});
  TensorId d = g.add1("detach", DetachConfig{}, {h});
  LinearConfig b;
  b.out_features = 2;
  TensorId y = g.add1("fc_b", b, {d});
  g.set_loss(g.add1("mse", MseLossConfig{}, {y, t}));
  EXPECT_TRUE(g.requires_grad(h));
  EXPECT_FALSE(g.requires_grad(d));
  g.keep(h);  // both read after the step
  g.keep(d);
  g.finalize();
  from_host(*be, g.tensor(x), random_vec(12, 1));
  from_host(*be, g.tensor(t), random_vec(8, 2));
  g.zero_grad();
  g.forward();
  g.backward();
  EXPECT_EQ(to_host(*be, g.tensor(d)), to_host(*be, g.tensor(h)));
  for (Param* p : g.params()) {
    Vec grad = to_host(*be, p->grad);
    double norm = 0;
    for (double v : grad) norm += v * v;
    if (p->name.rfind("fc_a", 0) == 0) {
      EXPECT_EQ(norm, 0.0) << p->name;
    } else {
      EXPECT_GT(norm, 0.0) << p->name;
    }
  }
}

// Frozen layers (Graph::set_param_grads) keep their gradients; the others train; a frozen layer
// with nothing else to compute (its input is data) is skipped.
TEST(Graph, FrozenLayersKeepTheirGradients) {
  auto be = make_cpu_backend();
  Graph g(*be, 4);
  TensorId x = g.input("x", Shape{4, 3});
  TensorId t = g.input("t", Shape{4, 2});
  LinearConfig a;
  a.out_features = 5;
  TensorId h = g.add1("critic.fc1", a, {x});
  h = g.add1("critic.relu", ActivationConfig{ActKind::kRelu}, {h});
  LinearConfig b;
  b.out_features = 2;
  TensorId y = g.add1("head.fc", b, {h});
  g.set_loss(g.add1("mse", MseLossConfig{}, {y, t}));
  g.finalize();
  from_host(*be, g.tensor(x), random_vec(12, 1));
  from_host(*be, g.tensor(t), random_vec(8, 2));
  EXPECT_EQ(g.set_param_grads("critic.", false), 1);
  expect_error([&] { g.set_param_grads("nothing.", false); }, {"no layer", "nothing."});
  auto norm_of = [&](const std::string& prefix) {
    double n = 0;
    for (Param* p : g.params()) {
      if (p->name.rfind(prefix, 0) != 0) continue;
      for (double v : to_host(*be, p->grad)) n += v * v;
    }
    return n;
  };
  g.zero_grad();
  g.forward();
  g.backward();
  EXPECT_EQ(norm_of("critic."), 0.0);
  EXPECT_GT(norm_of("head."), 0.0);
  g.set_param_grads("critic.", true);
  g.zero_grad();
  g.forward();
  g.backward();
  EXPECT_GT(norm_of("critic."), 0.0);
}

// Frozen before finalize(), a stem fed by data is pruned from backward: its outputs take no
// gradient, it runs no backward (no dgrad, no wgrad in the executed work), the head trains.
TEST(Graph, LayersFrozenBeforeFinalizeArePrunedFromBackward) {
  auto be = make_cpu_backend();
  Graph g(*be, 4);
  TensorId x = g.input("x", Shape{4, 3});
  TensorId t = g.input("t", Shape{4, 2});
  LinearConfig a;
  a.out_features = 5;
  TensorId h = g.add1("stem.fc", a, {x});
  TensorId r = g.add1("stem.relu", ActivationConfig{ActKind::kRelu}, {h});
  LinearConfig b;
  b.out_features = 2;
  TensorId y = g.add1("head.fc", b, {r});
  g.set_loss(g.add1("mse", MseLossConfig{}, {y, t}));
  EXPECT_EQ(g.set_param_grads("stem.", false), 1);
  g.finalize();
  EXPECT_FALSE(g.requires_grad(h));
  EXPECT_FALSE(g.requires_grad(r));
  EXPECT_TRUE(g.requires_grad(y));
  EXPECT_EQ(g.executed_flops(0).bwd(), 0.0);
  EXPECT_EQ(g.executed_flops(1).bwd(), 0.0);
  EXPECT_GT(g.executed_flops(2).wgrad, 0.0);
  EXPECT_EQ(g.executed_flops(2).dgrad, 0.0);  // nothing upstream takes a gradient
  from_host(*be, g.tensor(x), random_vec(12, 1));
  from_host(*be, g.tensor(t), random_vec(8, 2));
  g.zero_grad();
  g.forward();
  g.backward();
  double stem = 0, head = 0;
  for (Param* p : g.params()) {
    double& n = p->name.rfind("stem.", 0) == 0 ? stem : head;
    for (double v : to_host(*be, p->grad)) n += v * v;
  }
  EXPECT_EQ(stem, 0.0);
  EXPECT_GT(head, 0.0);
}

// A parameter that shares another's value (a worker's view of the global weights) reads it,
// keeps its own gradient, and is not counted twice.
TEST(Graph, SharedValueKeepsItsOwnGradient) {
  auto be = make_cpu_backend();
  LinearConfig fc;
  fc.out_features = 2;
  Graph global(*be, 1);
  TensorId gx = global.input("x", Shape{4, 3});
  TensorId gt = global.input("t", Shape{4, 2});
  global.set_loss(global.add1("mse", MseLossConfig{}, {global.add1("fc", fc, {gx}), gt}));
  Graph worker(*be, 2);
  TensorId wx = worker.input("x", Shape{4, 3});
  TensorId wt = worker.input("t", Shape{4, 2});
  TensorId wy = worker.add1("fc", fc, {wx});
  worker.set_loss(worker.add1("mse", MseLossConfig{}, {wy, wt}));
  Layer& gl = *global.nodes()[0].layer;
  Layer& wl = *worker.nodes()[0].layer;
  for (std::size_t k = 0; k < wl.params().size(); ++k) {
    worker.share_value(wl.params()[k], gl.params()[k]);
  }
  // Sharing needs the source's storage: finalize the global graph first.
  expect_error([&] { worker.finalize(); }, {"no storage yet", "finalize its graph first"});
  global.finalize();
  Graph w(*be, 2);
  TensorId x = w.input("x", Shape{4, 3});
  TensorId t = w.input("t", Shape{4, 2});
  w.set_loss(w.add1("mse", MseLossConfig{}, {w.add1("fc", fc, {x}), t}));
  Layer& l = *w.nodes()[0].layer;
  for (std::size_t k = 0; k < l.params().size(); ++k) w.share_value(l.params()[k], gl.params()[k]);
  w.finalize();
  EXPECT_EQ(w.num_params(), 0);      // the values are the global graph's
  EXPECT_EQ(w.params().size(), 2u);  // with gradients of their own
  EXPECT_EQ(l.params()[0].value.raw(), gl.params()[0].value.raw());
  EXPECT_NE(l.params()[0].grad.raw(), gl.params()[0].grad.raw());
  from_host(*be, w.tensor(x), random_vec(12, 1));
  from_host(*be, w.tensor(t), random_vec(8, 2));
  w.zero_grad();
  w.forward();
  w.backward();
  double own = 0, global_norm = 0;
  for (double v : to_host(*be, l.params()[0].grad)) own += v * v;
  for (double v : to_host(*be, gl.params()[0].grad)) global_norm += v * v;
  EXPECT_GT(own, 0.0);
  EXPECT_EQ(global_norm, 0.0);
}

// The graph asks each implementation which layouts it wants (InputLayouts): on the CPU, two
// convolution branches concatenated along channels stay in oneDNN's nChw16c into the next
// convolution, with no Reorder; a branch of 8 channels cannot, and the graph reorders.
TEST(Graph, BlockedDataFlowsThroughAConcatOfBranches) {
  auto count_reorders = [](Graph& g) {
    int n = 0;
    for (auto& node : g.nodes()) n += std::string(node.layer->kind()) == "Reorder";
    return n;
  };
  for (int64_t kb : {32, 8}) {
    auto be = make_cpu_backend();
    Graph g(*be, 1);
    TensorId x = g.input("x", Shape{2, 3, 8, 8});
    TensorId labels = g.input("labels", Shape{2}, DType::kI32);
    TensorId a = g.add1("branch_a", Conv2dConfig::square(16, 1), {x});
    TensorId b = g.add1("branch_b", Conv2dConfig::square(kb, 3, 1, 1), {x});
    ConcatConfig cat;
    cat.axis = 1;
    TensorId h = g.add1("concat", cat, {a, b});
    h = g.add1("conv", Conv2dConfig::square(16, 3, 1, 1), {h});
    h = g.add1("pool", GlobalAvgPool2dConfig{}, {h});
    LinearConfig fc;
    fc.out_features = 4;
    h = g.add1("fc", fc, {h});
    g.set_loss(g.add1("loss", SoftmaxCrossEntropyConfig{}, {h, labels}));
    TensorId cat_out = -1;
    for (auto& node : g.nodes()) {
      if (node.layer->name() == "concat") cat_out = node.outputs[0];
    }
    if (kb == 32) {
      EXPECT_EQ(count_reorders(g), 0) << "blocked branches";
      EXPECT_EQ(g.desc(cat_out).layout, Layout::kNChw16c);
    } else {
      // branch_b (8 channels) is row-major; branch_a is reordered to row-major for the concat,
      // whose 24 channels cannot be blocked by 16 either.
      EXPECT_EQ(count_reorders(g), 1) << "an 8-channel branch";
      EXPECT_EQ(g.desc(cat_out).layout, Layout::kRowMajor);
    }
    g.finalize();
    g.zero_grad();
    g.forward();
    g.backward();
    EXPECT_TRUE(std::isfinite(g.loss_value()));
  }
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
