// layers/smooth_l1_loss.cpp: the contract of SmoothL1Loss (shared by all backends).
#include "layers/smooth_l1_loss.h"

#include <cmath>

namespace tbd {

Flops smooth_l1_loss_flops(const Shape& pred) {
  const double e = static_cast<double>(pred.numel());
  return Flops{6 * e + 1, 5 * e, 0};
}

Bytes smooth_l1_loss_bytes(const Shape& pred) {
  const double e = static_cast<double>(pred.numel());
  return Bytes{bytes_of(3 * e + 1), bytes_of(1 + 3 * e + e), 0};
}

std::string smooth_l1_loss_describe(const Shape& pred, const SmoothL1LossConfig& cfg) {
  return detail::concat("pred ", pred.to_string(), " sigma=", cfg.sigma, " scale=", cfg.scale);
}

template <>
Contract contract(const std::string& name, const SmoothL1LossConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = SmoothL1LossConfig::kKind;
  check_input_count(k, name, in, 3, "inputs (pred, target, weight)");
  const char* args[] = {"pred", "target", "weight"};
  for (int i = 0; i < 3; ++i) check_f32(k, name, args[i], in[i]);
  TBD_LAYER_CHECK(in[0].shape.rank() >= 1, k, name, "input pred must have rank >= 1, got ",
                  in[0].shape.to_string());
  check_positive(k, name, "pred", in[0].shape);
  for (int i = 1; i < 3; ++i) {
    TBD_LAYER_CHECK(in[i].shape == in[0].shape, k, name, "input ", args[i],
                    " must have pred's shape ", in[0].shape.to_string(), ", got ",
                    in[i].shape.to_string());
  }
  TBD_LAYER_CHECK(std::isfinite(cfg.sigma) && cfg.sigma > 0, k, name,
                  "invalid config: sigma=", cfg.sigma, " must be finite and > 0");
  TBD_LAYER_CHECK(std::isfinite(cfg.scale), k, name, "invalid config: scale=", cfg.scale,
                  " must be finite");
  Contract c{{TensorDesc{Shape{1}}},
             {},
             smooth_l1_loss_flops(in[0].shape),
             smooth_l1_loss_bytes(in[0].shape)};
  c.input_grads = {true, false, false};
  return c;
}

std::string describe_problem(const SmoothL1LossConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return smooth_l1_loss_describe(in[0].shape, cfg);
}

}  // namespace tbd
