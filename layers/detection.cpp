// layers/detection.cpp: the contracts of Proposal, AnchorTarget and ProposalTarget and the host
// box library (layers/detection.h).
#include "layers/detection.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "layers/cpu/simd.h"

namespace tbd {

int64_t AnchorSpec::num_anchors() const {
  return static_cast<int64_t>(scales.size() * ratios.size());
}

namespace {

constexpr double kIouFlops = 15;

void check_spec(const char* k, const std::string& name, const AnchorSpec& s) {
  TBD_LAYER_CHECK(s.feature_stride >= 1, k, name, "anchors.feature_stride must be >= 1, got ",
                  s.feature_stride);
  TBD_LAYER_CHECK(!s.scales.empty() && !s.ratios.empty(), k, name,
                  "anchors.scales and anchors.ratios must not be empty");
  for (double v : s.scales) {
    TBD_LAYER_CHECK(v > 0, k, name, "anchors.scales must be > 0, got ", v);
  }
  for (double v : s.ratios) {
    TBD_LAYER_CHECK(v > 0, k, name, "anchors.ratios must be > 0, got ", v);
  }
  TBD_LAYER_CHECK(s.image_h >= 1 && s.image_w >= 1 && s.feature_h >= 1 && s.feature_w >= 1, k, name,
                  "anchors: image ", s.image_h, "x", s.image_w, " and feature map ", s.feature_h,
                  "x", s.feature_w, " must be positive");
}

void check_gt(const char* k, const std::string& name, const TensorDesc& d) {
  check_rank(k, name, "gt", d, 3, "(N, G, 5)");
  check_positive(k, name, "gt", d.shape);
  check_f32(k, name, "gt", d);
  TBD_LAYER_CHECK(d.shape[2] == 5, k, name,
                  "input gt must be (N, G, 5) rows (x1, y1, x2, y2, class), got ",
                  d.shape.to_string());
}

double per_image_k(const AnchorSpec& s) {
  return static_cast<double>(s.num_anchors() * s.feature_h * s.feature_w);
}

}  // namespace

// ---- work ----

Flops proposal_flops(const ProposalConfig& cfg, int64_t N) {
  const double K = per_image_k(cfg.anchors);
  const double n = std::min(static_cast<double>(cfg.pre_nms_top_n), K);
  const double m = std::min(static_cast<double>(cfg.post_nms_top_n), n);
  const double sort = n > 1 ? n * std::log2(n) : 0;
  const double nms = (m * n - m * (m + 1) / 2) * kIouFlops + 3 * n;
  return Flops{static_cast<double>(N) * (30 * K + K + sort + nms), 0, 0};
}

Bytes proposal_bytes(const ProposalConfig& cfg, int64_t N) {
  const double K = per_image_k(cfg.anchors);
  return Bytes{static_cast<double>(N) *
                   bytes_of(2 * K + 4 * K + 5 * static_cast<double>(cfg.post_nms_top_n)),
               0, 0};
}

Flops anchor_target_flops(const AnchorTargetConfig& cfg, int64_t N, int64_t G) {
  const double K = per_image_k(cfg.anchors), g = static_cast<double>(G);
  const double pos = std::min(K, std::floor(static_cast<double>(cfg.batch_size) * cfg.fg_fraction));
  return Flops{static_cast<double>(N) * (K * g * kIouFlops + 4 * K * g + 4 * K + 20 * pos), 0, 0};
}

Bytes anchor_target_bytes(const AnchorTargetConfig& cfg, int64_t N, int64_t G) {
  const double K = per_image_k(cfg.anchors), g = static_cast<double>(G);
  return Bytes{
      static_cast<double>(N) * (bytes_of(5 * g) + bytes_of(K, DType::kI32) + bytes_of(8 * K)), 0,
      0};
}

Flops proposal_target_flops(const ProposalTargetConfig& cfg, int64_t N, int64_t P, int64_t G) {
  const double c = static_cast<double>(P + G) * static_cast<double>(G);
  const double R = static_cast<double>(cfg.rois_per_image);
  return Flops{static_cast<double>(N) * (c * kIouFlops + 2 * c + 24 * R), 0, 0};
}

Bytes proposal_target_bytes(const ProposalTargetConfig& cfg, int64_t N, int64_t P, int64_t G) {
  const double R = static_cast<double>(cfg.rois_per_image);
  const double C = static_cast<double>(cfg.num_classes);
  const double p = static_cast<double>(P), g = static_cast<double>(G);
  return Bytes{static_cast<double>(N) * (bytes_of(5 * p + 5 * g) + bytes_of(5 * R) +
                                         bytes_of(R, DType::kI32) + bytes_of(8 * R * C)),
               0, 0};
}

// ---- contracts ----

template <>
Contract contract(const std::string& name, const ProposalConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = ProposalConfig::kKind;
  check_spec(k, name, cfg.anchors);
  check_input_count(k, name, in, 2, "inputs (cls, deltas)");
  const int64_t A = cfg.anchors.num_anchors(), H = cfg.anchors.feature_h, W = cfg.anchors.feature_w;
  check_rank(k, name, "cls", in[0], 4, "(N, 2A, H, W)");
  check_rank(k, name, "deltas", in[1], 4, "(N, 4A, H, W)");
  check_f32(k, name, "cls", in[0]);
  check_f32(k, name, "deltas", in[1]);
  check_positive(k, name, "cls", in[0].shape);
  const int64_t N = in[0].shape[0];
  TBD_LAYER_CHECK(in[0].shape == (Shape{N, 2 * A, H, W}), k, name,
                  "input cls must be (N, 2A, H, W) = (", N, ", ", 2 * A, ", ", H, ", ", W, ") for ",
                  A, " anchors on a ", H, "x", W, " map, got ", in[0].shape.to_string());
  TBD_LAYER_CHECK(in[1].shape == (Shape{N, 4 * A, H, W}), k, name,
                  "input deltas must be (N, 4A, H, W) = (", N, ", ", 4 * A, ", ", H, ", ", W,
                  "), got ", in[1].shape.to_string());
  TBD_LAYER_CHECK(cfg.pre_nms_top_n >= 1 && cfg.post_nms_top_n >= 1, k, name,
                  "pre_nms_top_n and post_nms_top_n must be >= 1, got ", cfg.pre_nms_top_n, " and ",
                  cfg.post_nms_top_n);
  TBD_LAYER_CHECK(cfg.nms_threshold > 0 && cfg.nms_threshold <= 1, k, name,
                  "nms_threshold must be in (0, 1], got ", cfg.nms_threshold);
  TBD_LAYER_CHECK(cfg.min_size >= 0, k, name, "min_size must be >= 0, got ", cfg.min_size);
  Contract c{{TensorDesc{Shape{N * cfg.post_nms_top_n, 5}}},
             {},
             proposal_flops(cfg, N),
             proposal_bytes(cfg, N)};
  c.output_grads = {false};
  c.input_grads = {false, false};
  return c;
}

template <>
Contract contract(const std::string& name, const AnchorTargetConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = AnchorTargetConfig::kKind;
  check_spec(k, name, cfg.anchors);
  check_input_count(k, name, in, 1, "inputs (gt)");
  check_gt(k, name, in[0]);
  TBD_LAYER_CHECK(cfg.batch_size >= 1, k, name, "batch_size must be >= 1, got ", cfg.batch_size);
  TBD_LAYER_CHECK(cfg.fg_fraction >= 0 && cfg.fg_fraction <= 1, k, name,
                  "fg_fraction must be in [0, 1], got ", cfg.fg_fraction);
  TBD_LAYER_CHECK(cfg.negative_iou <= cfg.positive_iou, k, name, "negative_iou ", cfg.negative_iou,
                  " must be <= positive_iou ", cfg.positive_iou);
  const int64_t N = in[0].shape[0], G = in[0].shape[1];
  const int64_t A = cfg.anchors.num_anchors(), H = cfg.anchors.feature_h, W = cfg.anchors.feature_w;
  Contract c{{TensorDesc{Shape{N, A * H * W}, DType::kI32}, TensorDesc{Shape{N, 4 * A, H, W}},
              TensorDesc{Shape{N, 4 * A, H, W}}},
             {},
             anchor_target_flops(cfg, N, G),
             anchor_target_bytes(cfg, N, G)};
  c.output_grads = {false, false, false};
  c.input_grads = {false};
  return c;
}

template <>
Contract contract(const std::string& name, const ProposalTargetConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = ProposalTargetConfig::kKind;
  check_input_count(k, name, in, 2, "inputs (rois, gt)");
  check_rank(k, name, "rois", in[0], 2, "(N*P, 5)");
  check_positive(k, name, "rois", in[0].shape);
  check_f32(k, name, "rois", in[0]);
  TBD_LAYER_CHECK(in[0].shape[1] == 5, k, name,
                  "input rois must be (N*P, 5) rows (batch_index, x1, y1, x2, y2), got ",
                  in[0].shape.to_string());
  check_gt(k, name, in[1]);
  const int64_t N = in[1].shape[0], G = in[1].shape[1];
  TBD_LAYER_CHECK(in[0].shape[0] % N == 0, k, name, "input rois ", in[0].shape.to_string(),
                  " must have a multiple of the gt's N = ", N, " rows");
  const int64_t P = in[0].shape[0] / N;
  TBD_LAYER_CHECK(cfg.num_classes >= 2, k, name, "num_classes must be >= 2, got ", cfg.num_classes);
  TBD_LAYER_CHECK(cfg.rois_per_image >= 1, k, name, "rois_per_image must be >= 1, got ",
                  cfg.rois_per_image);
  TBD_LAYER_CHECK(cfg.fg_fraction >= 0 && cfg.fg_fraction <= 1, k, name,
                  "fg_fraction must be in [0, 1], got ", cfg.fg_fraction);
  TBD_LAYER_CHECK(cfg.bg_iou_lo <= cfg.bg_iou_hi, k, name, "bg_iou_lo ", cfg.bg_iou_lo,
                  " must be <= bg_iou_hi ", cfg.bg_iou_hi);
  for (double s : cfg.stds) {
    TBD_LAYER_CHECK(s > 0, k, name, "stds must be > 0, got ", s);
  }
  const int64_t R = cfg.rois_per_image, C = cfg.num_classes;
  Contract c{{TensorDesc{Shape{N * R, 5}}, TensorDesc{Shape{N * R}, DType::kI32},
              TensorDesc{Shape{N * R, 4 * C}}, TensorDesc{Shape{N * R, 4 * C}}},
             {},
             proposal_target_flops(cfg, N, P, G),
             proposal_target_bytes(cfg, N, P, G)};
  c.output_grads = {false, false, false, false};
  c.input_grads = {false, false};
  return c;
}

// ---- the box library ----

std::vector<double> generate_anchors(int64_t base_size, const std::vector<double>& scales,
                                     const std::vector<double>& ratios) {
  // py-faster-rcnn: base (0, 0, base-1, base-1); _ratio_enum then _scale_enum; np.round rounds
  // half to even, as nearbyint does in the default rounding mode.
  const double w = static_cast<double>(base_size), h = w;
  const double cx = 0.5 * (w - 1), cy = 0.5 * (h - 1);
  std::vector<double> out;
  for (double r : ratios) {
    const double size_ratio = w * h / r;
    const double ws = std::nearbyint(std::sqrt(size_ratio));
    const double hs = std::nearbyint(ws * r);
    for (double s : scales) {
      const double sw = ws * s, sh = hs * s;
      out.insert(out.end(), {cx - 0.5 * (sw - 1), cy - 0.5 * (sh - 1), cx + 0.5 * (sw - 1),
                             cy + 0.5 * (sh - 1)});
    }
  }
  return out;
}

std::vector<float> anchor_grid(const AnchorSpec& spec) {
  const std::vector<double> base = generate_anchors(spec.feature_stride, spec.scales, spec.ratios);
  const int64_t A = spec.num_anchors(), H = spec.feature_h, W = spec.feature_w;
  std::vector<float> out(static_cast<std::size_t>(A * H * W * 4));
  for (int64_t a = 0; a < A; ++a) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t w = 0; w < W; ++w) {
        const double sx = static_cast<double>(w * spec.feature_stride);
        const double sy = static_cast<double>(h * spec.feature_stride);
        float* o = &out[static_cast<std::size_t>(((a * H + h) * W + w) * 4)];
        o[0] = static_cast<float>(base[a * 4 + 0] + sx);
        o[1] = static_cast<float>(base[a * 4 + 1] + sy);
        o[2] = static_cast<float>(base[a * 4 + 2] + sx);
        o[3] = static_cast<float>(base[a * 4 + 3] + sy);
      }
    }
  }
  return out;
}

