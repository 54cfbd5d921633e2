// layers/sequence_last.h: each sample's last valid step of a time-major sequence (MXNet's
// SequenceLast; Sockeye initialises its decoder from the encoder state there).
//
//   x: (T, N, D...) row-major f32  lengths: (N) i32 in [1, T]  y: (N, D...)
//   y[n] = x[lengths[n] - 1, n]. A length outside [1, T] makes forward throw on the CPU
//   (naming the sample); on CUDA, where a kernel cannot throw, that sample's row is NaN.
//   dx[t, n] = dy[n] at t = lengths[n] - 1 and 0 elsewhere; lengths take no gradient.
// No FLOPs. Bytes (a lower bound, layers/layer.h), R = N * (D...) elements of y:
//   fprop 4*(N + 2R) (read lengths and the R selected values, write y);
//   dgrad 4*(N + R + T*R) (read lengths and dy, write every element of dx); wgrad 0.
#pragma once

#include "layers/layer.h"

namespace tbd {

struct SequenceLastConfig {
  static constexpr const char* kKind = "SequenceLast";
};

// Contract: inputs x (T, N, ...) f32 row-major, rank >= 2, and lengths (N) i32; y (N, ...).
template <>
Contract contract(const std::string& name, const SequenceLastConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const SequenceLastConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
