// tests/support/tolerances.h: every tolerance the tests use, in one table, each with its reason.
// A value passes iff |x - ref| <= atol + rtol * |ref|.
//
// The layer harness (tests/support/check.h) runs every layer case on each target against the
// same float64 reference and looks its tolerance up here by (target, phase, class of op), as
// ggml's test-backend-ops does per op: the CPU column is what float32 arithmetic costs; a CUDA
// target adds what its libraries add (another summation order, FFT/Winograd transforms, TF32
// operand rounding). A test states the class of its op, never a number.
#pragma once

#include <cstddef>

namespace tbd::test {

struct Tol {
  double atol;
  double rtol;
};
constexpr Tol operator+(Tol a, Tol b) { return Tol{a.atol + b.atol, a.rtol + b.rtol}; }

// Where a layer case runs: the CPU backend (oneDNN, strict FP32), the CUDA backend in strict
// FP32 (MathMode::kFp32: no tensor-core paths) and with TF32 tensor cores (MathMode::kTf32).
enum class Target { kCpu, kCudaFp32, kCudaTf32 };
inline constexpr Target kAllTargets[] = {Target::kCpu, Target::kCudaFp32, Target::kCudaTf32};

// What is compared: forward outputs (fprop), input gradients (dgrad), accumulated parameter
// gradients (wgrad), and parameters after optimizer steps (update).
enum class Phase { kFprop, kDgrad, kWgrad, kUpdate };

// What the op does to its numbers.
enum class OpClass {
  // A few roundings per element: copies, permutations, concat/split, add, dropout's scaling,
  // relu, pooling windows, the positional table add.
  kElementwise,
  // Sums of products: matrix products, convolutions, attention, embeddings (the default).
  kPlain,
  // Statistics over a whole row or batch without operand products: batchnorm, layernorm,
  // losses, global pooling.
  kReduction,
  // exp/tanh/sigmoid/erf per element (activations).
  kTranscendental,
  // Products and sigmoid/tanh chained through T time steps (LSTM, GRU, LSTMCell).
  kRecurrent,
};

// float32 on the CPU against float64, [class][phase]: fprop, dgrad, wgrad, update.
//  * elementwise: at most a handful of roundings of O(1) values (relative 2^-24 each); the
//    average over a 3x3 window sums 9.
//  * plain, reduction: accumulation of up to ~1e4 products or terms of O(1) values loses ~1e-5
//    relative; weight gradients sum over every position of the batch (N*P*Q, T*N), so their
//    error grows with that length. The input gradient of a reduction is again one (a
//    normalisation's dx sums dy and dy*xhat over the row on top of the forward's statistics;
//    LayerNormDgrad's, a second derivative, needs it too).
//  * transcendental, recurrent: vectorised oneDNN and own kernels use polynomial
//    approximations of exp/tanh/erf accurate to a few ulp, amplified by chains of them
//    (LSTM/GRU through time, their gradients included).
//  * update: a few steps of elementwise optimizer arithmetic (sqrt, division) per element;
//    the same for every class (the optimizer tests use kPlain).
inline constexpr Tol kCpuF32[5][4] = {
    /* elementwise    */ {{1e-5, 1e-5}, {1e-5, 1e-5}, {5e-4, 5e-3}, {1e-4, 1e-3}},
    /* plain          */ {{1e-4, 1e-3}, {1e-4, 1e-3}, {5e-4, 5e-3}, {1e-4, 1e-3}},
    /* reduction      */ {{1e-4, 1e-3}, {5e-4, 5e-3}, {5e-4, 5e-3}, {1e-4, 1e-3}},
    /* transcendental */ {{1e-3, 5e-3}, {1e-3, 5e-3}, {1e-3, 5e-3}, {1e-3, 5e-3}},
    /* recurrent      */ {{1e-3, 5e-3}, {1e-3, 5e-3}, {1e-3, 5e-3}, {1e-3, 5e-3}},
};

// CUDA in strict FP32 adds, to the CPU entry: float32 in other summation orders (cuDNN/cuBLAS
// tiles and warp-shuffle trees vs oneDNN blocking) and, for convolutions, cuDNN's FFT and
// Winograd algorithms, which strict mode still permits and whose transforms add round-off near
// 1e-5 of the operands' norm, hence the atol. This is the bound the CUDA-vs-CPU comparisons
// held before they were replaced by the float64 reference, so by the triangle inequality every
// case they passed passes here. Elementwise ops add nothing: a copy, a max or one rounding
// per element comes out the same on any backend (CUDA's dropout agreed with the CPU's to 1e-6).
inline constexpr Tol kCudaFp32Extra{1e-3, 5e-3};

// TF32 tensor cores (products only: plain and recurrent ops) add, instead: both operands of
// every product rounded to a 10-bit mantissa (relative 2^-11 each, so ~1e-3 per product).
// Over a dot product of K terms with random signs the absolute error grows like sqrt(K) times
// the terms (the tests' convolutions and linear layers, K up to ~2000 products of O(0.3)
// values, reach ~3e-2 in the worst of a few thousand outputs: the atol), and through the T
// steps of a recurrence, or the softmax of TF32 attention scores, it compounds relative to the
// output (~2e-2: the rtol). Two constants used to disagree here for the same comparison
// ({3e-2, 1e-2} for convolutions and GEMMs, {5e-3, 2e-2} for RNNs and attention), each covering
// one of the two effects; every TF32 case has both, so both take the larger of each.
inline constexpr Tol kTf32Extra{3e-2, 2e-2};

// The tolerance of `phase` of an op of class `c` on target `t` against float64.
constexpr Tol tolerance(Target t, Phase phase, OpClass c) {
  const Tol cpu = kCpuF32[static_cast<std::size_t>(c)][static_cast<std::size_t>(phase)];
  // An optimizer update multiplies no two tensors: TF32 does not reach it.
  const bool uses_products =
      (c == OpClass::kPlain || c == OpClass::kRecurrent) && phase != Phase::kUpdate;
  // A weight gradient is a sum over the batch whatever the op is.
  const bool elementwise = c == OpClass::kElementwise && phase != Phase::kWgrad;
  switch (t) {
    case Target::kCpu:
      return cpu;
    case Target::kCudaFp32:
      return elementwise ? cpu : cpu + kCudaFp32Extra;
    case Target::kCudaTf32:
      if (uses_products) return cpu + kTf32Extra;
      return elementwise ? cpu : cpu + kCudaFp32Extra;  // TF32 mode leaves these ops alone
  }
  return cpu;
}

// The table's order, checked when it is edited: no target is stricter than the CPU, TF32 is
// never stricter than strict FP32, and wgrad never stricter than fprop.
constexpr bool tolerances_are_ordered() {
  auto ge = [](Tol a, Tol b) { return a.atol >= b.atol && a.rtol >= b.rtol; };
  const Phase phases[] = {Phase::kFprop, Phase::kDgrad, Phase::kWgrad, Phase::kUpdate};
  const OpClass classes[] = {OpClass::kElementwise, OpClass::kPlain, OpClass::kReduction,
                             OpClass::kTranscendental, OpClass::kRecurrent};
  for (OpClass c : classes) {
    for (Phase p : phases) {
      const Tol cpu = tolerance(Target::kCpu, p, c);
      const Tol fp32 = tolerance(Target::kCudaFp32, p, c);
      if (!ge(fp32, cpu) || !ge(tolerance(Target::kCudaTf32, p, c), fp32)) return false;
    }
    for (Target t : kAllTargets) {
      if (!ge(tolerance(t, Phase::kWgrad, c), tolerance(t, Phase::kFprop, c))) return false;
    }
  }
  return true;
}
static_assert(tolerances_are_ordered(), "tests/support/tolerances.h: the table is out of order");

// Named CPU entries for the tests that compare outside the harness (CPU-only behaviour).
inline constexpr Tol kF32 = tolerance(Target::kCpu, Phase::kFprop, OpClass::kPlain);
inline constexpr Tol kF32Reduction = tolerance(Target::kCpu, Phase::kWgrad, OpClass::kPlain);
inline constexpr Tol kF32Transcendental =
    tolerance(Target::kCpu, Phase::kFprop, OpClass::kTranscendental);

// Central finite differences of the float64 reference, eps = 1e-6: truncation error
// O(eps^2) ~ 1e-12 and rounding error O(1e-16/eps) ~ 1e-10 per unit of output scale.
inline constexpr double kFdEps = 1e-6;
inline constexpr Tol kFiniteDiff{1e-6, 1e-5};

}  // namespace tbd::test
