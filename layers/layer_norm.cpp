// layers/layer_norm.cpp: shape checks, FLOP and byte counts of LayerNorm (shared by all
// backends).
#include "layers/layer_norm.h"

namespace tbd {

const char* to_string(LayerNormOver o) { return o == LayerNormOver::kLastDim ? "last_dim" : "chw"; }

LayerNormRows layer_norm_rows(const LayerNormConfig& cfg, const Shape& x) {
  LayerNormRows r;
  if (cfg.over == LayerNormOver::kChw) {
    r.M = x[0];
    r.D = x.numel() / x[0];
    r.P = x[1];
    r.G = x[2] * x[3];
  } else {
    r.D = x[-1];
    r.M = x.numel() / r.D;
    r.P = r.D;
    r.G = 1;
  }
  return r;
}

Shape layer_norm_output_shape(const std::string& name, const LayerNormConfig& cfg, const Shape& x) {
  const char* k = LayerNormConfig::kKind;
  if (cfg.over == LayerNormOver::kChw) {
    TBD_LAYER_CHECK(x.rank() == 4, k, name,
                    "input x must have rank 4 (N, C, H, W) to be normalised over (C, H, W), got ",
                    x.to_string());
  } else {
    TBD_LAYER_CHECK(x.rank() >= 2, k, name, "input x must have rank >= 2 (..., D), got ",
                    x.to_string());
  }
  check_positive(k, name, "x", x);
  TBD_LAYER_CHECK(cfg.eps > 0, k, name, "invalid config: eps=", cfg.eps, " must be > 0");
  return x;
}

Flops layer_norm_flops(const Shape& x) {
  double e = static_cast<double>(x.numel());
  return Flops{8 * e, 12 * e, 4 * e};
}

Bytes layer_norm_bytes(const LayerNormConfig& cfg, const Shape& x) {
  const LayerNormRows r = layer_norm_rows(cfg, x);
  const double e = static_cast<double>(x.numel()), p = static_cast<double>(r.P),
               m = static_cast<double>(r.M);
  return Bytes{bytes_of(2 * e + 2 * p + 2 * m), bytes_of(3 * e + 2 * m + p),
               bytes_of(2 * e + 2 * m + 4 * p)};
}

template <>
Contract contract(const std::string& name, const LayerNormConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(LayerNormConfig::kKind, name, in, 1);
  check_f32(LayerNormConfig::kKind, name, "x", in[0]);
  const Shape ys = layer_norm_output_shape(name, cfg, in[0].shape);
  const int64_t P = layer_norm_rows(cfg, ys).P;
  Contract c{{TensorDesc{ys}},
             {{"gamma", Shape{P}, Init::kOnes, P, P, false},
              {"beta", Shape{P}, Init::kZeros, P, P, false}},
             layer_norm_flops(in[0].shape),
             layer_norm_bytes(cfg, in[0].shape)};
  c.saved_inputs = {true};  // x (with the row statistics the layer keeps); y is not read
  c.saved_outputs = {false};
  return c;
}

std::string describe_problem(const LayerNormConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].to_string(), " over ", to_string(cfg.over), " eps=", cfg.eps);
}

}  // namespace tbd
