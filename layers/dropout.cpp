// layers/dropout.cpp: shape checks, FLOP and byte counts of Dropout (shared by all backends).
#include "layers/dropout.h"

namespace tbd {

Shape dropout_output_shape(const std::string& name, const DropoutConfig& cfg, const TensorDesc& x) {
  const char* k = DropoutConfig::kKind;
  TBD_LAYER_CHECK(x.shape.rank() >= 1, k, name, "input x must have rank >= 1, got ",
                  x.shape.to_string());
  check_positive(k, name, "x", x.shape);
  TBD_LAYER_CHECK(is_floating(x.dtype), k, name, "input x must be f32 or bf16, got ",
                  x.to_string());
  TBD_LAYER_CHECK(x.layout != Layout::kNChw16c || (x.shape.rank() == 4 && x.shape[1] % 16 == 0), k,
                  name, "blocked input x must be (N, C, H, W) with C % 16 == 0, got ",
                  x.to_string());
  TBD_LAYER_CHECK(cfg.p >= 0 && cfg.p <= 1, k, name, "invalid config: p=", cfg.p,
                  " must be in [0, 1]");
  return x.shape;
}

Flops dropout_flops(const Shape& x) {
  double e = static_cast<double>(x.numel());
  return Flops{2 * e, e, 0};
}

Bytes dropout_bytes(const Shape& x, DType t) {
  constexpr double kMaskBytesPerElement = 1;  // the mask is one byte per element (see above)
  const double e = static_cast<double>(x.numel());
  const double pass = bytes_of(2 * e, t) + kMaskBytesPerElement * e;
  return Bytes{pass, pass, 0};
}

template <>
Contract contract(const std::string& name, const DropoutConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(DropoutConfig::kKind, name, in, 1);
  dropout_output_shape(name, cfg, in[0]);
  Contract c{{in[0]}, {}, dropout_flops(in[0].shape), dropout_bytes(in[0].shape, in[0].dtype)};
  saves_nothing(c, in.size());  // backward reads the mask the layer keeps
  return c;
}

std::string describe_problem(const DropoutConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].to_string(), " p=", cfg.p);
}

}  // namespace tbd
