// tests/layers/roi_pool_test.cpp: RoIPool (max: MXNet ROIPooling / torchvision roi_pool; align:
// torchvision roi_align, aligned = false) against float64 references on every target, in plain
// and nChw16c layouts: RoIs at fractional coordinates, partly and wholly outside the map, tiny,
// degenerate and inverted, on several images; plus the batch-index error and the contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>

#include "core/random.h"
#include "layers/roi_pool.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct RoICase {
  std::string name;
  Shape x;   // (N, C, H, W)
  Vec rois;  // R rows (batch_index, x1, y1, x2, y2), image pixels
  RoIPoolMode mode = RoIPoolMode::kMax;
  int64_t ph = 3, pw = 4;
  double scale = 1.0 / 8;
  int64_t sampling_ratio = 0;
  Layout layout = Layout::kRowMajor;  // nChw16c: the CPU's blocked path (elsewhere row-major)
};

// The references: written from torchvision's roi_pool_kernel.cpp and roi_align_kernel.cpp
// (CPU), not from layers/roi_pool.h. The max pool's box quantization is float arithmetic in
// torchvision and MXNet (bin edges are floor/ceil of float products, which double can put on
// the other side of an integer), so it is float here too; everything else is double.
struct RefRoIPool {
  const RoICase& c;
  int64_t N() const { return c.x[0]; }
  int64_t C() const { return c.x[1]; }
  int64_t H() const { return c.x[2]; }
  int64_t W() const { return c.x[3]; }
  int64_t R() const { return static_cast<int64_t>(c.rois.size()) / 5; }
  int64_t out(int64_t r, int64_t ch, int64_t ph, int64_t pw) const {
    return ((r * C() + ch) * c.ph + ph) * c.pw + pw;
  }
  int64_t in(int64_t n, int64_t ch, int64_t h, int64_t w) const {
    return ((n * C() + ch) * H() + h) * W() + w;
  }

  // The cells of max bin (ph, pw) of RoI r: [hs, he) x [ws, we).
  void max_bin(int64_t r, int64_t ph, int64_t pw, int64_t* hs, int64_t* he, int64_t* ws,
               int64_t* we) const {
    const double* b = &c.rois[r * 5];
    const float sc = static_cast<float>(c.scale);
    const int sw = static_cast<int>(std::round(static_cast<float>(b[1]) * sc));
    const int sh = static_cast<int>(std::round(static_cast<float>(b[2]) * sc));
    const int ew = static_cast<int>(std::round(static_cast<float>(b[3]) * sc));
    const int eh = static_cast<int>(std::round(static_cast<float>(b[4]) * sc));
    const float bh = static_cast<float>(std::max(eh - sh + 1, 1)) / static_cast<float>(c.ph);
    const float bw = static_cast<float>(std::max(ew - sw + 1, 1)) / static_cast<float>(c.pw);
    auto clip = [](int64_t v, int64_t hi) {
      return std::min<int64_t>(std::max<int64_t>(v, 0), hi);
    };
    *hs = clip(static_cast<int>(std::floor(static_cast<float>(ph) * bh)) + sh, H());
    *he = clip(static_cast<int>(std::ceil(static_cast<float>(ph + 1) * bh)) + sh, H());
    *ws = clip(static_cast<int>(std::floor(static_cast<float>(pw) * bw)) + sw, W());
    *we = clip(static_cast<int>(std::ceil(static_cast<float>(pw + 1) * bw)) + sw, W());
  }

