// tests/layers/optimizer_test.cpp: SGD, Adam/AdamW and RMSprop on every target against float64
// references of PyTorch's update rules over several steps (weight decay on and off per
// parameter), their state size, FLOP counts, and that step() allocates nothing.
#include <gtest/gtest.h>

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
  for (int64_t t = 1; t <= 5; ++t) {
    std::vector<Vec> g = P.set_grads(t);
    opt->step();
    for (std::size_t k = 0; k < P.ps.size(); ++k) {
      std::visit([&](const auto& c) { ref_step(c, P.ref[k], g[k], t); }, tcase().cfg);
    }
  }
  P.be->synchronize();
  for (std::size_t k = 0; k < P.ps.size(); ++k) {
    expect_close(P.ps[k].name + " after 5 steps", to_host(*P.be, P.ps[k].value), P.ref[k].w,
                 tolerance(target(), Phase::kUpdate, OpClass::kPlain));
  }
}

TEST_P(OptimizerTest, StateIsAllocatedOnceAsOptimizerState) {
  Params P(be());
  const auto& stats = P.be->allocator().stats();
  const std::size_t before = stats.current_of(MemCategory::kOptimizerState);
  auto opt = make_opt(*P.be, tcase().cfg, P.ptrs());
  const std::size_t numel = P.numel(true) + P.numel(false);
  EXPECT_EQ(stats.current_of(MemCategory::kOptimizerState) - before,
            4 * numel * state_per_element(tcase().cfg));
  P.set_grads(1);
  opt->step();  // warm-up
  const uint64_t allocs = stats.num_allocations;
  for (int i = 0; i < 3; ++i) opt->step();
  EXPECT_EQ(stats.num_allocations, allocs) << "step() must not allocate";
}

INSTANTIATE_TEST_SUITE_P(
    Rules, OptimizerTest,
    on_all_targets(::testing::Values(
        OptCase{"sgd_momentum_decay", sgd(0.1, 0.9, 0.1)}, OptCase{"sgd_plain", sgd(0.1, 0.0, 0.0)},
        OptCase{"sgd_decay_no_momentum", sgd(0.1, 0.0, 0.3)},
        OptCase{"adam", adam(0.01, 0.0, false)}, OptCase{"adam_l2_decay", adam(0.01, 0.5, false)},
        OptCase{"adamw", adam(0.01, 0.5, true)}, OptCase{"rmsprop", rmsprop(0.01, 0.0, 0.0)},
        OptCase{"rmsprop_momentum", rmsprop(0.01, 0.9, 0.0)},
        OptCase{"rmsprop_momentum_decay", rmsprop(0.01, 0.9, 0.2)})),
    CaseOnTarget());

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
