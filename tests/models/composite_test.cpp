// tests/models/composite_test.cpp: a small conv-bn-relu-pool-linear-xent model trains:
// overfits one fixed batch, reruns bit-identically, allocates nothing in steady state, and
// its weights category is exactly 4 bytes per parameter; a model with its own step (two graphs,
// two optimizers, a frozen tied critic) trains both players.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backends.h"
#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/pool2d.h"
#include "layers/tensor_ops.h"
#include "models/model.h"
#include "tests/support/check.h"

namespace tbd {
namespace {

std::unique_ptr<Model> build_small_cnn(Backend& be, uint64_t seed) {
  auto m = std::make_unique<Model>(be, "SmallCNN", seed);
  Graph& g = m->graph();
  const int64_t N = 8, classes = 10;
  TensorId x = m->data_input("images", Shape{N, 3, 12, 12}, DType::kF32, -1, 1);
  TensorId y = m->data_input("labels", Shape{N}, DType::kI32, 0, classes);
  TensorId h = g.add1("conv1", Conv2dConfig::square(16, 3, 1, 1), {x});
  h = g.add1("bn1", BatchNorm2dConfig{}, {h});
  h = g.add1("relu1", ActivationConfig{ActKind::kRelu}, {h});
  h = g.add1("pool1", Pool2dConfig::square(PoolKind::kMax, 2, 2), {h});
  h = g.add1("flatten", ReshapeConfig{{N, 16 * 6 * 6}}, {h});
  LinearConfig fc;
  fc.out_features = classes;
  h = g.add1("fc", fc, {h});
  g.set_loss(g.add1("loss", SoftmaxCrossEntropyConfig{}, {h, y}));
  SgdConfig sgd;
  sgd.lr = 0.05;
  sgd.momentum = 0.9;
  m->finalize([&](std::vector<Param*> ps) { return make_optimizer(be, sgd, std::move(ps)); });
  m->set_samples_per_step(N);
  return m;
}

std::vector<float> train(Backend& be, int steps, uint64_t seed) {
  auto m = build_small_cnn(be, seed);
  std::vector<float> losses;
  for (int i = 0; i < steps; ++i) {
    m->train_step();
    losses.push_back(m->loss());
  }
  return losses;
}

TEST(SmallCnn, OverfitsOneBatch) {
  auto be = make_cpu_backend();
  std::vector<float> losses = train(*be, 100, 7);
  for (float l : losses) ASSERT_TRUE(std::isfinite(l));
  EXPECT_LE(losses.back(), 0.1f * losses.front())
      << "loss " << losses.front() << " -> " << losses.back() << " (needs a 90% drop)";
}

TEST(SmallCnn, RerunGivesIdenticalLosses) {
  auto be = make_cpu_backend();
  std::vector<float> a = train(*be, 20, 3);
  std::vector<float> b = train(*be, 20, 3);
  EXPECT_EQ(a, b);
}

TEST(SmallCnn, SteadyStateStepAllocatesNothing) {
  auto be = make_cpu_backend();
  auto m = build_small_cnn(*be, 1);
  m->train_step();  // warm-up
  auto before = be->allocator().stats().num_allocations;
  auto bytes = be->allocator().stats().total_current;
  for (int i = 0; i < 3; ++i) m->train_step();
  EXPECT_EQ(be->allocator().stats().num_allocations, before);
  EXPECT_EQ(be->allocator().stats().total_current, bytes);
}

TEST(SmallCnn, WeightsAreFourBytesPerParameter) {
  auto be = make_cpu_backend();
  auto m = build_small_cnn(*be, 1);
  // conv 16*3*3*3, bn 2*16, fc 576*10 + 10
  const int64_t params = 16 * 27 + 32 + 5760 + 10;
  EXPECT_EQ(m->graph().num_params(), params);
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kWeights),
            static_cast<std::size_t>(4 * params));
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kWeightGrads),
            static_cast<std::size_t>(4 * params));
  EXPECT_GT(be->allocator().stats().current_of(MemCategory::kOptimizerState), 0u);
}

