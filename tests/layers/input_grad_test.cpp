// tests/layers/input_grad_test.cpp: the input-gradient kinds (a kind's dgrad as a forward layer,
// for double backward) and GradientPenalty against float64 references, with finite
// differences of the references, on every target that implements them; their refusals.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/input_grad.h"
#include "layers/loss.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

// Every kind here runs on every target that implements it (the CPU, so far).
class InputGradTest : public TargetTest {};
INSTANTIATE_TEST_SUITE_P(Targets, InputGradTest, ::testing::ValuesIn(kAllTargets), TargetName());

// ---- LinearDgrad: dx = dy W, W (O, I) ----

struct RefLinearDgrad {
  int64_t M, O, I;
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>& p) const {
    Vec dx(M * I, 0.0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t o = 0; o < O; ++o)
        for (int64_t i = 0; i < I; ++i) dx[m * I + i] += x[0][m * O + o] * p[0][o * I + i];
    return {dx};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>& p,
                    const std::vector<Vec>& v) const {
    RefGrads g;
    g.dx = {Vec(M * O, 0.0)};
    g.dparams = {Vec(O * I, 0.0)};
    for (int64_t m = 0; m < M; ++m)
      for (int64_t o = 0; o < O; ++o)
        for (int64_t i = 0; i < I; ++i) {
          g.dx[0][m * O + o] += v[0][m * I + i] * p[0][o * I + i];
          g.dparams[0][o * I + i] += x[0][m * O + o] * v[0][m * I + i];
        }
    return g;
  }
};

TEST_P(InputGradTest, LinearDgradMatchesFloat64Reference) {
  Backend* be = &this->be();
  TBD_SKIP_WITHOUT_IMPLEMENTATION(LinearDgradConfig, *be);
  for (const auto& [dy, in] : std::vector<std::pair<Shape, int64_t>>{
           {Shape{4, 3}, 5}, {Shape{2, 3, 7}, 6}, {Shape{1, 1}, 9}}) {
    SCOPED_TRACE(dy.to_string());
    LinearDgradConfig c;
    c.in_features = in;
    auto layer = make_layer(*be, "fc.dgrad", c, {TensorDesc{dy}});
    EXPECT_EQ(layer->output_descs()[0].shape[-1], in);
    RefLinearDgrad ref{dy.numel() / dy[-1], dy[-1], in};
    check_layer(
        *be, *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
        [&](auto& x, auto& p, auto& v) { return ref.backward(x, p, v); });
  }
}

// ---- Conv2dDgrad: dx = conv^T(dy, W) ----

// Direct float64 convolution (cross-correlation) with groups, stride and padding, and its two
// adjoints: everything the Conv2dDgrad reference needs.
struct RefConv {
  int64_t N, C, H, W, K, R, S, stride, pad, G, P, Q;
  RefConv(const Shape& x, int64_t k, int64_t r, int64_t s_, int64_t pd, int64_t g)
      : N(x[0]), C(x[1]), H(x[2]), W(x[3]), K(k), R(r), S(r), stride(s_), pad(pd), G(g) {
    P = (H + 2 * pad - R) / stride + 1;
    Q = (W + 2 * pad - S) / stride + 1;
  }
  // Calls f(x index, w index, y index) for every multiply of the forward.
  template <class F>
  void each(F&& f) const {
    const int64_t Cg = C / G, Kg = K / G;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t p = 0; p < P; ++p)
            for (int64_t q = 0; q < Q; ++q)
              for (int64_t r = 0; r < R; ++r)
                for (int64_t s = 0; s < S; ++s) {
                  const int64_t h = p * stride - pad + r, w = q * stride - pad + s;
                  if (h < 0 || h >= H || w < 0 || w >= W) continue;
                  const int64_t cc = (k / Kg) * Cg + c;
                  f(((n * C + cc) * H + h) * W + w, ((k * Cg + c) * R + r) * S + s,
                    ((n * K + k) * P + p) * Q + q);
                }
  }
  Vec fprop(const Vec& x, const Vec& w) const {
    Vec y(N * K * P * Q, 0.0);
    each([&](int64_t xi, int64_t wi, int64_t yi) { y[yi] += x[xi] * w[wi]; });
    return y;
  }
  Vec dgrad(const Vec& dy, const Vec& w) const {
    Vec dx(N * C * H * W, 0.0);
    each([&](int64_t xi, int64_t wi, int64_t yi) { dx[xi] += dy[yi] * w[wi]; });
    return dx;
  }
  Vec wgrad(const Vec& x, const Vec& dy) const {
    Vec dw(K * (C / G) * R * S, 0.0);
    each([&](int64_t xi, int64_t wi, int64_t yi) { dw[wi] += x[xi] * dy[yi]; });
    return dw;
  }
};

