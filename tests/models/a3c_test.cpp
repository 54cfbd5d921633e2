// tests/models/a3c_test.cpp: A3C's actor-learners: the full network's parameter count, a tiny
// configuration whose loss falls on a fixed rollout, identical reruns with one worker, and two
// workers running concurrently with exact memory accounting (run under ThreadSanitizer by the
// tsan preset, scripts/test.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backends/backends.h"
#include "layers/cast_scale.h"
#include "layers/loss.h"
#include "models/a3c.h"
#include "models/registry.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

std::vector<float> global_weights(Backend& be, Model& m) {
  // The global weights are graph 1 (the first added graph, a3c.cpp).
  const Tensor& v = m.graph(1).arena().values;
  std::vector<float> h(v.numel());
  be.copy_to_host(h.data(), v);
  return h;
}

// The network of TBD's TensorFlow A3C at 84x84x4 and 4 actions, counted by hand:
//   conv1   4*16*8*8 + 16          =     4,112
//   conv2   16*32*4*4 + 32         =     8,224
//   fc      (32*11*11)*256 + 256   =   991,488   (conv2 'SAME': 21 -> 11)
//   policy  256*4 + 4              =     1,028
//   value   256*1 + 1              =       257
//   total                          = 1,005,109
TEST(A3C, FullConfigurationParameterCount) {
  auto be = make_cpu_backend();
  A3cOptions o;
  o.actors = 1;
  EXPECT_EQ(a3c_param_count(o), 1005109);
  auto m = build_a3c(*be, o);
  EXPECT_EQ(m->graph().num_params(), 1005109);   // a worker's local copy
  EXPECT_EQ(m->graph(1).num_params(), 1005109);  // the global weights
  // conv2's output is 'SAME''s 11x11.
  bool found = false;
  for (auto& n : m->graph().nodes()) {
    if (n.layer->name() == "flatten") {
      EXPECT_EQ(n.layer->output_descs()[0].shape, (Shape{5, 32 * 11 * 11}));
      found = true;
    }
  }
  EXPECT_TRUE(found);
  // Weights: the global copy and one local copy; gradients: the local one; the RMSprop state.
  const MemoryStats s = be->allocator().stats();
  EXPECT_EQ(s.current_of(MemCategory::kWeights), 2u * 4 * 1005109);
  EXPECT_EQ(s.current_of(MemCategory::kWeightGrads), 4u * 1005109);
  EXPECT_EQ(s.current_of(MemCategory::kOptimizerState), 4u * 1005109);
  EXPECT_EQ(m->samples_per_step(), 8);  // updates: 8 per worker per iteration
  EXPECT_EQ(m->extra_items_per_step().at("frames"), 8 * 5.0);
  // Per update at least: the pull (read and write every weight), RMSprop with clipping (read
  // w, g, sq and g again, write w, sq) and zero_grad: 9 passes of 4 bytes per parameter; and
  // the FLOPs of the six batch-1 forwards and the batch-5 step, about 3 x 3.8 M MACs per
  // sample x 5 + 6 x 3.8 M MACs = 160 MFLOP.
  const double per_update_bytes = m->step_bytes() / static_cast<double>(m->samples_per_step());
  EXPECT_GT(per_update_bytes, 9.0 * 4 * 1005109);
  const double per_update_flops = m->step_flops() / static_cast<double>(m->samples_per_step());
  EXPECT_GT(per_update_flops, 150e6);
  EXPECT_LT(per_update_flops, 200e6);
}

