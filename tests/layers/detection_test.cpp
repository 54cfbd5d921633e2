// tests/layers/detection_test.cpp: the box library (anchors against py-faster-rcnn's table,
// encode/decode, clip, IoU against float64, top-k and NMS against brute-force greedy
// references with ties and degenerate boxes, the sampler) and the Proposal, AnchorTarget and
// ProposalTarget kinds on every target against float64 references built from brute-force
// pieces: label rules, caps, targets, padding gt rows, reruns and fresh draws; and the time of
// the three at the full Faster R-CNN configuration.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "layers/cpu/boxes.h"
#include "layers/detection.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

using Box = std::array<double, 4>;

// ---- float64 brute-force pieces ----

double iou64(const Box& a, const Box& b) {
  const double iw = std::min(a[2], b[2]) - std::max(a[0], b[0]) + 1;
  const double ih = std::min(a[3], b[3]) - std::max(a[1], b[1]) + 1;
  if (iw <= 0 || ih <= 0) return 0;
  const double inter = iw * ih;
  const double ua = (a[2] - a[0] + 1) * (a[3] - a[1] + 1) + (b[2] - b[0] + 1) * (b[3] - b[1] + 1);
  return inter / (ua - inter);
}

Box decode64(const Box& a, const double* d) {
  const double w = a[2] - a[0] + 1, h = a[3] - a[1] + 1;
  const double cx = a[0] + 0.5 * (w - 1), cy = a[1] + 0.5 * (h - 1);
  const double px = d[0] * w + cx, py = d[1] * h + cy;
  const double pw = std::exp(d[2]) * w, ph = std::exp(d[3]) * h;
  return {px - 0.5 * (pw - 1), py - 0.5 * (ph - 1), px + 0.5 * (pw - 1), py + 0.5 * (ph - 1)};
}

std::array<double, 4> encode64(const Box& e, const Box& g) {
  const double ew = e[2] - e[0] + 1, eh = e[3] - e[1] + 1;
  const double gw = g[2] - g[0] + 1, gh = g[3] - g[1] + 1;
  return {(g[0] + 0.5 * (gw - 1) - e[0] - 0.5 * (ew - 1)) / ew,
          (g[1] + 0.5 * (gh - 1) - e[1] - 0.5 * (eh - 1)) / eh, std::log(gw / ew),
          std::log(gh / eh)};
}

// Greedy NMS the slow way: repeatedly the best remaining (score, then lowest index), kept,
// and every remaining box it overlaps by more than t suppressed. `iou` decides.
template <class Iou>
std::vector<int64_t> brute_nms(const std::vector<double>& score, double t, const Iou& iou) {
  const auto n = static_cast<int64_t>(score.size());
  std::vector<bool> alive(score.size(), true);
  std::vector<int64_t> keep;
  while (true) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (alive[i] && (best < 0 || score[i] > score[best])) best = i;
    }
    if (best < 0) break;
    keep.push_back(best);
    alive[best] = false;
    for (int64_t j = 0; j < n; ++j) {
      if (alive[j] && iou(best, j) > t) alive[j] = false;
    }
  }
  return keep;
}

// The order of a stable descending sort, by repeated first-argmax.
std::vector<int64_t> brute_order(const std::vector<double>& score) {
  std::vector<int64_t> order;
  std::vector<bool> used(score.size(), false);
  for (std::size_t r = 0; r < score.size(); ++r) {
    int64_t best = -1;
    for (std::size_t i = 0; i < score.size(); ++i) {
      if (!used[i] && (best < 0 || score[i] > score[best])) best = static_cast<int64_t>(i);
    }
    used[best] = true;
    order.push_back(best);
  }
  return order;
}

// Random boxes on an integer grid (so IoUs repeat exactly and ties at a threshold occur), with
// identical copies and degenerate ones (zero and negative width or height).
std::vector<float> random_boxes(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> b(static_cast<std::size_t>(4 * n));
  for (int64_t i = 0; i < n; ++i) {
    float* o = &b[4 * i];
    if (i > 0 && rng.uniform() < 0.1) {  // an identical copy of an earlier box
      const int64_t j = rng.randint(0, i);
      std::copy(&b[4 * j], &b[4 * j] + 4, o);
      continue;
    }
    o[0] = static_cast<float>(rng.randint(0, 40));
    o[1] = static_cast<float>(rng.randint(0, 40));
    o[2] = o[0] + static_cast<float>(rng.randint(0, 20));
    o[3] = o[1] + static_cast<float>(rng.randint(0, 20));
    if (rng.uniform() < 0.08) o[2] = o[0] - 1;  // width 0
    if (rng.uniform() < 0.05) o[3] = o[1] - 3;  // height -2
  }
  return b;
}

Box box_at(const std::vector<float>& b, int64_t i) {
  return {b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]};
}

// ---- the box library ----

TEST(DetectionBoxes, GenerateAnchorsIsPyFasterRcnnsTable) {
  const std::vector<double> got = generate_anchors(16, {8, 16, 32}, {0.5, 1, 2});
  const std::vector<double> want = {-84, -40, 99, 55, -176, -88,  191, 103, -360, -184, 375, 199,
                                    -56, -56, 71, 71, -120, -120, 135, 135, -248, -248, 263, 263,
                                    -36, -80, 51, 95, -80,  -168, 95,  183, -168, -344, 183, 359};
  EXPECT_EQ(got, want);
  // The grid: anchor a at cell (h, w) is anchor a shifted by 16 (w, h), index (a H + h) W + w.
  AnchorSpec s;
  s.feature_h = 3;
  s.feature_w = 5;
  const std::vector<float> grid = anchor_grid(s);
  ASSERT_EQ(grid.size(), 9u * 3 * 5 * 4);
  for (int64_t a : {0, 4, 8}) {
    for (int64_t h = 0; h < 3; ++h) {
      for (int64_t w = 0; w < 5; ++w) {
        const float* g = &grid[((a * 3 + h) * 5 + w) * 4];
        EXPECT_EQ(g[0], want[a * 4] + 16 * w);
        EXPECT_EQ(g[1], want[a * 4 + 1] + 16 * h);
        EXPECT_EQ(g[2], want[a * 4 + 2] + 16 * w);
        EXPECT_EQ(g[3], want[a * 4 + 3] + 16 * h);
      }
    }
  }
}

