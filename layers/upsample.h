// layers/upsample.h: nearest-neighbour upsampling by an integer factor.
//
// Upsample2d:  x: (N, C, H, W) any layout  y: (N, C, s*H, s*W) in x's layout
//   y[n, c, h, w] = x[n, c, h / s, w / s] (integer division): every value repeated in an s x s
//   square. WGAN-GP's generator upsamples this way (its UpsampleConv tiles x four times along
//   channels and applies depth_to_space(2), which is nearest 2x upsampling).
//   Gradient: dx[n, c, h, w] = sum of dy over the s x s square of (h, w).
// FLOPs: fprop 0 (a copy), dgrad X*(s*s - 1) (the adds), X = N*C*H*W, Y = s*s*X.
// Bytes (FP32; a lower bound, layers/layer.h): fprop 4*(X + Y) (read x, write y),
//   dgrad 4*(Y + X) (read dy, write dx), wgrad 0.
#pragma once

#include "layers/layer.h"

namespace tbd {

struct Upsample2dConfig {
  static constexpr const char* kKind = "Upsample2d";
  int64_t scale = 2;  // s, both spatial dims
};

// Checks x (rank 4 f32, positive dims) and cfg (scale >= 1); returns (N, C, s*H, s*W).
Shape upsample2d_output_shape(const std::string& name, const Upsample2dConfig& cfg,
                              const TensorDesc& x);
Flops upsample2d_flops(const Upsample2dConfig& cfg, const Shape& x);
Bytes upsample2d_bytes(const Upsample2dConfig& cfg, const Shape& x);

// Contract: one input x (N, C, H, W) f32; y (N, C, s*H, s*W) in x's layout; no parameters.
template <>
Contract contract(const std::string& name, const Upsample2dConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const Upsample2dConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
