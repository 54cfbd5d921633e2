// layers/layer_norm.h: layer normalization, over the last dimension or over (C, H, W).
//
// Two forms (LayerNormConfig::over):
//   kLastDim:  x: (..., D) row-major, rank >= 2  gamma, beta: (D)  y: like x
//     each row of D is normalised; gamma and beta are elementwise (the Transformer's).
//   kChw:      x: (N, C, H, W) row-major or nChw16c  gamma, beta: (C)  y: like x (same layout)
//     each sample is normalised over all of its C*H*W values; gamma and beta are per channel
//     (the WGAN-GP critic's: tflib's Layernorm over axes [1, 2, 3], PyTorch's GroupNorm(1, C)).
//     A row below is then one sample (D = C*H*W) and parameter entry c covers the H*W values of
//     channel c.
//   y = (x - mean) / sqrt(var + eps) * gamma + beta, biased variance over the row.
//   Saved for backward (feature_maps): mean and variance per row, (M) each.
//   gamma initialises to ones, beta to zeros; neither takes weight decay.
// FLOPs: fprop 8*M*D, dgrad 12*M*D, wgrad 4*M*D (M rows of D; E = M*D elements).
// Bytes (FP32; a lower bound, layers/layer.h), with P parameter entries (D, or C for kChw):
//   fprop = 4*(2E + 2P + 2M)  read x, gamma, beta; write y, the saved mean and variance
//   dgrad = 4*(3E + 2M + P)   read dy, x, saved mean and variance, gamma; write dx
//   wgrad = 4*(2E + 2M + 4P)  read dy, x, saved mean and variance; read and write dgamma, dbeta
// As for BatchNorm2d, implementations compute all three gradients in one backward; the phase
// sum counts x and dy twice.
#pragma once

#include "layers/layer.h"

namespace tbd {

enum class LayerNormOver { kLastDim, kChw };
const char* to_string(LayerNormOver o);  // "last_dim", "chw"

struct LayerNormConfig {
  static constexpr const char* kKind = "LayerNorm";
  double eps = 1e-5;
  LayerNormOver over = LayerNormOver::kLastDim;
};

// The row view of x: M rows of D values; gamma and beta have P entries, entry p covering G
// consecutive values of a row (row-major order): kLastDim G = 1, P = D; kChw G = H*W, P = C.
struct LayerNormRows {
  int64_t M = 0, D = 0, P = 0, G = 1;
};
LayerNormRows layer_norm_rows(const LayerNormConfig& cfg, const Shape& x);

// Checks x against cfg (throws naming the layer); y has x's shape.
Shape layer_norm_output_shape(const std::string& name, const LayerNormConfig& cfg, const Shape& x);
Flops layer_norm_flops(const Shape& x);
Bytes layer_norm_bytes(const LayerNormConfig& cfg, const Shape& x);

// Contract: one input x (f32); y like x; gamma (P) ones and beta (P) zeros, no decay.
template <>
Contract contract(const std::string& name, const LayerNormConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const LayerNormConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
