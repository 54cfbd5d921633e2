// layers/roi_pool.h: pooling of regions of interest (Faster R-CNN's detector head), max
// (RoIPool) or bilinear (RoIAlign). This header also brings the detector's box loss
// (SmoothL1Loss, layers/smooth_l1_loss.h), so the RoI head's kinds come with one include.
//
// RoIPool:  x: (N, C, H, W) f32 (CPU: row-major or nChw16c)  rois: (R, 5) f32 row-major
//           y: (R, C, PH, PW) f32 (CPU: in x's layout; CUDA: row-major)
//   A RoI row is (batch_index, x1, y1, x2, y2) in image pixels; spatial_scale maps them onto
//   x's grid. The batch index (truncated to an integer) selects the image; one outside [0, N)
//   is an error on the CPU (the CUDA kernels cannot throw: there the RoI's outputs are 0 and it
//   takes no gradient).
//   kMax, exactly MXNet's ROIPooling and torchvision.ops.roi_pool (Caffe's quantized bins, in
//   float): start = round(x1 * scale), end = round(x2 * scale) (half away from zero), roi size
//   max(end - start + 1, 1), bin = size / P; bin p covers [floor(p * bin) + start,
//   ceil((p + 1) * bin) + start) clipped to [0, H) (W alike); y is its maximum (the first one
//   in (h, w) order; initial value -FLT_MAX, strict >), an empty bin gives 0. The argmax (the
//   index h * W + w in x's plane, -1 for none) is saved for backward: (R, C, PH, PW) i32,
//   category feature_maps, allocated at build. dx[n, c, argmax] += dy over every output.
//   kAlign, exactly torchvision.ops.roi_align with aligned = false: start = x1 * scale, roi size
//   max(x2 * scale - start, 1) (no +1), bin = size / P, G = sampling_ratio samples per bin side
//   (0: adaptive, ceil(roi_h / PH) and ceil(roi_w / PW) per RoI); sample (iy, ix) of bin (p, q)
//   at y = start_y + p * bin_h + (iy + 0.5) * bin_h / G_h (x alike); a sample with y < -1,
//   y > H, x < -1 or x > W is 0; otherwise y, x are clamped to >= 0, and a coordinate past the
//   last row/column is taken as the last one; y is the average of the samples' bilinear
//   interpolations (count max(G_h * G_w, 1)). dx gets each dy / count with the bilinear
//   weights.
//   Gradient into x only (input_grads {true, false}: y is piecewise constant in the boxes for
//   kMax and the detector's training does not differentiate through them). dx is assigned:
//   zeroed, then the contributions accumulate.
//   Coordinates are clamped to +-2^24 before rounding (the float grid has no integers beyond),
//   so no box, however wrong, converts out of range.
// FLOPs: they depend on the boxes, which the contract does not see; it counts RoIs that span
//   the whole map, a = max(H / PH, 1) * max(W / PW, 1) cells per bin (Y = R*C*PH*PW):
//   kMax fprop a*Y compares, dgrad Y adds; kAlign with S samples per bin (S = sampling_ratio^2,
//   adaptive: ceil(H / PH) * ceil(W / PW)) fprop Y*(8*S + 1) (4 products and 4 adds per sample
//   and channel, one division), dgrad the same (4 products and 4 adds into dx per sample).
//   The per-sample coordinates and weights are shared by all C channels and not counted.
// Bytes (FP32; a lower bound, layers/layer.h), X = N*C*H*W, Y = R*C*PH*PW, 5R the boxes:
//   kMax   fprop 4*(X + 5R + Y + Y) (read x and the boxes, write y and the i32 argmax),
//          dgrad 4*(Y + Y + 5R + X) (read dy, the argmax and the boxes' batch indices, write dx);
//   kAlign fprop 4*(X + 5R + Y), dgrad 4*(Y + 5R + X); wgrad 0.
#pragma once

#include <cmath>