TEST_P(InputGradTest, Conv2dDgradMatchesFloat64Reference) {
  Backend* be = &this->be();
  TBD_SKIP_WITHOUT_IMPLEMENTATION(Conv2dDgradConfig, *be);
  struct Case {
    Shape x;
    int64_t k, r, stride, pad, groups;
  };
  for (const Case& tc :
       {Case{Shape{2, 3, 7, 7}, 4, 3, 1, 1, 1}, Case{Shape{2, 4, 8, 8}, 6, 3, 2, 1, 2},
        Case{Shape{1, 5, 6, 5}, 3, 1, 1, 0, 1}, Case{Shape{2, 2, 9, 9}, 4, 4, 2, 1, 1},
        // Channels in 16s: the CPU's blocked path (nChw16c copies at the edges).
        Case{Shape{2, 16, 6, 6}, 32, 3, 1, 1, 1}, Case{Shape{1, 32, 4, 4}, 16, 1, 1, 0, 1},
        Case{Shape{2, 16, 7, 7}, 16, 3, 2, 1, 1}}) {
    SCOPED_TRACE(tc.x.to_string());
    RefConv ref(tc.x, tc.k, tc.r, tc.stride, tc.pad, tc.groups);
    Conv2dDgradConfig c;
    c.conv = Conv2dConfig::square(tc.k, tc.r, tc.stride, tc.pad);
    c.conv.groups = tc.groups;
    c.in_channels = ref.C, c.in_h = ref.H, c.in_w = ref.W;
    auto layer = make_layer(*be, "conv.dgrad", c, {TensorDesc{Shape{ref.N, ref.K, ref.P, ref.Q}}});
    EXPECT_EQ(layer->output_descs()[0].shape, tc.x);
    check_layer(
        *be, *layer, [&](auto& x, auto& p) { return std::vector<Vec>{ref.dgrad(x[0], p[0])}; },
        [&](auto& x, auto& p, auto& v) {
          RefGrads g;
          g.dx = {ref.fprop(v[0], p[0])};
          g.dparams = {ref.wgrad(v[0], x[0])};
          return g;
        });
  }
}

// ---- ActivationDgrad: dx = dy * f'(x) ----

TEST_P(InputGradTest, ActivationDgradMatchesFloat64Reference) {
  Backend* be = &this->be();
  TBD_SKIP_WITHOUT_IMPLEMENTATION(ActivationDgradConfig, *be);
  for (const auto& [act, alpha] :
       std::vector<std::pair<ActKind, double>>{{ActKind::kRelu, 0.0}, {ActKind::kLeakyRelu, 0.2}}) {
    SCOPED_TRACE(to_string(act));
    ActivationDgradConfig c;
    c.act.act = act;
    c.act.alpha = alpha;
    const Shape s{3, 4, 5};
    auto layer = make_layer(*be, "relu.dgrad", c, {TensorDesc{s}, TensorDesc{s}});
    EXPECT_TRUE(layer->input_grad(0));
    EXPECT_FALSE(layer->input_grad(1));  // piecewise constant in x
    const double slope = act == ActKind::kRelu ? 0.0 : alpha;
    auto d = [&](double x) { return x > 0 ? 1.0 : slope; };
    LayerCheckOptions o;
    o.x_needs_grad = {true, false};
    check_layer(
        *be, *layer,
        [&](auto& x, auto&) {
          Vec y(x[0].size());
          for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] * d(x[1][i]);
          return std::vector<Vec>{y};
        },
        [&](auto& x, auto&, auto& v) {
          RefGrads g;
          g.dx = {Vec(x[0].size()), Vec()};
          for (std::size_t i = 0; i < x[0].size(); ++i) g.dx[0][i] = v[0][i] * d(x[1][i]);
          return g;
        },
        o);
  }
}

