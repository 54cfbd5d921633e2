// tests/layers/optimizer_test.cpp: SGD, Adam/AdamW and RMSprop on every target against float64
// references of PyTorch's update rules over several steps (weight decay on and off per
// parameter; gradient clipping by global norm, by value and both, active and not), their state
// size, FLOP counts, that step() allocates nothing, leaves the gradients alone and repeats
// itself bit for bit, and the clipping options' checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <variant>

#include "layers/optimizer.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

using AnyConfig = std::variant<SgdConfig, AdamConfig, RmspropConfig>;

struct OptCase {
  std::string name;
  AnyConfig cfg;
  bool clip_active = false;  // whether the case's clipping changes some gradient
};
void PrintTo(const OptCase& c, std::ostream* os) { *os << c.name; }

SgdConfig sgd(double lr, double momentum, double wd) {
  SgdConfig c;
  c.lr = lr, c.momentum = momentum, c.weight_decay = wd;
  return c;
}
AdamConfig adam(double lr, double wd, bool decoupled) {
  AdamConfig c;
  c.lr = lr, c.weight_decay = wd, c.decoupled = decoupled;
  return c;
}
RmspropConfig rmsprop(double lr, double momentum, double wd) {
  RmspropConfig c;
  c.lr = lr, c.momentum = momentum, c.weight_decay = wd;
  return c;
}
AnyConfig with_clip(AnyConfig cfg, double max_norm, double value) {
  std::visit([&](auto& c) { c.clip = GradClip{value, max_norm}; }, cfg);
  return cfg;
}
GradClip clip_of(const AnyConfig& cfg) {
  return std::visit([](const auto& c) { return c.clip; }, cfg);
}

// The gradients one step's update reads (GradClip, layers/optimizer.h), in float64: all of
// them scaled by min(1, max_norm / (||g||_2 + 1e-6)), then each element clipped to [-value,
// value]. Returns whether that changed any gradient.
bool ref_clip(const GradClip& c, std::vector<Vec>& g) {
  bool changed = false;
  if (c.max_norm > 0) {
    double ss = 0;
    for (const Vec& v : g)
      for (double e : v) ss += e * e;
    const double scale = std::min(1.0, c.max_norm / (std::sqrt(ss) + 1e-6));
    changed |= scale < 1;
    for (Vec& v : g)
      for (double& e : v) e *= scale;
  }
  if (c.value > 0) {
    for (Vec& v : g)
      for (double& e : v) {
        changed |= std::fabs(e) > c.value;
        e = std::clamp(e, -c.value, c.value);
      }
  }
  return changed;
}

// One parameter in float64 with its optimizer state.
struct RefParam {
  Vec w;
  bool decay;
  Vec s0, s1;
};

// One update of PyTorch's rules (torch.optim.SGD/Adam/AdamW/RMSprop, non-centered, no
// dampening or nesterov), step number t from 1.
void ref_step(const SgdConfig& c, RefParam& p, const Vec& g, int64_t) {
  const double wd = p.decay ? c.weight_decay : 0.0;
  if (p.s0.empty()) p.s0.assign(g.size(), 0.0);
  for (std::size_t i = 0; i < g.size(); ++i) {
    double d = g[i] + wd * p.w[i];
    if (c.momentum != 0) d = p.s0[i] = c.momentum * p.s0[i] + d;
    p.w[i] -= c.lr * d;
  }
}
void ref_step(const AdamConfig& c, RefParam& p, const Vec& g, int64_t t) {
  if (p.s0.empty()) p.s0.assign(g.size(), 0.0), p.s1.assign(g.size(), 0.0);
  const double bc1 = 1 - std::pow(c.beta1, t), bc2 = 1 - std::pow(c.beta2, t);
  for (std::size_t i = 0; i < g.size(); ++i) {
    double gi = g[i];
    if (p.decay && !c.decoupled) gi += c.weight_decay * p.w[i];
    if (p.decay && c.decoupled) p.w[i] *= 1 - c.lr * c.weight_decay;
    p.s0[i] = c.beta1 * p.s0[i] + (1 - c.beta1) * gi;
    p.s1[i] = c.beta2 * p.s1[i] + (1 - c.beta2) * gi * gi;
    p.w[i] -= c.lr * (p.s0[i] / bc1) / (std::sqrt(p.s1[i] / bc2) + c.eps);
  }
}
void ref_step(const RmspropConfig& c, RefParam& p, const Vec& g, int64_t) {
  if (p.s0.empty()) p.s0.assign(g.size(), 0.0), p.s1.assign(g.size(), 0.0);
  for (std::size_t i = 0; i < g.size(); ++i) {
    double gi = g[i] + (p.decay ? c.weight_decay : 0.0) * p.w[i];
    p.s0[i] = c.alpha * p.s0[i] + (1 - c.alpha) * gi * gi;
    double u = gi / (std::sqrt(p.s0[i]) + c.eps);
    if (c.momentum != 0) u = p.s1[i] = c.momentum * p.s1[i] + u;
    p.w[i] -= c.lr * u;
  }
}

