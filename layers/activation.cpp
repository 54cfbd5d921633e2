// layers/activation.cpp: names, shape checks, FLOP and byte counts of Activation (all
// backends).
#include "layers/activation.h"

#include <cmath>

namespace tbd {

const char* to_string(ActKind k) {
  switch (k) {
    case ActKind::kRelu:
      return "relu";
    case ActKind::kLeakyRelu:
      return "leaky_relu";
    case ActKind::kTanh:
      return "tanh";
    case ActKind::kSigmoid:
      return "sigmoid";
    case ActKind::kGelu:
      return "gelu";
    case ActKind::kClippedRelu:
      return "clipped_relu";
    case ActKind::kGeluTanh:
      return "gelu_tanh";
  }
  return "?";
}

Shape activation_output_shape(const std::string& name, const ActivationConfig& cfg,
                              const TensorDesc& x) {
  const char* k = ActivationConfig::kKind;
  TBD_LAYER_CHECK(x.shape.rank() >= 1, k, name, "input x must have rank >= 1, got ",
                  x.shape.to_string());
  check_positive(k, name, "x", x.shape);
  TBD_LAYER_CHECK(is_floating(x.dtype), k, name, "input x must be f32 or bf16, got ",
                  to_string(x.dtype), " ", x.shape.to_string());
  TBD_LAYER_CHECK(x.layout != Layout::kNChw16c || (x.shape.rank() == 4 && x.shape[1] % 16 == 0), k,
                  name, "input x in nChw16c needs rank 4 and C % 16 == 0, got ",
                  x.shape.to_string());
  TBD_LAYER_CHECK(
      cfg.act != ActKind::kClippedRelu || (cfg.ceiling > 0 && std::isfinite(cfg.ceiling)), k, name,
      "invalid config: ceiling=", cfg.ceiling, " (clipped relu needs a finite ceiling > 0)");
  return x.shape;
}

Flops activation_flops(const ActivationConfig& cfg, const Shape& x) {
  double e = static_cast<double>(x.numel());
  switch (cfg.act) {
    case ActKind::kRelu:
      return Flops{e, e, 0};
    case ActKind::kLeakyRelu:
    case ActKind::kClippedRelu:
      return Flops{2 * e, 2 * e, 0};
    case ActKind::kTanh:
    case ActKind::kSigmoid:
      return Flops{4 * e, 3 * e, 0};
    case ActKind::kGelu:
      return Flops{8 * e, 10 * e, 0};
    case ActKind::kGeluTanh:
      return Flops{12 * e, 20 * e, 0};
  }
  return Flops{};
}

Bytes activation_bytes(const ActivationConfig& cfg, const Shape& x, DType t) {
  (void)cfg;  // every kind reads one saved tensor (x or y) in backward: the same bytes
  const double e = static_cast<double>(x.numel());
  return Bytes{bytes_of(2 * e, t), bytes_of(3 * e, t), 0};
}

template <>
Contract contract(const std::string& name, const ActivationConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(ActivationConfig::kKind, name, in, 1);
  const Shape ys = activation_output_shape(name, cfg, in[0]);
  Contract c{{TensorDesc{ys, in[0].dtype, in[0].layout}},
             {},
             activation_flops(cfg, in[0].shape),
             activation_bytes(cfg, in[0].shape, in[0].dtype)};
  const bool from_y = activation_saves_output(cfg);
  c.saved_inputs = {!from_y};
  c.saved_outputs = {from_y};
  return c;
}

std::string describe_problem(const ActivationConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat(to_string(cfg.act), " x ", in[0].shape.to_string());
}

bool activation_saves_output(const ActivationConfig& cfg) {
  switch (cfg.act) {
    case ActKind::kRelu:
    case ActKind::kTanh:
    case ActKind::kSigmoid:
    case ActKind::kClippedRelu:
      return true;
    case ActKind::kLeakyRelu:
      return cfg.alpha >= 0;  // y keeps x's sign only then
    case ActKind::kGelu:
    case ActKind::kGeluTanh:
      return false;
  }
  return false;
}

}  // namespace tbd
