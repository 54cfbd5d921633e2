// layers/cast_scale.h: CastScale, unsigned bytes to f32 with a scale, inside the graph.
//
//   x: (...) u8 row-major  y: like x, f32: y = scale * x   (A3C: 84x84x4 Atari frames fed as
//   bytes, scale 1/255, as TensorFlow's to_float(states) / 255). Feeding bytes keeps the input
//   and its host-to-device copy a quarter of f32's. No gradient: x is not differentiable and
//   there are no parameters.
//   FLOPs fprop E (the multiply; the conversion is not counted), dgrad 0, wgrad 0.
//   Bytes (a lower bound, layers/layer.h), E = numel: fprop E + 4E (read x as bytes, write y),
//   dgrad 0, wgrad 0.
#pragma once

#include "layers/layer.h"

namespace tbd {

struct CastScaleConfig {
  static constexpr const char* kKind = "CastScale";
  double scale = 1.0 / 255.0;
};

Flops cast_scale_flops(const Shape& x);
Bytes cast_scale_bytes(const Shape& x);

// Contract: one input x (rank >= 1, u8); y of x's shape, f32; no parameters; no gradient to x.
template <>
Contract contract(const std::string& name, const CastScaleConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const CastScaleConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
