// layers/loss.h: losses; each returns a scalar (shape (1)) mean over the batch.
//
// SoftmaxCrossEntropy: logits: (..., V) row-major f32 or bf16, labels: (...) i32  y: (1) f32
//   (bf16 logits are widened exactly and everything is computed in f32, the same numbers as on
//   the logits cast to f32; dlogits are then bf16, the one rounding a cast's backward makes.)
//   (M = product of the leading dims; (M, V) logits with (M) labels is the common case.)
//   loss = weight * mean over rows with label != ignore_index of
//          -(1-ls)*log p[label] - ls/V * sum_v log p[v]   (ls = label_smoothing)
//   (weight: the loss's share of a summed loss, e.g. Inception-v3's auxiliary classifier 0.4)
//   Rows whose label == ignore_index contribute nothing (and are not in the mean); when every
//   row is ignored the loss and the gradient are 0. A label outside [0, V) (other than
//   ignore_index) makes forward throw (one compare per row, next to the row's V exps).
//   The gradient flows only to logits (labels' dx is always null); the upstream gradient is
//   dy[0], which the graph seeds with 1. Saved for backward (feature_maps): the per-row
//   log-sum-exp and the count of rows in the mean, M + 1 floats.
//   FLOPs fprop 4*M*V, dgrad 3*M*V.
//   Bytes (a lower bound, layers/layer.h; logits and dlogits s = 4 or 2 bytes, the rest 4
//   bytes), E = M*V: fprop s*E + 4*(M + M + 2) (read logits and labels; write the loss, the
//   saved log-sum-exp and count), dgrad s*2E + 4*(2 + M + M) (read dy, the count, logits,
//   log-sum-exp and labels; write dlogits), wgrad 0.
// MseLoss: pred, target: same shape  y: (1) = mean((pred - target)^2); gradients to both.
//   FLOPs fprop 3*E, dgrad 3*E.
//   Bytes (FP32): fprop 4*(2E + 1) (read pred, target; write the loss), dgrad 4*(1 + 4E)
//   (read dy, pred, target; write both gradients), wgrad 0.
// GradientPenalty: g (N, ...) f32 row-major  y: (1) = weight * mean_n (||g_n||_2 - target)^2,
//   g_n the n-th sample's slice (WGAN-GP: g = d critic / d x, weight 10, target 1). Gradient:
//   dg_n = dy * weight * 2 (||g_n|| - target) / N * g_n / ||g_n|| (0 where ||g_n|| = 0).
//   FLOPs fprop 2*E + 4*N, dgrad 2*E + 6*N. Bytes fprop 4*(E + 1), dgrad 4*(1 + 2E) (read dy
//   and g, write dg; the norms are recomputed).
// ActorCriticLoss (A3C, as TBD's TensorFlow version: policy gradient with an advantage, an
//   entropy bonus and a squared value error, each a SUM over the batch, not a mean):
//   logits (N, A) f32, value (N, 1) f32, actions (N) i32, returns (N) f32  y: (1) =
//     sum_n [ -log q[n, a_n] * adv_n  -  beta * H_n  +  c * (value_n - R_n)^2 ]
//   with p = softmax(logits), q = p + eps (TensorFlow's probs + 1e-8, so no log 0),
//   H_n = -sum_j q_j log q_j, adv_n = R_n - value_n taken as a constant: the advantage is not
//   back-propagated (TensorFlow computes it in numpy), so the value head learns only from the
//   squared error. beta = entropy_beta (0.01), c = value_weight (1: TensorFlow's value loss
//   is sum (V - R)^2, no 1/2). Gradients (dy the upstream scalar), g_j = d l_n / d q_j =
//   -adv_n [j = a_n] / q_a + beta (log q_j + 1):
//     dlogits[n, i] = dy * p_i (g_i - sum_j p_j g_j),   dvalue_n = dy * 2c (value_n - R_n);
//   none to actions and returns. An action outside [0, A) makes the CPU forward throw.
//   Nothing is saved: backward recomputes the softmax from the logits.
//   FLOPs, counted per row: fprop softmax 4A (max, exp, sum, divide), q and log q 2A, the
//   entropy's products and sum 2A, the picked-action, advantage and value terms 8: N*(8A + 8);
//   dgrad the softmax again 4A, q and log q 2A, g 3A, sum_j p_j g_j 2A, the products 1A, dvalue
//   4: N*(12A + 4); wgrad 0.
//   Bytes (f32, i32 actions): fprop 4*(N*A + 3N + 1) (read logits, value, actions, returns;
//   write the loss), dgrad 4*(1 + 2*N*A + 4N) (read dy, logits, value, actions, returns; write
//   dlogits and dvalue), wgrad 0.
// All reduce in a fixed order (per-row or per-block partial sums, then one serial sum), so
// the loss is bit-identical from run to run whatever the thread schedule.
#pragma once

#include "layers/layer.h"

namespace tbd {

struct SoftmaxCrossEntropyConfig {
  static constexpr const char* kKind = "SoftmaxCrossEntropy";
  double label_smoothing = 0.0;
  int64_t ignore_index = -100;
  double weight = 1.0;
};

struct MseLossConfig {
  static constexpr const char* kKind = "MseLoss";
};

struct GradientPenaltyConfig {
  static constexpr const char* kKind = "GradientPenalty";
  double weight = 10.0;  // lambda
  double target = 1.0;   // the norm the penalty pulls toward
};

struct ActorCriticLossConfig {
  static constexpr const char* kKind = "ActorCriticLoss";
  double entropy_beta = 0.01;
  double value_weight = 1.0;
  double prob_eps = 1e-8;
};

// Check the inputs (throw naming the layer, the argument and the dims); return (1).
Shape softmax_cross_entropy_output_shape(const std::string& name,
                                         const SoftmaxCrossEntropyConfig& cfg,
                                         const TensorDesc& logits, const TensorDesc& labels);
Flops softmax_cross_entropy_flops(const Shape& logits);
Bytes softmax_cross_entropy_bytes(const Shape& logits, DType t = DType::kF32);
Shape mse_loss_output_shape(const std::string& name, const TensorDesc& pred,
                            const TensorDesc& target);
Flops mse_loss_flops(const Shape& pred);
Bytes mse_loss_bytes(const Shape& pred);

// logits: (N, A).
Flops actor_critic_loss_flops(const Shape& logits);
Bytes actor_critic_loss_bytes(const Shape& logits);

// Contract: inputs logits (N, A) f32, value (N, 1) f32, actions (N) i32, returns (N) f32, all
// row-major; y (1) f32; no parameters; gradients to logits and value only.
template <>
Contract contract(const std::string& name, const ActorCriticLossConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const ActorCriticLossConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// Contract: inputs logits (..., V) f32 and labels (...) i32; y (1) f32; no parameters.
template <>
Contract contract(const std::string& name, const SoftmaxCrossEntropyConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const SoftmaxCrossEntropyConfig& cfg,
                             const std::vector<TensorDesc>& in, const Contract& c);

// Contract: inputs pred and target (same shape, f32); y (1) f32; no parameters.
template <>
Contract contract(const std::string& name, const MseLossConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const MseLossConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// Contract: input g (N, ...) f32 row-major, rank >= 2; y (1) f32; no parameters.
template <>
Contract contract(const std::string& name, const GradientPenaltyConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const GradientPenaltyConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
