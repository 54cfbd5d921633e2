// layers/layer_norm.cpp: shape checks, FLOP and byte counts of LayerNorm (shared by all
// backends).
#include "layers/layer_norm.h"

namespace tbd {

Shape layer_norm_output_shape(const std::string& name, const LayerNormConfig& cfg, const Shape& x) {
  const char* k = LayerNormConfig::kKind;
  TBD_LAYER_CHECK(x.rank() >= 2, k, name, "input x must have rank >= 2 (..., D), got ",
                  x.to_string());
  check_positive(k, name, "x", x);
  TBD_LAYER_CHECK(cfg.eps > 0, k, name, "invalid config: eps=", cfg.eps, " must be > 0");
  return x;
}

Flops layer_norm_flops(const Shape& x) {
  double e = static_cast<double>(x.numel());
  return Flops{8 * e, 12 * e, 4 * e};
}

Bytes layer_norm_bytes(const Shape& x) {
  const double e = static_cast<double>(x.numel()), d = static_cast<double>(x[-1]);
  const double m = e / d;
  return Bytes{bytes_of(2 * e + 2 * d + 2 * m), bytes_of(3 * e + 2 * m + d),
               bytes_of(2 * e + 2 * m + 4 * d)};
}

template <>
Contract contract(const std::string& name, const LayerNormConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(LayerNormConfig::kKind, name, in, 1);
  check_f32(LayerNormConfig::kKind, name, "x", in[0]);
  const Shape ys = layer_norm_output_shape(name, cfg, in[0].shape);
  const int64_t D = in[0].shape[-1];
  return Contract{{TensorDesc{ys}},
                  {{"gamma", Shape{D}, Init::kOnes, D, D, false},
                   {"beta", Shape{D}, Init::kZeros, D, D, false}},
                  layer_norm_flops(in[0].shape),
                  layer_norm_bytes(in[0].shape)};
}

}  // namespace tbd
