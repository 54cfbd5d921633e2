// layers/swiglu.h: the SwiGLU gate of Llama's MLP (Shazeer 2020), on a packed input.
//
// x: (..., 2F) row-major f32 or bf16 (computed in f32 registers, outputs rounded once), each row
// [gate (F) | up (F)] as one C -> 2F projection writes it (Llama's w1 and w3 as one Linear); y:
// (..., F) = silu(gate) * up, silu(g) = g * sigmoid(g). The MLP is then w2(SwiGLU(w13(x))).
// Backward reads x (saved), not y:
//   dup = dy * silu(g);  dgate = dy * up * s * (1 + g * (1 - s)), s = sigmoid(g).
// FLOPs (E = M*F outputs): fprop 5E (exp, add, divide, two multiplies), dgrad 10E (the
// sigmoid and silu again, then dup, and dgate's five); wgrad 0.
// Bytes (a lower bound, s = 4 or 2 bytes an element): fprop = s*3E (read x, write y),
// dgrad = s*5E (read dy, x; write dx).
#pragma once

#include "layers/layer.h"

namespace tbd {

struct SwiGluConfig {
  static constexpr const char* kKind = "SwiGLU";
};

template <>
Contract contract(const std::string& name, const SwiGluConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const SwiGluConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
