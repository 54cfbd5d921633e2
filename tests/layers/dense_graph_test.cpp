// tests/layers/dense_graph_test.cpp: the dense layers together in a Graph, a tiny language
// model (Embedding -> LayerNorm -> Dropout -> Linear -> Linear tied to the embedding ->
// SoftmaxCrossEntropy), checking what the single-layer tests cannot: i32 graph inputs, the
// loss seed as dy, tied weights, zero allocations per step, a falling loss under plain SGD
// and bit-identical reruns (dropout masks included).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "models/graph.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

constexpr int64_t kN = 4, kT = 6, kV = 23, kD = 16;

struct TinyLm {
  std::unique_ptr<Backend> be = make_cpu_backend();
  Graph g{*be, /*seed=*/5};

  TinyLm() {
    TensorId ids = g.input("ids", Shape{kN, kT}, DType::kI32);
    TensorId labels = g.input("labels", Shape{kN, kT}, DType::kI32);
    EmbeddingConfig emb;
    emb.num_embeddings = kV;
    emb.dim = kD;
    emb.scale = 2.0;
    emb.padding_idx = 0;
    emb.init = Init::kXavierUniform;
    TensorId h = g.add1("emb", emb, {ids});
    h = g.add1("ln", LayerNormConfig{}, {h});
    DropoutConfig drop;
    drop.p = 0.1;
    drop.seed = 3;
    h = g.add1("drop", drop, {h});
    LinearConfig fc;
    fc.out_features = kD;
    h = g.add1("fc", fc, {h});
    LinearConfig out;
    out.out_features = kV;
    out.bias = false;
    TensorId logits = g.add1("out", out, {h});
    g.tie(g.nodes()[4].layer->params()[0], g.nodes()[0].layer->params()[0]);
    SoftmaxCrossEntropyConfig xent;
    xent.label_smoothing = 0.1;
    xent.ignore_index = -1;
    g.set_loss(g.add1("loss", xent, {logits, labels}));
    g.finalize();
    // A fixed batch: labels are the next id; the last position of each row is ignored.
    Vec idv(kN * kT), lab(kN * kT);
    for (int64_t i = 0; i < kN * kT; ++i) {
      idv[i] = static_cast<double>((i * 5 + 1) % kV);
      lab[i] = i % kT == kT - 1 ? -1.0 : static_cast<double>((i * 5 + 6) % kV);
    }
    from_host(*be, g.tensor(ids), idv);
    from_host(*be, g.tensor(labels), lab);
  }

  float step() {
    g.zero_grad();
    g.forward();
    g.backward();
    return g.loss_value();
  }
  void sgd(double lr) {  // on the host, outside any measured step
    for (Param* p : g.params()) {
      Vec v = to_host(*be, p->value), d = to_host(*be, p->grad);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] -= lr * d[i];
      from_host(*be, p->value, v);
    }
  }
};

TEST(DenseGraph, TiedParamsCountedOnce) {
  TinyLm m;
  EXPECT_EQ(m.g.params().size(), 5u);  // emb.weight, ln.gamma, ln.beta, fc.weight, fc.bias
  EXPECT_EQ(m.g.num_params(), kV * kD + 2 * kD + kD * kD + kD);
  EXPECT_EQ(m.be->allocator().stats().current_of(MemCategory::kWeights),
            static_cast<std::size_t>(4 * m.g.num_params()));
}

TEST(DenseGraph, StepsAllocateNothingAndLossFalls) {
  TinyLm m;
  float first = m.step();
  m.sgd(0.5);
  uint64_t allocs = m.be->allocator().stats().num_allocations;
  float last = first;
  for (int i = 0; i < 40; ++i) {
    last = m.step();
    EXPECT_EQ(m.be->allocator().stats().num_allocations, allocs) << "step " << i;
    m.sgd(0.5);
  }
  EXPECT_TRUE(std::isfinite(first));
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
}

TEST(DenseGraph, RerunGivesIdenticalLosses) {
  std::vector<float> a, b;
  for (auto* seq : {&a, &b}) {
    TinyLm m;
    for (int i = 0; i < 5; ++i) {
      seq->push_back(m.step());
      m.sgd(0.5);
    }
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a[0], a[1]);
}

}  // namespace
}  // namespace tbd::test
