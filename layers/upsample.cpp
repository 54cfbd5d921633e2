// layers/upsample.cpp: shape checks, FLOP and byte counts of Upsample2d (shared by all
// backends).
#include "layers/upsample.h"

namespace tbd {

Shape upsample2d_output_shape(const std::string& name, const Upsample2dConfig& cfg,
                              const TensorDesc& x) {
  const char* k = Upsample2dConfig::kKind;
  check_rank(k, name, "x", x, 4, "(N, C, H, W)");
  check_positive(k, name, "x", x.shape);
  check_f32(k, name, "x", x);
  TBD_LAYER_CHECK(cfg.scale >= 1, k, name, "invalid config: scale=", cfg.scale, " must be >= 1");
  const Shape& s = x.shape;
  return Shape{s[0], s[1], s[2] * cfg.scale, s[3] * cfg.scale};
}

Flops upsample2d_flops(const Upsample2dConfig& cfg, const Shape& x) {
  const double e = static_cast<double>(x.numel());
  return Flops{0, e * static_cast<double>(cfg.scale * cfg.scale - 1), 0};
}

Bytes upsample2d_bytes(const Upsample2dConfig& cfg, const Shape& x) {
  const double e = static_cast<double>(x.numel());
  const double y = e * static_cast<double>(cfg.scale * cfg.scale);
  return Bytes{bytes_of(e + y), bytes_of(y + e), 0};
}

template <>
Contract contract(const std::string& name, const Upsample2dConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(Upsample2dConfig::kKind, name, in, 1);
  const Shape ys = upsample2d_output_shape(name, cfg, in[0]);
  Contract c{{TensorDesc{ys, DType::kF32, in[0].layout}},
             {},
             upsample2d_flops(cfg, in[0].shape),
             upsample2d_bytes(cfg, in[0].shape)};
  saves_nothing(c, in.size());  // dx sums dy over each pixel's copies
  return c;
}

std::string describe_problem(const Upsample2dConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("nearest x", cfg.scale, " x ", in[0].to_string());
}

}  // namespace tbd
