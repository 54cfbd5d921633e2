// layers/positional_encoding.cpp: the sinusoid table, FLOP and byte counts (all backends).
#include "layers/positional_encoding.h"

#include <cmath>

namespace tbd {

double sinusoid(int64_t t, int64_t d, int64_t dim) {
  double freq = std::pow(10000.0, -static_cast<double>(2 * (d / 2)) / static_cast<double>(dim));
  return d % 2 == 0 ? std::sin(t * freq) : std::cos(t * freq);
}

Flops positional_encoding_flops(const Shape& x) {
  return Flops{static_cast<double>(x.numel()), 0, 0};
}

Bytes positional_encoding_bytes(const Shape& x) {
  const double e = static_cast<double>(x.numel());
  const double table = static_cast<double>(x[1] * x[2]);
  return Bytes{bytes_of(2 * e + table), bytes_of(2 * e), 0};
}

template <>
Contract contract(const std::string& name, const PositionalEncodingConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  (void)cfg;
  const char* k = PositionalEncodingConfig::kKind;
  check_input_count(k, name, in, 1);
  check_rank(k, name, "x", in[0], 3, "(N, T, D)");
  check_f32(k, name, "x", in[0]);
  Contract c{{TensorDesc{in[0].shape}},
             {},
             positional_encoding_flops(in[0].shape),
             positional_encoding_bytes(in[0].shape)};
  saves_nothing(c, in.size());  // dx = dy
  return c;
}

std::string describe_problem(const PositionalEncodingConfig&, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].shape.to_string());
}

}  // namespace tbd
