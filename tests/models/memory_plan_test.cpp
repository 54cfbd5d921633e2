// tests/models/memory_plan_test.cpp: the static memory planner (models/memory_plan.h) and the
// graphs that use it: no two live buffers share a byte, the arena is what the allocator holds,
// nothing is allocated during a step, and a planned step gives the same bits as an unplanned one
// for every model.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/backends.h"
#include "layers/activation.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/mean_loss.h"
#include "layers/tensor_ops.h"
#include "models/graph.h"
#include "models/memory_plan.h"
#include "tests/models/tiny_models.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

TEST(MemoryPlan, DisjointLifetimesShareAndOverlappingOnesDoNot) {
  // 0 and 1 overlap at step 2; 2 starts after both end, so it reuses the lowest free offset.
  std::vector<PlanRequest> r{{100, 0, 2}, {200, 2, 4}, {150, 5, 6}};
  MemoryPlan p = plan_memory(r, 64);
  EXPECT_EQ(check_memory_plan(r, p), "");
  EXPECT_NE(p.offsets[0], p.offsets[1]);
  EXPECT_EQ(p.offsets[2], 0u);            // reuses the space of both
  EXPECT_EQ(p.arena_bytes, 256u + 100u);  // 1 at 0 (200 B), 0 at 256 (the next 64-B boundary)
  EXPECT_EQ(p.peak_live_bytes, 300u);
  EXPECT_EQ(p.total_bytes, 450u);
  for (std::size_t off : p.offsets) EXPECT_EQ(off % 64, 0u);
}

TEST(MemoryPlan, RandomIntervalsNeverConflictAndStayNearThePeak) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<PlanRequest> r(1 + rng() % 200);
    for (auto& q : r) {
      q.bytes = rng() % 5000;
      q.first = static_cast<int>(rng() % 100);
      q.last = q.first + static_cast<int>(rng() % 20);
    }
    MemoryPlan p = plan_memory(r, 64);
    ASSERT_EQ(check_memory_plan(r, p), "") << "trial " << trial;
    EXPECT_GE(p.arena_bytes, p.peak_live_bytes);
    EXPECT_LE(p.arena_bytes, p.total_bytes + 64 * r.size());
    EXPECT_EQ(plan_memory(r, 64).offsets, p.offsets);  // deterministic
  }
}

TEST(MemoryPlan, CheckerNamesAConflict) {
  std::vector<PlanRequest> r{{128, 0, 3}, {128, 3, 5}};
  MemoryPlan p;
  p.offsets = {0, 64};
  p.arena_bytes = 192;
  const std::string why = check_memory_plan(r, p);
  EXPECT_NE(why.find("buffers 0 and 1 overlap at bytes [64, 128)"), std::string::npos) << why;
  EXPECT_NE(why.find("step 3"), std::string::npos) << why;
  p.arena_bytes = 100;
  EXPECT_NE(check_memory_plan(r, p).find("past the arena"), std::string::npos);
  EXPECT_THROW(plan_memory({{8, 3, 2}}), Error);
}