TEST(DetectionBoxes, EncodeDecodeRoundTripAndClip) {
  Rng rng(3);
  for (int i = 0; i < 200; ++i) {
    const float x = static_cast<float>(rng.uniform(-50, 500)),
                y = static_cast<float>(rng.uniform(-50, 500));
    const float a[4] = {x, y, x + static_cast<float>(rng.uniform(0, 300)),
                        y + static_cast<float>(rng.uniform(0, 300))};
    const float gw = (a[2] - a[0] + 1) * static_cast<float>(rng.uniform(0.5, 2));
    const float gh = (a[3] - a[1] + 1) * static_cast<float>(rng.uniform(0.5, 2));
    const float gx = x + static_cast<float>(rng.uniform(-40, 40));
    const float gy = y + static_cast<float>(rng.uniform(-40, 40));
    const float g[4] = {gx, gy, gx + gw - 1, gy + gh - 1};
    float d[4], back[4];
    bbox_encode(a, g, d);
    const auto d64 = encode64({a[0], a[1], a[2], a[3]}, {g[0], g[1], g[2], g[3]});
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(d[k], d64[k], 1e-5 + 1e-5 * std::fabs(d64[k]));
    bbox_decode(a, d, back);
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(back[k], g[k], 2e-3) << "box " << i << " coord " << k;
  }
  // The known deltas: a 16x16 anchor to the 32x8 box of the same centre.
  const float a[4] = {0, 0, 15, 15}, g[4] = {-8, 4, 23, 11};
  float d[4];
  bbox_encode(a, g, d);
  EXPECT_FLOAT_EQ(d[0], 0.f);
  EXPECT_FLOAT_EQ(d[1], 0.f);
  EXPECT_FLOAT_EQ(d[2], std::log(2.f));
  EXPECT_FLOAT_EQ(d[3], std::log(0.5f));
  float b[4] = {-5.5f, 3.f, 1200.f, 700.f};
  bbox_clip(b, 600, 1000);
  EXPECT_EQ(std::vector<float>(b, b + 4), (std::vector<float>{0, 3, 999, 599}));
  float c[4] = {1500.f, -2.f, -1.f, 599.5f};
  bbox_clip(c, 600, 1000);
  EXPECT_EQ(std::vector<float>(c, c + 4), (std::vector<float>{999, 0, 0, 599}));
}

TEST(DetectionBoxes, IouMatrixMatchesFloat64) {
  const std::vector<float> a = random_boxes(57, 11), b = random_boxes(23, 12);
  std::vector<float> m(57 * 23);
  iou_matrix(a.data(), 57, b.data(), 23, m.data());
  int degenerate = 0;
  for (int64_t i = 0; i < 57; ++i) {
    for (int64_t j = 0; j < 23; ++j) {
      const Box bi = box_at(a, i), bj = box_at(b, j);
      const double want = iou64(bi, bj);
      EXPECT_NEAR(m[i * 23 + j], want, 1e-6 * want + 1e-12) << i << ", " << j;
      if (bi[2] < bi[0] || bj[2] < bj[0] || bi[3] < bi[1] || bj[3] < bj[1]) {
        EXPECT_EQ(m[i * 23 + j], 0.f);
        ++degenerate;
      }
    }
  }
  EXPECT_GT(degenerate, 0);
  const float same[4] = {3, 4, 10, 20};
  EXPECT_EQ(box_iou(same, same), 1.f);
}

TEST(DetectionBoxes, TopKIsStableByIndexOnTies) {
  Rng rng(5);
  std::vector<float> s(300);
  for (auto& v : s) v = static_cast<float>(rng.randint(0, 12));  // many ties
  const std::vector<double> s64(s.begin(), s.end());
  const std::vector<int64_t> order = brute_order(s64);
  for (int64_t k : {0, 1, 7, 150, 299, 300, 400}) {
    const std::vector<int64_t> got = top_k(s.data(), 300, k);
    const std::vector<int64_t> want(order.begin(), order.begin() + std::min<int64_t>(k, 300));
    EXPECT_EQ(got, want) << "k " << k;
  }
}

// NMS against the slow greedy reference on random boxes with tied scores, identical and
// degenerate boxes, at several thresholds; and max_keep gives the reference's prefix. Both
// decide with box_iou (the f32 IoU checked against float64 above), so the lists must be equal.
TEST(DetectionBoxes, NmsEqualsBruteForceGreedy) {
  for (uint64_t seed : {21, 22, 23}) {
    const int64_t n = 400;
    const std::vector<float> boxes = random_boxes(n, seed);
    Rng rng(seed + 100);
    std::vector<float> s(n);
    for (auto& v : s) v = static_cast<float>(rng.randint(0, 30)) * 0.25f;
    const std::vector<double> s64(s.begin(), s.end());
    const std::vector<int64_t> order = top_k(s.data(), n, n);
    std::vector<float> sorted(4 * n);
    for (int64_t i = 0; i < n; ++i)
      std::copy(&boxes[4 * order[i]], &boxes[4 * order[i]] + 4, &sorted[4 * i]);
    for (double t : {0.0, 0.3, 0.5, 0.7, 0.95, 1.0}) {
      const auto iou = [&](int64_t i, int64_t j) {
        return static_cast<double>(box_iou(&boxes[4 * i], &boxes[4 * j]));
      };
      const std::vector<int64_t> want = brute_nms(s64, static_cast<float>(t), iou);
      std::vector<int64_t> got = nms_sorted(sorted.data(), n, static_cast<float>(t), n);
      for (auto& g : got) g = order[g];
      EXPECT_EQ(got, want) << "seed " << seed << " threshold " << t;
      std::vector<int64_t> prefix = nms_sorted(sorted.data(), n, static_cast<float>(t), 5);
      for (auto& g : prefix) g = order[g];
      EXPECT_EQ(prefix, std::vector<int64_t>(want.begin(),
                                             want.begin() + std::min<std::size_t>(5, want.size())));
      // Identical boxes: IoU 1, so at t < 1 no kept box has an identical copy kept after it.
      if (t < 1) {
        for (std::size_t a = 0; a < got.size(); ++a) {
          for (std::size_t b = a + 1; b < got.size(); ++b) {
            const Box x = box_at(boxes, got[a]), y = box_at(boxes, got[b]);
            if (x == y && x[2] >= x[0] && x[3] >= x[1]) ADD_FAILURE() << "identical boxes kept";
          }
        }
      }
    }
  }
}

