// tests/cuda/known_ffma.h: a kernel with a known FP32 FLOP count, for checking CUPTI's counts
// (tests only; CUDA builds only).
//
// No CUDA header here, so GoogleTest files (plain C++) can call it. Callers guard with
// #ifdef TBD_WITH_CUDA.
#pragma once

#include <cstdint>

#include "core/backend.h"

namespace tbd::cuda {

// Launches a kernel on be's stream in which each of n threads executes exactly
// kKnownFfmaPerThread dependent FFMA instructions and nothing else in floating point; returns
// the FP32 FLOPs it executes (2 * n * kKnownFfmaPerThread).
inline constexpr int64_t kKnownFfmaPerThread = 64;
double run_known_ffma_kernel(Backend& be, int64_t n);

}  // namespace tbd::cuda