  // One torchvision RoIAlign sample along an axis: cells lo, hi and weights, or none.
  struct Tap {
    int64_t lo = 0, hi = 0;
    double wlo = 0, whi = 0;
    bool valid = false;
  };
  static Tap tap(double v, int64_t extent) {
    Tap t;
    if (v < -1.0 || v > static_cast<double>(extent)) return t;
    v = std::max(v, 0.0);
    t.lo = static_cast<int64_t>(v);
    if (t.lo >= extent - 1) {
      t.lo = t.hi = extent - 1;
      v = static_cast<double>(t.lo);
    } else {
      t.hi = t.lo + 1;
    }
    t.whi = v - static_cast<double>(t.lo);
    t.wlo = 1.0 - t.whi;
    t.valid = true;
    return t;
  }
  // Visits every (cell index in the plane, weight) of align bin (ph, pw) of RoI r, the weight
  // including the 1 / count of the average.
  template <class F>
  void align_bin(int64_t r, int64_t ph, int64_t pw, F&& f) const {
    const double* b = &c.rois[r * 5];
    const double x0 = b[1] * c.scale, y0 = b[2] * c.scale;
    const double rw = std::max(b[3] * c.scale - x0, 1.0), rh = std::max(b[4] * c.scale - y0, 1.0);
    const double bh = rh / static_cast<double>(c.ph), bw = rw / static_cast<double>(c.pw);
    // The adaptive count, in float as torchvision takes it.
    const float rhf = std::max(static_cast<float>(b[4]) * static_cast<float>(c.scale) -
                                   static_cast<float>(b[2]) * static_cast<float>(c.scale),
                               1.0f);
    const float rwf = std::max(static_cast<float>(b[3]) * static_cast<float>(c.scale) -
                                   static_cast<float>(b[1]) * static_cast<float>(c.scale),
                               1.0f);
    const int64_t gh = c.sampling_ratio > 0
                           ? c.sampling_ratio
                           : static_cast<int64_t>(std::ceil(rhf / static_cast<float>(c.ph)));
    const int64_t gw = c.sampling_ratio > 0
                           ? c.sampling_ratio
                           : static_cast<int64_t>(std::ceil(rwf / static_cast<float>(c.pw)));
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    for (int64_t iy = 0; iy < gh; ++iy) {
      const Tap ty = tap(y0 + ph * bh + (iy + 0.5) * bh / gh, H());
      for (int64_t ix = 0; ix < gw; ++ix) {
        const Tap tx = tap(x0 + pw * bw + (ix + 0.5) * bw / gw, W());
        if (!ty.valid || !tx.valid) continue;
        f(ty.lo * W() + tx.lo, ty.wlo * tx.wlo / count);
        f(ty.lo * W() + tx.hi, ty.wlo * tx.whi / count);
        f(ty.hi * W() + tx.lo, ty.whi * tx.wlo / count);
        f(ty.hi * W() + tx.hi, ty.whi * tx.whi / count);
      }
    }
  }

  // Calls f(output index, input index) for every output and the input it takes its value
  // from, or -1 for an empty bin (max mode).
  template <class F>
  void each_max(const Vec& x, F&& f) const {
    for (int64_t r = 0; r < R(); ++r) {
      const auto n = static_cast<int64_t>(c.rois[r * 5]);
      for (int64_t ch = 0; ch < C(); ++ch)
        for (int64_t ph = 0; ph < c.ph; ++ph)
          for (int64_t pw = 0; pw < c.pw; ++pw) {
            int64_t hs, he, ws, we;
            max_bin(r, ph, pw, &hs, &he, &ws, &we);
            double m = -DBL_MAX;
            int64_t arg = -1;
            for (int64_t h = hs; h < he; ++h)
              for (int64_t w = ws; w < we; ++w)
                if (x[in(n, ch, h, w)] > m) m = x[in(n, ch, h, w)], arg = in(n, ch, h, w);
            f(out(r, ch, ph, pw), arg);
          }
    }
  }
  // Calls f(output index, input index, weight) for every bilinear tap of every output (align).
  template <class F>
  void each_align(F&& f) const {
    for (int64_t r = 0; r < R(); ++r) {
      const auto n = static_cast<int64_t>(c.rois[r * 5]);
      for (int64_t ph = 0; ph < c.ph; ++ph)
        for (int64_t pw = 0; pw < c.pw; ++pw)
          align_bin(r, ph, pw, [&](int64_t cell, double w) {
            for (int64_t ch = 0; ch < C(); ++ch)
              f(out(r, ch, ph, pw), (n * C() + ch) * H() * W() + cell, w);
          });
    }
  }

  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>&) const {
    Vec y(R() * C() * c.ph * c.pw, 0.0);
    if (c.mode == RoIPoolMode::kMax) {
      each_max(x[0], [&](int64_t o, int64_t i) { y[o] = i < 0 ? 0.0 : x[0][i]; });
    } else {
      each_align([&](int64_t o, int64_t i, double w) { y[o] += w * x[0][i]; });
    }
    return {y};
  }

  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>&,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(x[0].size(), 0.0), Vec()};
    Vec& dx = g.dx[0];
    if (c.mode == RoIPoolMode::kMax) {
      each_max(x[0], [&](int64_t o, int64_t i) {
        if (i >= 0) dx[i] += dy[0][o];
      });
    } else {
      each_align([&](int64_t o, int64_t i, double w) { dx[i] += w * dy[0][o]; });
    }
    return g;
  }
};

