// tests/layers/batchnorm_ref.h: the float64 reference of batch normalization per channel over
// (N, HW) and the running-statistics check, shared by the BatchNorm2d and SequenceBatchNorm
// suites (a SequenceBatchNorm of (..., C) is a BatchNorm2d of (M, C, 1, 1)).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "layers/batchnorm2d.h"
#include "tests/support/check.h"

namespace tbd::test {

// Naive float64 batch normalisation over (N, HW) per channel; tensors plain (N, C, HW).
struct RefBn {
  int64_t N, C, HW;
  double eps;
  bool relu;  // a fused ReLU after the normalisation
  RefBn(int64_t n, int64_t c, int64_t hw, double e, bool r = false)
      : N(n), C(c), HW(hw), eps(e), relu(r) {}
  // y from the normalised values; dy masked where the ReLU cut them off.
  Vec out(Vec pre) const {
    if (relu)
      for (double& v : pre) v = std::max(v, 0.0);
    return pre;
  }
  Vec masked(const Vec& dy, const Vec& pre) const {
    Vec g = dy;
    if (relu)
      for (std::size_t k = 0; k < g.size(); ++k) g[k] = pre[k] > 0 ? g[k] : 0.0;
    return g;
  }

  int64_t at(int64_t n, int64_t c, int64_t i) const { return (n * C + c) * HW + i; }
  double count() const { return static_cast<double>(N * HW); }

  // Batch mean and biased variance.
  void stats(const Vec& x, Vec& mean, Vec& var) const {
    mean.assign(C, 0.0);
    var.assign(C, 0.0);
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < HW; ++i) mean[c] += x[at(n, c, i)];
      mean[c] /= count();
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < HW; ++i) var[c] += std::pow(x[at(n, c, i)] - mean[c], 2);
      var[c] /= count();
    }
  }
  // y = gamma * (x - mean) / sqrt(var + eps) + beta.
  Vec normalize(const Vec& x, const Vec& g, const Vec& b, const Vec& mean, const Vec& var) const {
    Vec y(x.size());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < HW; ++i) {
          int64_t k = at(n, c, i);
          y[k] = g[c] * (x[k] - mean[c]) / std::sqrt(var[c] + eps) + b[c];
        }
    return y;
  }
  std::vector<Vec> forward_train(const std::vector<Vec>& x, const std::vector<Vec>& p) const {
    Vec mean, var;
    stats(x[0], mean, var);
    return {out(normalize(x[0], p[0], p[1], mean, var))};
  }
  // dx = g*rstd/M * (M*dy - sum(dy) - xhat*sum(dy*xhat)); dgamma = sum dy*xhat; dbeta = sum dy.
  RefGrads backward_train(const std::vector<Vec>& x, const std::vector<Vec>& p,
                          const std::vector<Vec>& dy_in) const {
    Vec mean, var;
    stats(x[0], mean, var);
    const std::vector<Vec> dy{masked(dy_in[0], normalize(x[0], p[0], p[1], mean, var))};
    RefGrads r;
    r.dx = {Vec(x[0].size())};
    r.dparams = {Vec(C, 0.0), Vec(C, 0.0)};
    for (int64_t c = 0; c < C; ++c) {
      double rstd = 1.0 / std::sqrt(var[c] + eps), sdy = 0, sdyx = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < HW; ++i) {
          int64_t k = at(n, c, i);
          double xh = (x[0][k] - mean[c]) * rstd;
          sdy += dy[0][k];
          sdyx += dy[0][k] * xh;
        }
      r.dparams[0][c] = sdyx;
      r.dparams[1][c] = sdy;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < HW; ++i) {
          int64_t k = at(n, c, i);
          double xh = (x[0][k] - mean[c]) * rstd;
          r.dx[0][k] = p[0][c] * rstd / count() * (count() * dy[0][k] - sdy - xh * sdyx);
        }
    }
    return r;
  }
  // Eval: fixed statistics, so y is affine in x.
  RefGrads backward_eval(const std::vector<Vec>& x, const std::vector<Vec>& p,
                         const std::vector<Vec>& dy_in, const Vec& mean, const Vec& var) const {
    const std::vector<Vec> dy{masked(dy_in[0], normalize(x[0], p[0], p[1], mean, var))};
    RefGrads r;
    r.dx = {Vec(x[0].size())};
    r.dparams = {Vec(C, 0.0), Vec(C, 0.0)};
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < HW; ++i) {
          int64_t k = at(n, c, i);
          double rstd = 1.0 / std::sqrt(var[c] + eps);
          r.dx[0][k] = dy[0][k] * p[0][c] * rstd;
          r.dparams[0][c] += dy[0][k] * (x[0][k] - mean[c]) * rstd;
          r.dparams[1][c] += dy[0][k];
        }
    return r;
  }
};

