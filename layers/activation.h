// layers/activation.h: elementwise activations (relu, gelu, gelu with the tanh approximation,
// tanh, sigmoid, leaky relu, clipped relu).
//
//   x: any shape, any layout  y: like x
// Clipped relu: y = min(max(x, 0), ceiling), dx = dy where 0 < x < ceiling, else 0 (PyTorch's
// Hardtanh(0, ceiling); Deep Speech 2 clips at 20).
// FLOPs (per element, counted as the usual formula): relu 1/1, leaky relu 2/2, clipped relu 2/2
// (max and min; two comparisons), tanh 4/3, sigmoid 4/3, gelu (erf) 8/10, gelu_tanh 12/20
// for fprop/dgrad. No weights.
// gelu_tanh is GPT-2's (llm.c's, PyTorch's approximate="tanh"): y = x/2 (1 + tanh(u)),
// u = sqrt(2/pi) (x + 0.044715 x^3); fprop x^3 2, the rest of u 3, tanh 4 (as the tanh
// kind), 1 + , x/2 2; dgrad u and tanh again 9, 1 - t^2 2, du/dx 4, dy (0.5 (1 + t) +
// 0.5 x (1 - t^2) du/dx) 5.
// Bytes (FP32; a lower bound, layers/layer.h), E = elements of x:
//   fprop 4*2E (read x, write y); dgrad 4*3E (read dy and one saved tensor: x for relu,
//   leaky relu and both gelus, y for tanh, sigmoid and clipped relu; write dx); wgrad 0.
#pragma once

#include "layers/layer.h"

namespace tbd {

enum class ActKind { kRelu, kLeakyRelu, kTanh, kSigmoid, kGelu, kClippedRelu, kGeluTanh };
const char* to_string(ActKind k);

struct ActivationConfig {
  static constexpr const char* kKind = "Activation";
  ActKind act = ActKind::kRelu;
  double alpha = 0.01;    // leaky relu slope
  double ceiling = 20.0;  // clipped relu's upper bound (> 0)
};

// Checks x (rank >= 1 f32, positive dims) and, for clipped relu, ceiling > 0; returns y's shape
// (x's).
Shape activation_output_shape(const std::string& name, const ActivationConfig& cfg,
                              const TensorDesc& x);
Flops activation_flops(const ActivationConfig& cfg, const Shape& x);
Bytes activation_bytes(const ActivationConfig& cfg, const Shape& x, DType t = DType::kF32);

// Whether backward reads y (relu, tanh, sigmoid, clipped relu, leaky relu with alpha >= 0: their
// gradients are functions of y) rather than x (both GELUs, leaky relu with alpha < 0); it saves
// that one alone, so a relu's input is free once the forward ran (PyTorch's in-place ReLU).
bool activation_saves_output(const ActivationConfig& cfg);

// Contract: one input x; y like x (shape, dtype, layout); no parameters; saves x or y
// (activation_saves_output).
template <>
Contract contract(const std::string& name, const ActivationConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const ActivationConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
