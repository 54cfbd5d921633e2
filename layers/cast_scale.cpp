// layers/cast_scale.cpp: CastScale's contract, FLOP and byte counts (all backends).
#include "layers/cast_scale.h"

#include <cmath>

namespace tbd {

Flops cast_scale_flops(const Shape& x) { return Flops{static_cast<double>(x.numel()), 0, 0}; }

Bytes cast_scale_bytes(const Shape& x) {
  const double e = static_cast<double>(x.numel());
  return Bytes{bytes_of(e, DType::kU8) + bytes_of(e), 0, 0};
}

template <>
Contract contract(const std::string& name, const CastScaleConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = CastScaleConfig::kKind;
  check_input_count(k, name, in, 1);
  TBD_LAYER_CHECK(in[0].shape.rank() >= 1, k, name, "input x must have rank >= 1, got ",
                  in[0].shape.to_string());
  check_positive(k, name, "x", in[0].shape);
  TBD_LAYER_CHECK(in[0].dtype == DType::kU8, k, name, "input x must be u8, got ",
                  in[0].to_string());
  TBD_LAYER_CHECK(in[0].layout == Layout::kRowMajor, k, name, "input x must be row-major, got ",
                  in[0].to_string());
  TBD_LAYER_CHECK(std::isfinite(cfg.scale), k, name, "scale must be finite, got ", cfg.scale);
  Contract c{
      {TensorDesc{in[0].shape}}, {}, cast_scale_flops(in[0].shape), cast_scale_bytes(in[0].shape)};
  saves_nothing(c, in.size());  // no gradient flows to u8 data
  return c;
}

std::string describe_problem(const CastScaleConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].shape.to_string(), " u8 scale ", cfg.scale);
}

}  // namespace tbd