// A graph with a fork (h feeds two layers) and a join: the planned arenas are exactly what the
// allocator holds (the gradient arena, every activation gradient and the fork's scratch, all
// its dynamic memory beyond the inputs; the value arena all its feature maps), so the planned
// peak is the tracked peak, and a step allocates nothing.
TEST(GraphMemoryPlan, ArenasAreTheTrackedMemoryAndStepsAllocateNothing) {
  for (bool planned : {true, false}) {
    auto be = make_cpu_backend();
    Graph g(*be, 3);
    g.set_memory_planning(planned);
    const int64_t M = 4, I = 8, O = 16;
    TensorId x = g.input("x", Shape{M, I});
    TensorId t = g.input("t", Shape{M, O});
    LinearConfig fc;
    fc.out_features = O;
    TensorId h = g.add1("fc1", fc, {x});
    TensorId a = g.add1("tanh", ActivationConfig{ActKind::kTanh}, {h});
    TensorId s = g.add1("sigmoid", ActivationConfig{ActKind::kSigmoid}, {h});
    TensorId y = g.add1("sum", AddConfig{}, {a, s});
    TensorId z = g.add1("fc2", fc, {y});
    g.set_loss(g.add1("mse", MseLossConfig{}, {z, t}));
    const MemoryStats built = be->allocator().stats();
    g.finalize();
    const MemoryStats ready = be->allocator().stats();
    const std::size_t dynamic =
        ready.current_of(MemCategory::kDynamic) - built.current_of(MemCategory::kDynamic);
    const std::size_t feature_maps =
        ready.current_of(MemCategory::kFeatureMaps) - built.current_of(MemCategory::kFeatureMaps);
    const std::size_t inputs = 4 * (M * I + M * O);
    if (planned) {
      ASSERT_EQ(check_memory_plan(g.gradient_requests(), g.gradient_plan()), "");
      // h, a, s, y, z and the loss, and one scratch for h's second consumer.
      EXPECT_EQ(g.gradient_requests().size(), 7u);
      EXPECT_EQ(dynamic, inputs + (g.gradient_plan().arena_bytes + 3) / 4 * 4);
      EXPECT_EQ(feature_maps, (g.value_plan().arena_bytes + 3) / 4 * 4);
      EXPECT_LT(g.gradient_plan().arena_bytes, g.gradient_plan().total_bytes);
      // Values (steps: forward of node i is i, its backward 11 - i, the end 12): h is read by
      // tanh and sigmoid, which save their outputs, not h, so it is free after the sigmoid's
      // forward; a lives to tanh's backward, y to fc2's (which saves its input), the loss to
      // the end.
      ASSERT_EQ(check_memory_plan(g.value_requests(), g.value_plan()), "");
      const std::vector<PlanRequest>& v = g.value_requests();
      ASSERT_EQ(v.size(), 6u);  // h, a, s, y, z, the loss
      EXPECT_EQ(std::make_pair(v[0].first, v[0].last), std::make_pair(0, 2));
      EXPECT_EQ(std::make_pair(v[1].first, v[1].last), std::make_pair(1, 10));
      EXPECT_EQ(std::make_pair(v[3].first, v[3].last), std::make_pair(3, 7));
      EXPECT_EQ(v[5].last, 12);
    } else {
      EXPECT_TRUE(g.gradient_requests().empty());
      EXPECT_EQ(dynamic, inputs + 4 * (5 * M * O + 1 + M * O));
      EXPECT_EQ(feature_maps, 4 * (5 * M * O + 1));  // h, a, s, y, z and the loss
    }
    from_host(*be, g.tensor(x), random_vec(M * I, 1));
    from_host(*be, g.tensor(t), random_vec(M * O, 2));
    be->allocator().reset_peak();
    const MemoryStats s0 = be->allocator().stats();
    g.zero_grad();
    g.forward();
    g.backward();
    const MemoryStats s1 = be->allocator().stats();
    EXPECT_EQ(s1.total_peak, s0.total_current) << "planned " << planned;
    EXPECT_EQ(s1.num_allocations, s0.num_allocations) << "planned " << planned;
  }
}

// Every graph's parameter values and gradients (floats widened exactly: equal means equal bits,
// but for the sign of zero).
std::vector<Vec> state_of(Backend& be, Model& m) {
  std::vector<Vec> out;
  for (std::size_t i = 0; i < m.num_graphs(); ++i) {
    const ParamArena& a = m.graph(i).arena();
    if (a.values.defined()) out.push_back(to_host(be, a.values));
    if (a.grads.defined()) out.push_back(to_host(be, a.grads));
  }
  return out;
}

class PlannedModel : public ::testing::TestWithParam<TinyModel> {};