// Distinct values in [-1, 1) spaced by 2 / n, in a seeded random order, exact in float: a max
// pool without ties, and no maximum within the finite differences' step of another.
Vec distinct_values(int64_t n, uint64_t seed) {
  Vec v(n);
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(seed);
  for (int64_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.randint(0, i + 1)]);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = static_cast<double>(static_cast<float>(-1.0 + 2.0 * perm[i] / n));
  }
  return v;
}

Vec as_f32_values(Vec v) {
  for (double& e : v) e = static_cast<double>(static_cast<float>(e));
  return v;
}

// gtest prints the case by its name.
void PrintTo(const RoICase& c, std::ostream* os) { *os << c.name; }

class RoIPoolTest : public LayerTest<RoICase> {};

TEST_P(RoIPoolTest, MatchesFloat64Reference) {
  const RoICase& tc = tcase();
  RoIPoolConfig cfg;
  cfg.mode = tc.mode;
  cfg.pooled_h = tc.ph;
  cfg.pooled_w = tc.pw;
  cfg.spatial_scale = tc.scale;
  cfg.sampling_ratio = tc.sampling_ratio;
  const int64_t R = static_cast<int64_t>(tc.rois.size()) / 5;
  auto layer = make("rcnn.roi_pool", cfg,
                    {TensorDesc{tc.x, DType::kF32, tc.layout}, TensorDesc{Shape{R, 5}}});
  EXPECT_EQ(layer->output_descs()[0].shape, (Shape{R, tc.x[1], tc.ph, tc.pw}));
  EXPECT_TRUE(layer->input_grad(0));
  EXPECT_FALSE(layer->input_grad(1)) << "the boxes take no gradient";
  RefRoIPool ref{tc};
  LayerCheckOptions opt;
  // Max: copies, and dx sums a few dy per cell; align: 4 products per sample, summed.
  opt.op_class = tc.mode == RoIPoolMode::kMax ? OpClass::kElementwise : OpClass::kPlain;
  opt.x_needs_grad = {true, false};
  opt.x_values[1] = as_f32_values(tc.rois);
  if (tc.mode == RoIPoolMode::kMax) opt.x_values[0] = distinct_values(tc.x.numel(), 7);
  opt.fd_samples = 200;
  check_layer(
      be(), *layer, [&](auto& xs, auto& p) { return ref.forward(xs, p); },
      [&](auto& xs, auto& p, auto& dy) { return ref.backward(xs, p, dy); }, opt);
}

// Boxes on a 9x11 map at scale 1/8 (a 72x88 image) of two images.
const Vec kBoxes = {
    0, 3.3,   5.7,   40.2,  61.9,   // fractional
    1, -20.5, -10.2, 30.4,  25.1,   // over the top-left corner
    0, 50.3,  40.7,  120.6, 95.2,   // over the bottom-right corner
    1, 20.2,  30.1,  20.9,  30.4,   // smaller than a cell
    0, 33,    33,    33,    33,     // a point
    1, 0,     0,     87,    71,     // the whole image
    0, 200.5, 180.3, 260.1, 240.7,  // wholly outside: empty bins (max), samples off the map
    1, 60.4,  50.2,  10.9,  7.6,    // inverted: taken as one cell (max) / size 1 (align)
};
// Boxes of a 12x16 map at scale 1/16 (a 192x256 image), for 14x14 bins as the model pools.
const Vec kModelBoxes = {
    0, 10.5,  20.25, 180.75, 150.5,  //
    0, 100.1, 5.3,   250.9,  90.7,   //
    0, -30.2, 60.6,  80.4,   200.3,  //
    0, 128.4, 96.2,  140.6,  100.9,  //
    0, 0,     0,     255,    191,    //
};

