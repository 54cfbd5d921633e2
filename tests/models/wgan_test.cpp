// tests/models/wgan_test.cpp: WGAN-GP (models/wgan.h).
//
// The full configuration's parameter counts; the gradient penalty's parameter gradients through
// the model's own critic (input conv, a down-sampling residual block with LayerNorm over
// (C, H, W), mean pooling, the output Linear) at a tiny size against float64 central finite
// differences of a float64 reference; a tiny WGAN whose critic learns to tell real images from
// the generator's; the generator step leaving the critic untouched; identical reruns; a steady
// state that allocates nothing; the breakdown covering both players' steps.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backends.h"
#include "layers/loss.h"
#include "models/breakdown.h"
#include "models/double_backward.h"
#include "models/wgan.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

TEST(Wgan, ParameterCountsOfTheFullConfiguration) {
  auto be = make_cpu_backend();
  WganOptions o;
  o.batch = 2;
  o.build_only = true;
  auto m = build_wgan(*be, o);
  ASSERT_EQ(m->num_graphs(), 2u);
  EXPECT_EQ(m->graph(0).num_params(), 7491841);  // the critic (its step's graph owns it)
  EXPECT_EQ(m->graph(1).num_params(), 8540483);  // the generator
  EXPECT_EQ(m->samples_per_step(), 2);
  EXPECT_EQ(m->extra_items_per_step().at("critic_steps"), 5);
}

// ---- the penalty through the critic, in float64 ----

// The tiny critic: blocks = 1, dim = 2: x (N, 3, 8, 8) -> conv 3x3 3->2 (+b) -> block 2->4
// (shortcut: pool, conv 1x1 (+b); main: LN, ReLU, conv 3x3 2->2, LN, ReLU, conv 3x3 2->4 (+b),
// pool) -> (N, 64) -> Linear 1 (+b).
constexpr int64_t N = 2, S = 8, C0 = 2, C1 = 4, Sp = S / 2;
constexpr double kLnEps = 1e-5, kLambda = 10;

struct Img {  // (n, c, h, w) in a flat Vec
  int64_t c, h, w;
  Vec v;
  Img() : Img(0, 0, 0) {}
  Img(int64_t cc, int64_t hh, int64_t ww) : c(cc), h(hh), w(ww), v(N * cc * hh * ww, 0.0) {}
  double& at(int64_t n, int64_t k, int64_t y, int64_t x) {
    return v[((n * c + k) * h + y) * w + x];
  }
  double at(int64_t n, int64_t k, int64_t y, int64_t x) const {
    return v[((n * c + k) * h + y) * w + x];
  }
};