void iou_matrix(const float* a, int64_t na, const float* b, int64_t nb, float* out) {
#pragma omp parallel for schedule(static) if (na * nb > 16384)
  for (int64_t i = 0; i < na; ++i) {
    const float area_a = box_area(a + 4 * i);
    for (int64_t j = 0; j < nb; ++j) {
      out[i * nb + j] = box_iou_areas(a + 4 * i, area_a, b + 4 * j, box_area(b + 4 * j));
    }
  }
}

std::vector<int64_t> top_k(const float* scores, int64_t n, int64_t k) {
  k = std::clamp<int64_t>(k, 0, n);
  std::vector<int64_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  auto before = [scores](int64_t i, int64_t j) {
    return scores[i] > scores[j] || (scores[i] == scores[j] && i < j);
  };
  if (k < n) std::nth_element(idx.begin(), idx.begin() + k, idx.end(), before);
  idx.resize(static_cast<std::size_t>(k));
  std::sort(idx.begin(), idx.end(), before);
  return idx;
}

namespace {

// Marks every box j in [from, n) whose IoU with box b exceeds the threshold (box_iou_areas's
// operations in the same order, so the decision is the scalar one); returns how many it newly
// marked.
TBD_SIMD_CLONES int64_t suppress_after(const float* x1, const float* y1, const float* x2,
                                       const float* y2, const float* area, int64_t from, int64_t n,
                                       float bx1, float by1, float bx2, float by2, float barea,
                                       float threshold, int32_t* suppressed) {
  int32_t newly = 0;
#pragma omp simd reduction(+ : newly)
  for (int64_t j = from; j < n; ++j) {
    const float iw = (std::min(bx2, x2[j]) - std::max(bx1, x1[j])) + 1.f;
    const float ih = (std::min(by2, y2[j]) - std::max(by1, y1[j])) + 1.f;
    const float inter = iw * ih;
    const float iou = (iw > 0.f && ih > 0.f) ? inter / ((barea + area[j]) - inter) : 0.f;
    const int32_t s = suppressed[j] | static_cast<int32_t>(iou > threshold);
    newly += s - suppressed[j];
    suppressed[j] = s;
  }
  return newly;
}

}  // namespace