INSTANTIATE_TEST_SUITE_P(
    Shapes, RoIPoolTest,
    on_all_targets(::testing::Values(
        RoICase{"max", Shape{2, 3, 9, 11}, kBoxes},
        RoICase{"max_blocked", Shape{2, 16, 9, 11}, kBoxes, RoIPoolMode::kMax, 3, 4, 1.0 / 8, 0,
                Layout::kNChw16c},
        RoICase{"max_bins_2x2_scale_half", Shape{1, 2, 7, 5},
                Vec{0, 1.3, 2.2, 8.9, 12.6, 0, -3.5, 4.4, 6.6, 9.9}, RoIPoolMode::kMax, 2, 2, 0.5},
        RoICase{"max_model_bins", Shape{1, 32, 12, 16}, kModelBoxes, RoIPoolMode::kMax, 14, 14,
                1.0 / 16, 0, Layout::kNChw16c},
        RoICase{"max_channel_tails", Shape{1, 70, 5, 6}, Vec{0, 2.5, 1.5, 30.5, 25.5}},
        RoICase{"align", Shape{2, 3, 9, 11}, kBoxes, RoIPoolMode::kAlign},
        RoICase{"align_sampling_2", Shape{2, 3, 9, 11}, kBoxes, RoIPoolMode::kAlign, 3, 4, 1.0 / 8,
                2},
        RoICase{"align_blocked", Shape{2, 16, 9, 11}, kBoxes, RoIPoolMode::kAlign, 3, 4, 1.0 / 8, 0,
                Layout::kNChw16c},
        RoICase{"align_model_bins", Shape{1, 32, 12, 16}, kModelBoxes, RoIPoolMode::kAlign, 14, 14,
                1.0 / 16, 0, Layout::kNChw16c},
        RoICase{"align_channel_tails_blocked", Shape{1, 80, 5, 6}, Vec{0, 2.5, 1.5, 30.5, 25.5},
                RoIPoolMode::kAlign, 3, 4, 1.0 / 8, 0, Layout::kNChw16c},
        RoICase{"align_channel_tails", Shape{1, 70, 5, 6}, Vec{0, 2.5, 1.5, 30.5, 25.5},
                RoIPoolMode::kAlign})),
    CaseOnTarget());

// A box with a batch index outside [0, N) is an error naming the layer, the row and the index.
TEST(RoIPoolErrors, BatchIndexOutOfRange) {
  auto be = make_cpu_backend();
  for (RoIPoolMode mode : {RoIPoolMode::kMax, RoIPoolMode::kAlign}) {
    RoIPoolConfig cfg;
    cfg.mode = mode;
    auto layer = make_layer(*be, "rcnn.roi_pool", cfg,
                            {TensorDesc{Shape{2, 3, 4, 4}}, TensorDesc{Shape{2, 5}}});
    const Vec x(2 * 3 * 4 * 4, 0.5);
    expect_error(
        [&] {
          forward_values(*be, *layer, {x, Vec{1, 0, 0, 8, 8, 2, 0, 0, 8, 8}});
        },
        {"RoIPool 'rcnn.roi_pool'", "rois row 1", "batch index 2", "[0, 2)"});
    expect_error(
        [&] {
          forward_values(*be, *layer, {x, Vec{-1, 0, 0, 8, 8, 0, 0, 0, 8, 8}});
        },
        {"rois row 0", "batch index -1"});
  }
}