// ---- Pool2dDgrad (average) ----

TEST_P(InputGradTest, Pool2dDgradMatchesFloat64Reference) {
  Backend* be = &this->be();
  TBD_SKIP_WITHOUT_IMPLEMENTATION(Pool2dDgradConfig, *be);
  struct Case {
    Shape x;
    int64_t k, stride, pad;
    bool include_pad;
  };
  for (const Case& tc :
       {Case{Shape{2, 3, 8, 8}, 2, 2, 0, true}, Case{Shape{1, 2, 7, 6}, 3, 1, 1, false},
        Case{Shape{1, 2, 7, 6}, 3, 2, 1, true}}) {
    SCOPED_TRACE(tc.x.to_string());
    Pool2dDgradConfig c;
    c.pool = Pool2dConfig::square(PoolKind::kAvg, tc.k, tc.stride, tc.pad);
    c.pool.count_include_pad = tc.include_pad;
    c.in_h = tc.x[2], c.in_w = tc.x[3];
    const int64_t N = tc.x[0] * tc.x[1], H = tc.x[2], W = tc.x[3];
    const int64_t P = (H + 2 * tc.pad - tc.k) / tc.stride + 1;
    const int64_t Q = (W + 2 * tc.pad - tc.k) / tc.stride + 1;
    auto layer = make_layer(*be, "pool.dgrad", c, {TensorDesc{Shape{tc.x[0], tc.x[1], P, Q}}});
    EXPECT_EQ(layer->output_descs()[0].shape, tc.x);
    // each(f): f(x index, y index, 1 / divisor) for every (window, element) pair of the
    // forward average pooling.
    auto each = [&](auto&& f) {
      for (int64_t n = 0; n < N; ++n)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t q = 0; q < Q; ++q) {
            int64_t cnt = 0;
            for (int pass = 0; pass < 2; ++pass)
              for (int64_t r = 0; r < tc.k; ++r)
                for (int64_t s = 0; s < tc.k; ++s) {
                  const int64_t h = p * tc.stride - tc.pad + r, w = q * tc.stride - tc.pad + s;
                  if (h < 0 || h >= H || w < 0 || w >= W) continue;
                  if (pass == 0) {
                    ++cnt;
                    continue;
                  }
                  const double div =
                      tc.include_pad ? static_cast<double>(tc.k * tc.k) : static_cast<double>(cnt);
                  f((n * H + h) * W + w, (n * P + p) * Q + q, 1.0 / div);
                }
          }
    };
    check_layer(
        *be, *layer,
        [&](auto& x, auto&) {
          Vec dx(N * H * W, 0.0);
          each([&](int64_t xi, int64_t yi, double inv) { dx[xi] += x[0][yi] * inv; });
          return std::vector<Vec>{dx};
        },
        [&](auto&, auto&, auto& v) {
          RefGrads g;
          g.dx = {Vec(N * P * Q, 0.0)};
          each([&](int64_t xi, int64_t yi, double inv) { g.dx[0][yi] += v[0][xi] * inv; });
          return g;
        });
  }
}

// ---- LayerNormDgrad ----