// The loss falls on one fixed rollout: the tiny network's training graph (worker 0's, the main
// graph) fed the same states, actions and returns every step, trained with the model's own
// shared RMSprop through the global weights (one worker: pull, step, apply).
TEST(A3C, LossFallsOnAFixedRollout) {
  auto be = make_cpu_backend();
  A3cOptions o = a3c_tiny(1);
  o.lr = 1e-3;  // a few steps must show it
  auto m = build_a3c(*be, o);
  Graph& g = m->graph();
  // Fixed inputs: the main graph's data (random frames, actions, returns in [-1, 1)) stay as
  // filled at build; one update pulls, runs forward/backward and applies, like the model.
  Graph& global = m->graph(1);
  auto step = [&] {
    be->reorder(g.arena().values, global.arena().values);  // pull
    g.zero_grad();
    g.forward();
    g.backward();
    m->optimizer().step();  // apply: the shared RMSprop reads worker 0's gradients
    return g.loss_value();
  };
  // The rollout leaves its states in the inputs: refill them once, then keep them fixed.
  m->train_step();
  std::vector<float> losses;
  for (int i = 0; i < 30; ++i) losses.push_back(step());
  for (float l : losses) ASSERT_TRUE(std::isfinite(l));
  EXPECT_LT(losses.back(), losses.front() - 0.1f * std::fabs(losses.front()))
      << "first " << losses.front() << ", last " << losses.back();
}

// With one worker everything is sequential and seeded: two builds give bit-identical global
// weights after the same number of steps, and the weights did move.
TEST(A3C, IdenticalRerunsWithOneWorker) {
  std::vector<std::vector<float>> runs;
  std::vector<float> initial;
  for (int r = 0; r < 2; ++r) {
    auto be = make_cpu_backend();
    auto m = build_a3c(*be, a3c_tiny(1));
    if (r == 0) initial = global_weights(*be, *m);
    for (int i = 0; i < 4; ++i) m->train_step();
    EXPECT_TRUE(std::isfinite(m->loss()));
    runs.push_back(global_weights(*be, *m));
  }
  ASSERT_EQ(runs[0].size(), runs[1].size());
  EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(runs[0].data(), initial.data(), initial.size() * sizeof(float)), 0);
}

// Two workers update the global weights concurrently: 8 K updates per step, memory exactly two
// local copies (weights + gradients) beside the global weights and one optimizer state,
// nothing allocated by the steps, and the memory returned when the model goes.
TEST(A3C, TwoConcurrentWorkersKeepExactAccounting) {
  auto be = make_cpu_backend();
  const MemoryStats before = be->allocator().stats();
  {
    A3cOptions o = a3c_tiny(2);
    const auto P = static_cast<std::size_t>(a3c_param_count(o));
    auto m = build_a3c(*be, o);
    EXPECT_EQ(m->samples_per_step(), 16);
    EXPECT_EQ(m->extra_items_per_step().at("frames"), 16 * 5.0);
    MemoryStats s = be->allocator().stats();
    EXPECT_EQ(s.current_of(MemCategory::kWeights) - before.current_of(MemCategory::kWeights),
              3 * 4 * P);
    EXPECT_EQ(s.current_of(MemCategory::kWeightGrads), 2 * 4 * P);
    EXPECT_EQ(s.current_of(MemCategory::kOptimizerState), 4 * P);
    const std::vector<float> w0 = global_weights(*be, *m);
    m->train_step();  // warm-up
    const uint64_t allocs = be->allocator().stats().num_allocations;
    const std::size_t bytes = be->allocator().stats().total_current;
    for (int i = 0; i < 3; ++i) m->train_step();
    s = be->allocator().stats();
    EXPECT_EQ(s.num_allocations, allocs) << "the workers' updates must not allocate";
    EXPECT_EQ(s.total_current, bytes);
    EXPECT_TRUE(std::isfinite(m->loss()));
    const std::vector<float> w1 = global_weights(*be, *m);
    for (float v : w1) ASSERT_TRUE(std::isfinite(v));
    EXPECT_NE(std::memcmp(w0.data(), w1.data(), w0.size() * sizeof(float)), 0);
  }
  EXPECT_EQ(be->allocator().stats().total_current, before.total_current);
}

// The registered model takes its workers from /actors:<K>.
TEST(A3C, RegisteredWithActorsParameter) {
  const ModelEntry* e = nullptr;
  for (const ModelEntry& m : model_registry()) {
    if (m.name == "A3C") e = &m;
  }
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->batches, (std::vector<int64_t>{5}));
  EXPECT_EQ(e->param_keys, (std::vector<std::string>{"actors"}));
}

}  // namespace
}  // namespace tbd::test
