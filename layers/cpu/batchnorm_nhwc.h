// layers/cpu/batchnorm_nhwc.h: batch normalization's training forward and backward over
// channels-last data (M = N H W rows of C channels), f32 or bf16 (uint16_t) tensors with f32
// arithmetic and f32 statistics; used by BatchNormOneDnn for nhwc x (batchnorm_cpu.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tbd::cpu {

// Bytes of the work buffer the calls below need with `threads` threads (64-byte aligned).
std::size_t bn_nhwc_work_bytes(int64_t C, int threads);

// Training forward: mean and biased var per channel of x, then
// y = gamma (x - mean) / sqrt(var + eps) + beta (max(0, .) under relu).
void bn_nhwc_forward(const float* x, float* y, int64_t M, int64_t C, const float* gamma,
                     const float* beta, double eps, bool relu, float* mean, float* var, int threads,
                     void* work);
void bn_nhwc_forward(const uint16_t* x, uint16_t* y, int64_t M, int64_t C, const float* gamma,
                     const float* beta, double eps, bool relu, float* mean, float* var, int threads,
                     void* work);

// Training backward with the batch statistics, g = dy (0 where y <= 0 when y, the fused
// ReLU's output, is given): dgamma += sum g (x - mean) rstd and dbeta += sum g when dgamma is
// given; dx = gamma rstd (g - mean(g) - (x - mean) rstd^2 mean(g (x - mean))) when dx is.
void bn_nhwc_backward(const float* dy, const float* x, const float* y, float* dx, int64_t M,
                      int64_t C, const float* gamma, const float* mean, const float* var,
                      double eps, float* dgamma, float* dbeta, int threads, void* work);
void bn_nhwc_backward(const uint16_t* dy, const uint16_t* x, const uint16_t* y, uint16_t* dx,
                      int64_t M, int64_t C, const float* gamma, const float* mean, const float* var,
                      double eps, float* dgamma, float* dbeta, int threads, void* work);

}  // namespace tbd::cpu
