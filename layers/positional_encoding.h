// layers/positional_encoding.h: adds the sinusoidal position table (Vaswani et al. 2017).
//
//   x: (N, T, D) row-major  y: like x.  y[n,t,2i] = x + sin(t / 10000^(2i/D)),
//   y[n,t,2i+1] = x + cos(t / 10000^(2i/D)). The table is a constant built at construction
//   (category dynamic). dx = dy. FLOPs: fprop N*T*D, dgrad 0.
// Bytes (FP32; a lower bound, layers/layer.h), E = N*T*D: fprop 4*(2E + T*D) (read x and the
//   table, write y), dgrad 4*2E (read dy, write dx: a copy), wgrad 0.
#pragma once

#include "layers/layer.h"

namespace tbd {

struct PositionalEncodingConfig {
  static constexpr const char* kKind = "PositionalEncoding";
};

// The table value at (t, d) in float64, shared by implementations and tests.
double sinusoid(int64_t t, int64_t d, int64_t dim);
// x: (N, T, D).
Flops positional_encoding_flops(const Shape& x);
Bytes positional_encoding_bytes(const Shape& x);

// Contract: one input x (N, T, D) f32; y like x; no parameters (the table is a
// constant buffer, not a parameter).
template <>
Contract contract(const std::string& name, const PositionalEncodingConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const PositionalEncodingConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
