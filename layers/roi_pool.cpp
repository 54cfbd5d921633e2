// layers/roi_pool.cpp: shape checks, FLOP and byte counts of RoIPool (shared by all backends).
#include "layers/roi_pool.h"

#include <algorithm>
#include <cmath>

namespace tbd {

const char* to_string(RoIPoolMode m) { return m == RoIPoolMode::kMax ? "max" : "align"; }

Shape roi_pool_output_shape(const std::string& name, const RoIPoolConfig& cfg, const TensorDesc& x,
                            const TensorDesc& rois) {
  const char* k = RoIPoolConfig::kKind;
  check_rank(k, name, "x", x, 4, "(N, C, H, W)");
  check_positive(k, name, "x", x.shape);
  check_f32(k, name, "x", x);
  TBD_LAYER_CHECK(x.layout == Layout::kRowMajor || x.shape[1] % 16 == 0, k, name,
                  "input x in nChw16c needs C % 16 == 0, got ", x.shape.to_string());
  check_rank(k, name, "rois", rois, 2, "(R, 5)");
  check_f32(k, name, "rois", rois);
  TBD_LAYER_CHECK(rois.shape[1] == 5 && rois.shape[0] >= 1, k, name,
                  "input rois must be (R, 5) rows (batch_index, x1, y1, x2, y2) with R >= 1, got ",
                  rois.shape.to_string());
  TBD_LAYER_CHECK(rois.layout == Layout::kRowMajor, k, name, "input rois must be row-major, got ",
                  rois.to_string());
  TBD_LAYER_CHECK(cfg.pooled_h >= 1 && cfg.pooled_w >= 1, k, name,
                  "invalid config: pooled_h=", cfg.pooled_h, " pooled_w=", cfg.pooled_w,
                  " must be >= 1");
  TBD_LAYER_CHECK(std::isfinite(cfg.spatial_scale) && cfg.spatial_scale > 0, k, name,
                  "invalid config: spatial_scale=", cfg.spatial_scale, " must be finite and > 0");
  TBD_LAYER_CHECK(cfg.sampling_ratio >= 0, k, name,
                  "invalid config: sampling_ratio=", cfg.sampling_ratio,
                  " must be >= 0 (0: adaptive)");
  return Shape{rois.shape[0], x.shape[1], cfg.pooled_h, cfg.pooled_w};
}

Flops roi_pool_flops(const RoIPoolConfig& cfg, const Shape& x, const Shape& y) {
  const double Y = static_cast<double>(y.numel());
  const double H = static_cast<double>(x[2]), W = static_cast<double>(x[3]);
  const double PH = static_cast<double>(cfg.pooled_h), PW = static_cast<double>(cfg.pooled_w);
  if (cfg.mode == RoIPoolMode::kMax) {
    const double cells = std::max(H / PH, 1.0) * std::max(W / PW, 1.0);
    return Flops{cells * Y, Y, 0};
  }
  const double S = cfg.sampling_ratio > 0
                       ? static_cast<double>(cfg.sampling_ratio * cfg.sampling_ratio)
                       : std::ceil(H / PH) * std::ceil(W / PW);
  return Flops{Y * (8 * S + 1), Y * (8 * S + 1), 0};
}

Bytes roi_pool_bytes(const RoIPoolConfig& cfg, const Shape& x, const Shape& rois, const Shape& y) {
  const double X = static_cast<double>(x.numel());
  const double B = static_cast<double>(rois.numel());
  const double Y = static_cast<double>(y.numel());
  if (cfg.mode == RoIPoolMode::kMax) {
    return Bytes{bytes_of(X + B + Y) + bytes_of(Y, DType::kI32),
                 bytes_of(Y + B + X) + bytes_of(Y, DType::kI32), 0};
  }
  return Bytes{bytes_of(X + B + Y), bytes_of(Y + B + X), 0};
}

template <>
Contract contract(const std::string& name, const RoIPoolConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(RoIPoolConfig::kKind, name, in, 2, "inputs (x, rois)");
  const Shape ys = roi_pool_output_shape(name, cfg, in[0], in[1]);
  Contract c{{TensorDesc{ys}},
             {},
             roi_pool_flops(cfg, in[0].shape, ys),
             roi_pool_bytes(cfg, in[0].shape, in[1].shape, ys)};
  c.input_grads = {true, false};
  return c;
}

std::string describe_problem(const RoIPoolConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat(
      to_string(cfg.mode), " x ", in[0].to_string(), " rois ", in[1].shape.to_string(), " -> ",
      cfg.pooled_h, "x", cfg.pooled_w, " scale=", cfg.spatial_scale,
      cfg.mode == RoIPoolMode::kAlign ? detail::concat(" sampling_ratio=", cfg.sampling_ratio)
                                      : std::string());
}

}  // namespace tbd