// gamma is indexed i / G: G = 1 over the last dim, H*W over (C, H, W) (a row is a sample).
struct RefLnDgrad {
  int64_t M, D;
  double eps;
  int64_t G = 1;
  // dx = r P(g), g = dy * gamma, per row.
  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>& p) const {
    Vec dx(M * D);
    for (int64_t m = 0; m < M; ++m) {
      Vec xh, g;
      double r = row(x[1], m, &xh);
      for (int64_t i = 0; i < D; ++i) g.push_back(x[0][m * D + i] * p[0][i / G]);
      Vec pg = proj(g, xh);
      for (int64_t i = 0; i < D; ++i) dx[m * D + i] = r * pg[i];
    }
    return {dx};
  }
  // The formulas of layers/input_grad.h; the finite differences of forward() check them.
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>& p,
                    const std::vector<Vec>& vv) const {
    RefGrads out;
    out.dx = {Vec(M * D), Vec(M * D)};
    out.dparams = {Vec(D / G, 0.0)};
    for (int64_t m = 0; m < M; ++m) {
      Vec xh, g, v;
      double r = row(x[1], m, &xh);
      for (int64_t i = 0; i < D; ++i) {
        g.push_back(x[0][m * D + i] * p[0][i / G]);
        v.push_back(vv[0][m * D + i]);
      }
      Vec pg = proj(g, xh), pv = proj(v, xh);
      double mg = 0, mgx = 0, mv = 0, mvx = 0, mvg = 0;
      for (int64_t i = 0; i < D; ++i) {
        mg += g[i] / D, mgx += g[i] * xh[i] / D, mv += v[i] / D, mvx += v[i] * xh[i] / D;
        mvg += v[i] * g[i] / D;
      }
      for (int64_t i = 0; i < D; ++i) {
        out.dx[0][m * D + i] = r * pv[i] * p[0][i / G];
        out.dparams[0][i / G] += r * pv[i] * x[0][m * D + i];
        out.dx[1][m * D + i] =
            r * r * (xh[i] * (mgx * mvx - mvg + mg * mv) - pg[i] * mvx - pv[i] * mgx);
      }
    }
    return out;
  }
  double row(const Vec& x, int64_t m, Vec* xh) const {
    double mu = 0, var = 0;
    for (int64_t i = 0; i < D; ++i) mu += x[m * D + i] / D;
    for (int64_t i = 0; i < D; ++i) var += (x[m * D + i] - mu) * (x[m * D + i] - mu) / D;
    const double r = 1 / std::sqrt(var + eps);
    for (int64_t i = 0; i < D; ++i) xh->push_back((x[m * D + i] - mu) * r);
    return r;
  }
  // P(u) = u - mean(u) - xh mean(u xh)
  Vec proj(const Vec& u, const Vec& xh) const {
    double mu = 0, mux = 0;
    for (int64_t i = 0; i < D; ++i) mu += u[i] / D, mux += u[i] * xh[i] / D;
    Vec out(D);
    for (int64_t i = 0; i < D; ++i) out[i] = u[i] - mu - xh[i] * mux;
    return out;
  }
};

TEST_P(InputGradTest, LayerNormDgradMatchesFloat64Reference) {
  Backend* be = &this->be();
  TBD_SKIP_WITHOUT_IMPLEMENTATION(LayerNormDgradConfig, *be);
  for (const Shape& s : {Shape{3, 8}, Shape{2, 3, 5}, Shape{2, 48}}) {
    SCOPED_TRACE(s.to_string());
    LayerNormDgradConfig c;
    auto layer = make_layer(*be, "ln.dgrad", c, {TensorDesc{s}, TensorDesc{s}});
    RefLnDgrad ref{s.numel() / s[-1], s[-1], c.ln.eps};
    LayerCheckOptions o;
    o.op_class = OpClass::kReduction;
    check_layer(
        *be, *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
        [&](auto& x, auto& p, auto& v) { return ref.backward(x, p, v); }, o);
  }
  // Over (C, H, W): a sample per row, gamma per channel.
  for (const Shape& s : {Shape{2, 3, 2, 4}, Shape{1, 5, 3, 3}}) {
    SCOPED_TRACE(s.to_string());
    LayerNormDgradConfig c;
    c.ln.over = LayerNormOver::kChw;
    auto layer = make_layer(*be, "ln.dgrad", c, {TensorDesc{s}, TensorDesc{s}});
    EXPECT_EQ(layer->params()[0].value.shape(), (Shape{s[1]}));
    RefLnDgrad ref{s[0], s.numel() / s[0], c.ln.eps, s[2] * s[3]};
    LayerCheckOptions o;
    o.op_class = OpClass::kReduction;
    check_layer(
        *be, *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
        [&](auto& x, auto& p, auto& v) { return ref.backward(x, p, v); }, o);
  }
}

