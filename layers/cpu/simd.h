// layers/cpu/simd.h: helpers for the CPU backend's own (non-oneDNN) kernels.
//
// The library is built for baseline x86-64 (no -march=native: the binary must run on any
// machine it is copied to), which would leave own loops at SSE2 width. TBD_SIMD_CLONES
// compiles a function three times (baseline, x86-64-v3 = AVX2+FMA, x86-64-v4 = AVX-512) and
// picks the best at load time (GCC/Clang ifunc), so `#pragma omp simd` loops in it run at
// the machine's full vector width. Put it on per-row kernels called from inside an OpenMP
// region, not on the function holding the `omp parallel` (its outlined body is not cloned).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TBD_SIMD_CLONES \
  __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define TBD_SIMD_CLONES
#endif

namespace tbd::cpu {

// exp(x) in float for x <= ~0 (softmax after max subtraction), branch-free so loops
// vectorize (libm's expf does not): Cephes expf range reduction and degree-6 polynomial,
// max relative error ~1.4 ulp on [-87, 0]; inputs below -87 give ~1.6e-38 instead of
// underflowing (callers write exact zeros for masked entries themselves).
inline float exp_nonpositive(float x) {
  x = std::max(x, -87.0f);
  // round(x / ln 2) by the 1.5*2^23 trick (exact for |n| < 2^22; no -ffast-math here).
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f - n * -2.12194440e-4f;  // ln 2 split in two for accuracy
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  float y = p * r * r + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n, n in [-126, 0]
  return y * std::bit_cast<float>(bits);
}

// tanh(x) in float, branch-free so loops vectorize: sign(x) (1 - e) / (1 + e) with
// e = exp(-2|x|), and the odd Taylor polynomial x (1 - x^2/3 + 2x^4/15 - 17x^6/315) below
// |x| = 1/16 where 1 - e would cancel. Absolute error below 2e-7 everywhere.
inline float tanh_fast(float x) {
  const float ax = std::abs(x);
  const float e = exp_nonpositive(-2.0f * ax);
  const float big = std::copysign((1.0f - e) / (1.0f + e), x);
  const float x2 = x * x;
  const float small = x * (1.0f + x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315))));
  return ax < 0.0625f ? small : big;
}

// 1 / (1 + exp(-x)) in float, branch-free: e = exp(-|x|) <= 1, then 1/(1+e) for x >= 0 and
// e/(1+e) below. Relative error within a few ulp.
inline float sigmoid_fast(float x) {
  const float e = exp_nonpositive(-std::abs(x));
  const float r = 1.0f / (1.0f + e);
  return x >= 0 ? r : e * r;
}

}  // namespace tbd::cpu