int64_t nms_columns(float* x1, float* y1, float* x2, float* y2, float* area, int64_t n,
                    float threshold, int64_t max_keep, int32_t* suppressed, int64_t* pos,
                    int64_t* keep) {
  std::fill(suppressed, suppressed + n, 0);
  std::iota(pos, pos + n, int64_t{0});
  int64_t kept = 0, m = n, dead = 0;
  for (int64_t i = 0; i < m && kept < max_keep; ++i) {
    if (suppressed[i]) continue;
    keep[kept++] = pos[i];
    if (kept == max_keep) break;
    dead += suppress_after(x1, y1, x2, y2, area, i + 1, m, x1[i], y1[i], x2[i], y2[i], area[i],
                           threshold, suppressed);
    // Once a quarter of what is left is suppressed, squeeze it out (order kept), so that later
    // passes scan only live boxes (results/tuning.md: 9-11 -> 6-7 ms at the full configuration).
    if (4 * dead > m - i) {
      int64_t w = i + 1;
      for (int64_t j = i + 1; j < m; ++j) {
        if (suppressed[j]) continue;
        x1[w] = x1[j];
        y1[w] = y1[j];
        x2[w] = x2[j];
        y2[w] = y2[j];
        area[w] = area[j];
        pos[w] = pos[j];
        suppressed[w] = 0;
        ++w;
      }
      m = w;
      dead = 0;
    }
  }
  return kept;
}