// Stride-1 "same" convolution with a k x k kernel (k odd), w (Co, Ci, k, k), and its adjoint.
Img conv(const Img& x, const Vec& wt, const Vec* b, int64_t co, int64_t k) {
  Img y(co, x.h, x.w);
  const int64_t p = k / 2;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < co; ++o)
      for (int64_t i = 0; i < x.h; ++i)
        for (int64_t j = 0; j < x.w; ++j) {
          double s = b ? (*b)[o] : 0.0;
          for (int64_t c = 0; c < x.c; ++c)
            for (int64_t r = 0; r < k; ++r)
              for (int64_t q = 0; q < k; ++q) {
                const int64_t ii = i + r - p, jj = j + q - p;
                if (ii < 0 || ii >= x.h || jj < 0 || jj >= x.w) continue;
                s += x.at(n, c, ii, jj) * wt[((o * x.c + c) * k + r) * k + q];
              }
          y.at(n, o, i, j) = s;
        }
  return y;
}
Img conv_dgrad(const Img& dy, const Vec& wt, int64_t ci, int64_t k) {
  Img dx(ci, dy.h, dy.w);
  const int64_t p = k / 2;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < dy.c; ++o)
      for (int64_t i = 0; i < dy.h; ++i)
        for (int64_t j = 0; j < dy.w; ++j)
          for (int64_t c = 0; c < ci; ++c)
            for (int64_t r = 0; r < k; ++r)
              for (int64_t q = 0; q < k; ++q) {
                const int64_t ii = i + r - p, jj = j + q - p;
                if (ii < 0 || ii >= dy.h || jj < 0 || jj >= dy.w) continue;
                dx.at(n, c, ii, jj) += dy.at(n, o, i, j) * wt[((o * ci + c) * k + r) * k + q];
              }
  return dx;
}
Img pool_dgrad(const Img& dy) {
  Img dx(dy.c, dy.h * 2, dy.w * 2);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < dy.c; ++c)
      for (int64_t i = 0; i < dx.h; ++i)
        for (int64_t j = 0; j < dx.w; ++j) dx.at(n, c, i, j) = dy.at(n, c, i / 2, j / 2) / 4;
  return dx;
}
// LayerNorm per sample over (C, H, W), gamma and beta per channel; keeps xhat and r.
struct Ln {
  Img xh;
  Vec r;
};
Img layer_norm(const Img& x, const Vec& gamma, const Vec& beta, Ln* saved) {
  const int64_t D = x.c * x.h * x.w, G = x.h * x.w;
  saved->xh = x;
  saved->r.assign(N, 0.0);
  Img y = x;
  for (int64_t n = 0; n < N; ++n) {
    double mu = 0, var = 0;
    for (int64_t i = 0; i < D; ++i) mu += x.v[n * D + i] / D;
    for (int64_t i = 0; i < D; ++i) var += (x.v[n * D + i] - mu) * (x.v[n * D + i] - mu) / D;
    saved->r[n] = 1 / std::sqrt(var + kLnEps);
    for (int64_t i = 0; i < D; ++i) {
      saved->xh.v[n * D + i] = (x.v[n * D + i] - mu) * saved->r[n];
      y.v[n * D + i] = saved->xh.v[n * D + i] * gamma[i / G] + beta[i / G];
    }
  }
  return y;
}
Img layer_norm_dgrad(const Img& dy, const Ln& s, const Vec& gamma) {
  const int64_t D = dy.c * dy.h * dy.w, G = dy.h * dy.w;
  Img dx = dy;
  for (int64_t n = 0; n < N; ++n) {
    double mg = 0, mgx = 0;
    for (int64_t i = 0; i < D; ++i) {
      const double g = dy.v[n * D + i] * gamma[i / G];
      mg += g / D;
      mgx += g * s.xh.v[n * D + i] / D;
    }
    for (int64_t i = 0; i < D; ++i) {
      const double g = dy.v[n * D + i] * gamma[i / G];
      dx.v[n * D + i] = s.r[n] * (g - mg - s.xh.v[n * D + i] * mgx);
    }
  }
  return dx;
}
Img relu(const Img& x) {
  Img y = x;
  for (double& e : y.v) e = e > 0 ? e : 0.0;
  return y;
}
Img relu_dgrad(const Img& dy, const Img& x) {
  Img dx = dy;
  for (std::size_t i = 0; i < dx.v.size(); ++i) dx.v[i] = x.v[i] > 0 ? dy.v[i] : 0.0;
  return dx;
}
Img add(Img a, const Img& b) {
  for (std::size_t i = 0; i < a.v.size(); ++i) a.v[i] += b.v[i];
  return a;
}

// Parameters in the order of Graph::params().
enum P { kW0, kB0, kWs, kBs, kG1, kBe1, kW1, kG2, kBe2, kW2, kB2, kWl, kBl, kNumParams };

// d sum(critic(x)) / dx by hand (the forward, then its backward from d score = 1).
Img critic_input_gradient(const std::vector<Vec>& p, const Img& x) {
  const Img h0 = conv(x, p[kW0], &p[kB0], C0, 3);
  Ln ln1, ln2;
  const Img z1 = layer_norm(h0, p[kG1], p[kBe1], &ln1);
  const Img c1 = conv(relu(z1), p[kW1], nullptr, C0, 3);
  const Img z2 = layer_norm(c1, p[kG2], p[kBe2], &ln2);
  // The forward's remaining values do not enter the input gradient: the scores are linear in
  // the block's output, the pools and the shortcut are linear.
  Img df(C1, Sp, Sp);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < C1 * Sp * Sp; ++i) df.v[n * C1 * Sp * Sp + i] = p[kWl][i];
  const Img dc2 = pool_dgrad(df);
  const Img dz2 = relu_dgrad(conv_dgrad(dc2, p[kW2], C0, 3), z2);
  const Img dz1 = relu_dgrad(conv_dgrad(layer_norm_dgrad(dz2, ln2, p[kG2]), p[kW1], C0, 3), z1);
  const Img dh0 =
      add(layer_norm_dgrad(dz1, ln1, p[kG1]), pool_dgrad(conv_dgrad(df, p[kWs], C0, 1)));
  return conv_dgrad(dh0, p[kW0], 3, 3);
}

