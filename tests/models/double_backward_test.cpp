// tests/models/double_backward_test.cpp: a gradient penalty trained through a double backward.
//
// A tiny WGAN-GP-style critic (conv, LayerNorm over (C, H, W), ReLU, conv, residual add, 2x2
// mean pooling, leaky ReLU, linear) on a (2, 3, 8, 8) batch; its input gradient is appended as
// forward nodes (append_input_gradient) and the loss is 10 * mean_n (||d critic / d x_n|| - 1)^2.
// The graph's input gradient is compared with a float64 reference, and every parameter's
// gradient of the penalty with float64 central finite differences of that reference.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backends.h"
#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/pool2d.h"
#include "layers/tensor_ops.h"
#include "models/double_backward.h"
#include "models/graph.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

constexpr int64_t N = 2, C = 3, H = 8, W = 8, K = 4, D = K * H * W, Hp = H / 2, Wp = W / 2;
constexpr double kEps = 1e-5, kSlope = 0.2, kPenalty = 10.0;

// 3x3 stride-1 pad-1 convolution of (N, Ci, H, W) with w (Ko, Ci, 3, 3), plus its adjoint in x.
Vec conv(const Vec& x, const Vec& w, int64_t ci, int64_t ko, const Vec* bias) {
  Vec y(N * ko * H * W, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < ko; ++k)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t v = 0; v < W; ++v) {
          double s = bias ? (*bias)[k] : 0.0;
          for (int64_t c = 0; c < ci; ++c)
            for (int64_t r = 0; r < 3; ++r)
              for (int64_t q = 0; q < 3; ++q) {
                const int64_t hh = h + r - 1, vv = v + q - 1;
                if (hh < 0 || hh >= H || vv < 0 || vv >= W) continue;
                s += x[((n * ci + c) * H + hh) * W + vv] * w[((k * ci + c) * 3 + r) * 3 + q];
              }
          y[((n * ko + k) * H + h) * W + v] = s;
        }
  return y;
}
Vec conv_dgrad(const Vec& dy, const Vec& w, int64_t ci, int64_t ko) {
  Vec dx(N * ci * H * W, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < ko; ++k)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t v = 0; v < W; ++v)
          for (int64_t c = 0; c < ci; ++c)
            for (int64_t r = 0; r < 3; ++r)
              for (int64_t q = 0; q < 3; ++q) {
                const int64_t hh = h + r - 1, vv = v + q - 1;
                if (hh < 0 || hh >= H || vv < 0 || vv >= W) continue;
                dx[((n * ci + c) * H + hh) * W + vv] +=
                    dy[((n * ko + k) * H + h) * W + v] * w[((k * ci + c) * 3 + r) * 3 + q];
              }
  return dx;
}

// The critic's parameters, in the graph's order of params().
struct Weights {
  Vec w1, b1, gamma, beta, w2, wl, bl;
};