std::unique_ptr<Optimizer> make_opt(Backend& be, const AnyConfig& cfg, std::vector<Param*> ps) {
  return std::visit([&](const auto& c) { return make_optimizer(be, c, ps); }, cfg);
}

// State floats per parameter element.
int state_per_element(const AnyConfig& cfg) {
  return std::visit(
      [](const auto& c) -> int {
        using C = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<C, SgdConfig>) return c.momentum != 0 ? 1 : 0;
        if constexpr (std::is_same_v<C, AdamConfig>) return 2;
        if constexpr (std::is_same_v<C, RmspropConfig>) return c.momentum != 0 ? 2 : 1;
      },
      cfg);
}

// Three parameters: a decaying matrix, a non-decaying bias, and a vector longer than two of
// the optimizer's chunks (so chunk boundaries are crossed).
struct Params {
  std::unique_ptr<Backend> own;  // a CPU backend of its own unless one is given
  Backend* be;
  std::vector<Param> ps;
  std::vector<RefParam> ref;

  Params() : own(make_cpu_backend()), be(own.get()) { init(); }
  explicit Params(Backend& b) : be(&b) { init(); }
  void init() {
    static const char* const kNames[] = {"matrix", "bias", "long_vector"};
    const std::vector<std::pair<Shape, bool>> specs{
        {Shape{37, 13}, true}, {Shape{13}, false}, {Shape{70001}, true}};
    for (std::size_t k = 0; k < specs.size(); ++k) {
      Param p;
      p.name = kNames[k];
      p.value = be->empty(specs[k].first, MemCategory::kWeights);
      p.grad = be->empty(specs[k].first, MemCategory::kWeightGrads);
      p.decay = specs[k].second;
      Vec w = random_vec(p.value.numel(), 5 + k, -0.5, 0.5);
      for (auto& e : w) e = static_cast<float>(e);
      from_host(*be, p.value, w);
      ref.push_back(RefParam{w, p.decay, {}, {}});
      ps.push_back(std::move(p));
    }
  }
  std::vector<Param*> ptrs() {
    std::vector<Param*> out;
    for (auto& p : ps) out.push_back(&p);
    return out;
  }
  // New gradients for step t (the optimizer does not zero them; the graph would).
  std::vector<Vec> set_grads(int64_t t) {
    std::vector<Vec> gs;
    for (std::size_t k = 0; k < ps.size(); ++k) {
      Vec g = random_vec(ps[k].grad.numel(), 1000 * t + k);
      for (auto& e : g) e = static_cast<float>(e);
      from_host(*be, ps[k].grad, g);
      gs.push_back(g);
    }
    return gs;
  }
  int64_t numel(bool decay) const {
    int64_t n = 0;
    for (const auto& p : ps) n += p.decay == decay ? p.value.numel() : 0;
    return n;
  }
};

class OptimizerTest : public LayerTest<OptCase> {};