TEST(RoIPoolErrors, NameTheLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  const TensorDesc x{Shape{1, 16, 8, 8}}, rois{Shape{4, 5}};
  expect_error(
      [&] {
        make_layer(*be, "roi", RoIPoolConfig{}, {x, TensorDesc{Shape{4, 4}}});
      },
      {"RoIPool 'roi'", "rois", "(R, 5)", "(4, 4)"});
  expect_error(
      [&] {
        make_layer(*be, "roi", RoIPoolConfig{}, {TensorDesc{Shape{16, 8, 8}}, rois});
      },
      {"RoIPool 'roi'", "x", "rank 4", "(16, 8, 8)"});
  expect_error(
      [&] {
        make_layer(*be, "roi", RoIPoolConfig{}, {x, TensorDesc{Shape{4, 5}, DType::kI32}});
      },
      {"RoIPool 'roi'", "rois", "f32"});
  expect_error([&] { make_layer(*be, "roi", RoIPoolConfig{}, {x}); },
               {"RoIPool 'roi'", "inputs (x, rois)"});
  RoIPoolConfig bad;
  bad.pooled_h = 0;
  expect_error([&] { make_layer(*be, "roi", bad, {x, rois}); }, {"RoIPool 'roi'", "pooled_h=0"});
  bad = RoIPoolConfig{};
  bad.spatial_scale = 0;
  expect_error([&] { make_layer(*be, "roi", bad, {x, rois}); }, {"spatial_scale=0"});
  bad = RoIPoolConfig{};
  bad.sampling_ratio = -1;
  expect_error([&] { make_layer(*be, "roi", bad, {x, rois}); }, {"sampling_ratio=-1"});
}

// kMax keeps its argmax for backward: (R, C, PH, PW) i32 of feature maps, allocated at build.
TEST(RoIPoolMemory, MaxSavesArgmaxAsFeatureMaps) {
  auto be = make_cpu_backend();
  const std::size_t before = be->allocator().stats().current_of(MemCategory::kFeatureMaps);
  RoIPoolConfig cfg;
  auto layer =
      make_layer(*be, "roi", cfg, {TensorDesc{Shape{1, 16, 8, 8}}, TensorDesc{Shape{3, 5}}});
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kFeatureMaps) - before,
            std::size_t{4 * 3 * 16 * 14 * 14});
  cfg.mode = RoIPoolMode::kAlign;
  auto align =
      make_layer(*be, "roi", cfg, {TensorDesc{Shape{1, 16, 8, 8}}, TensorDesc{Shape{3, 5}}});
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kFeatureMaps) - before,
            std::size_t{4 * 3 * 16 * 14 * 14})
      << "align saves nothing";
}

// The CPU takes x in nChw16c whenever C % 16 == 0 (the graph reorders a plain one) and gives y
// in x's layout, ready for the head's next convolution.
TEST(RoIPoolLayouts, CpuWantsBlockedXAndGivesYInItsLayout) {
  auto be = make_cpu_backend();
  const RoIPoolConfig cfg;
  const TensorDesc rois{Shape{2, 5}};
  EXPECT_EQ(wanted_layouts(DeviceKind::kCpu, "roi", cfg, {TensorDesc{Shape{1, 32, 8, 8}}, rois}),
            (std::vector<Layout>{Layout::kNChw16c, Layout::kRowMajor}));
  EXPECT_EQ(wanted_layouts(DeviceKind::kCpu, "roi", cfg, {TensorDesc{Shape{1, 24, 8, 8}}, rois}),
            (std::vector<Layout>{Layout::kRowMajor, Layout::kRowMajor}));
  for (Layout l : {Layout::kNChw16c, Layout::kRowMajor}) {
    auto layer =
        make_layer(*be, "roi", cfg, {TensorDesc{Shape{1, 32, 8, 8}, DType::kF32, l}, rois});
    EXPECT_EQ(layer->output_descs()[0].layout, l);
  }
}

TEST(RoIPoolFlops, MatchesFormula) {
  RoIPoolConfig cfg;  // 14x14
  const Shape x{1, 1024, 38, 63}, y{128, 1024, 14, 14};
  const double Y = 128.0 * 1024 * 196;
  Flops f = roi_pool_flops(cfg, x, y);
  EXPECT_DOUBLE_EQ(f.fprop, Y * (38.0 / 14) * (63.0 / 14));
  EXPECT_DOUBLE_EQ(f.dgrad, Y);
  cfg.mode = RoIPoolMode::kAlign;
  f = roi_pool_flops(cfg, x, y);  // adaptive: ceil(38/14) * ceil(63/14) = 3 * 5 samples
  EXPECT_DOUBLE_EQ(f.fprop, Y * (8 * 15 + 1));
  cfg.sampling_ratio = 2;
  f = roi_pool_flops(cfg, x, y);
  EXPECT_DOUBLE_EQ(f.dgrad, Y * (8 * 4 + 1));
  EXPECT_DOUBLE_EQ(f.wgrad, 0);
}

}  // namespace
}  // namespace tbd::test
