// backends/cuda/cuda_test_hooks.h: CUDA-build-only helpers for tests and the GPU check.
//
// No CUDA header here, so GoogleTest files (plain C++) can call into the CUDA backend. Defined
// only when the build has TBD_WITH_CUDA; callers guard with #ifdef TBD_WITH_CUDA.
#pragma once

#include <cstdint>

#include "core/backend.h"

namespace tbd::cuda {

// Launches a kernel on be's stream in which each of n threads executes exactly
// kKnownFfmaPerThread dependent FFMA instructions and nothing else in floating point; returns
// the FP32 FLOPs it executes (2 * n * kKnownFfmaPerThread). Used to check CUPTI's counts.
inline constexpr int64_t kKnownFfmaPerThread = 64;
double run_known_ffma_kernel(Backend& be, int64_t n);

// Switches be (a CUDA backend) between strict FP32 and TF32 tensor-core math. Layers read the
// mode at construction (cuDNN descriptors) or at execution (cuBLAS compute type): set it first.
void set_tf32_math(Backend& be, bool tf32);

// The factor that turns sm__ops_path_tensor_src_tf32_dst_fp32 into FLOPs (to be calibrated).
double cupti_tf32_flop_per_tensor_op();

}  // namespace tbd::cuda