TEST_P(OptimizerTest, MatchesFloat64ReferenceOverSteps) {
  Params P(be());
  auto opt = make_opt(*P.be, tcase().cfg, P.ptrs());
  if (target() != Target::kCpu) {  // the counts are stated once per rule (layers/optimizer.cpp)
    Params cpu_params;
    auto cpu = make_opt(*cpu_params.be, tcase().cfg, cpu_params.ptrs());
    EXPECT_STREQ(opt->kind(), cpu->kind());
    EXPECT_DOUBLE_EQ(opt->flops(), cpu->flops());
    EXPECT_DOUBLE_EQ(opt->bytes(), cpu->bytes());
  }
  bool clipped = false;
  std::vector<Vec> g;
  for (int64_t t = 1; t <= 5; ++t) {
    g = P.set_grads(t);
    opt->step();
    std::vector<Vec> read = g;
    clipped |= ref_clip(clip_of(tcase().cfg), read);
    for (std::size_t k = 0; k < P.ps.size(); ++k) {
      std::visit([&](const auto& c) { ref_step(c, P.ref[k], read[k], t); }, tcase().cfg);
    }
  }
  EXPECT_EQ(clipped, tcase().clip_active) << "the case's clipping is not what its name says";
  P.be->synchronize();
  for (std::size_t k = 0; k < P.ps.size(); ++k) {
    expect_close(P.ps[k].name + " after 5 steps", to_host(*P.be, P.ps[k].value), P.ref[k].w,
                 tolerance(target(), Phase::kUpdate, OpClass::kPlain));
    // Clipping acts on what the update reads, never on Param::grad.
    EXPECT_EQ(to_host(*P.be, P.ps[k].grad), g[k]) << P.ps[k].name << ": step() changed its grad";
  }
}

TEST_P(OptimizerTest, StateIsAllocatedOnceAsOptimizerState) {
  Params P(be());
  auto stats = [&] { return P.be->allocator().stats(); };  // a snapshot per call
  const std::size_t before = stats().current_of(MemCategory::kOptimizerState);
  auto opt = make_opt(*P.be, tcase().cfg, P.ptrs());
  const std::size_t numel = P.numel(true) + P.numel(false);
  EXPECT_EQ(stats().current_of(MemCategory::kOptimizerState) - before,
            4 * numel * state_per_element(tcase().cfg));
  P.set_grads(1);
  opt->step();  // warm-up
  const uint64_t allocs = stats().num_allocations;
  for (int i = 0; i < 3; ++i) opt->step();
  EXPECT_EQ(stats().num_allocations, allocs) << "step() must not allocate";
}

