// tests/models/models_test.cpp: ResNet-50 and Transformer: tiny configurations overfit one
// batch and rerun identically; the full configurations have their exact parameter counts;
// ResNet-50's memory breakdown at batch 16 is dominated by feature maps, not weights. Every
// model: its step's FLOPs are those of the phases that run.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backends.h"
#include "models/breakdown.h"
#include "models/registry.h"
#include "models/resnet50.h"
#include "models/transformer.h"
#include "tests/models/overfit.h"
#include "tests/models/tiny_models.h"

namespace tbd {
namespace {

TEST(ResNet50, TinyConfigurationOverfitsAndReruns) {
  auto be = make_cpu_backend();
  auto a = losses(*build_resnet50(*be, resnet50_tiny()), 100);
  expect_overfits(a);
  auto b = losses(*build_resnet50(*be, resnet50_tiny()), 100);
  EXPECT_EQ(a, b);
}

TEST(Transformer, TinyConfigurationOverfitsAndReruns) {
  auto be = make_cpu_backend();
  auto a = losses(*build_transformer(*be, transformer_tiny()), 100);
  expect_overfits(a);
  auto b = losses(*build_transformer(*be, transformer_tiny()), 100);
  EXPECT_EQ(a, b);
}

TEST(ResNet50, FullConfigurationHasExactParameterCount) {
  auto be = make_cpu_backend();
  ResNetOptions o;
  o.batch = 1;
  auto m = build_resnet50(*be, o);
  EXPECT_EQ(m->graph().num_params(), 25557032);
  EXPECT_EQ(resnet50_param_count(), 25557032);
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kWeights), 4u * 25557032);
}

TEST(Transformer, FullConfigurationHasDocumentedParameterCount) {
  auto be = make_cpu_backend();
  TransformerOptions o;
  o.batch = 1;
  o.spec.src_len = o.spec.tgt_len = 16;  // lengths do not change the count
  auto m = build_transformer(*be, o);
  EXPECT_EQ(transformer_param_count(TransformerSpec{}), 60524544);
  EXPECT_EQ(m->graph().num_params(), 60524544);
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kWeights), 4u * 60524544);
}

TEST(ResNet50, FeatureMapsDominateWeightsAtBatch16) {
  auto be = make_cpu_backend();
  ResNetOptions o;
  o.batch = 16;
  auto m = build_resnet50(*be, o);
  const MemoryStats s = be->allocator().stats();
  EXPECT_GT(s.current_of(MemCategory::kFeatureMaps), s.current_of(MemCategory::kWeights))
      << "feature maps " << s.current_of(MemCategory::kFeatureMaps) << " B, weights "
      << s.current_of(MemCategory::kWeights) << " B";
}

TEST(Models, RegisteredWithSweeps) {
  std::vector<std::string> names;
  for (const auto& e : model_registry()) names.push_back(e.name);
  EXPECT_NE(std::find(names.begin(), names.end(), "ResNet50"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "Transformer"), names.end());
}

TEST(Breakdown, RowsCoverEveryNodeAndAddUp) {
  auto be = make_cpu_backend();
  auto m = build_resnet50(*be, resnet50_tiny());
  StepBreakdown b = measure_breakdown(*m, 2);
  ASSERT_EQ(b.layers.size(), m->graph().nodes().size());
  EXPECT_GT(b.step_s, 0);
  double sum = b.zero_grad_s + b.optimizer_s;
  for (const auto& t : b.layers) {
    EXPECT_GE(t.fwd_s, 0) << t.name;
    EXPECT_GE(t.bwd_s, 0) << t.name;
    sum += t.fwd_s + t.bwd_s;
  }
  EXPECT_DOUBLE_EQ(b.sum_s, sum);
  // Convolutions compute their gradients in two calls and get a time for each (adding up to
  // the backward), except conv1's data gradient, which the step never computes (the image
  // needs none); BatchNorm's one oneDNN call gets none.
  int split = 0;
  for (const auto& t : b.layers) {
    if (t.kind == "Conv2d" && t.name == "conv1") {
      EXPECT_FALSE(t.dgrad_s);
      ASSERT_TRUE(t.wgrad_s);
      EXPECT_DOUBLE_EQ(t.bwd_s, *t.wgrad_s);
    } else if (t.kind == "Conv2d") {
      ASSERT_TRUE(t.dgrad_s && t.wgrad_s) << t.name;
      EXPECT_DOUBLE_EQ(t.bwd_s, *t.dgrad_s + *t.wgrad_s) << t.name;
      ++split;
    }
    if (t.kind == "BatchNorm2d") {
      EXPECT_FALSE(t.dgrad_s || t.wgrad_s) << t.name;
    }
  }
  EXPECT_GT(split, 0);
  // How close the rows come to the un-instrumented step is a performance figure, measured in
  // tbd_bench --tbd_breakdown (not asserted here: unit tests are not timed).
  std::string table = format_breakdown(b, "tiny ResNet");
  EXPECT_NE(table.find("layer1.0.conv2"), std::string::npos) << table;
  EXPECT_NE(table.find("(optimizer)"), std::string::npos) << table;
  EXPECT_NE(table.find("dgrad ms"), std::string::npos) << table;
}

// step_flops() and step_bytes() count the phases that run: the breakdown's rows (each node's
// executed phases per part of the step plan) plus the optimizer, zero_grad and input
// preparation add up to them, for every model (A3C's rollouts included: its plan has a
// forward-only part); and for ResNet-50 that is everything but the first convolution's data
// gradient (its input is the images).
class StepWork : public ::testing::TestWithParam<test::TinyModel> {};
TEST_P(StepWork, StepFlopsAreThePhasesThatRun) {
  auto be = make_cpu_backend();
  auto m = GetParam().build(*be);
  const StepBreakdown b = measure_breakdown(*m, 1);
  double flops = 0, bytes = 0;
  for (const LayerTiming& t : b.layers) {
    flops += t.flops.total();
    bytes += t.bytes.total();
  }
  EXPECT_DOUBLE_EQ(flops + b.optimizer_flops, m->step_flops());
  EXPECT_DOUBLE_EQ(bytes + b.optimizer_bytes + b.zero_grad_bytes + b.prepare_bytes,
                   m->step_bytes());
}
INSTANTIATE_TEST_SUITE_P(Models, StepWork, ::testing::ValuesIn(test::tiny_models()),
                         test::TinyModelName());

TEST(ResNet50, StepFlopsLeaveOutTheFirstConvolutionsDataGradient) {
  auto be = make_cpu_backend();
  auto m = build_resnet50(*be, resnet50_tiny());
  const Graph& g = m->graph();
  const Layer* conv1 = nullptr;
  for (const auto& n : m->graph().nodes())
    if (n.layer->name() == "conv1") conv1 = n.layer.get();
  ASSERT_NE(conv1, nullptr);
  ASSERT_GT(conv1->flops().dgrad, 0);
  EXPECT_DOUBLE_EQ(m->step_flops() + conv1->flops().dgrad,
                   g.flops().total() + m->optimizer().flops());
}

}  // namespace
}  // namespace tbd
