// layers/mean_loss.h: a weighted mean as a loss term (WGAN's critic and generator losses).
//
// MeanLoss:  x: any shape, row-major f32  y: (1) = weight * mean(x)
//   Terms of a summed loss add with Add (layers/tensor_ops.h): WGAN-GP's critic loss is
//   MeanLoss{+1}(D(fake)) + MeanLoss{-1}(D(real)) + GradientPenalty, the generator's
//   MeanLoss{-1}(D(G(z))). Gradient: dx = dy[0] * weight / E everywhere.
//   The sum is taken in a fixed order (double), so the loss is bit-identical from run to run.
// FLOPs (E elements): fprop E + 1, dgrad E. Bytes (FP32; a lower bound, layers/layer.h):
//   fprop 4*(E + 1) (read x, write y), dgrad 4*(1 + E) (read dy, write dx), wgrad 0.
#pragma once

#include "layers/layer.h"

namespace tbd {

struct MeanLossConfig {
  static constexpr const char* kKind = "MeanLoss";
  double weight = 1.0;
};

Flops mean_loss_flops(const Shape& x);
Bytes mean_loss_bytes(const Shape& x);

// Contract: one input x (f32, positive dims); y (1) f32; no parameters.
template <>
Contract contract(const std::string& name, const MeanLossConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const MeanLossConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