INSTANTIATE_TEST_SUITE_P(
    Rules, OptimizerTest,
    on_all_targets(::testing::Values(
        OptCase{"sgd_momentum_decay", sgd(0.1, 0.9, 0.1)}, OptCase{"sgd_plain", sgd(0.1, 0.0, 0.0)},
        OptCase{"sgd_decay_no_momentum", sgd(0.1, 0.0, 0.3)},
        OptCase{"adam", adam(0.01, 0.0, false)}, OptCase{"adam_l2_decay", adam(0.01, 0.5, false)},
        OptCase{"adamw", adam(0.01, 0.5, true)}, OptCase{"rmsprop", rmsprop(0.01, 0.0, 0.0)},
        OptCase{"rmsprop_momentum", rmsprop(0.01, 0.9, 0.0)},
        OptCase{"rmsprop_momentum_decay", rmsprop(0.01, 0.9, 0.2)},
        // Clipping. The gradients are uniform in [-1, 1] over about 70500 elements: their global
        // norm is about 150, so max_norm 20 scales them by about 0.13 and 1000 leaves them;
        // value 0.5 clips half of them and 1.5 none; max_norm 100 (about 0.65) then value 0.4
        // do both. Adam's and RMSprop's first steps divide g' by about |g'| (their second
        // moments start at 0), so where g' = clipped g + wd*w nearly cancels, float32 and the
        // reference part ways: their clipped cases add no weight decay to the gradient (AdamW's
        // decoupled decay does not add it there).
        OptCase{"sgd_clip_norm", with_clip(sgd(0.1, 0.9, 0.1), 20, 0), true},
        OptCase{"sgd_clip_norm_inactive", with_clip(sgd(0.1, 0.9, 0.1), 1000, 0), false},
        OptCase{"sgd_clip_value", with_clip(sgd(0.1, 0.0, 0.3), 0, 0.5), true},
        OptCase{"sgd_clip_value_inactive", with_clip(sgd(0.1, 0.9, 0.0), 0, 1.5), false},
        OptCase{"sgd_clip_both", with_clip(sgd(0.1, 0.9, 0.1), 100, 0.4), true},
        OptCase{"adam_clip_norm", with_clip(adam(0.01, 0.0, false), 20, 0), true},
        OptCase{"adam_clip_norm_inactive", with_clip(adam(0.01, 0.0, false), 1000, 0), false},
        OptCase{"adamw_clip_value", with_clip(adam(0.01, 0.5, true), 0, 0.5), true},
        OptCase{"adam_clip_value_inactive", with_clip(adam(0.01, 0.0, false), 0, 1.5), false},
        OptCase{"adamw_clip_both", with_clip(adam(0.01, 0.5, true), 100, 0.4), true},
        OptCase{"rmsprop_clip_norm", with_clip(rmsprop(0.01, 0.9, 0.0), 20, 0), true},
        OptCase{"rmsprop_clip_norm_inactive", with_clip(rmsprop(0.01, 0.0, 0.0), 1000, 0), false},
        OptCase{"rmsprop_clip_value", with_clip(rmsprop(0.01, 0.0, 0.0), 0, 0.5), true},
        OptCase{"rmsprop_clip_value_inactive", with_clip(rmsprop(0.01, 0.9, 0.0), 0, 1.5), false},
        OptCase{"rmsprop_clip_both", with_clip(rmsprop(0.01, 0.9, 0.0), 100, 0.4), true})),
    CaseOnTarget());

class OptimizerOnTarget : public TargetTest {};

// The global norm is reduced in a fixed order: two runs of the same steps agree bit for bit.
TEST_P(OptimizerOnTarget, ClippedStepsRepeatBitForBit) {
  for (const AnyConfig& cfg :
       {with_clip(sgd(0.1, 0.9, 0.1), 100, 0.4), with_clip(adam(0.01, 0.5, true), 20, 0),
        with_clip(rmsprop(0.01, 0.9, 0.2), 100, 0.4)}) {
    std::vector<Vec> runs[2];
    for (auto& run : runs) {
      Params P(be());
      auto opt = make_opt(*P.be, cfg, P.ptrs());
      for (int64_t t = 1; t <= 3; ++t) {
        P.set_grads(t);
        opt->step();
      }
      for (const Param& p : P.ps) run.push_back(to_host(*P.be, p.value));
    }
    for (std::size_t k = 0; k < runs[0].size(); ++k) {
      EXPECT_EQ(runs[0][k], runs[1][k]) << make_opt(be(), cfg, {})->kind() << " parameter " << k;
    }
  }
}