// The float64 input gradient d sum(critic(x)) / dx, and the penalty of it.
Vec input_gradient(const Weights& p, const Vec& x) {
  const Vec c1 = conv(x, p.w1, C, K, &p.b1);
  // LayerNorm per sample over (K, H, W) with elementwise affine over the same D features.
  Vec z(N * D), xh(N * D), rs(N);
  for (int64_t n = 0; n < N; ++n) {
    double mu = 0, var = 0;
    for (int64_t i = 0; i < D; ++i) mu += c1[n * D + i] / D;
    for (int64_t i = 0; i < D; ++i) var += (c1[n * D + i] - mu) * (c1[n * D + i] - mu) / D;
    rs[n] = 1 / std::sqrt(var + kEps);
    for (int64_t i = 0; i < D; ++i) {
      xh[n * D + i] = (c1[n * D + i] - mu) * rs[n];
      z[n * D + i] = xh[n * D + i] * p.gamma[i] + p.beta[i];
    }
  }
  Vec a(N * D);
  for (int64_t i = 0; i < N * D; ++i) a[i] = z[i] > 0 ? z[i] : 0.0;
  const Vec c2 = conv(a, p.w2, K, K, nullptr);
  Vec r(N * D), pooled(N * K * Hp * Wp, 0.0);
  for (int64_t i = 0; i < N * D; ++i) r[i] = c1[i] + c2[i];
  for (int64_t nk = 0; nk < N * K; ++nk)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t v = 0; v < W; ++v)
        pooled[(nk * Hp + h / 2) * Wp + v / 2] += r[(nk * H + h) * W + v] / 4;
  // Backward from d out = 1: linear, leaky ReLU, pooling, the residual, conv2, ReLU, LayerNorm
  // (dx = r P(g)), the residual again, conv1.
  Vec dp(N * K * Hp * Wp);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < K * Hp * Wp; ++i) {
      const double pv = pooled[n * K * Hp * Wp + i];
      dp[n * K * Hp * Wp + i] = p.wl[i] * (pv > 0 ? 1.0 : kSlope);
    }
  Vec dr(N * D);
  for (int64_t nk = 0; nk < N * K; ++nk)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t v = 0; v < W; ++v)
        dr[(nk * H + h) * W + v] = dp[(nk * Hp + h / 2) * Wp + v / 2] / 4;
  const Vec da = conv_dgrad(dr, p.w2, K, K);
  Vec dc1 = dr;
  for (int64_t n = 0; n < N; ++n) {
    Vec g(D);
    double mg = 0, mgx = 0;
    for (int64_t i = 0; i < D; ++i) {
      g[i] = da[n * D + i] * (z[n * D + i] > 0 ? 1.0 : 0.0) * p.gamma[i];
      mg += g[i] / D;
      mgx += g[i] * xh[n * D + i] / D;
    }
    for (int64_t i = 0; i < D; ++i) dc1[n * D + i] += rs[n] * (g[i] - mg - xh[n * D + i] * mgx);
  }
  return conv_dgrad(dc1, p.w1, C, K);
}

double penalty(const Weights& p, const Vec& x) {
  const Vec g = input_gradient(p, x);
  double l = 0;
  for (int64_t n = 0; n < N; ++n) {
    double s = 0;
    for (int64_t i = 0; i < C * H * W; ++i) s += g[n * C * H * W + i] * g[n * C * H * W + i];
    l += (std::sqrt(s) - 1) * (std::sqrt(s) - 1);
  }
  return kPenalty * l / N;
}

struct Critic {
  TensorId x, out;
};

Critic build_critic(Graph& g, ActKind last = ActKind::kLeakyRelu) {
  Critic c;
  c.x = g.input("x", Shape{N, C, H, W});
  Conv2dConfig c1 = Conv2dConfig::square(K, 3, 1, 1, /*bias=*/true);
  TensorId h1 = g.add1("conv1", c1, {c.x});
  TensorId flat = g.add1("ln.flatten", ReshapeConfig{{N, D}}, {h1});
  TensorId ln = g.add1("ln", LayerNormConfig{kEps}, {flat});
  TensorId img = g.add1("ln.unflatten", ReshapeConfig{{N, K, H, W}}, {ln});
  TensorId a = g.add1("relu", ActivationConfig{ActKind::kRelu}, {img});
  TensorId h2 = g.add1("conv2", Conv2dConfig::square(K, 3, 1, 1), {a});
  TensorId res = g.add1("residual", AddConfig{}, {h1, h2});
  TensorId pooled = g.add1("pool", Pool2dConfig::square(PoolKind::kAvg, 2, 2), {res});
  ActivationConfig act{last};
  act.alpha = kSlope;
  TensorId l = g.add1("act", act, {pooled});
  TensorId v = g.add1("flatten", ReshapeConfig{{N, K * Hp * Wp}}, {l});
  LinearConfig fc;
  fc.out_features = 1;
  c.out = g.add1("fc", fc, {v});
  return c;
}