// ---- GradientPenalty ----

TEST_P(InputGradTest, GradientPenaltyMatchesFloat64Reference) {
  Backend* be = &this->be();
  TBD_SKIP_WITHOUT_IMPLEMENTATION(GradientPenaltyConfig, *be);
  for (const Shape& s : {Shape{4, 6}, Shape{3, 2, 3, 3}, Shape{1, 1}}) {
    SCOPED_TRACE(s.to_string());
    GradientPenaltyConfig c;
    c.weight = 10, c.target = 1;
    auto layer = make_layer(*be, "gp", c, {TensorDesc{s}});
    const int64_t N = s[0], D = s.numel() / N;
    auto norm = [&](const Vec& g, int64_t n) {
      double t = 0;
      for (int64_t i = 0; i < D; ++i) t += g[n * D + i] * g[n * D + i];
      return std::sqrt(t);
    };
    check_layer(
        *be, *layer,
        [&](auto& x, auto&) {
          double l = 0;
          for (int64_t n = 0; n < N; ++n) l += (norm(x[0], n) - 1) * (norm(x[0], n) - 1);
          return std::vector<Vec>{Vec{10 * l / N}};
        },
        [&](auto& x, auto&, auto& dy) {
          RefGrads g;
          g.dx = {Vec(N * D)};
          for (int64_t n = 0; n < N; ++n) {
            const double nn = norm(x[0], n);
            for (int64_t i = 0; i < D; ++i)
              g.dx[0][n * D + i] = dy[0][0] * 10 * 2 * (nn - 1) / N * x[0][n * D + i] / nn;
          }
          return g;
        });
  }
}

// ---- refusals ----

TEST(InputGradErrors, NameTheLayerAndWhatIsUnsupported) {
  auto be = make_cpu_backend();
  const TensorDesc d{Shape{2, 3}};
  ActivationDgradConfig tanh;
  tanh.act.act = ActKind::kTanh;
  expect_error(
      [&] {
        make_layer(*be, "t.dgrad", tanh, {d, d});
      },
      {"ActivationDgrad 't.dgrad'", "tanh", "not supported"});
  Pool2dDgradConfig maxp;
  maxp.pool = Pool2dConfig::square(PoolKind::kMax, 2, 2);
  maxp.in_h = maxp.in_w = 4;
  expect_error(
      [&] {
        make_layer(*be, "p.dgrad", maxp, {TensorDesc{Shape{1, 1, 2, 2}}});
      },
      {"Pool2dDgrad 'p.dgrad'", "max pooling"});
  Conv2dDgradConfig conv;
  conv.conv = Conv2dConfig::square(4, 3, 1, 1);
  conv.in_channels = 3, conv.in_h = 8, conv.in_w = 8;
  expect_error(
      [&] {
        make_layer(*be, "c.dgrad", conv, {TensorDesc{Shape{2, 4, 7, 8}}});
      },
      {"Conv2dDgrad 'c.dgrad'", "(2, 4, 7, 8)", "(2, 4, 8, 8)"});
  LinearDgradConfig lin;
  expect_error([&] { make_layer(*be, "l.dgrad", lin, {d}); },
               {"LinearDgrad 'l.dgrad'", "in_features"});
  expect_error([&] { make_layer(*be, "gp", GradientPenaltyConfig{}, {TensorDesc{Shape{5}}}); },
               {"GradientPenalty 'gp'", "rank >= 2", "(5)"});
}

}  // namespace
}  // namespace tbd::test
