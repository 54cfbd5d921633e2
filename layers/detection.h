// layers/detection.h: the non-differentiable detection kinds of Faster R-CNN (Proposal,
// AnchorTarget, ProposalTarget), the anchors, and the box arithmetic and sampling keys every
// backend shares (host and device code); the CPU's box algorithms (NMS, top-k, subsets) are
// layers/cpu/boxes.h.
//
// Conventions (MXNet's rcnn example and py-faster-rcnn): a box is (x1, y1, x2, y2) in image
// pixels, inclusive, so width = x2 - x1 + 1 and area = (x2 - x1 + 1) (y2 - y1 + 1); IoU uses
// the same +1. A RoI row is (batch_index, x1, y1, x2, y2) f32. Ground truth per image is (G, 5)
// rows (x1, y1, x2, y2, class) f32 with class in [1, num_classes) for real boxes; rows with
// class < 0 are padding, ignored everywhere. Anchor index order is (a, h, w) per image: anchor
// a of A = len(scales) x len(ratios) at feature cell (h, w) has flat index (a H + h) W + w.
// RPN maps: objectness logits (N, 2A, H, W), channels 0..A-1 background of anchor a, A..2A-1
// foreground; box deltas (N, 4A, H, W), channel 4a + k, k = (dx, dy, dw, dh).
//
// Nothing here carries a gradient: every output has output_grads false and every input
// input_grads false (layers/layer.h); backward() does nothing.
//
// Orders and ties (every backend, the tests' references too):
//   * top-k: by score descending, equal scores by ascending index (a stable sort);
//   * NMS: greedy over the boxes in that order; box j is suppressed by a kept box i when
//     IoU(i, j) > threshold (strictly, as MXNet and py-faster-rcnn); IoU is box_iou below, in
//     f32 with correctly rounded operations, so the CPU and CUDA kernels decide alike on the
//     same boxes (Proposal's decoded boxes themselves can differ in the last bits between the
//     backends: expf and the device's fused multiply-adds);
//   * a degenerate box (width or height <= 0) intersects nothing: its IoU with any box is 0;
//   * sampling "k of these candidates": the k with the smallest 64-bit key
//     splitmix64(base + index) (distinct for distinct indices: splitmix64 is a bijection),
//     base = sample_base(key, call, image, stream) and key = seed_for(seed, layer name); a
//     new draw every call of the layer (its call counter), identical on a rerun, the same on
//     every backend. Selected sets are written in ascending index order.
//
// Work (FLOPs count floating-point operations, a comparison as one; bytes are the lower bound
// of layers/layer.h). With K = A H W anchors per image and G the gt rows (padded: the contract
// cannot know how many are real, so the IoU counts are upper bounds):
//   * one IoU: 15 (4 min/max, 2 subtractions + 2 adds for the +1 intersection sides, 1
//     multiply, the 2 areas at 3 each counted once per pair as 2, union 2, divide 1, rounded);
//   * Proposal, per image: decode, clip, size filter and score 30 per anchor (anchor centre and
//     size 6, deltas to centre/size 6 with 2 exp, corners 4, clip 8, size test 4, score 1,
//     rounded up); top-k as K comparisons for the selection plus n log2 n for sorting the
//     n = min(pre_nms_top_n, K) kept; NMS as the greedy upper bound: each of at most
//     m = min(post_nms_top_n, n) kept boxes against every later candidate, (m n - m (m+1)/2)
//     IoUs of 15, plus 3 n for the areas.
//     Bytes: read cls 2AHW and deltas 4AHW f32, write rois 5 post_nms_top_n, per image.
//   * AnchorTarget, per image: K G IoUs of 15, 4 K G comparisons (per pair: 2 for the anchor's
//     best gt, 2 for the gt's best anchors), 4 K for the label rules, the box targets of the
//     positives at 20 each (at most batch_size fg_fraction of them). Bytes: read gt 5G, write
//     labels K (i32), targets 4K and weights 4K f32, per image.
//   * ProposalTarget, per image with P = proposals per image and R = rois_per_image:
//     (P + G) G IoUs of 15 and 2 (P + G) G comparisons for the argmax, the targets of R rows at
//     24 each (encode 20, normalise 4). Bytes: read rois 5P and gt 5G, write rois 5R, labels R
//     (i32), targets and weights 4 R num_classes each, per image.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/host_device.h"
#include "core/random.h"
#include "layers/layer.h"

