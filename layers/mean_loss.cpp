// layers/mean_loss.cpp: the contract of MeanLoss (shared by all backends).
#include "layers/mean_loss.h"

#include <cmath>

namespace tbd {

Flops mean_loss_flops(const Shape& x) {
  const double e = static_cast<double>(x.numel());
  return Flops{e + 1, e, 0};
}

Bytes mean_loss_bytes(const Shape& x) {
  const double e = static_cast<double>(x.numel());
  return Bytes{bytes_of(e + 1), bytes_of(1 + e), 0};
}

template <>
Contract contract(const std::string& name, const MeanLossConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = MeanLossConfig::kKind;
  check_input_count(k, name, in, 1);
  check_f32(k, name, "x", in[0]);
  TBD_LAYER_CHECK(in[0].shape.rank() >= 1, k, name, "input x must have rank >= 1, got ",
                  in[0].shape.to_string());
  check_positive(k, name, "x", in[0].shape);
  TBD_LAYER_CHECK(std::isfinite(cfg.weight), k, name, "invalid config: weight=", cfg.weight,
                  " must be finite");
  return Contract{
      {TensorDesc{Shape{1}}}, {}, mean_loss_flops(in[0].shape), mean_loss_bytes(in[0].shape)};
}

std::string describe_problem(const MeanLossConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].shape.to_string(), " weight=", cfg.weight);
}

}  // namespace tbd
