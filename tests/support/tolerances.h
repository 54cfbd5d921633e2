// tests/support/tolerances.h: every tolerance the tests use, each with its reason.
// A value passes iff |x - ref| <= atol + rtol * |ref|.
#pragma once

namespace tbd::test {

struct Tol {
  double atol;
  double rtol;
};

// float32 kernels vs the float64 reference: accumulation of up to ~1e4 products of O(1)
// values loses ~1e-5 relative; blocked/Winograd-free oneDNN kernels stay well inside this.
inline constexpr Tol kF32{1e-4, 1e-3};
// Reductions over a whole batch or long sequences (batchnorm statistics, weight gradients
// summed over N*P*Q positions, recurrent gradients through T steps): error grows with length.
inline constexpr Tol kF32Reduction{5e-4, 5e-3};
// Transcendentals (tanh/sigmoid/gelu/exp) in vectorised oneDNN and own kernels use
// polynomial approximations accurate to a few ulp, amplified by chains of them (LSTM/GRU).
inline constexpr Tol kF32Transcendental{1e-3, 5e-3};
// CUDA TF32 tensor-core math vs the FP32 CPU backend: inputs are rounded to 10-bit mantissas
// (relative 2^-11 each), so products carry ~1e-3 relative error, growing with K and time steps.
inline constexpr Tol kTf32{5e-3, 2e-2};
// Central finite differences of the float64 reference, eps = 1e-6: truncation error
// O(eps^2) ~ 1e-12 and rounding error O(1e-16/eps) ~ 1e-10 per unit of output scale.
inline constexpr double kFdEps = 1e-6;
inline constexpr Tol kFiniteDiff{1e-6, 1e-5};

// CUDA backend against the CPU backend, both strict FP32 (tests/cuda): two float32
// implementations with different summation orders (cuDNN/cuBLAS tiles and warp-shuffle trees vs
// oneDNN blocking), each within kF32Reduction of the exact result; strict mode still permits
// cuDNN's FFT and Winograd convolutions, whose transforms add round-off near 1e-5 of the
// operands' norm, hence the larger atol.
inline constexpr Tol kCudaF32{1e-3, 5e-3};
// CUDA with TF32 tensor cores against the CPU in FP32: TF32 rounds both operands of every
// product to a 10-bit mantissa (relative error up to 2^-11 each); over the tests' reductions
// (K up to ~2000 products of O(0.3) values with random signs) the error grows like sqrt(K) and
// reaches ~3e-2 in the worst of a few thousand outputs.
inline constexpr Tol kCudaTf32{3e-2, 1e-2};

}  // namespace tbd::test
