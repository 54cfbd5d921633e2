// layers/detection.cpp: the contracts of Proposal, AnchorTarget and ProposalTarget and the host
// box library (layers/detection.h).
#include "layers/detection.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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

std::string describe_problem(const ProposalConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("cls ", in[0].shape.to_string(), " pre ", cfg.pre_nms_top_n, " post ",
                        cfg.post_nms_top_n, " nms ", cfg.nms_threshold);
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

std::string describe_problem(const AnchorTargetConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("gt ", in[0].shape.to_string(), " anchors ",
                        cfg.anchors.num_anchors() * cfg.anchors.feature_h * cfg.anchors.feature_w,
                        " batch ", cfg.batch_size, " seed=", cfg.seed);
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

std::string describe_problem(const ProposalTargetConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("rois ", in[0].shape.to_string(), " gt ", in[1].shape.to_string(), " R ",
                        cfg.rois_per_image, " seed=", cfg.seed);
}

// ---- anchors ----

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

}  // namespace tbd