// Two steps planned and unplanned: the same losses and the same parameters and gradients, bit
// for bit; every graph's plan checks; the step allocates nothing and the planned one needs less.
// A layer's saved state (Layer::saved_state: here dropout's mask) is placed in the value arena
// beside the outputs, live from its node's forward to its backward in a training graph and for
// its forward alone in an inference graph; unplanned, it has a buffer of its own.
TEST(GraphMemoryPlan, SavedStateLivesFromItsForwardToItsBackward) {
  for (bool inference : {false, true}) {
    auto be = make_cpu_backend();
    Graph g(*be, 3);
    const int64_t M = 4, I = 8;
    TensorId x = g.input("x", Shape{M, I});
    LinearConfig fc;
    fc.out_features = I;
    TensorId h = g.add1("fc", fc, {x});
    DropoutConfig drop;
    drop.p = 0.5;
    TensorId d = g.add1("drop", drop, {h});
    g.set_loss(g.add1("loss", MeanLossConfig{}, {d}));
    const Layer& l = *g.nodes()[1].layer;
    ASSERT_EQ(l.saved_state().size(), 1u);
    const std::size_t mask = l.saved_state()[0].desc.bytes();
    if (inference)
      g.finalize_inference();
    else
      g.finalize();
    ASSERT_EQ(check_memory_plan(g.value_requests(), g.value_plan()), "");
    // Steps: forward of node i is i, its backward 5 - i (three nodes).
    std::vector<std::pair<int, int>> mask_live;
    for (const PlanRequest& r : g.value_requests())
      if (r.bytes == mask) mask_live.emplace_back(r.first, r.last);
    const std::pair<int, int> want = inference ? std::make_pair(1, 1) : std::make_pair(1, 4);
    EXPECT_NE(std::find(mask_live.begin(), mask_live.end(), want), mask_live.end())
        << "inference " << inference;
    from_host(*be, g.tensor(x), random_vec(M * I, 1));
    g.forward();
    if (!inference) g.backward();
  }
}

TEST_P(PlannedModel, SameBitsAsUnplannedWithLessMemory) {
  const TinyModel& c = GetParam();
  std::vector<float> losses[2];
  std::vector<Vec> state[2];
  std::size_t dynamic[2] = {0, 0}, feature_maps[2] = {0, 0};
  std::size_t value_buffers = 0;  // planned: outputs and saved state placed in the arena
  for (int planned = 0; planned < 2; ++planned) {
    set_memory_planning_default(planned == 1);
    auto be = make_cpu_backend();
    std::unique_ptr<Model> m = c.build(*be);
    set_memory_planning_default(true);
    for (std::size_t i = 0; i < m->num_graphs(); ++i) {
      const Graph& g = m->graph(i);
      EXPECT_EQ(g.memory_planning(), planned == 1);
      EXPECT_EQ(check_memory_plan(g.gradient_requests(), g.gradient_plan()), "")
          << c.name << " graph " << i << ": gradients";
      EXPECT_EQ(check_memory_plan(g.value_requests(), g.value_plan()), "")
          << c.name << " graph " << i << ": values";
      if (planned == 1) value_buffers += g.value_requests().size();
    }
    m->train_step();  // the first step may set up lazily
    be->allocator().reset_peak();
    const MemoryStats s0 = be->allocator().stats();
    m->train_step();
    losses[planned].push_back(m->loss());
    const MemoryStats s1 = be->allocator().stats();
    EXPECT_EQ(s1.total_peak, s0.total_current) << c.name << ": a step allocated";
    dynamic[planned] = s1.peak_of(MemCategory::kDynamic);
    feature_maps[planned] = s1.peak_of(MemCategory::kFeatureMaps);
    m->train_step();
    losses[planned].push_back(m->loss());
    state[planned] = state_of(*be, *m);
  }
  EXPECT_EQ(losses[0], losses[1]) << c.name;
  ASSERT_EQ(state[0].size(), state[1].size());
  for (std::size_t i = 0; i < state[0].size(); ++i) {
    ASSERT_EQ(state[0][i].size(), state[1][i].size());
    std::size_t differ = 0;
    for (std::size_t k = 0; k < state[0][i].size(); ++k) differ += state[0][i][k] != state[1][i][k];
    EXPECT_EQ(differ, 0u) << c.name << ": arena " << i << " differs planned vs unplanned";
  }
  EXPECT_LT(dynamic[1], dynamic[0]) << c.name;
  // The arena places every buffer at a 64-byte boundary, where the allocator's statistics count
  // the bytes asked for (each allocation is rounded up unseen): in a tiny model, whose buffers
  // are nearly all live at the end of the forward, that rounding is all the difference.
  EXPECT_LE(feature_maps[1], feature_maps[0] + 63 * value_buffers) << c.name;
}

INSTANTIATE_TEST_SUITE_P(Models, PlannedModel, ::testing::ValuesIn(tiny_models()), TinyModelName());

}  // namespace
}  // namespace tbd::test
