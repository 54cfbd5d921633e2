// layers/rms_norm.cpp: shape checks, FLOP and byte counts of RMSNorm (all backends).
#include "layers/rms_norm.h"

namespace tbd {

template <>
Contract contract(const std::string& name, const RmsNormConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = RmsNormConfig::kKind;
  check_input_count(k, name, in, 1);
  check_f32(k, name, "x", in[0]);
  const Shape& x = in[0].shape;
  TBD_LAYER_CHECK(x.rank() >= 2, k, name, "input x must have rank >= 2 (..., D), got ",
                  x.to_string());
  check_positive(k, name, "x", x);
  TBD_LAYER_CHECK(in[0].layout == Layout::kRowMajor, k, name, "input x must be row-major, got ",
                  in[0].to_string());
  TBD_LAYER_CHECK(cfg.eps > 0, k, name, "invalid config: eps=", cfg.eps, " must be > 0");
  const int64_t D = x[-1];
  const double e = static_cast<double>(x.numel()), d = static_cast<double>(D), m = e / d;
  Contract c{{TensorDesc{x}},
             {{"weight", Shape{D}, Init::kOnes, D, D, false}},
             Flops{4 * e, 6 * e, 3 * e},
             Bytes{bytes_of(2 * e + d + m), bytes_of(3 * e + d + m), bytes_of(2 * e + m + 2 * d)}};
  c.saved_inputs = {true};  // x (with rstd, which the layer keeps); y is not read
  c.saved_outputs = {false};
  return c;
}

std::string describe_problem(const RmsNormConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].to_string(), " eps=", cfg.eps);
}

}  // namespace tbd