TEST(SmallCnn, MisfedLayerErrorNamesLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  Graph g(*be);
  TensorId x = g.input("x", Shape{4, 10});
  try {
    g.add1("stem.conv", Conv2dConfig::square(8, 3), {x});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("Conv2d 'stem.conv'"), std::string::npos) << m;
    EXPECT_NE(m.find("x"), std::string::npos) << m;
    EXPECT_NE(m.find("(4, 10)"), std::string::npos) << m;
  }
  EXPECT_THROW(g.input("bad", Shape{4, 0}), Error);
  EXPECT_THROW(g.input("neg", Shape{-1, 3}), Error);
}

// A model that owns its training step, shaped like a GAN: a critic graph, and a generator graph
// whose critic layer is tied to the critic's (finalized first) with its parameter gradients off;
// an optimizer each; the step alternates them.
class TwoPlayer final : public Model {
 public:
  explicit TwoPlayer(Backend& be) : Model(be, "TwoPlayer", 1) {
    LinearConfig critic;
    critic.out_features = 1;
    Graph& c = graph();
    TensorId real = data_input("real", Shape{8, 4}, DType::kF32, 0.5, 1);
    TensorId c_target = data_input("critic_target", Shape{8, 1}, DType::kF32, 1, 1.0001);
    c.set_loss(c.add1("loss", MseLossConfig{}, {c.add1("critic", critic, {real}), c_target}));

    Graph& g = add_graph();
    LinearConfig gen;
    gen.out_features = 4;
    TensorId z = data_input(g, "z", Shape{8, 3}, DType::kF32, -1, 1);
    TensorId g_target = data_input(g, "generator_target", Shape{8, 1}, DType::kF32, 2, 2.0001);
    TensorId fake = g.add1("generator", gen, {z});
    TensorId score = g.add1("critic", critic, {fake});
    g.tie(g.nodes().back().layer->params()[0], c.nodes()[0].layer->params()[0]);
    g.tie(g.nodes().back().layer->params()[1], c.nodes()[0].layer->params()[1]);
    g.set_loss(g.add1("loss", MseLossConfig{}, {score, g_target}));
    g.set_param_grads("critic", false);  // the generator's step does not train the critic

    SgdConfig sgd;
    sgd.lr = 0.05;
    sgd.momentum = 0;
    c.finalize();  // first: the generator graph ties to its parameters
    g.finalize();
    add_optimizer(make_optimizer(be, sgd, c.params()));
    add_optimizer(make_optimizer(be, sgd, g.params()));
    fill_data();
  }

  void train_step() override {
    copy_inputs_from_host();
    for (std::size_t i = 0; i < 2; ++i) {
      graph(i).zero_grad();
      graph(i).forward();
      graph(i).backward();
      optimizer(i).step();
    }
  }
};

using test::to_host;
using test::Vec;

TEST(OwnTrainingStep, TwoGraphsTwoOptimizersFrozenTiedCritic) {
  auto be = make_cpu_backend();
  TwoPlayer m(*be);
  ASSERT_EQ(m.num_graphs(), 2u);
  ASSERT_EQ(m.num_optimizers(), 2u);
  EXPECT_EQ(m.graph(1).params().size(), 2u);  // the generator's own; the critic's are tied
  Param& cw = *m.graph(0).params()[0];
  EXPECT_EQ(m.graph(1).nodes()[1].layer->params()[0].value.raw(), cw.value.raw());
  double c0 = 0, g0 = 0;
  for (int step = 0; step < 60; ++step) {
    m.graph(0).zero_grad();
    m.graph(0).forward();
    m.graph(0).backward();
    m.optimizer(0).step();
    Vec critic_grad = to_host(*be, cw.grad);
    Vec critic_w = to_host(*be, cw.value);
    m.graph(1).zero_grad();
    m.graph(1).forward();
    m.graph(1).backward();
    // The generator's backward went through the critic's weights but left them and their
    // gradients as they were.
    ASSERT_EQ(to_host(*be, cw.grad), critic_grad);
    m.optimizer(1).step();
    ASSERT_EQ(to_host(*be, cw.value), critic_w);
    if (step == 0) c0 = m.graph(0).loss_value(), g0 = m.graph(1).loss_value();
  }
  EXPECT_LT(m.graph(0).loss_value(), 0.2 * c0);
  EXPECT_LT(m.graph(1).loss_value(), 0.5 * g0);
  m.train_step();  // the model's own step runs both
  EXPECT_TRUE(std::isfinite(m.graph(1).loss_value()));
}

}  // namespace
}  // namespace tbd
