// tests/layers/pool2d_test.cpp: max/average pooling and global average pooling against float64
// references, in plain and nChw16c layouts, on every target.
#include <gtest/gtest.h>

#include <limits>

#include "layers/pool2d.h"
#include "tests/layers/layer_steps.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

// Naive float64 pooling, PyTorch semantics (floor mode): window p covers rows
// [p*stride - pad, p*stride - pad + kernel); padding never wins a max; the average divides by
// kernel_h*kernel_w (count_include_pad) or by the number of real elements.
struct RefPool {
  Pool2dConfig c;
  int64_t N, C, H, W, P, Q;
  RefPool(const Shape& x, const Pool2dConfig& cfg) : c(cfg) {
    N = x[0], C = x[1], H = x[2], W = x[3];
    P = (H + 2 * c.pad_h - c.kernel_h) / c.stride_h + 1;
    Q = (W + 2 * c.pad_w - c.kernel_w) / c.stride_w + 1;
  }
  // f(y index, list of x indices in the window)
  template <class F>
  void each(F f) const {
    std::vector<int64_t> win;
    for (int64_t nc = 0; nc < N * C; ++nc)
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          win.clear();
          for (int64_t r = 0; r < c.kernel_h; ++r)
            for (int64_t s = 0; s < c.kernel_w; ++s) {
              int64_t h = p * c.stride_h - c.pad_h + r, w = q * c.stride_w - c.pad_w + s;
              if (h >= 0 && h < H && w >= 0 && w < W) win.push_back((nc * H + h) * W + w);
            }
          f((nc * P + p) * Q + q, win);
        }
  }
  double divisor(std::size_t real) const {
    return c.count_include_pad ? static_cast<double>(c.kernel_h * c.kernel_w)
                               : static_cast<double>(real);
  }
  std::vector<Vec> forward(const std::vector<Vec>& x) const {
    Vec y(N * C * P * Q);
    each([&](int64_t yi, const std::vector<int64_t>& win) {
      if (c.pool == PoolKind::kMax) {
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t xi : win) m = std::max(m, x[0][xi]);
        y[yi] = m;
      } else {
        double s = 0;
        for (int64_t xi : win) s += x[0][xi];
        y[yi] = s / divisor(win.size());
      }
    });
    return {y};
  }
  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(x[0].size(), 0.0)};
    each([&](int64_t yi, const std::vector<int64_t>& win) {
      if (c.pool == PoolKind::kMax) {
        int64_t arg = win[0];
        for (int64_t xi : win) {
          if (x[0][xi] > x[0][arg]) arg = xi;
        }
        g.dx[0][arg] += dy[0][yi];
      } else {
        for (int64_t xi : win) g.dx[0][xi] += dy[0][yi] / divisor(win.size());
      }
    });
    return g;
  }
};

struct PoolCase {
  std::string name;
  Shape x;
  Pool2dConfig cfg;
  Layout layout = Layout::kRowMajor;
};

Pool2dConfig pool(PoolKind k, int64_t kernel, int64_t stride, int64_t pad,
                  bool include_pad = true) {
  Pool2dConfig c = Pool2dConfig::square(k, kernel, stride, pad);
  c.count_include_pad = include_pad;
  return c;
}

class Pool2dTest : public LayerTest<PoolCase> {};