TEST(DetectionBoxes, SampleSubsetTakesTheSmallestKeys) {
  std::vector<int64_t> cand;
  for (int64_t i = 0; i < 500; i += 3) cand.push_back(i);
  const uint64_t base = sample_base(detection_key(7, "rpn.anchor_target"), 0, 0, 0);
  for (int64_t k : {0, 1, 10, 100, 167, 500}) {
    std::vector<int64_t> by_key = cand;
    std::sort(by_key.begin(), by_key.end(),
              [&](int64_t a, int64_t b) { return sample_rank(base, a) < sample_rank(base, b); });
    by_key.resize(std::min<std::size_t>(static_cast<std::size_t>(k), cand.size()));
    std::sort(by_key.begin(), by_key.end());
    EXPECT_EQ(sample_subset(cand, k, base), by_key) << "k " << k;
  }
  // Another call or another image draws another subset; the same draws the same.
  const auto s0 = sample_subset(cand, 20, base);
  EXPECT_EQ(sample_subset(cand, 20, sample_base(detection_key(7, "rpn.anchor_target"), 0, 0, 0)),
            s0);
  EXPECT_NE(sample_subset(cand, 20, sample_base(detection_key(7, "rpn.anchor_target"), 1, 0, 0)),
            s0);
  EXPECT_NE(sample_subset(cand, 20, sample_base(detection_key(7, "rpn.anchor_target"), 0, 1, 0)),
            s0);
  // Roughly uniform: the first half of the candidates gets about half of 2000 draws of 10.
  int first_half = 0;
  for (uint64_t c = 0; c < 200; ++c) {
    for (int64_t v : sample_subset(cand, 10, sample_base(1, c, 0, 0))) first_half += v < 250;
  }
  EXPECT_NEAR(first_half, 1000, 120);
}

// ---- Proposal ----

struct ProposalCase {
  std::string name;
  int64_t N;
  ProposalConfig cfg;
};

// Stride 8, 6 anchors (scales 2 and 4, three ratios) on an h x w map of an 8h x 8w image.
AnchorSpec small_spec(int64_t h, int64_t w) {
  AnchorSpec s;
  s.feature_stride = 8;
  s.scales = {2, 4};
  s.ratios = {0.5, 1, 2};
  s.feature_h = h;
  s.feature_w = w;
  s.image_h = 8 * h;
  s.image_w = 8 * w;
  return s;
}

ProposalConfig small_proposal(int64_t pre, int64_t post, double min_size) {
  ProposalConfig c;
  c.anchors = small_spec(6, 7);
  c.pre_nms_top_n = pre;
  c.post_nms_top_n = post;
  c.nms_threshold = 0.6;
  c.min_size = min_size;
  return c;
}

// Proposal in float64: decode, clip, filter, stable sort, top pre, brute-force NMS, cyclic pad.
Vec ref_proposal(const ProposalConfig& cfg, int64_t N, const Vec& cls, const Vec& del) {
  const AnchorSpec& s = cfg.anchors;
  const int64_t A = s.num_anchors(), HW = s.feature_h * s.feature_w, K = A * HW;
  const std::vector<double> base = generate_anchors(s.feature_stride, s.scales, s.ratios);
  Vec out;
  for (int64_t n = 0; n < N; ++n) {
    std::vector<Box> boxes;
    std::vector<double> score;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t a = k / HW, hw = k % HW, h = hw / s.feature_w, w = hw % s.feature_w;
      const Box anchor = {base[a * 4] + 1.0 * w * s.feature_stride,
                          base[a * 4 + 1] + 1.0 * h * s.feature_stride,
                          base[a * 4 + 2] + 1.0 * w * s.feature_stride,
                          base[a * 4 + 3] + 1.0 * h * s.feature_stride};
      double d[4];
      for (int j = 0; j < 4; ++j) d[j] = del[(n * 4 * A + 4 * a + j) * HW + hw];
      Box b = decode64(anchor, d);
      b[0] = std::clamp(b[0], 0.0, s.image_w - 1.0);
      b[1] = std::clamp(b[1], 0.0, s.image_h - 1.0);
      b[2] = std::clamp(b[2], 0.0, s.image_w - 1.0);
      b[3] = std::clamp(b[3], 0.0, s.image_h - 1.0);
      if (b[2] - b[0] + 1 < cfg.min_size || b[3] - b[1] + 1 < cfg.min_size) continue;
      boxes.push_back(b);
      score.push_back(cls[(n * 2 * A + A + a) * HW + hw] - cls[(n * 2 * A + a) * HW + hw]);
    }
    std::vector<int64_t> order = brute_order(score);
    order.resize(std::min<std::size_t>(order.size(), static_cast<std::size_t>(cfg.pre_nms_top_n)));
    std::vector<double> top_score;
    for (int64_t i : order) top_score.push_back(score[i]);
    std::vector<int64_t> keep = brute_nms(top_score, cfg.nms_threshold, [&](int64_t i, int64_t j) {
      return iou64(boxes[order[i]], boxes[order[j]]);
    });
    for (int64_t r = 0; r < cfg.post_nms_top_n; ++r) {
      out.push_back(static_cast<double>(n));
      if (keep.empty()) {
        out.insert(out.end(), {0, 0, 0, 0});
      } else {
        const Box& b = boxes[order[keep[r % keep.size()]]];
        out.insert(out.end(), b.begin(), b.end());
      }
    }
  }
  return out;
}

