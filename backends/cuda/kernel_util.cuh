// backends/cuda/kernel_util.cuh: device helpers shared by the CUDA backend's and the CUDA
// layers' own kernels (grid-stride loop, warp and block reductions, f32/bf16 loads and stores).
// Included only by .cu files.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace tbd::cuda {

// An element as f32 in registers (f32 as is, bf16 widened exactly), and stored back (bf16
// rounded to nearest even): kernels templated on the element type E compute in f32 either way.
__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void store(float* p, float x) { *p = x; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float x) { *p = __float2bfloat16(x); }

// for (int64_t i = global thread index; i < n; i += total threads)
#define TBD_GRID_STRIDE(i, n)                                               \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{blockDim.x} * gridDim.x)

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

template <class T>
__device__ __forceinline__ T warp_max(T v) {
  for (int off = 16; off > 0; off >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Sum over a 1-D block of at most 1024 threads; every thread gets the result. `shared` holds
// 32 values. Deterministic for a fixed block size.
template <class T>
__device__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // `shared` may still be read from a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int nwarps = (blockDim.x + 31) >> 5;
  v = lane < nwarps ? shared[lane] : T(0);
  return warp_sum(v);
}

// Step counters live in device memory (an i32 pair: [0] the next step, [1] the step the last
// call used) and are advanced by this one-thread kernel, so that a captured CUDA graph advances
// them on every replay instead of replaying a host value frozen at capture (PyTorch's
// capturable Adam). Kernels read the step they use from [1].
__global__ inline void advance_step_kernel(int32_t* counter) {
  counter[1] = counter[0];
  counter[0] += 1;
}

template <class T>
__device__ T block_max(T v, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int nwarps = (blockDim.x + 31) >> 5;
  v = lane < nwarps ? shared[lane] : shared[0];
  return warp_max(v);
}

}  // namespace tbd::cuda
