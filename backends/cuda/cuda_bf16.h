// backends/cuda/cuda_bf16.h: element kernels of bf16 mixed precision on CUDA, on the backend's
// stream. Pointers are device pointers; bf16 arrays are passed as void* (__nv_bfloat16 stays
// out of host-compiled code). f32 -> bf16 rounds to nearest even.
#pragma once

#include <cstdint>

#include "backends/cuda/cuda_backend.h"

namespace tbd::cuda {

// dst (bf16) = src (f32) rounded, n elements.
void cast_to_bf16(CudaBackend& cu, void* dst, const float* src, int64_t n);
// dst (f32) = src (bf16), exact.
void cast_to_f32(CudaBackend& cu, float* dst, const void* src, int64_t n);
// dst (f32) += src (bf16): a bf16 weight gradient into the f32 master's gradient.
void add_bf16_into_f32(CudaBackend& cu, float* dst, const void* src, int64_t n);
// y (rows, n) bf16 = bias (n, f32) rounded, on every row (a GEMM then adds with beta = 1).
void bias_rows_bf16(CudaBackend& cu, void* y, const float* bias, int64_t rows, int64_t n);
// y (batch, channels, inner) bf16 += bias[channel] (f32), rounded once.
void add_channel_bias_bf16(CudaBackend& cu, void* y, const float* bias, int64_t batch,
                           int64_t channels, int64_t inner);
// db (channels, f32) += the sums of dy (batch, channels, inner; bf16) over batch and inner.
void channel_sums_bf16(CudaBackend& cu, float* db, const void* dy, int64_t batch, int64_t channels,
                       int64_t inner);

}  // namespace tbd::cuda
