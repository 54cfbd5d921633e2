// layers/smooth_l1_loss.h: the smooth-L1 box-regression loss with per-element weights (Faster
// R-CNN's RPN and detector box losses, MXNet's smooth_l1 under a weighted MakeLoss).
//
// SmoothL1Loss:  pred, target, weight: the same shape (any rank), row-major f32  y: (1) f32
//   y = scale * sum_i weight_i * f(pred_i - target_i),
//   f(d) = 0.5 * (sigma * d)^2 if |d| < 1 / sigma^2, else |d| - 0.5 / sigma^2  (MXNet's
//   smooth_l1 with its scalar sigma). MXNet's rcnn example: RPN sigma 3, scale 1/256 (its
//   MakeLoss grad_scale over the 256 sampled anchors), detector sigma 1, scale 1/128.
//   Gradient to pred only (input_grads {true, false, false}: the targets and weights are
//   sampled, not learned): dpred_i = dy * scale * weight_i * f'(d_i), f'(d) = sigma^2 * d
//   if |d| < 1 / sigma^2, else sign(d).
//   The sum is taken in double over fixed chunks in a fixed order, so the loss is
//   bit-identical from run to run whatever the thread count.
// FLOPs (E elements): fprop 6E + 1 (difference, compare, the branch's 3 operations, the
//   weight, the sum: counted as 6 per element; the scale), dgrad 5E (difference, compare, f',
//   weight, scale * dy). Bytes (FP32; a lower bound, layers/layer.h): fprop 4*(3E + 1) (read
//   pred, target and weight, write y), dgrad 4*(1 + 3E + E) (read dy, pred, target and weight,
//   write dpred), wgrad 0.
#pragma once

#include <string>

#include "core/splitmix.h"
#include "layers/layer.h"

namespace tbd {

struct SmoothL1LossConfig {
  static constexpr const char* kKind = "SmoothL1Loss";
  double sigma = 1.0;
  double scale = 1.0;
};

Flops smooth_l1_loss_flops(const Shape& pred);
Bytes smooth_l1_loss_bytes(const Shape& pred);
// The problem as every backend describes it: "pred (128, 84) sigma=1 scale=0.0078125".
std::string smooth_l1_loss_describe(const Shape& pred, const SmoothL1LossConfig& cfg);

// Contract: inputs pred, target, weight (the same shape, f32, positive dims); y (1) f32; no
// parameters; input_grads {true, false, false}. sigma must be finite and > 0, scale finite.
template <>
Contract contract(const std::string& name, const SmoothL1LossConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const SmoothL1LossConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// f(d) and f'(d) in float, shared by the CPU and CUDA kernels; s2 = sigma^2.
TBD_HOST_DEVICE inline float smooth_l1(float d, float s2) {
  const float a = d < 0.0f ? -d : d;
  return a < 1.0f / s2 ? 0.5f * s2 * d * d : a - 0.5f / s2;
}
TBD_HOST_DEVICE inline float smooth_l1_grad(float d, float s2) {
  const float a = d < 0.0f ? -d : d;
  if (a < 1.0f / s2) return s2 * d;
  return d < 0.0f ? -1.0f : 1.0f;
}

}  // namespace tbd
