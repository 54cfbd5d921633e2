// layers/loss.cpp: shape checks, FLOP and byte counts of the losses (shared by all backends).
#include "layers/loss.h"

#include <cmath>

namespace tbd {

Shape softmax_cross_entropy_output_shape(const std::string& name,
                                         const SoftmaxCrossEntropyConfig& cfg,
                                         const TensorDesc& logits, const TensorDesc& labels) {
  const char* k = SoftmaxCrossEntropyConfig::kKind;
  const Shape& z = logits.shape;
  TBD_LAYER_CHECK(z.rank() >= 2, k, name, "input logits must have rank >= 2 (..., V), got ",
                  z.to_string());
  check_positive(k, name, "logits", z);
  check_positive(k, name, "labels", labels.shape);
  check_floating(k, name, "logits", logits);
  TBD_LAYER_CHECK(labels.dtype == DType::kI32, k, name, "input labels must be i32, got ",
                  labels.to_string());
  std::vector<int64_t> lead(z.dims().begin(), z.dims().end() - 1);
  TBD_LAYER_CHECK(labels.shape == Shape(lead), k, name, "input labels must have shape ",
                  Shape(lead).to_string(), " (the leading dims of logits ", z.to_string(),
                  "), got ", labels.shape.to_string());
  TBD_LAYER_CHECK(cfg.label_smoothing >= 0 && cfg.label_smoothing <= 1, k, name,
                  "invalid config: label_smoothing=", cfg.label_smoothing, " must be in [0, 1]");
  TBD_LAYER_CHECK(std::isfinite(cfg.weight), k, name, "invalid config: weight=", cfg.weight,
                  " must be finite");
  return Shape{1};
}

Flops softmax_cross_entropy_flops(const Shape& logits) {
  double e = static_cast<double>(logits.numel());
  return Flops{4 * e, 3 * e, 0};
}

Bytes softmax_cross_entropy_bytes(const Shape& logits, DType t) {
  const double e = static_cast<double>(logits.numel());
  const double m = e / static_cast<double>(logits[-1]);
  const double labels = bytes_of(m, DType::kI32);
  // Saved for backward: the per-row log-sum-exp (M) and the count of rows in the mean (1).
  return Bytes{bytes_of(e, t) + bytes_of(1 + m + 1) + labels,
               bytes_of(2 * e, t) + bytes_of(1 + 1 + m) + labels, 0};
}

Shape mse_loss_output_shape(const std::string& name, const TensorDesc& pred,
                            const TensorDesc& target) {
  const char* k = MseLossConfig::kKind;
  TBD_LAYER_CHECK(pred.shape.rank() >= 1, k, name, "input pred must have rank >= 1, got ",
                  pred.shape.to_string());
  check_positive(k, name, "pred", pred.shape);
  TBD_LAYER_CHECK(target.shape == pred.shape, k, name, "input target must have pred's shape ",
                  pred.shape.to_string(), ", got ", target.shape.to_string());
  TBD_LAYER_CHECK(pred.dtype == DType::kF32 && target.dtype == DType::kF32, k, name,
                  "inputs pred and target must be f32, got ", pred.to_string(), " and ",
                  target.to_string());
  return Shape{1};
}

Flops mse_loss_flops(const Shape& pred) {
  double e = static_cast<double>(pred.numel());
  return Flops{3 * e, 3 * e, 0};
}

Bytes mse_loss_bytes(const Shape& pred) {
  const double e = static_cast<double>(pred.numel());
  return Bytes{bytes_of(2 * e + 1), bytes_of(1 + 4 * e), 0};
}

template <>
Contract contract(const std::string& name, const SoftmaxCrossEntropyConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(SoftmaxCrossEntropyConfig::kKind, name, in, 2, "inputs (logits, labels)");
  const Shape ys = softmax_cross_entropy_output_shape(name, cfg, in[0], in[1]);
  return Contract{{TensorDesc{ys}},
                  {},
                  softmax_cross_entropy_flops(in[0].shape),
                  softmax_cross_entropy_bytes(in[0].shape, in[0].dtype)};
}

std::string describe_problem(const SoftmaxCrossEntropyConfig& cfg,
                             const std::vector<TensorDesc>& in, const Contract&) {
  return detail::concat("logits ", in[0].shape.to_string(), " smoothing=", cfg.label_smoothing,
                        cfg.weight != 1 ? detail::concat(" weight=", cfg.weight) : "");
}

template <>
Contract contract(const std::string& name, const MseLossConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  (void)cfg;
  check_input_count(MseLossConfig::kKind, name, in, 2, "inputs (pred, target)");
  const Shape ys = mse_loss_output_shape(name, in[0], in[1]);
  return Contract{{TensorDesc{ys}}, {}, mse_loss_flops(in[0].shape), mse_loss_bytes(in[0].shape)};
}

std::string describe_problem(const MseLossConfig&, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("pred ", in[0].shape.to_string());
}

template <>
Contract contract(const std::string& name, const GradientPenaltyConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = GradientPenaltyConfig::kKind;
  check_input_count(k, name, in, 1, "inputs (g)");
  check_f32(k, name, "g", in[0]);
  const Shape& g = in[0].shape;
  TBD_LAYER_CHECK(g.rank() >= 2 && in[0].layout == Layout::kRowMajor, k, name,
                  "input g must be row-major with rank >= 2 (N, ...), got ", in[0].to_string());
  check_positive(k, name, "g", g);
  TBD_LAYER_CHECK(cfg.weight > 0 && cfg.target >= 0, k, name, "invalid config: weight=", cfg.weight,
                  " target=", cfg.target);
  const double e = static_cast<double>(g.numel()), n = static_cast<double>(g[0]);
  return Contract{{TensorDesc{Shape{1}}},
                  {},
                  Flops{2 * e + 4 * n, 2 * e + 6 * n, 0},
                  Bytes{bytes_of(e + 1), bytes_of(1 + 2 * e), 0}};
}

std::string describe_problem(const GradientPenaltyConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("g ", in[0].shape.to_string(), " weight=", cfg.weight);
}

Flops actor_critic_loss_flops(const Shape& logits) {
  const double n = static_cast<double>(logits[0]), a = static_cast<double>(logits[1]);
  return Flops{n * (8 * a + 8), n * (12 * a + 4), 0};
}

Bytes actor_critic_loss_bytes(const Shape& logits) {
  const double n = static_cast<double>(logits[0]), e = static_cast<double>(logits.numel());
  // i32 actions are 4 bytes like the f32 tensors.
  return Bytes{bytes_of(e + 3 * n + 1), bytes_of(1 + 2 * e + 4 * n), 0};
}

template <>
Contract contract(const std::string& name, const ActorCriticLossConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = ActorCriticLossConfig::kKind;
  check_input_count(k, name, in, 4, "inputs (logits, value, actions, returns)");
  check_rank(k, name, "logits", in[0], 2, "(N, A)");
  check_positive(k, name, "logits", in[0].shape);
  check_f32(k, name, "logits", in[0]);
  const int64_t N = in[0].shape[0];
  TBD_LAYER_CHECK(in[1].shape == Shape({N, 1}), k, name, "input value must have shape ",
                  Shape({N, 1}).to_string(), ", got ", in[1].shape.to_string());
  check_f32(k, name, "value", in[1]);
  TBD_LAYER_CHECK(in[2].shape == Shape({N}) && in[2].dtype == DType::kI32, k, name,
                  "input actions must be (", N, ") i32, got ", in[2].to_string());
  TBD_LAYER_CHECK(in[3].shape == Shape({N}), k, name, "input returns must have shape (", N,
                  "), got ", in[3].shape.to_string());
  check_f32(k, name, "returns", in[3]);
  for (std::size_t i = 0; i < in.size(); ++i) {
    TBD_LAYER_CHECK(in[i].layout == Layout::kRowMajor, k, name, "input ", i,
                    " must be row-major, got ", in[i].to_string());
  }
  TBD_LAYER_CHECK(cfg.entropy_beta >= 0 && cfg.value_weight >= 0 && cfg.prob_eps >= 0, k, name,
                  "invalid config: entropy_beta=", cfg.entropy_beta,
                  " value_weight=", cfg.value_weight, " prob_eps=", cfg.prob_eps, " must be >= 0");
  Contract c{{TensorDesc{Shape{1}}},
             {},
             actor_critic_loss_flops(in[0].shape),
             actor_critic_loss_bytes(in[0].shape)};
  c.input_grads = {true, true, false, false};
  return c;
}

std::string describe_problem(const ActorCriticLossConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("logits ", in[0].shape.to_string(), " beta=", cfg.entropy_beta);
}

}  // namespace tbd