double penalty(const std::vector<Vec>& p, const Img& x) {
  const Img g = critic_input_gradient(p, x);
  const int64_t D = 3 * S * S;
  double l = 0;
  for (int64_t n = 0; n < N; ++n) {
    double s = 0;
    for (int64_t i = 0; i < D; ++i) s += g.v[n * D + i] * g.v[n * D + i];
    l += (std::sqrt(s) - 1) * (std::sqrt(s) - 1);
  }
  return kLambda * l / N;
}

TEST(Wgan, GradientPenaltyThroughTheCriticMatchesFloat64FiniteDifferences) {
  auto be = make_cpu_backend();
  Graph g(*be, 3);
  WganOptions o;
  o.blocks = 1;
  o.dim = C0;
  ASSERT_EQ(wgan_image_size(o), S);
  const TensorId x = g.input("x", Shape{N, 3, S, S});
  const TensorId score = wgan_critic(g, x, o);
  const InputGradient ig = append_input_gradient(g, x, score, "gp");
  g.set_loss(g.add1("gp.penalty", GradientPenaltyConfig{kLambda, 1.0}, {ig.dx}));
  g.keep(ig.dx);  // read after the step
  g.finalize();
  std::vector<Param*> ps = g.params();
  ASSERT_EQ(ps.size(), static_cast<std::size_t>(kNumParams));
  const std::vector<std::string> names{
      "critic.input.weight",       "critic.input.bias",      "critic.res1.shortcut.weight",
      "critic.res1.shortcut.bias", "critic.res1.ln1.gamma",  "critic.res1.ln1.beta",
      "critic.res1.conv1.weight",  "critic.res1.ln2.gamma",  "critic.res1.ln2.beta",
      "critic.res1.conv2.weight",  "critic.res1.conv2.bias", "critic.output.weight",
      "critic.output.bias"};
  std::vector<Vec> pv;
  for (std::size_t k = 0; k < ps.size(); ++k) {
    EXPECT_EQ(ps[k]->name, names[k]);
    Vec v = random_vec(ps[k]->value.numel(), 60 + k, -0.5, 0.5);
    if (k == kG1 || k == kG2) {
      for (double& e : v) e += 1.0;
    }
    for (double& e : v) e = static_cast<float>(e);
    from_host(*be, ps[k]->value, v);
    pv.push_back(v);
  }
  EXPECT_EQ(ps[kG1]->value.shape(), (Shape{C0}));  // per channel
  Img xi(3, S, S);
  xi.v = random_vec(N * 3 * S * S, 9);
  for (double& e : xi.v) e = static_cast<float>(e);
  from_host(*be, g.tensor(x), xi.v);
  from_host(*be, g.tensor(ig.seed), Vec(N, 1.0));
  g.zero_grad();
  g.forward();
  g.backward();

  expect_close("input gradient", to_host(*be, g.tensor(ig.dx)), critic_input_gradient(pv, xi).v,
               Tol{1e-5, 1e-3});
  const double ref = penalty(pv, xi);
  EXPECT_NEAR(g.loss_value(), ref, 1e-4 * std::abs(ref));
  EXPECT_GT(ref, 1e-2);  // the norms are away from 1: every term matters
  for (std::size_t k = 0; k < ps.size(); ++k) {
    Vec fd(pv[k].size());
    for (std::size_t i = 0; i < pv[k].size(); ++i) {
      std::vector<Vec> lo = pv, hi = pv;
      const double h = 1e-6;
      lo[k][i] -= h;
      hi[k][i] += h;
      fd[i] = (penalty(hi, xi) - penalty(lo, xi)) / (2 * h);
    }
    expect_close(ps[k]->name + " gradient of the penalty", to_host(*be, ps[k]->grad), fd,
                 Tol{2e-4, 2e-3});
  }
  // Shifts that only move the last ReLU's kinks or the scores: no gradient of the penalty (the
  // input conv's bias and the first LayerNorm's shift do have one, through the second
  // LayerNorm's statistics).
  for (int k : {kBs, kBe2, kB2, kBl}) {
    for (double e : to_host(*be, ps[k]->grad)) EXPECT_EQ(e, 0.0) << ps[k]->name;
  }
}

// ---- the model at a tiny size ----

// Per iteration: the critic's loss after its last step and the generator's loss.
std::vector<std::pair<float, float>> train(Backend& be, int iters, uint64_t seed) {
  auto m = build_wgan(be, wgan_tiny(seed));
  std::vector<std::pair<float, float>> v;
  for (int i = 0; i < iters; ++i) {
    m->train_step();
    v.push_back({m->graph(0).loss_value(), m->graph(1).loss_value()});
  }
  return v;
}

