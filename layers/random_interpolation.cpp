// layers/random_interpolation.cpp: the contract of RandomInterpolation (shared by all backends).
#include "layers/random_interpolation.h"

namespace tbd {

Flops random_interpolation_flops(const Shape& x) {
  const double e = static_cast<double>(x.numel());
  return Flops{3 * e, 2 * e, 0};
}

Bytes random_interpolation_bytes(const Shape& x) {
  const double e = static_cast<double>(x.numel()), n = static_cast<double>(x[0]);
  return Bytes{bytes_of(3 * e + n), bytes_of(3 * e + n), 0};
}

template <>
Contract contract(const std::string& name, const RandomInterpolationConfig&,
                  const std::vector<TensorDesc>& in) {
  const char* k = RandomInterpolationConfig::kKind;
  check_input_count(k, name, in, 2);
  check_f32(k, name, "x0", in[0]);
  check_f32(k, name, "x1", in[1]);
  TBD_LAYER_CHECK(in[0].shape.rank() >= 1, k, name, "input x0 must have rank >= 1 (N, ...), got ",
                  in[0].shape.to_string());
  check_positive(k, name, "x0", in[0].shape);
  TBD_LAYER_CHECK(in[0].shape == in[1].shape, k, name, "x0 ", in[0].shape.to_string(), " and x1 ",
                  in[1].shape.to_string(), " must have the same shape");
  Contract c{{TensorDesc{in[0].shape}},
             {},
             random_interpolation_flops(in[0].shape),
             random_interpolation_bytes(in[0].shape)};
  saves_nothing(c, in.size());  // backward reads the weights alpha the layer keeps
  return c;
}

std::string describe_problem(const RandomInterpolationConfig& cfg,
                             const std::vector<TensorDesc>& in, const Contract&) {
  return detail::concat("x ", in[0].shape.to_string(), " seed=", cfg.seed);
}

}  // namespace tbd
