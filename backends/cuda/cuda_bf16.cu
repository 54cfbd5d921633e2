// backends/cuda/cuda_bf16.cu: the element kernels of bf16 mixed precision on CUDA (casts, the
// weight-gradient accumulate, biases), shared by the backend's reorder and the bf16 layers.
// Rounding is to nearest even (__float2bfloat16_rn), as core/bf16.h rounds on the CPU.
#include <cuda_bf16.h>

#include "backends/cuda/cuda_bf16.h"
#include "backends/cuda/kernel_util.cuh"

namespace tbd::cuda {
namespace {

__global__ void to_bf16_kernel(__nv_bfloat16* __restrict__ dst, const float* __restrict__ src,
                               int64_t n) {
  TBD_GRID_STRIDE(i, n) { dst[i] = __float2bfloat16_rn(src[i]); }
}

__global__ void to_f32_kernel(float* __restrict__ dst, const __nv_bfloat16* __restrict__ src,
                              int64_t n) {
  TBD_GRID_STRIDE(i, n) { dst[i] = __bfloat162float(src[i]); }
}

__global__ void add_bf16_kernel(float* __restrict__ dst, const __nv_bfloat16* __restrict__ src,
                                int64_t n) {
  TBD_GRID_STRIDE(i, n) { dst[i] += __bfloat162float(src[i]); }
}

__global__ void bias_rows_kernel(__nv_bfloat16* __restrict__ y, const float* __restrict__ bias,
                                 int64_t total, int64_t n) {
  TBD_GRID_STRIDE(i, total) { y[i] = __float2bfloat16_rn(bias[i % n]); }
}

__global__ void add_channel_bias_kernel(__nv_bfloat16* __restrict__ y,
                                        const float* __restrict__ bias, int64_t total,
                                        int64_t channels, int64_t inner) {
  TBD_GRID_STRIDE(i, total) {
    const int64_t k = (i / inner) % channels;
    y[i] = __float2bfloat16_rn(__bfloat162float(y[i]) + bias[k]);
  }
}

// One block per channel: db[k] += sum over n and the inner positions of dy (f32 sums, in a
// fixed order for a fixed block size: reruns are bit-identical).
__global__ void channel_sums_kernel(float* __restrict__ db, const __nv_bfloat16* __restrict__ dy,
                                    int64_t batch, int64_t channels, int64_t inner) {
  __shared__ float partial[32];
  const int64_t k = blockIdx.x;
  float s = 0.f;
  for (int64_t j = threadIdx.x; j < batch * inner; j += blockDim.x) {
    const int64_t n = j / inner, p = j % inner;
    s += __bfloat162float(dy[(n * channels + k) * inner + p]);
  }
  s = block_sum(s, partial);
  if (threadIdx.x == 0) db[k] += s;
}

}  // namespace

void cast_to_bf16(CudaBackend& cu, void* dst, const float* src, int64_t n) {
  if (n == 0) return;
  to_bf16_kernel<<<grid_for(n), kBlock, 0, cu.stream()>>>(static_cast<__nv_bfloat16*>(dst), src, n);
  TBD_CUDA_CHECK_LAST();
}

void cast_to_f32(CudaBackend& cu, float* dst, const void* src, int64_t n) {
  if (n == 0) return;
  to_f32_kernel<<<grid_for(n), kBlock, 0, cu.stream()>>>(dst,
                                                         static_cast<const __nv_bfloat16*>(src), n);
  TBD_CUDA_CHECK_LAST();
}

void add_bf16_into_f32(CudaBackend& cu, float* dst, const void* src, int64_t n) {
  if (n == 0) return;
  add_bf16_kernel<<<grid_for(n), kBlock, 0, cu.stream()>>>(
      dst, static_cast<const __nv_bfloat16*>(src), n);
  TBD_CUDA_CHECK_LAST();
}

void bias_rows_bf16(CudaBackend& cu, void* y, const float* bias, int64_t rows, int64_t n) {
  if (rows * n == 0) return;
  bias_rows_kernel<<<grid_for(rows * n), kBlock, 0, cu.stream()>>>(static_cast<__nv_bfloat16*>(y),
                                                                   bias, rows * n, n);
  TBD_CUDA_CHECK_LAST();
}

void add_channel_bias_bf16(CudaBackend& cu, void* y, const float* bias, int64_t batch,
                           int64_t channels, int64_t inner) {
  const int64_t total = batch * channels * inner;
  if (total == 0) return;
  add_channel_bias_kernel<<<grid_for(total), kBlock, 0, cu.stream()>>>(
      static_cast<__nv_bfloat16*>(y), bias, total, channels, inner);
  TBD_CUDA_CHECK_LAST();
}

void channel_sums_bf16(CudaBackend& cu, float* db, const void* dy, int64_t batch, int64_t channels,
                       int64_t inner) {
  if (channels == 0) return;
  channel_sums_kernel<<<static_cast<unsigned>(channels), kBlock, 0, cu.stream()>>>(
      db, static_cast<const __nv_bfloat16*>(dy), batch, channels, inner);
  TBD_CUDA_CHECK_LAST();
}

}  // namespace tbd::cuda
