// layers/rope.cpp: shape checks, FLOP and byte counts of RoPE (all backends).
#include "layers/rope.h"

#include <cmath>

namespace tbd {

std::vector<float> rope_tables(const RopeConfig& cfg, int64_t T) {
  const int64_t half = cfg.head_dim / 2;
  std::vector<float> t(static_cast<std::size_t>(2 * T * half));
  for (int64_t p = 0; p < T; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(p) *
          std::pow(cfg.theta, -2.0 * static_cast<double>(i) / static_cast<double>(cfg.head_dim));
      t[static_cast<std::size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
      t[static_cast<std::size_t>((T + p) * half + i)] = static_cast<float>(std::sin(angle));
    }
  }
  return t;
}

int64_t rope_rotated_heads(const std::string& name, const RopeConfig& c, const TensorDesc& x) {
  const char* k = RopeConfig::kKind;
  check_rank(k, name, "x", x, 3, "(N, T, W)");
  check_floating(k, name, "x", x);
  check_positive(k, name, "x", x.shape);
  TBD_LAYER_CHECK(x.layout == Layout::kRowMajor, k, name, "input x must be row-major, got ",
                  x.to_string());
  TBD_LAYER_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0 && c.theta > 0 && c.rotate_heads >= 0, k,
                  name, "invalid config: head_dim=", c.head_dim,
                  " (positive, even) theta=", c.theta, " rotate_heads=", c.rotate_heads);
  const int64_t W = x.shape[2];
  TBD_LAYER_CHECK(W % c.head_dim == 0, k, name, "input x ", x.shape.to_string(), ": width ", W,
                  " must be a multiple of head_dim=", c.head_dim);
  const int64_t heads = W / c.head_dim;
  TBD_LAYER_CHECK(c.rotate_heads <= heads, k, name, "rotate_heads=", c.rotate_heads,
                  " exceeds the ", heads, " heads of x ", x.shape.to_string());
  return c.rotate_heads == 0 ? heads : c.rotate_heads;
}

template <>
Contract contract(const std::string& name, const RopeConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(RopeConfig::kKind, name, in, 1);
  const int64_t rot = rope_rotated_heads(name, cfg, in[0]);
  const Shape& x = in[0].shape;
  const double e = static_cast<double>(x.numel());
  const double e_rot = static_cast<double>(x[0] * x[1] * rot * cfg.head_dim);
  const double tables = static_cast<double>(x[1] * cfg.head_dim);  // f32 cos and sin
  const DType t = in[0].dtype;
  Contract c{
      {in[0]},
      {},
      Flops{3 * e_rot, 3 * e_rot, 0},
      Bytes{bytes_of(2 * e, t) + bytes_of(tables), bytes_of(2 * e, t) + bytes_of(tables), 0}};
  saves_nothing(c, 1);
  return c;
}

std::string describe_problem(const RopeConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].shape.to_string(), " d=", cfg.head_dim,
                        " rotated_heads=", rope_rotated_heads("", cfg, in[0]),
                        " theta=", cfg.theta);
}

}  // namespace tbd
