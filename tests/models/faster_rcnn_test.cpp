// tests/models/faster_rcnn_test.cpp: Faster R-CNN has the note's parameter counts (stored and
// trained); its frozen stem runs no backward; a tiny configuration (small backbone, 64x64
// image, 3 classes, 2 anchors per cell) trains all four losses down within 100 steps and reruns
// identically.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "backends/backends.h"
#include "models/faster_rcnn.h"
#include "models/registry.h"
#include "tests/support/check.h"

namespace tbd {
namespace {

TEST(FasterRcnn, ParameterCountsAreTheNotes) {
  FasterRcnnOptions o;
  // ../shared/notes/tbd_models.md 3.3: MXNet's variant, 47,454,565 stored, 47,134,367 trained
  // (conv0, stage 1 and every BatchNorm fixed).
  EXPECT_EQ(faster_rcnn_param_count(o, false), 47454565);
  EXPECT_EQ(faster_rcnn_param_count(o, true), 47134367);
  EXPECT_EQ(faster_rcnn_feature_size(o), (std::pair<int64_t, int64_t>{38, 63}));

  auto be = make_cpu_backend();
  o.build_only = true;
  auto m = build_faster_rcnn(*be, o);
  EXPECT_EQ(m->graph().num_params(), 47454565);
  int64_t trained = 0;
  for (const Graph::Node& n : m->graph().nodes()) {
    if (!n.layer->param_grads()) continue;
    for (const Param& p : n.layer->params()) trained += p.value.numel();
  }
  EXPECT_EQ(trained, 47134367);
}

// Per step, the four loss terms.
std::vector<std::map<std::string, float>> train(FasterRcnn& m, int steps) {
  std::vector<std::map<std::string, float>> out;
  for (int i = 0; i < steps; ++i) {
    m.train_step();
    std::map<std::string, float> t;
    for (auto& [name, v] : m.loss_terms()) t[name] = v;
    out.push_back(t);
  }
  return out;
}

TEST(FasterRcnn, FrozenStemRunsNoBackward) {
  auto be = make_cpu_backend();
  auto m = build_faster_rcnn(*be, faster_rcnn_tiny());
  Graph& g = m->graph();
  for (std::size_t i = 0; i < g.nodes().size(); ++i) {
    const std::string& name = g.nodes()[i].layer->name();
    const bool stem = name.rfind("bn_data", 0) == 0 || name.rfind("conv0", 0) == 0 ||
                      name.rfind("bn0", 0) == 0 || name.rfind("pool0", 0) == 0 ||
                      name.rfind("stage1.", 0) == 0;
    if (stem) {
      EXPECT_EQ(g.executed_flops(i).bwd(), 0.0) << name;
    }
    // Every BatchNorm is frozen: no parameter gradient anywhere.
    if (std::string(g.nodes()[i].layer->kind()) == "BatchNorm2d") {
      EXPECT_FALSE(g.nodes()[i].layer->param_grads()) << name;
    }
  }
  // The first trained layer of stage 2 takes weight gradients but no data gradient.
  for (std::size_t i = 0; i < g.nodes().size(); ++i) {
    if (g.nodes()[i].layer->name() != "stage2.unit1.conv1") continue;
    EXPECT_GT(g.executed_flops(i).wgrad, 0.0);
    EXPECT_EQ(g.executed_flops(i).dgrad, 0.0);
  }
}

// All four losses fall within 100 steps on one fixed batch, and a rerun repeats every term bit
// for bit. The anchors and RoIs are sampled anew every step, so each term's mean over steps
// 1-20 is compared with its mean over steps 81-100. The detector's box loss is the one that
// decides the bar: while the RPN is still random the detector's foreground RoIs are mostly the
// ground truth itself (appended to the proposals, delta 0), and the loss rises again as the RPN
// starts proposing near-misses; it falls for good once the RPN's proposals settle. At channels
// / 8 that took 100 to 240 steps; at / 4 (the tiny configuration) the RPN settles sooner: over
// seeds 0-15, 15 meet this bar (seed 8 does not: its box loss climbs back at steps 50-80).
// Seed 14, the configuration's, ends at 0.1-2.5% of its start (the box loss the highest).
TEST(FasterRcnn, TinyConfigurationTrainsAllFourLossesAndReruns) {
  constexpr int kSteps = 100, kFirst = 20, kLast = 20;
  auto be = make_cpu_backend();
  auto a = train(*build_faster_rcnn(*be, faster_rcnn_tiny()), kSteps);
  for (const char* term : {"rpn_cls", "rpn_bbox", "rcnn_cls", "rcnn_bbox"}) {
    double first = 0, last = 0;
    for (int i = 0; i < kSteps; ++i) {
      const float v = a[i].at(term);
      ASSERT_TRUE(std::isfinite(v)) << term << " at step " << i;
      if (i < kFirst) first += v / kFirst;
      if (i >= kSteps - kLast) last += v / kLast;
    }
    EXPECT_LT(last, 0.5 * first) << term << ": mean of the first " << kFirst << " steps " << first
                                 << ", of the last " << kLast << " " << last;
  }
  auto b = train(*build_faster_rcnn(*be, faster_rcnn_tiny()), kSteps);
  EXPECT_EQ(a, b);
}

TEST(FasterRcnn, BadOptionsAreNamed) {
  auto be = make_cpu_backend();
  FasterRcnnOptions o = faster_rcnn_tiny();
  o.num_gt = 9;
  test::expect_error([&] { build_faster_rcnn(*be, o); }, {"FasterRCNN", "gt=9", "[1, 4]"});
}

TEST(FasterRcnn, Registered) {
  bool found = false;
  for (const auto& e : model_registry()) {
    if (e.name != "FasterRCNN") continue;
    found = true;
    EXPECT_EQ(e.batches, (std::vector<int64_t>{1, 2, 4, 8}));
    EXPECT_EQ(e.param_keys, (std::vector<std::string>{"height", "width", "gt"}));
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace tbd