class ProposalTest : public LayerTest<ProposalCase> {};

TEST_P(ProposalTest, MatchesFloat64Reference) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(ProposalConfig, be());
  const ProposalCase& tc = tcase();
  const AnchorSpec& s = tc.cfg.anchors;
  const int64_t A = s.num_anchors();
  const Shape cs{tc.N, 2 * A, s.feature_h, s.feature_w}, ds{tc.N, 4 * A, s.feature_h, s.feature_w};
  auto layer = make("rpn.proposal", tc.cfg, {TensorDesc{cs}, TensorDesc{ds}});
  EXPECT_FALSE(layer->output_grad(0));
  EXPECT_FALSE(layer->input_grad(0));
  EXPECT_FALSE(layer->input_grad(1));
  Vec cls = random_vec(cs.numel(), 31, -3, 3), del = random_vec(ds.numel(), 32, -0.4, 0.4);
  for (auto& v : cls) v = static_cast<float>(v);
  for (auto& v : del) v = static_cast<float>(v);
  const std::vector<Vec> got = forward_values(be(), *layer, {cls, del});
  const Vec want = ref_proposal(tc.cfg, tc.N, cls, del);
  expect_close("rois", got[0], want, Tol{1e-3, 1e-5});
  // Deterministic: the same inputs give the same rois on the next call.
  EXPECT_EQ(forward_values(be(), *layer, {cls, del})[0], got[0]);
}

INSTANTIATE_TEST_SUITE_P(Configs, ProposalTest,
                         on_all_targets(::testing::Values(
                             ProposalCase{"batch1", 1, small_proposal(100, 40, 4)},
                             ProposalCase{"padded", 2,
                                          small_proposal(60, 150, 4)},  // fewer survivors: cyclic
                             ProposalCase{"all_kept_pre", 2, small_proposal(1000, 30, 0)},
                             ProposalCase{"none_survive", 1, small_proposal(100, 8, 1000)})),
                         CaseOnTarget());

// ---- AnchorTarget ----

AnchorTargetConfig small_anchor_target(int64_t batch) {
  AnchorTargetConfig c;
  c.anchors = small_spec(8, 10);
  c.batch_size = batch;
  c.seed = 9;
  return c;
}

// gt (N, G, 5) on the integer grid: `real` boxes per image, the rest padding rows with a
// plausible box and class -1 (which must be ignored).
Vec make_gt(int64_t N, int64_t G, const std::vector<int64_t>& real, double im_h, double im_w,
            int64_t classes, uint64_t seed) {
  Rng rng(seed);
  Vec gt(static_cast<std::size_t>(N * G * 5));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < G; ++g) {
      double* o = &gt[(n * G + g) * 5];
      const double w = static_cast<double>(rng.randint(8, static_cast<int64_t>(im_w / 2)));
      const double h = static_cast<double>(rng.randint(8, static_cast<int64_t>(im_h / 2)));
      o[0] = static_cast<double>(rng.randint(0, static_cast<int64_t>(im_w - w)));
      o[1] = static_cast<double>(rng.randint(0, static_cast<int64_t>(im_h - h)));
      o[2] = o[0] + w - 1;
      o[3] = o[1] + h - 1;
      o[4] = g < real[n] ? static_cast<double>(rng.randint(1, classes)) : -1.0;
    }
  }
  return gt;
}

// Labels before sampling, in float64 (the thresholds compared in f32, as the kind states), and
// each anchor's best gt.
struct AnchorRef {
  std::vector<int> label;  // -1, 0, 1
  std::vector<int64_t> best_gt;
  std::vector<Box> anchors;
};

AnchorRef ref_anchor_labels(const AnchorTargetConfig& cfg, const double* gt, int64_t G) {
  const AnchorSpec& s = cfg.anchors;
  const int64_t A = s.num_anchors(), H = s.feature_h, W = s.feature_w, K = A * H * W;
  const std::vector<double> base = generate_anchors(s.feature_stride, s.scales, s.ratios);
  AnchorRef r;
  r.label.assign(K, -1);
  r.best_gt.assign(K, -1);
  std::vector<int64_t> real;
  for (int64_t g = 0; g < G; ++g) {
    if (gt[g * 5 + 4] >= 0) real.push_back(g);
  }
  std::vector<bool> inside(K);
  for (int64_t k = 0; k < K; ++k) {
    const int64_t a = k / (H * W), h = (k / W) % H, w = k % W;
    const double sx = 1.0 * w * s.feature_stride, sy = 1.0 * h * s.feature_stride;
    r.anchors.push_back(
        {base[a * 4] + sx, base[a * 4 + 1] + sy, base[a * 4 + 2] + sx, base[a * 4 + 3] + sy});
    const Box& b = r.anchors.back();
    inside[k] = b[0] >= 0 && b[1] >= 0 && b[2] < s.image_w && b[3] < s.image_h;
  }
  auto f = [](double v) { return static_cast<float>(v); };
  auto gbox = [&](int64_t g) {
    return Box{gt[g * 5], gt[g * 5 + 1], gt[g * 5 + 2], gt[g * 5 + 3]};
  };
  std::vector<double> gt_max(real.size(), 0);
  for (std::size_t g = 0; g < real.size(); ++g) {
    for (int64_t k = 0; k < K; ++k) {
      if (inside[k]) gt_max[g] = std::max(gt_max[g], iou64(r.anchors[k], gbox(real[g])));
    }
  }
  for (int64_t k = 0; k < K; ++k) {
    if (!inside[k]) continue;
    if (real.empty()) {
      r.label[k] = 0;
      continue;
    }
    double best = -1;
    bool best_of_gt = false;
    for (std::size_t g = 0; g < real.size(); ++g) {
      const double v = iou64(r.anchors[k], gbox(real[g]));
      if (v > best) {
        best = v;
        r.best_gt[k] = real[g];
      }
      best_of_gt |= gt_max[g] > 0 && f(v) == f(gt_max[g]);
    }
    if (f(best) < f(cfg.negative_iou)) r.label[k] = 0;
    if (best_of_gt || f(best) >= f(cfg.positive_iou)) r.label[k] = 1;
  }
  return r;
}