// Max pooling's gradient has kinks where two window elements tie; random f32 inputs make
// ties (and near-ties within the FD step) improbable, and the seeds are fixed.
TEST_P(Pool2dTest, MatchesFloat64Reference) {
  const PoolCase& tc = tcase();
  auto layer = make("pool", tc.cfg, {TensorDesc{tc.x, DType::kF32, tc.layout}});
  RefPool ref(tc.x, tc.cfg);
  EXPECT_EQ(layer->output_descs()[0].shape, (Shape{ref.N, ref.C, ref.P, ref.Q}));
  EXPECT_EQ(layer->output_descs()[0].layout, layer->input_descs()[0].layout);
  LayerCheckOptions opt;
  opt.op_class = OpClass::kElementwise;
  check_layer(
      be(), *layer, [&](auto& x, auto&) { return ref.forward(x); },
      [&](auto& x, auto&, auto& dy) { return ref.backward(x, dy); }, opt);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Pool2dTest,
    on_all_targets(::testing::Values(
        PoolCase{"max_stem_3x3s2p1_odd", Shape{2, 3, 9, 11}, pool(PoolKind::kMax, 3, 2, 1)},
        PoolCase{"max_2x2s2_blocked", Shape{2, 16, 8, 6}, pool(PoolKind::kMax, 2, 2, 0),
                 Layout::kNChw16c},
        // Floor mode leaves the last row and column unused.
        PoolCase{"max_floor_leftover_batch1", Shape{1, 5, 7, 7}, pool(PoolKind::kMax, 2, 2, 0)},
        PoolCase{"max_3x3s2p1_blocked_batch1", Shape{1, 32, 7, 5}, pool(PoolKind::kMax, 3, 2, 1),
                 Layout::kNChw16c},
        PoolCase{"avg_include_pad_blocked", Shape{2, 16, 5, 5}, pool(PoolKind::kAvg, 3, 1, 1),
                 Layout::kNChw16c},
        PoolCase{"avg_exclude_pad_odd", Shape{1, 3, 7, 6},
                 pool(PoolKind::kAvg, 3, 2, 1, /*include_pad=*/false)},
        PoolCase{"avg_exclude_pad_blocked", Shape{2, 16, 6, 7},
                 pool(PoolKind::kAvg, 3, 2, 1, /*include_pad=*/false), Layout::kNChw16c},
        PoolCase{"avg_2x2s2_nopad", Shape{3, 4, 6, 8}, pool(PoolKind::kAvg, 2, 2, 0)},
        PoolCase{"max_3x3s2p1_channels_last", Shape{2, 5, 7, 6}, pool(PoolKind::kMax, 3, 2, 1),
                 Layout::kNhwc},
        PoolCase{"avg_exclude_pad_channels_last", Shape{2, 6, 6, 7},
                 pool(PoolKind::kAvg, 3, 2, 1, /*include_pad=*/false), Layout::kNhwc},
        PoolCase{"avg_rect_include_pad", Shape{2, 2, 6, 9}, [] {
                   Pool2dConfig c = pool(PoolKind::kAvg, 2, 1, 1);
                   c.kernel_w = 3, c.stride_w = 2, c.pad_h = 0;
                   return c;
                 }()},
        PoolCase{"max_rect", Shape{2, 2, 5, 8}, [] {
                   Pool2dConfig c = pool(PoolKind::kMax, 3, 1, 1);
                   c.kernel_w = 2, c.stride_w = 2, c.pad_w = 0;
                   return c;
                 }()},
        PoolCase{"max_2x2s2_odd_width", Shape{2, 3, 8, 9}, pool(PoolKind::kMax, 2, 2, 0)},
        PoolCase{"max_3x3s2p1_11x11", Shape{2, 4, 11, 11}, pool(PoolKind::kMax, 3, 2, 1)},
        PoolCase{"avg_3x3s2p1_include_pad", Shape{2, 4, 11, 10}, pool(PoolKind::kAvg, 3, 2, 1)},
        PoolCase{"avg_3x3s2p1_exclude_pad", Shape{2, 4, 11, 10},
                 pool(PoolKind::kAvg, 3, 2, 1, /*include_pad=*/false)})),
    CaseOnTarget());

struct GapCase {
  std::string name;
  Shape x;
  Layout layout = Layout::kRowMajor;
};

class GlobalAvgPool2dTest : public LayerTest<GapCase> {};

TEST_P(GlobalAvgPool2dTest, MatchesFloat64Reference) {
  const GapCase& tc = tcase();
  auto layer = make("gap", GlobalAvgPool2dConfig{}, {TensorDesc{tc.x, DType::kF32, tc.layout}});
  const int64_t NC = tc.x[0] * tc.x[1], HW = tc.x[2] * tc.x[3];
  EXPECT_EQ(layer->output_descs()[0].shape, (Shape{tc.x[0], tc.x[1]}));
  EXPECT_EQ(layer->output_descs()[0].layout, Layout::kRowMajor);
  LayerCheckOptions opt;
  opt.op_class = OpClass::kReduction;
  check_layer(
      be(), *layer,
      [&](auto& x, auto&) {
        Vec y(NC, 0.0);
        for (int64_t i = 0; i < NC * HW; ++i) y[i / HW] += x[0][i] / HW;
        return std::vector<Vec>{y};
      },
      [&](auto& x, auto&, auto& dy) {
        RefGrads g;
        g.dx = {Vec(x[0].size())};
        for (int64_t i = 0; i < NC * HW; ++i) g.dx[0][i] = dy[0][i / HW] / HW;
        return g;
      },
      opt);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GlobalAvgPool2dTest,
                         on_all_targets(::testing::Values(
                             GapCase{"plain_odd", Shape{2, 5, 3, 7}},
                             GapCase{"plain_batch1_1x1", Shape{1, 3, 1, 1}},
                             GapCase{"plain_7x7", Shape{2, 5, 7, 7}},
                             GapCase{"blocked", Shape{3, 32, 4, 4}, Layout::kNChw16c},
                             GapCase{"blocked_batch1_7x7", Shape{1, 16, 7, 7}, Layout::kNChw16c},
                             GapCase{"channels_last", Shape{2, 5, 3, 4}, Layout::kNhwc})),
                         CaseOnTarget());