// The toy set is separable: real images are uniform noise in [-1, 1), the generator's start
// near its tanh's zero. The critic's loss (which it minimises) falls and its Wasserstein
// estimate mean(D(real)) - mean(D(fake)) becomes clearly positive.
TEST(Wgan, CriticLossMovesTheRightWayOnASeparableToySet) {
  auto be = make_cpu_backend();
  auto m = build_wgan(*be, wgan_tiny());
  Graph& c = m->graph(0);
  auto wasserstein = [&] {
    for (std::size_t i = 0; i < c.nodes().size(); ++i) {
      if (c.nodes()[i].layer->name() == "loss.wasserstein") {
        return -to_host(*be, c.tensor(c.nodes()[i].outputs[0]))[0];
      }
    }
    ADD_FAILURE() << "no loss.wasserstein node";
    return 0.0;
  };
  m->train_step();
  const float first = m->loss();
  const double w0 = wasserstein();
  for (int i = 0; i < 15; ++i) m->train_step();
  const float last = m->loss();
  ASSERT_TRUE(std::isfinite(first) && std::isfinite(last));
  // (Seen: loss 1.03 -> -1.01, estimate 0.66 -> 1.10 while the generator's loss falls too.)
  EXPECT_LT(last, first - 1.0) << "critic loss " << first << " -> " << last;
  EXPECT_GT(wasserstein(), w0 + 0.25) << "Wasserstein estimate " << w0 << " -> " << wasserstein();
  EXPECT_TRUE(std::isfinite(m->graph(1).loss_value()));
}

// The generator's step trains the generator only: the critic's weights and gradients stay.
TEST(Wgan, GeneratorStepLeavesTheCriticAlone) {
  auto be = make_cpu_backend();
  auto m = build_wgan(*be, wgan_tiny());
  m->train_step();
  const Vec critic_w = to_host(*be, m->graph(0).arena().values);
  const Vec critic_g = to_host(*be, m->graph(0).arena().grads);
  const Vec gen_w = to_host(*be, m->graph(1).arena().values);
  Graph& g = m->graph(1);
  g.zero_grad();
  g.forward();
  g.backward();
  m->optimizer(1).step();
  EXPECT_EQ(to_host(*be, m->graph(0).arena().values), critic_w);
  EXPECT_EQ(to_host(*be, m->graph(0).arena().grads), critic_g);
  EXPECT_NE(to_host(*be, m->graph(1).arena().values), gen_w);
}

TEST(Wgan, RerunGivesIdenticalLosses) {
  auto be = make_cpu_backend();
  EXPECT_EQ(train(*be, 3, 5), train(*be, 3, 5));
}

TEST(Wgan, SteadyStateStepAllocatesNothing) {
  auto be = make_cpu_backend();
  auto m = build_wgan(*be, wgan_tiny());
  m->train_step();  // warm-up
  const auto before = be->allocator().stats().num_allocations;
  const auto bytes = be->allocator().stats().total_current;
  for (int i = 0; i < 2; ++i) m->train_step();
  EXPECT_EQ(be->allocator().stats().num_allocations, before);
  EXPECT_EQ(be->allocator().stats().total_current, bytes);
}

// One row per node of both steps, the critic's counted five times; FLOPs are what runs.
TEST(Wgan, BreakdownCoversBothStepsAndTheStepsWork) {
  auto be = make_cpu_backend();
  auto m = build_wgan(*be, wgan_tiny());
  const StepBreakdown b = measure_breakdown(*m, 1);
  EXPECT_EQ(b.layers.size(), m->graph(0).nodes().size() + m->graph(1).nodes().size());
  double flops = 0;
  for (const LayerTiming& t : b.layers) flops += t.flops.total();
  EXPECT_DOUBLE_EQ(flops + b.optimizer_flops, m->step_flops());
  EXPECT_EQ(b.layers.front().name.rfind("gen_step:", 0), 0u) << b.layers.front().name;
  EXPECT_EQ(b.layers.back().name.rfind("critic_step:", 0), 0u) << b.layers.back().name;
  // The critic's layers in the generator's step compute no weight gradients.
  for (const LayerTiming& t : b.layers) {
    if (t.name.rfind("gen_step:critic.", 0) == 0) {
      EXPECT_EQ(t.flops.wgrad, 0) << t.name;
    }
  }
  EXPECT_GT(b.step_s, 0);
}

}  // namespace
}  // namespace tbd::test