#include "core/host_device.h"
#include "layers/layer.h"
#include "layers/smooth_l1_loss.h"

namespace tbd {

enum class RoIPoolMode { kMax, kAlign };
const char* to_string(RoIPoolMode m);  // "max", "align"

struct RoIPoolConfig {
  static constexpr const char* kKind = "RoIPool";
  RoIPoolMode mode = RoIPoolMode::kMax;
  int64_t pooled_h = 14, pooled_w = 14;
  double spatial_scale = 1.0 / 16;
  int64_t sampling_ratio = 0;  // kAlign only: samples per bin side, 0 = adaptive
};

// Checks x (rank 4 f32, positive dims), rois ((R, 5) f32, R >= 1) and cfg (pooled sizes >= 1,
// spatial_scale finite and > 0, sampling_ratio >= 0); returns (R, C, PH, PW).
Shape roi_pool_output_shape(const std::string& name, const RoIPoolConfig& cfg, const TensorDesc& x,
                            const TensorDesc& rois);
Flops roi_pool_flops(const RoIPoolConfig& cfg, const Shape& x, const Shape& y);
Bytes roi_pool_bytes(const RoIPoolConfig& cfg, const Shape& x, const Shape& rois, const Shape& y);

// Contract: inputs x (N, C, H, W) f32, rois (R, 5) f32; y (R, C, PH, PW) f32 row-major (an
// implementation may choose another layout); no parameters; input_grads {true, false}.
template <>
Contract contract(const std::string& name, const RoIPoolConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const RoIPoolConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// ---- the geometry, shared by the CPU and CUDA implementations (host and device code) ----

// v clamped to [-2^24, 2^24]; NaN becomes -2^24.
TBD_HOST_DEVICE inline float roi_clamp_coord(float v) {
  constexpr float kLim = 16777216.0f;
  v = v > kLim ? kLim : v;
  return v >= -kLim ? v : -kLim;
}

// kMax: the quantized RoI along one axis (lo = x1 or y1, hi = x2 or y2, in image pixels).
struct RoIMaxAxis {
  int64_t start;
  float bin;  // roi size / pooled, in cells
};
TBD_HOST_DEVICE inline RoIMaxAxis roi_max_axis(float lo, float hi, float scale, int64_t pooled) {
  const auto start = static_cast<int64_t>(roundf(roi_clamp_coord(lo * scale)));
  const auto end = static_cast<int64_t>(roundf(roi_clamp_coord(hi * scale)));
  const int64_t size = end - start + 1 > 1 ? end - start + 1 : 1;
  return RoIMaxAxis{start, static_cast<float>(size) / static_cast<float>(pooled)};
}
// Bin p's cells [*b, *e) along an axis of `extent` cells (empty when *e <= *b).
TBD_HOST_DEVICE inline void roi_max_bin(const RoIMaxAxis& a, int64_t p, int64_t extent, int64_t* b,
                                        int64_t* e) {
  int64_t lo = static_cast<int64_t>(floorf(static_cast<float>(p) * a.bin)) + a.start;
  int64_t hi = static_cast<int64_t>(ceilf(static_cast<float>(p + 1) * a.bin)) + a.start;
  lo = lo < 0 ? 0 : (lo > extent ? extent : lo);
  hi = hi < 0 ? 0 : (hi > extent ? extent : hi);
  *b = lo;
  *e = hi;
}

// kAlign: the RoI along one axis.
struct RoIAlignAxis {
  float start;
  float bin;     // roi size / pooled, in cells
  int64_t grid;  // samples per bin along the axis
};
TBD_HOST_DEVICE inline RoIAlignAxis roi_align_axis(float lo, float hi, float scale, int64_t pooled,
                                                   int64_t sampling_ratio) {
  const float start = roi_clamp_coord(lo * scale);
  const float end = roi_clamp_coord(hi * scale);
  const float size = end - start > 1.0f ? end - start : 1.0f;
  const float bin = size / static_cast<float>(pooled);
  const int64_t grid = sampling_ratio > 0
                           ? sampling_ratio
                           : static_cast<int64_t>(ceilf(size / static_cast<float>(pooled)));
  return RoIAlignAxis{start, bin, grid};
}
// One sample along an axis of `extent` cells: its two cells and their weights. valid is false
// for a sample off the map (< -1 or > extent); then both weights are 0.
struct RoIAlignTap {
  int64_t lo, hi;
  float w_lo, w_hi;
  bool valid;
};
TBD_HOST_DEVICE inline RoIAlignTap roi_align_tap(const RoIAlignAxis& a, int64_t p, int64_t i,
                                                 int64_t extent) {
  float v = a.start + static_cast<float>(p) * a.bin +
            (static_cast<float>(i) + 0.5f) * a.bin / static_cast<float>(a.grid);
  if (v < -1.0f || v > static_cast<float>(extent)) return RoIAlignTap{0, 0, 0.0f, 0.0f, false};
  if (v <= 0.0f) v = 0.0f;
  int64_t lo = static_cast<int64_t>(v);
  int64_t hi;
  if (lo >= extent - 1) {
    hi = lo = extent - 1;
    v = static_cast<float>(lo);
  } else {
    hi = lo + 1;
  }
  const float l = v - static_cast<float>(lo);
  return RoIAlignTap{lo, hi, 1.0f - l, l, true};
}

// A RoI row (batch_index, x1, y1, x2, y2) as both modes see it.
struct RoIMaxBox {
  RoIMaxAxis y, x;
};
TBD_HOST_DEVICE inline RoIMaxBox roi_max_box(const float* roi, float scale, int64_t pooled_h,
                                             int64_t pooled_w) {
  return RoIMaxBox{roi_max_axis(roi[2], roi[4], scale, pooled_h),
                   roi_max_axis(roi[1], roi[3], scale, pooled_w)};
}
struct RoIAlignBox {
  RoIAlignAxis y, x;
  float count;  // the average's divisor, max(G_h * G_w, 1)
};
TBD_HOST_DEVICE inline RoIAlignBox roi_align_box(const float* roi, float scale, int64_t pooled_h,
                                                 int64_t pooled_w, int64_t sampling_ratio) {
  const RoIAlignAxis y = roi_align_axis(roi[2], roi[4], scale, pooled_h, sampling_ratio);
  const RoIAlignAxis x = roi_align_axis(roi[1], roi[3], scale, pooled_w, sampling_ratio);
  const int64_t n = y.grid * x.grid;
  return RoIAlignBox{y, x, static_cast<float>(n > 1 ? n : 1)};
}
// Calls f(cells, weights) for every sample of bin (ph, pw) on the H x W map: cells[k] = h * W + w
// of its four taps, weights[k] their bilinear weights (without the 1 / count).
template <class F>
TBD_HOST_DEVICE inline void roi_align_samples(const RoIAlignBox& b, int64_t ph, int64_t pw,
                                              int64_t H, int64_t W, F&& f) {
  for (int64_t iy = 0; iy < b.y.grid; ++iy) {
    const RoIAlignTap ty = roi_align_tap(b.y, ph, iy, H);
    if (!ty.valid) continue;
    for (int64_t ix = 0; ix < b.x.grid; ++ix) {
      const RoIAlignTap tx = roi_align_tap(b.x, pw, ix, W);
      if (!tx.valid) continue;
      const int64_t cells[4] = {ty.lo * W + tx.lo, ty.lo * W + tx.hi, ty.hi * W + tx.lo,
                                ty.hi * W + tx.hi};
      const float weights[4] = {ty.w_lo * tx.w_lo, ty.w_lo * tx.w_hi, ty.w_hi * tx.w_lo,
                                ty.w_hi * tx.w_hi};
      f(cells, weights);
    }
  }
}

}  // namespace tbd