struct AnchorTargetCase {
  std::string name;
  int64_t N, G;
  std::vector<int64_t> real;  // real boxes per image
  int64_t batch;
};

class AnchorTargetTest : public LayerTest<AnchorTargetCase> {};

TEST_P(AnchorTargetTest, LabelRulesSamplingAndTargets) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(AnchorTargetConfig, be());
  const AnchorTargetCase& tc = tcase();
  const AnchorTargetConfig cfg = small_anchor_target(tc.batch);
  const AnchorSpec& s = cfg.anchors;
  const int64_t A = s.num_anchors(), HW = s.feature_h * s.feature_w, K = A * HW;
  const Vec gt = make_gt(tc.N, tc.G, tc.real, static_cast<double>(s.image_h),
                         static_cast<double>(s.image_w), 5, 41);
  auto layer = make("rpn.anchor_target", cfg, {TensorDesc{Shape{tc.N, tc.G, 5}}});
  for (std::size_t i = 0; i < 3; ++i) EXPECT_FALSE(layer->output_grad(i));
  const uint64_t key = detection_key(cfg.seed, "rpn.anchor_target");
  std::vector<std::vector<Vec>> calls;
  for (uint64_t call = 0; call < 2; ++call) {
    const std::vector<Vec> got = forward_values(be(), *layer, {gt});
    calls.push_back(got);
    for (int64_t n = 0; n < tc.N; ++n) {
      const AnchorRef ref = ref_anchor_labels(cfg, &gt[n * tc.G * 5], tc.G);
      std::vector<int64_t> fg, bg;
      for (int64_t k = 0; k < K; ++k) {
        if (ref.label[k] == 1) fg.push_back(k);
        if (ref.label[k] == 0) bg.push_back(k);
      }
      const auto max_fg = static_cast<int64_t>(cfg.batch_size * cfg.fg_fraction);
      const std::vector<int64_t> fg_s = sample_subset(fg, max_fg, sample_base(key, call, n, 0));
      const std::vector<int64_t> bg_s = sample_subset(
          bg, cfg.batch_size - static_cast<int64_t>(fg_s.size()), sample_base(key, call, n, 1));
      std::vector<int> want(K, -1);
      for (int64_t k : fg_s) want[k] = 1;
      for (int64_t k : bg_s) want[k] = 0;
      int64_t n_fg = 0, n_bg = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double label = got[0][n * K + k];
        EXPECT_EQ(label, want[k]) << "image " << n << " anchor " << k << " call " << call;
        n_fg += label == 1;
        n_bg += label == 0;
        const int64_t a = k / HW, hw = k % HW;
        std::array<double, 4> t{};
        if (want[k] == 1)
          t = encode64(
              ref.anchors[k],
              {gt[(n * tc.G + ref.best_gt[k]) * 5], gt[(n * tc.G + ref.best_gt[k]) * 5 + 1],
               gt[(n * tc.G + ref.best_gt[k]) * 5 + 2], gt[(n * tc.G + ref.best_gt[k]) * 5 + 3]});
        for (int j = 0; j < 4; ++j) {
          const int64_t at = ((n * 4 * A) + 4 * a + j) * HW + hw;
          EXPECT_NEAR(got[1][at], t[j], 1e-5 + 1e-5 * std::fabs(t[j]))
              << "target " << k << "," << j;
          EXPECT_EQ(got[2][at], want[k] == 1 ? 1.0 : 0.0);
        }
      }
      EXPECT_LE(n_fg, max_fg);
      EXPECT_LE(n_fg + n_bg, cfg.batch_size);
      EXPECT_EQ(n_fg, std::min<int64_t>(static_cast<int64_t>(fg.size()), max_fg));
      if (tc.real[n] > 0) {
        EXPECT_GT(n_fg, 0) << "every real gt marks its best anchors";
      }
    }
  }
  // A new draw on the next call; the same draws on a new layer with the same seed.
  EXPECT_NE(calls[0][0], calls[1][0]);
  auto again = make("rpn.anchor_target", cfg, {TensorDesc{Shape{tc.N, tc.G, 5}}});
  EXPECT_EQ(forward_values(be(), *again, {gt}), calls[0]);
}

INSTANTIATE_TEST_SUITE_P(
    Configs, AnchorTargetTest,
    on_all_targets(::testing::Values(AnchorTargetCase{"one_image", 1, 10, {4}, 32},
                                     AnchorTargetCase{"padded_and_empty", 3, 12, {5, 0, 12}, 24},
                                     AnchorTargetCase{"fg_capped", 1, 20, {20}, 8})),
    CaseOnTarget());

// ---- ProposalTarget ----

struct ProposalTargetCase {
  std::string name;
  int64_t N, P, G;
  std::vector<int64_t> real;
  int64_t R, C;
};

// RoIs (N*P, 5): half jittered copies of real gt boxes (foreground candidates), half random.
Vec make_rois(int64_t N, int64_t P, int64_t G, const Vec& gt, const std::vector<int64_t>& real,
              uint64_t seed) {
  Rng rng(seed);
  Vec rois;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t p = 0; p < P; ++p) {
      rois.push_back(static_cast<double>(n));
      if (real[n] > 0 && p % 2 == 0) {
        const double* g = &gt[(n * G + rng.randint(0, real[n])) * 5];
        for (int j = 0; j < 4; ++j) rois.push_back(g[j] + static_cast<double>(rng.randint(-4, 5)));
      } else {
        const double x = static_cast<double>(rng.randint(0, 60)),
                     y = static_cast<double>(rng.randint(0, 50));
        rois.insert(rois.end(), {x, y, x + static_cast<double>(rng.randint(0, 30)),
                                 y + static_cast<double>(rng.randint(0, 30))});
      }
    }
  }
  return rois;
}