std::vector<int64_t> nms_sorted(const float* boxes, int64_t n, float threshold, int64_t max_keep) {
  const auto sz = static_cast<std::size_t>(n);
  std::vector<float> x1(sz), y1(sz), x2(sz), y2(sz), area(sz);
  for (int64_t i = 0; i < n; ++i) {
    x1[i] = boxes[4 * i];
    y1[i] = boxes[4 * i + 1];
    x2[i] = boxes[4 * i + 2];
    y2[i] = boxes[4 * i + 3];
    area[i] = box_area(boxes + 4 * i);
  }
  std::vector<int32_t> suppressed(sz);
  std::vector<int64_t> pos(sz);
  std::vector<int64_t> keep(static_cast<std::size_t>(std::clamp<int64_t>(max_keep, 0, n)));
  keep.resize(static_cast<std::size_t>(
      nms_columns(x1.data(), y1.data(), x2.data(), y2.data(), area.data(), n, threshold,
                  static_cast<int64_t>(keep.size()), suppressed.data(), pos.data(), keep.data())));
  return keep;
}

int64_t sample_subset_into(const int64_t* candidates, int64_t n, int64_t k, uint64_t base,
                           std::pair<uint64_t, int64_t>* scratch, int64_t* out) {
  k = std::clamp<int64_t>(k, 0, n);
  if (k == n) {
    std::copy(candidates, candidates + n, out);
  } else if (k > 0) {
    for (int64_t i = 0; i < n; ++i) scratch[i] = {sample_rank(base, candidates[i]), candidates[i]};
    std::nth_element(scratch, scratch + (k - 1), scratch + n);
    for (int64_t i = 0; i < k; ++i) out[i] = scratch[i].second;
  }
  std::sort(out, out + k);
  return k;
}

std::vector<int64_t> sample_subset(const std::vector<int64_t>& candidates, int64_t k,
                                   uint64_t base) {
  const auto n = static_cast<int64_t>(candidates.size());
  std::vector<std::pair<uint64_t, int64_t>> scratch(candidates.size());
  std::vector<int64_t> out(static_cast<std::size_t>(std::clamp<int64_t>(k, 0, n)));
  sample_subset_into(candidates.data(), n, k, base, scratch.data(), out.data());
  return out;
}

}  // namespace tbd