// A negative clipping value is an error naming the optimizer and the field.
TEST_P(OptimizerOnTarget, NegativeClipValuesAreRejected) {
  Params P(be());
  const std::pair<AnyConfig, const char*> kinds[] = {{sgd(0.1, 0.9, 0), "SGD"},
                                                     {adam(1e-3, 0, false), "Adam"},
                                                     {adam(1e-3, 0, true), "AdamW"},
                                                     {rmsprop(1e-2, 0, 0), "RMSprop"}};
  for (const auto& [cfg, kind] : kinds) {
    expect_error([&] { make_opt(*P.be, with_clip(cfg, 0, -0.5), P.ptrs()); },
                 {kind, "clip.value", "-0.5"});
    expect_error([&] { make_opt(*P.be, with_clip(cfg, -2, 0), P.ptrs()); },
                 {kind, "clip.max_norm", "-2"});
    expect_error([&] { make_opt(*P.be, with_clip(cfg, 1, std::nan("")), P.ptrs()); },
                 {kind, "clip.value", "nan"});
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, OptimizerOnTarget, ::testing::ValuesIn(kAllTargets),
                         TargetName());

// The reference agrees with each variant; this checks that the variants really differ, so
// the comparisons above could tell decay on/off and AdamW from Adam apart.
TEST(OptimizerVariants, DecayFlagAndDecoupledDecayChangeTheResult) {
  auto run = [](const AnyConfig& cfg) {
    Params P;
    auto opt = make_opt(*P.be, cfg, P.ptrs());
    for (int64_t t = 1; t <= 3; ++t) {
      P.set_grads(t);
      opt->step();
    }
    return std::vector<Vec>{to_host(*P.be, P.ps[0].value), to_host(*P.be, P.ps[1].value)};
  };
  auto max_diff = [](const Vec& a, const Vec& b) {
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
    return m;
  };
  auto adam_l2 = run(adam(0.01, 0.5, false)), adamw = run(adam(0.01, 0.5, true));
  auto adam_plain = run(adam(0.01, 0.0, false));
  EXPECT_GT(max_diff(adam_l2[0], adamw[0]), 1e-3) << "AdamW differs from Adam + L2";
  EXPECT_GT(max_diff(adamw[0], adam_plain[0]), 1e-3) << "decay acts on decaying params";
  // The bias (decay = false) is untouched by either form of decay.
  EXPECT_EQ(adam_l2[1], adam_plain[1]);
  EXPECT_EQ(adamw[1], adam_plain[1]);
}

TEST(OptimizerFlops, MatchDocumentedPerElementCounts) {
  Params P;
  const double nd = static_cast<double>(P.numel(true)), nn = static_cast<double>(P.numel(false));
  EXPECT_DOUBLE_EQ(make_opt(*P.be, sgd(0.1, 0.9, 1e-4), P.ptrs())->flops(), 6 * nd + 4 * nn);
  EXPECT_DOUBLE_EQ(make_opt(*P.be, sgd(0.1, 0.0, 0.0), P.ptrs())->flops(), 2 * (nd + nn));
  EXPECT_DOUBLE_EQ(make_opt(*P.be, adam(1e-3, 0.0, false), P.ptrs())->flops(), 12 * (nd + nn));
  EXPECT_DOUBLE_EQ(make_opt(*P.be, adam(1e-3, 0.1, true), P.ptrs())->flops(), 14 * nd + 12 * nn);
  EXPECT_DOUBLE_EQ(make_opt(*P.be, rmsprop(1e-2, 0.0, 0.0), P.ptrs())->flops(), 8 * (nd + nn));
  EXPECT_DOUBLE_EQ(make_opt(*P.be, rmsprop(1e-2, 0.9, 0.1), P.ptrs())->flops(), 12 * nd + 10 * nn);
  // Clipping: 3 per element for the global norm (square, add; scale), 2 for the value clip.
  const double n = nd + nn;
  EXPECT_DOUBLE_EQ(make_opt(*P.be, with_clip(sgd(0.1, 0.0, 0.0), 1, 0), P.ptrs())->flops(),
                   2 * n + 3 * n);
  EXPECT_DOUBLE_EQ(make_opt(*P.be, with_clip(adam(1e-3, 0.0, false), 0, 1), P.ptrs())->flops(),
                   12 * n + 2 * n);
  EXPECT_DOUBLE_EQ(make_opt(*P.be, with_clip(rmsprop(1e-2, 0.0, 0.0), 1, 1), P.ptrs())->flops(),
                   8 * n + 5 * n);
}

TEST(OptimizerKinds, NamesAndParams) {
  Params P;
  EXPECT_STREQ(make_opt(*P.be, sgd(0.1, 0.9, 0), P.ptrs())->kind(), "SGD");
  EXPECT_STREQ(make_opt(*P.be, adam(1e-3, 0, false), P.ptrs())->kind(), "Adam");
  EXPECT_STREQ(make_opt(*P.be, adam(1e-3, 0, true), P.ptrs())->kind(), "AdamW");
  auto opt = make_opt(*P.be, rmsprop(1e-2, 0, 0), P.ptrs());
  EXPECT_STREQ(opt->kind(), "RMSprop");
  EXPECT_EQ(opt->params().size(), 3u);
}

}  // namespace
}  // namespace tbd::test