class ProposalTargetTest : public LayerTest<ProposalTargetCase> {};

TEST_P(ProposalTargetTest, SamplesAndTargetsMatchFloat64Reference) {
  TBD_SKIP_WITHOUT_IMPLEMENTATION(ProposalTargetConfig, be());
  const ProposalTargetCase& tc = tcase();
  ProposalTargetConfig cfg;
  cfg.num_classes = tc.C;
  cfg.rois_per_image = tc.R;
  cfg.seed = 4;
  const Vec gt = make_gt(tc.N, tc.G, tc.real, 64, 80, tc.C, 51);
  const Vec rois = make_rois(tc.N, tc.P, tc.G, gt, tc.real, 52);
  auto layer = make("rcnn.proposal_target", cfg,
                    {TensorDesc{Shape{tc.N * tc.P, 5}}, TensorDesc{Shape{tc.N, tc.G, 5}}});
  for (std::size_t i = 0; i < 4; ++i) EXPECT_FALSE(layer->output_grad(i));
  const uint64_t key = detection_key(cfg.seed, "rcnn.proposal_target");
  const int64_t R = tc.R, C4 = 4 * tc.C;
  const auto fg_per_image =
      static_cast<int64_t>(std::nearbyint(cfg.fg_fraction * static_cast<double>(R)));
  std::vector<std::vector<Vec>> calls;
  bool sampled = false;  // whether some image had more candidates than it takes
  for (uint64_t call = 0; call < 2; ++call) {
    const std::vector<Vec> got = forward_values(be(), *layer, {rois, gt});
    calls.push_back(got);
    for (int64_t n = 0; n < tc.N; ++n) {
      std::vector<Box> cand;
      std::vector<int64_t> real;
      for (int64_t p = 0; p < tc.P; ++p) {
        const double* r = &rois[(n * tc.P + p) * 5];
        cand.push_back({r[1], r[2], r[3], r[4]});
      }
      for (int64_t g = 0; g < tc.G; ++g) {
        const double* r = &gt[(n * tc.G + g) * 5];
        if (r[4] >= 0) {
          real.push_back(g);
          cand.push_back({r[0], r[1], r[2], r[3]});
        }
      }
      std::vector<int64_t> fg, bg, assign(cand.size(), -1);
      for (std::size_t i = 0; i < cand.size(); ++i) {
        double best = real.empty() ? 0 : -1;
        for (int64_t g : real) {
          const double* r = &gt[(n * tc.G + g) * 5];
          const double v = iou64(cand[i], {r[0], r[1], r[2], r[3]});
          if (v > best) {
            best = v;
            assign[i] = g;
          }
        }
        const auto b = static_cast<float>(best);
        if (assign[i] >= 0 && b >= 0.5f) fg.push_back(static_cast<int64_t>(i));
        if (b < 0.5f && b >= 0.f) bg.push_back(static_cast<int64_t>(i));
      }
      std::vector<int64_t> keep =
          sample_subset(fg, std::min<int64_t>(fg_per_image, static_cast<int64_t>(fg.size())),
                        sample_base(key, call, n, 0));
      const auto fg_take = static_cast<int64_t>(keep.size());
      const std::vector<int64_t> bgs = sample_subset(bg, R - fg_take, sample_base(key, call, n, 1));
      keep.insert(keep.end(), bgs.begin(), bgs.end());
      sampled |= fg.size() + bg.size() > keep.size();
      if (!real.empty()) {
        EXPECT_GT(fg_take, 0) << "the gt boxes themselves are foreground";
      }
      EXPECT_LE(fg_take, fg_per_image);
      for (int64_t r = 0; r < R; ++r) {
        const int64_t i =
            keep.empty() ? r % static_cast<int64_t>(cand.size()) : keep[r % keep.size()];
        const int64_t row = n * R + r;
        EXPECT_EQ(got[0][row * 5], static_cast<double>(n));
        for (int j = 0; j < 4; ++j) EXPECT_EQ(got[0][row * 5 + 1 + j], cand[i][j]) << "row " << row;
        const double* g = assign[i] >= 0 ? &gt[(n * tc.G + assign[i]) * 5] : nullptr;
        const int label = r < fg_take ? static_cast<int>(g[4]) : 0;
        EXPECT_EQ(got[1][row], label) << "row " << row;
        std::array<double, 4> t{};
        if (label > 0) t = encode64(cand[i], {g[0], g[1], g[2], g[3]});  // classes < C here
        for (int64_t col = 0; col < C4; ++col) {
          const bool on = label > 0 && col / 4 == label;
          const double want = on ? t[col % 4] / cfg.stds[col % 4] : 0.0;
          EXPECT_NEAR(got[2][row * C4 + col], want, 1e-4 + 1e-5 * std::fabs(want))
              << "row " << row << " col " << col;
          EXPECT_EQ(got[3][row * C4 + col], on ? 1.0 : 0.0);
        }
      }
    }
  }
  if (sampled) {
    EXPECT_NE(calls[0], calls[1]);
  }
  auto again = make("rcnn.proposal_target", cfg,
                    {TensorDesc{Shape{tc.N * tc.P, 5}}, TensorDesc{Shape{tc.N, tc.G, 5}}});
  EXPECT_EQ(forward_values(be(), *again, {rois, gt}), calls[0]);
}

INSTANTIATE_TEST_SUITE_P(Configs, ProposalTargetTest,
                         on_all_targets(::testing::Values(
                             ProposalTargetCase{"full_sizes", 1, 300, 12, {5}, 128, 21},
                             ProposalTargetCase{
                                 "two_images_padding_and_empty", 3, 120, 6, {3, 0, 6}, 64, 4},
                             ProposalTargetCase{"too_few_rois_repeat", 2, 10, 4, {2, 4}, 48, 3})),
                         CaseOnTarget());