namespace tbd {

// The anchor grid, shared by Proposal and AnchorTarget.
struct AnchorSpec {
  int64_t feature_stride = 16;
  std::vector<double> scales = {8, 16, 32};  // x base size = feature_stride
  std::vector<double> ratios = {0.5, 1, 2};  // py-faster-rcnn generate_anchors (its rounding)
  int64_t image_h = 600, image_w = 1000;     // im_info: every image of the batch
  int64_t feature_h = 38, feature_w = 63;    // the RPN map the anchors sit on
  int64_t num_anchors() const;               // scales x ratios
};

// Proposal (MXNet's contrib Proposal op): inputs cls (N, 2A, H, W) f32 logits, deltas
// (N, 4A, H, W) f32; output rois (N * post_nms_top_n, 5) f32. Per image: decode the deltas on
// the anchors, clip to the image, drop boxes with width or height below min_size, take the
// top pre_nms_top_n by foreground score (fg - bg logit, softmax-monotone), greedy NMS at
// nms_threshold, keep post_nms_top_n; fewer survivors are padded by repeating them cyclically,
// as MXNet does (an image where no box survives the size filter gets rows (n, 0, 0, 0, 0)).
// MXNet keeps too-small boxes with score -1 instead of dropping them; here they are dropped.
struct ProposalConfig {
  static constexpr const char* kKind = "Proposal";
  AnchorSpec anchors;
  int64_t pre_nms_top_n = 12000;
  int64_t post_nms_top_n = 2000;
  double nms_threshold = 0.7;
  double min_size = 16;
};

// AnchorTarget (MXNet's AnchorLoader assign_anchor): input gt (N, G, 5) f32; outputs labels
// (N, A*H*W) i32 in {-1, 0, 1}, bbox_targets (N, 4A, H, W) f32, bbox_weights (N, 4A, H, W) f32.
// Anchors not inside the image (x1 < 0, y1 < 0, x2 >= image_w or y2 >= image_h): -1. Inside:
// max IoU over the real gt < negative_iou: 0; then 1 for every anchor whose IoU with a gt
// equals that gt's best IoU over the inside anchors (ties: all of them; a gt that overlaps no
// inside anchor marks nothing, where py-faster-rcnn would mark every anchor at IoU 0) and for
// max IoU >= positive_iou. Then at most batch_size fg_fraction positives are kept (sampled),
// and negatives are sampled down to batch_size minus the positives kept; the rest -1. An image
// without real gt: every inside anchor is a negative candidate. bbox_targets: bbox_encode of
// the anchor and its best gt (first of equal IoUs) for the positives, else 0; bbox_weights 1
// for the 4 coordinates of the positives, else 0. Streams: 0 positives, 1 negatives.
struct AnchorTargetConfig {
  static constexpr const char* kKind = "AnchorTarget";
  AnchorSpec anchors;
  int64_t batch_size = 256;
  double fg_fraction = 0.5;
  double positive_iou = 0.7;
  double negative_iou = 0.3;
  uint64_t seed = 0;
};

// ProposalTarget (MXNet's proposal_target custom op): inputs rois (N*P, 5) f32 (Proposal's),
// gt (N, G, 5) f32; outputs rois (N*R, 5) f32, labels (N*R) i32 in [0, num_classes),
// bbox_targets (N*R, 4*num_classes) f32, bbox_weights (N*R, 4*num_classes) f32. Per image (its
// P rows; their batch index column is not read) the real gt boxes are appended to its RoIs;
// each candidate's best gt (first of equal IoUs) gives its IoU and class. Foreground: IoU >=
// fg_iou, at most round(R fg_fraction) sampled (stream 0); background: IoU in [bg_iou_lo,
// bg_iou_hi), sampled up to R minus the foreground (stream 1). Rows: the foreground then the
// background, each in ascending candidate order; when fewer than R, the rows taken so far are
// repeated cyclically as background (label 0, no targets), as MXNet fills with background (if
// none was taken, the candidates in order). The label of a foreground row is its gt's class
// truncated to an integer; one outside [1, num_classes) gets no targets (not checked: the
// layer benchmarks feed uniform random gt; a model feeds valid classes). An image without real gt
// has only background (label 0). Targets: (bbox_encode - 0) / stds in the 4 columns of the row's
// class, weights 1 there; 0 elsewhere and for background.
struct ProposalTargetConfig {
  static constexpr const char* kKind = "ProposalTarget";
  int64_t num_classes = 21;
  int64_t rois_per_image = 128;
  double fg_fraction = 0.25;
  double fg_iou = 0.5;
  double bg_iou_hi = 0.5;
  double bg_iou_lo = 0.0;
  std::array<double, 4> stds = {0.1, 0.1, 0.2, 0.2};
  uint64_t seed = 0;
};

Flops proposal_flops(const ProposalConfig& cfg, int64_t N);
Bytes proposal_bytes(const ProposalConfig& cfg, int64_t N);
Flops anchor_target_flops(const AnchorTargetConfig& cfg, int64_t N, int64_t G);
Bytes anchor_target_bytes(const AnchorTargetConfig& cfg, int64_t N, int64_t G);
Flops proposal_target_flops(const ProposalTargetConfig& cfg, int64_t N, int64_t P, int64_t G);
Bytes proposal_target_bytes(const ProposalTargetConfig& cfg, int64_t N, int64_t P, int64_t G);

// Contracts: the shapes above, checked (H, W against the anchor spec; P and G >= 1; f32).
template <>
Contract contract(const std::string& name, const ProposalConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const ProposalConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);
template <>
Contract contract(const std::string& name, const AnchorTargetConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const AnchorTargetConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);
template <>
Contract contract(const std::string& name, const ProposalTargetConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const ProposalTargetConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// ---- the box library (host; the CUDA kernels call the TBD_HOST_DEVICE ones) ----

// py-faster-rcnn's generate_anchors: (A, 4) boxes around a base_size cell at (0, 0), for each
// ratio (outer) each scale (inner), with its round-half-to-even (numpy's round). Base 16,
// scales (8, 16, 32), ratios (0.5, 1, 2) gives its published table, first row
// (-84, -40, 99, 55).
std::vector<double> generate_anchors(int64_t base_size, const std::vector<double>& scales,
                                     const std::vector<double>& ratios);
// Every anchor of the grid: (A H W, 4) f32 in (a, h, w) order, anchor a shifted by
// (w, h) x feature_stride.
std::vector<float> anchor_grid(const AnchorSpec& spec);

// IEEE-rounded f32 operations that the compiler may not fuse into FMAs on the device (the host
// build never contracts: ISO C++ mode), so the host and CUDA compute bit-identical boxes' IoU.
TBD_HOST_DEVICE inline float det_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
TBD_HOST_DEVICE inline float det_add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
TBD_HOST_DEVICE inline float det_sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// min and max as std::min / std::max (the host's fminf is a libm call that does not inline);
// the same values for every non-NaN input.
TBD_HOST_DEVICE inline float det_min(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fminf(a, b);
#else
  return b < a ? b : a;
#endif
}
TBD_HOST_DEVICE inline float det_max(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fmaxf(a, b);
#else
  return a < b ? b : a;
#endif
}

// (x2 - x1 + 1) (y2 - y1 + 1) of a box b[0..3].
TBD_HOST_DEVICE inline float box_area(const float* b) {
  return det_mul(det_add(det_sub(b[2], b[0]), 1.f), det_add(det_sub(b[3], b[1]), 1.f));
}
// IoU from the two areas (box_area): 0 where the boxes do not intersect (so also for a
// degenerate box), else inter / (area_a + area_b - inter).
TBD_HOST_DEVICE inline float box_iou_areas(const float* a, float area_a, const float* b,
                                           float area_b) {
  const float iw = det_add(det_sub(det_min(a[2], b[2]), det_max(a[0], b[0])), 1.f);
  const float ih = det_add(det_sub(det_min(a[3], b[3]), det_max(a[1], b[1])), 1.f);
  if (!(iw > 0.f) || !(ih > 0.f)) return 0.f;
  const float inter = det_mul(iw, ih);
  return inter / det_sub(det_add(area_a, area_b), inter);
}
TBD_HOST_DEVICE inline float box_iou(const float* a, const float* b) {
  return box_iou_areas(a, box_area(a), b, box_area(b));
}
// ProposalTarget's assignment of a candidate box `a` (CPU and CUDA alike): the real gt row it
// overlaps most (of the g_real `rows` into gt's (G, 5) block; the first on ties) into *arg and
// that IoU returned; with no real gt, IoU 0 and row -1.
template <class Row>
TBD_HOST_DEVICE inline float best_gt_overlap(const float* a, const float* gt, const Row* rows,
                                             int64_t g_real, Row* arg) {
  const float area_a = box_area(a);
  float best = g_real > 0 ? -1.f : 0.f;
  *arg = -1;
  for (int64_t g = 0; g < g_real; ++g) {
    const float* t = gt + rows[g] * 5;
    const float iou = box_iou_areas(a, area_a, t, box_area(t));
    if (iou > best) {
      best = iou;
      *arg = rows[g];
    }
  }
  return best;
}

// MXNet's bbox_transform: the deltas (dx, dy, dw, dh) taking box ex to box gt (+1 widths,
// centres x1 + 0.5 (w - 1)).
TBD_HOST_DEVICE inline void bbox_encode(const float* ex, const float* gt, float* d) {
  const float ew = ex[2] - ex[0] + 1.f, eh = ex[3] - ex[1] + 1.f;
  const float ex_x = ex[0] + 0.5f * (ew - 1.f), ex_y = ex[1] + 0.5f * (eh - 1.f);
  const float gw = gt[2] - gt[0] + 1.f, gh = gt[3] - gt[1] + 1.f;
  const float gx = gt[0] + 0.5f * (gw - 1.f), gy = gt[1] + 0.5f * (gh - 1.f);
  d[0] = (gx - ex_x) / ew;
  d[1] = (gy - ex_y) / eh;
  d[2] = logf(gw / ew);
  d[3] = logf(gh / eh);
}
// MXNet's BBoxTransformInv (Proposal): the box that deltas d make of box a.
TBD_HOST_DEVICE inline void bbox_decode(const float* a, const float* d, float* out) {
  const float w = a[2] - a[0] + 1.f, h = a[3] - a[1] + 1.f;
  const float cx = a[0] + 0.5f * (w - 1.f), cy = a[1] + 0.5f * (h - 1.f);
  const float px = d[0] * w + cx, py = d[1] * h + cy;
  const float pw = expf(d[2]) * w, ph = expf(d[3]) * h;
  out[0] = px - 0.5f * (pw - 1.f);
  out[1] = py - 0.5f * (ph - 1.f);
  out[2] = px + 0.5f * (pw - 1.f);
  out[3] = py + 0.5f * (ph - 1.f);
}
// Clips a box to [0, image_w - 1] x [0, image_h - 1].
TBD_HOST_DEVICE inline void bbox_clip(float* b, float image_h, float image_w) {
  b[0] = fmaxf(fminf(b[0], image_w - 1.f), 0.f);
  b[1] = fmaxf(fminf(b[1], image_h - 1.f), 0.f);
  b[2] = fmaxf(fminf(b[2], image_w - 1.f), 0.f);
  b[3] = fmaxf(fminf(b[3], image_h - 1.f), 0.f);
}

// Sampling (see the top of this file).
inline uint64_t detection_key(uint64_t seed, const std::string& layer_name) {
  return seed_for(seed, layer_name);
}
TBD_HOST_DEVICE inline uint64_t sample_base(uint64_t key, uint64_t call, int64_t image,
                                            int stream) {
  const uint64_t k = splitmix64(key ^ (call * 0xD1B54A32D192ED03ull));
  return splitmix64(k + static_cast<uint64_t>(image) * 2 + static_cast<uint64_t>(stream));
}
TBD_HOST_DEVICE inline uint64_t sample_rank(uint64_t base, int64_t index) {
  return splitmix64(base + static_cast<uint64_t>(index));
}
}  // namespace tbd