// The harness's options for a normalisation.
inline LayerCheckOptions bn_options() {
  LayerCheckOptions o;
  o.op_class = OpClass::kReduction;
  return o;
}

// Training forward and backward of `layer` against `ref`. Without an input gradient (x is
// data) the weight and bias gradients come from the implementation's own reduction; the
// reference's finite differences run in the case with one.
inline void check_bn_training(Backend& be, Layer& layer, const RefBn& ref, bool x_needs_grad) {
  LayerCheckOptions opt = bn_options();
  opt.x_needs_grad = {x_needs_grad};
  opt.run_fd = x_needs_grad;
  check_layer(
      be, layer, [&](auto& x, auto& p) { return ref.forward_train(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward_train(x, p, dy); }, opt);
}

// Two training steps of `layer` (built with `momentum`, fresh) update its running statistics
// (momentum, unbiased variance), which start at mean 0 and variance 1 as buffers of category
// dynamic; eval mode then normalises with them, forward and backward, and leaves them alone.
inline void check_running_stats_and_eval(Backend& be, Target target, Layer& layer, const RefBn& ref,
                                         double momentum) {
  const Tol tol = tolerance(target, Phase::kFprop, OpClass::kReduction);
  auto* bn = dynamic_cast<BatchNormLayer*>(&layer);
  ASSERT_NE(bn, nullptr);
  EXPECT_EQ(bn->running_mean().category(), MemCategory::kDynamic);
  EXPECT_EQ(bn->running_var().category(), MemCategory::kDynamic);
  const int64_t C = ref.C;
  Vec rm(C, 0.0), rv(C, 1.0);
  EXPECT_TRUE(expect_close("initial running mean", to_host(be, bn->running_mean()), rm, tol));
  EXPECT_TRUE(expect_close("initial running var", to_host(be, bn->running_var()), rv, tol));

  Tensor x = be.empty(layer.input_descs()[0], MemCategory::kDynamic);
  Tensor y = be.empty(layer.output_descs()[0], MemCategory::kFeatureMaps);
  const double m = momentum, M = ref.count();
  for (int step = 0; step < 2; ++step) {
    // Shifted, scaled inputs so the statistics are far from the initial 0 and 1.
    Vec xv = random_vec(x.numel(), 50 + step, -1.0 + step, 2.0 + 2 * step);
    for (auto& v : xv) v = static_cast<float>(v);
    from_host(be, x, xv);
    const Tensor* xp[] = {&x};
    Tensor* yp[] = {&y};
    layer.forward(yp, xp);
    Vec mean, var;
    ref.stats(xv, mean, var);
    for (int64_t c = 0; c < C; ++c) {
      rm[c] = (1 - m) * rm[c] + m * mean[c];
      rv[c] = (1 - m) * rv[c] + m * var[c] * (M > 1 ? M / (M - 1) : 1.0);
    }
  }
  EXPECT_TRUE(expect_close("running mean", to_host(be, bn->running_mean()), rm, tol));
  EXPECT_TRUE(expect_close("running var", to_host(be, bn->running_var()), rv, tol));

  Vec rm_f = to_host(be, bn->running_mean()), rv_f = to_host(be, bn->running_var());
  LayerCheckOptions opt = bn_options();
  opt.training = false;
  check_layer(
      be, layer,
      [&](auto& xs, auto& p) {
        return std::vector<Vec>{ref.out(ref.normalize(xs[0], p[0], p[1], rm_f, rv_f))};
      },
      [&](auto& xs, auto& p, auto& dy) { return ref.backward_eval(xs, p, dy, rm_f, rv_f); }, opt);
  // Eval mode leaves the running statistics alone.
  EXPECT_TRUE(
      expect_close("running mean after eval", to_host(be, bn->running_mean()), rm_f, Tol{0, 0}));
}

}  // namespace tbd::test