TEST(DoubleBackward, GradientPenaltyMatchesFloat64FiniteDifferences) {
  auto be = make_cpu_backend();
  Graph g(*be, 3);
  const Critic c = build_critic(g);
  const InputGradient ig = append_input_gradient(g, c.x, c.out, "gp");
  EXPECT_EQ(g.desc(ig.dx).shape, (Shape{N, C, H, W}));
  g.set_loss(g.add1("gp.loss", GradientPenaltyConfig{kPenalty, 1.0}, {ig.dx}));
  g.keep(ig.dx);  // read after the step
  g.finalize();

  // Parameters at scales where the penalty's terms all matter; the seed is d out = 1.
  std::vector<Param*> ps = g.params();
  ASSERT_EQ(ps.size(), 7u);
  const std::vector<std::string> names{"conv1.weight", "conv1.bias", "ln.gamma", "ln.beta",
                                       "conv2.weight", "fc.weight",  "fc.bias"};
  std::vector<Vec> pv;
  for (std::size_t k = 0; k < ps.size(); ++k) {
    EXPECT_EQ(ps[k]->name, names[k]);
    Vec v = random_vec(ps[k]->value.numel(), 40 + k, -0.5, 0.5);
    if (ps[k]->name == "ln.gamma") {
      for (double& e : v) e = 1.0 + e;
    }
    for (double& e : v) e = static_cast<float>(e);
    from_host(*be, ps[k]->value, v);
    pv.push_back(v);
  }
  Vec x = random_vec(N * C * H * W, 7);
  for (double& e : x) e = static_cast<float>(e);
  from_host(*be, g.tensor(c.x), x);
  from_host(*be, g.tensor(ig.seed), Vec(N, 1.0));
  g.zero_grad();
  g.forward();
  g.backward();

  auto weights = [&](const std::vector<Vec>& v) {
    return Weights{v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
  };
  expect_close("input gradient", to_host(*be, g.tensor(ig.dx)), input_gradient(weights(pv), x),
               Tol{1e-5, 1e-3});
  EXPECT_NEAR(g.loss_value(), penalty(weights(pv), x), 1e-4 * std::abs(penalty(weights(pv), x)));

  // Every parameter coordinate by central differences of the float64 penalty.
  for (std::size_t k = 0; k < ps.size(); ++k) {
    Vec fd(pv[k].size());
    for (std::size_t i = 0; i < pv[k].size(); ++i) {
      std::vector<Vec> lo = pv, hi = pv;
      const double h = 1e-5;
      lo[k][i] -= h;
      hi[k][i] += h;
      fd[i] = (penalty(weights(hi), x) - penalty(weights(lo), x)) / (2 * h);
    }
    expect_close(ps[k]->name + " gradient of the penalty", to_host(*be, ps[k]->grad), fd,
                 Tol{2e-4, 2e-3});
  }
  // The LayerNorm shift only moves ReLU's kinks: no gradient through the penalty.
  for (double e : to_host(*be, ps[3]->grad)) EXPECT_EQ(e, 0.0);
}

TEST(DoubleBackward, UnsupportedKindsAreNamed) {
  auto be = make_cpu_backend();
  {
    Graph g(*be, 3);
    const Critic c = build_critic(g, ActKind::kTanh);
    expect_error([&] { append_input_gradient(g, c.x, c.out, "gp"); },
                 {"ActivationDgrad 'gp.act.dgrad'", "tanh", "not supported"});
  }
  {
    Graph g(*be, 3);
    TensorId x = g.input("x", Shape{2, 4, 4, 4});
    TensorId y = g.add1("gap", GlobalAvgPool2dConfig{}, {x});
    expect_error([&] { append_input_gradient(g, x, y, "gp"); },
                 {"no input-gradient rule for GlobalAvgPool2d 'gap'", "Conv2d", "LayerNorm"});
    TensorId other = g.input("other", Shape{2, 4});
    expect_error([&] { append_input_gradient(g, other, y, "gp"); },
                 {"'gap' does not depend on 'other'"});
  }
}

}  // namespace
}  // namespace tbd::test