// ---- errors ----

TEST(DetectionErrors, NameTheLayerAndTheShapes) {
  auto be = make_cpu_backend();
  ProposalConfig p;
  expect_error(
      [&] {
        make_layer(*be, "rpn.proposal", p,
                   {TensorDesc{Shape{1, 18, 38, 62}}, TensorDesc{Shape{1, 36, 38, 63}}});
      },
      {"Proposal 'rpn.proposal'", "cls", "(1, 18, 38, 62)", "(N, 2A, H, W)"});
  expect_error(
      [&] {
        make_layer(*be, "rpn.at", AnchorTargetConfig{}, {TensorDesc{Shape{1, 4, 4}}});
      },
      {"AnchorTarget 'rpn.at'", "gt", "(1, 4, 4)"});
  expect_error(
      [&] {
        make_layer(*be, "pt", ProposalTargetConfig{},
                   {TensorDesc{Shape{7, 5}}, TensorDesc{Shape{2, 4, 5}}});
      },
      {"ProposalTarget 'pt'", "rois", "(7, 5)", "multiple"});
}

// A foreground row's label is its gt class truncated; a class outside [1, num_classes) gets
// its label and no targets (unchecked, so that uniform random benchmark data cannot fail).
TEST(DetectionClasses, TruncatedAndOutOfRangeWithoutTargets) {
  auto be = make_cpu_backend();
  ProposalTargetConfig pt;
  pt.num_classes = 3;
  pt.rois_per_image = 4;  // one foreground row
  auto layer = make_layer(*be, "pt", pt, {TensorDesc{Shape{2, 5}}, TensorDesc{Shape{1, 1, 5}}});
  const Vec rois = {0, 1, 1, 5, 5, 0, 1, 1, 5, 5};
  const std::vector<Vec> a = forward_values(*be, *layer, {rois, Vec{1, 1, 5, 5, 1.7}});
  EXPECT_EQ(a[1][0], 1);
  EXPECT_EQ(a[3], (Vec{0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                       0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  const std::vector<Vec> b = forward_values(*be, *layer, {rois, Vec{1, 1, 5, 5, 3}});
  EXPECT_EQ(b[1][0], 3);
  EXPECT_EQ(b[3], Vec(48, 0.0));
  EXPECT_EQ(b[2], Vec(48, 0.0));
}

// The FLOP counts of layers/detection.h, worked out for small shapes. Two images, 2 anchors
// (scales 8 and 16, ratio 1) on a 3x4 map: K = 24 per image.
TEST(DetectionWork, FlopsAsDocumented) {
  ProposalConfig p;
  p.anchors.scales = {8, 16};
  p.anchors.ratios = {1};
  p.anchors.feature_h = 3;
  p.anchors.feature_w = 4;
  p.pre_nms_top_n = 10;
  p.post_nms_top_n = 5;
  // Per image: decode etc. 30 K = 720, selection K = 24, sort n log2 n with n = 10, NMS: m = 5
  // kept against the later candidates, 5 * 10 - 5 * 6 / 2 = 35 IoUs of 15, areas 3 n = 30.
  EXPECT_DOUBLE_EQ(proposal_flops(p, 2).fprop,
                   2 * (720 + 24 + 10 * std::log2(10.0) + 35 * 15 + 30));
  EXPECT_EQ(proposal_flops(p, 2).bwd(), 0);
  // AnchorTarget, G = 3: K G = 72 IoUs of 15, 4 K G = 288 comparisons, 4 K = 96 label rules,
  // at most min(K, 256 / 2) = 24 positives' targets of 20.
  AnchorTargetConfig a;
  a.anchors = p.anchors;
  EXPECT_DOUBLE_EQ(anchor_target_flops(a, 2, 3).fprop, 2 * (72 * 15 + 288 + 96 + 24 * 20));
  // ProposalTarget, P = 6, G = 3, R = 4: (P + G) G = 27 IoUs of 15 and 54 comparisons, 4 rows'
  // targets of 24.
  ProposalTargetConfig t;
  t.rois_per_image = 4;
  EXPECT_DOUBLE_EQ(proposal_target_flops(t, 2, 6, 3).fprop, 2 * (27 * 15 + 54 + 4 * 24));
}

// CPU and CUDA at the full configuration, where a device is usable: AnchorTarget and
// ProposalTarget draw and label exactly alike (two calls); Proposal's boxes agree to 1e-3 px
// (exp and the fused multiply-adds of the decode differ in the last bits, which can flip an
// NMS decision at the threshold now and then, so at least 99% of the rows must match a row of
// the other backend).
// On the CUDA targets only (named .../cuda_fp32, so the GPU check's filter runs it).
class DetectionCpuCuda : public TargetTest {};

TEST_P(DetectionCpuCuda, FullConfigurationAgrees) {
  std::string why;
  Backend* gpu = &be();
  Backend* cpu = target_backend(Target::kCpu, &why);
  ASSERT_NE(cpu, nullptr) << why;
  const int64_t A = 9, H = 38, W = 63, G = 100;
  const Vec cls = random_vec(2 * A * H * W, 71, -4, 4),
            del = random_vec(4 * A * H * W, 72, -0.5, 0.5);
  const Vec gt = make_gt(1, G, {5}, 600, 1000, 21, 73);
  std::vector<std::vector<Vec>> out[2];
  for (int b = 0; b < 2; ++b) {
    Backend& be = b == 0 ? *cpu : *gpu;
    auto prop = make_layer(be, "rpn.proposal", ProposalConfig{},
                           {TensorDesc{Shape{1, 2 * A, H, W}}, TensorDesc{Shape{1, 4 * A, H, W}}});
    auto at =
        make_layer(be, "rpn.anchor_target", AnchorTargetConfig{}, {TensorDesc{Shape{1, G, 5}}});
    auto pt = make_layer(be, "rcnn.proposal_target", ProposalTargetConfig{},
                         {TensorDesc{Shape{2000, 5}}, TensorDesc{Shape{1, G, 5}}});
    out[b].push_back(forward_values(be, *prop, {cls, del}));
    for (int call = 0; call < 2; ++call) {
      out[b].push_back(forward_values(be, *at, {gt}));
      out[b].push_back(forward_values(be, *pt, {out[0][0][0], gt}));  // the CPU's proposals
    }
  }
  const Vec& rc = out[0][0][0];
  const Vec& rg = out[1][0][0];
  int64_t matched = 0;
  for (int64_t i = 0; i < 2000; ++i) {
    for (int64_t j = 0; j < 2000; ++j) {
      bool same = true;
      for (int k = 1; k < 5 && same; ++k) same = std::fabs(rg[i * 5 + k] - rc[j * 5 + k]) <= 1e-3;
      if (same) {
        ++matched;
        break;
      }
    }
  }
  EXPECT_GE(matched, 1980);
  // Steps 1, 3: AnchorTarget (labels, targets, weights); 2, 4: ProposalTarget (rois, labels,
  // targets, weights). Everything but the targets (logf) exactly.
  for (std::size_t c = 1; c < out[0].size(); ++c) {
    const std::size_t targets = c % 2 == 1 ? 1 : 2;
    for (std::size_t t = 0; t < out[0][c].size(); ++t) {
      if (t == targets) {
        expect_close("targets", out[1][c][t], out[0][c][t], Tol{1e-5, 1e-5});
      } else {
        EXPECT_EQ(out[1][c][t], out[0][c][t]) << "output " << t << " of step " << c;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, DetectionCpuCuda, ::testing::Values(Target::kCudaFp32),
                         TargetName());

// ---- the full configuration: invariants and the time of each kind ----

double median_ms(const std::function<void()>& f, int reps) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

TEST(DetectionFullConfiguration, InvariantsAndCpuTimes) {
  auto be = make_cpu_backend();
  ProposalConfig pc;  // 600x1000, 38x63, 9 anchors, 12000 / 2000, NMS 0.7
  const int64_t A = 9, H = 38, W = 63, G = 100, real = 5, R = 128, C = 21;
  auto prop = make_layer(*be, "rpn.proposal", pc,
                         {TensorDesc{Shape{1, 2 * A, H, W}}, TensorDesc{Shape{1, 4 * A, H, W}}});
  AnchorTargetConfig ac;
  auto at = make_layer(*be, "rpn.anchor_target", ac, {TensorDesc{Shape{1, G, 5}}});
  ProposalTargetConfig ptc;
  auto pt = make_layer(*be, "rcnn.proposal_target", ptc,
                       {TensorDesc{Shape{2000, 5}}, TensorDesc{Shape{1, G, 5}}});

  Tensor cls = be->empty(prop->input_descs()[0], MemCategory::kDynamic);
  Tensor del = be->empty(prop->input_descs()[1], MemCategory::kDynamic);
  Tensor gt = be->empty(at->input_descs()[0], MemCategory::kDynamic);
  from_host(*be, cls, random_vec(cls.numel(), 61, -4, 4));
  from_host(*be, del, random_vec(del.numel(), 62, -0.5, 0.5));
  from_host(*be, gt, make_gt(1, G, {real}, 600, 1000, C, 63));
  std::vector<Tensor> y0, y1, y2;
  for (const auto& d : prop->output_descs()) y0.push_back(be->empty(d, MemCategory::kDynamic));
  for (const auto& d : at->output_descs()) y1.push_back(be->empty(d, MemCategory::kDynamic));
  for (const auto& d : pt->output_descs()) y2.push_back(be->empty(d, MemCategory::kDynamic));
  const Tensor* px[] = {&cls, &del};
  Tensor* py[] = {&y0[0]};
  const Tensor* ax[] = {&gt};
  Tensor* ay[] = {&y1[0], &y1[1], &y1[2]};
  const Tensor* tx[] = {&y0[0], &gt};
  Tensor* ty[] = {&y2[0], &y2[1], &y2[2], &y2[3]};
  const double t_prop = median_ms([&] { prop->forward(py, px); }, 7);
  const double t_at = median_ms([&] { at->forward(ay, ax); }, 7);
  const double t_pt = median_ms([&] { pt->forward(ty, tx); }, 7);
  std::printf("CPU (%d threads) Proposal %.2f ms, AnchorTarget %.2f ms, ProposalTarget %.2f ms\n",
              be->num_threads(), t_prop, t_at, t_pt);
  ::testing::Test::RecordProperty("proposal_ms", std::to_string(t_prop));
  ::testing::Test::RecordProperty("anchor_target_ms", std::to_string(t_at));
  ::testing::Test::RecordProperty("proposal_target_ms", std::to_string(t_pt));

  const Vec labels = to_host(*be, y1[0]);
  int64_t fg = 0, bg = 0;
  for (double l : labels) {
    fg += l == 1;
    bg += l == 0;
  }
  EXPECT_GT(fg, 0);
  EXPECT_LE(fg, 128);
  EXPECT_EQ(fg + bg, 256);
  const Vec rois = to_host(*be, y0[0]);
  for (int64_t r = 0; r < 2000; ++r) {
    EXPECT_GE(rois[r * 5 + 3] - rois[r * 5 + 1] + 1, 16.0);
    EXPECT_LE(rois[r * 5 + 3], 999.0);
    EXPECT_LE(rois[r * 5 + 4], 599.0);
  }
  const Vec cl = to_host(*be, y2[1]);
  int64_t rfg = 0;
  for (int64_t r = 0; r < R; ++r) rfg += cl[r] > 0;
  EXPECT_GT(rfg, 0);
  EXPECT_LE(rfg, 32);
}

}  // namespace
}  // namespace tbd::test