TEST(Pool2dErrors, WrongRankNamesLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  try {
    make_layer(*be, "maxpool", Pool2dConfig{}, {TensorDesc{Shape{8, 112, 112}}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("Pool2d 'maxpool'"), std::string::npos) << m;
    EXPECT_NE(m.find("input x"), std::string::npos) << m;
    EXPECT_NE(m.find("(8, 112, 112)"), std::string::npos) << m;
  }
  try {
    make_layer(*be, "avgpool", GlobalAvgPool2dConfig{}, {TensorDesc{Shape{8, 2048}}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("GlobalAvgPool2d 'avgpool'"), std::string::npos) << m;
    EXPECT_NE(m.find("(8, 2048)"), std::string::npos) << m;
  }
}

TEST(Pool2dErrors, BadShapesAndConfigsAreRejected) {
  auto be = make_cpu_backend();
  auto make = [&](Pool2dConfig c, Shape x) {
    return make_layer(*be, "p", c, {TensorDesc{std::move(x)}});
  };
  Pool2dConfig ok = pool(PoolKind::kMax, 3, 2, 1);
  EXPECT_THROW(make(ok, Shape{1, 0, 8, 8}), Error);                             // zero channels
  EXPECT_THROW(make(ok, Shape{1, 3, -8, 8}), Error);                            // negative height
  EXPECT_THROW(make(pool(PoolKind::kMax, 5, 1, 0), Shape{1, 3, 4, 8}), Error);  // kernel > input
  EXPECT_THROW(make(pool(PoolKind::kMax, 0, 1, 0), Shape{1, 3, 4, 4}), Error);  // zero kernel
  EXPECT_THROW(make(pool(PoolKind::kMax, 2, 0, 0), Shape{1, 3, 4, 4}), Error);  // zero stride
  EXPECT_THROW(make(pool(PoolKind::kAvg, 2, 1, 2), Shape{1, 3, 4, 4}), Error);  // pad >= kernel
  EXPECT_THROW(make_layer(*be, "p", ok, {TensorDesc{Shape{1, 3, 8, 8}, DType::kI32}}), Error);
  EXPECT_THROW(make_layer(*be, "g", GlobalAvgPool2dConfig{}, {TensorDesc{Shape{2, 3, 0, 4}}}),
               Error);
}

TEST(Pool2dFlops, MatchesFormula) {
  Shape x{32, 64, 112, 112}, y{32, 64, 56, 56};
  const double out = 32.0 * 64 * 56 * 56;
  Flops mx = pool2d_flops(pool(PoolKind::kMax, 3, 2, 1), x, y);
  EXPECT_DOUBLE_EQ(mx.fprop, out * 9);
  EXPECT_DOUBLE_EQ(mx.dgrad, out);
  Flops av = pool2d_flops(pool(PoolKind::kAvg, 3, 2, 1), x, y);
  EXPECT_DOUBLE_EQ(av.fprop, out * 10);
  EXPECT_DOUBLE_EQ(av.dgrad, out * 10);
  EXPECT_DOUBLE_EQ(av.wgrad, 0);
  Flops g = global_avg_pool2d_flops(Shape{32, 2048, 7, 7});
  EXPECT_DOUBLE_EQ(g.fprop, 32.0 * 2048 * 49);
  EXPECT_DOUBLE_EQ(g.dgrad, 32.0 * 2048 * 49);
}

TEST(Pool2dSteps, AllocateNothing) {
  auto be = make_cpu_backend();
  for (Layout l : {Layout::kRowMajor, Layout::kNChw16c, Layout::kNhwc}) {
    TensorDesc x{Shape{2, 16, 7, 7}, DType::kF32, l};
    auto mx = make_layer(*be, "max", pool(PoolKind::kMax, 3, 2, 1), {x});
    EXPECT_EQ(allocations_in_step(*be, *mx), 0u) << to_string(l);
    auto av = make_layer(*be, "avg", pool(PoolKind::kAvg, 3, 2, 1), {x});
    EXPECT_EQ(allocations_in_step(*be, *av), 0u) << to_string(l);
    auto gap = make_layer(*be, "gap", GlobalAvgPool2dConfig{}, {x});
    EXPECT_EQ(allocations_in_step(*be, *gap), 0u) << to_string(l);
  }
}

}  // namespace
}  // namespace tbd::test
