// layers/cpu/simd.h: helpers for the CPU backend's own (non-oneDNN) kernels.
//
// The library is built for baseline x86-64 (no -march=native: the binary must run on any
// machine it is copied to), which would leave own loops at SSE2 width. TBD_SIMD_CLONES
// compiles a function three times (baseline, x86-64-v3 = AVX2+FMA, x86-64-v4 = AVX-512) and
// picks the best at load time (GCC/Clang ifunc), so `#pragma omp simd` loops in it run at
// the machine's full vector width. Put it on per-row kernels called from inside an OpenMP
// region, not on the function holding the `omp parallel` (its outlined body is not cloned).
// Not under ThreadSanitizer: the ifunc resolvers run while the dynamic loader relocates the
// library, before TSan's runtime is set up, and an instrumented resolver crashes the process
// at load (the tsan preset then runs the baseline loops).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/bf16.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
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
[[gnu::always_inline]] inline float exp_nonpositive(float x) {
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

// c ? a : b on the bits (and/or with a mask). A plain ?: in these helpers does not survive
// GCC at SSE2/AVX2 width: jump threading turns it into branches around arithmetic, which
// -ftrapping-math then keeps from being if-converted, and the loop does not vectorize (AVX-512
// masks hide it). Measured with -fopt-info-vec on GCC 12.
inline double select_f64(bool c, double a, double b) {
  const uint64_t m = uint64_t{0} - static_cast<uint64_t>(c);
  return std::bit_cast<double>((std::bit_cast<uint64_t>(a) & m) |
                               (std::bit_cast<uint64_t>(b) & ~m));
}

// c[0] x^(K-1) + c[1] x^(K-2) + ... + c[K-1] by Horner's rule (unrolled: K is a constant).
template <std::size_t K>
inline double horner(double x, const std::array<double, K>& c) {
  double p = c[0];
  for (std::size_t k = 1; k < K; ++k) p = p * x + c[k];
  return p;
}

// exp(x) in double, branch-free so loops vectorize: x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in
// two parts, n rounded by the 1.5*2^52 trick), exp(r) by its Taylor polynomial to degree 13
// (truncation below 1e-17 relative), times 2^n assembled in the exponent bits (a 64-bit
// shift: no double-to-int64 conversion, which AVX2 lacks). Within 2 ulp of std::exp (measured
// over [-708, 709]); exact 0 below -708 (where exp is subnormal or 0) and for -inf, exp(709)
// above 709.
inline double exp_f64(double x) {
  const double lo = select_f64(x < -708.0, -708.0, x);
  const double xc = select_f64(lo > 709.0, 709.0, lo);
  const double k = xc * 1.4426950408889634 + 6755399441055744.0;  // round(x / ln 2) + 1.5*2^52
  const double n = k - 6755399441055744.0;
  const double r = (xc - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
  // 1/13!, 1/12!, ..., 1/1!, 1/0! (the factorials are exact in double)
  constexpr std::array<double, 14> kExp = [] {
    std::array<double, 14> c{};
    double factorial = 1;
    for (std::size_t k = 0; k < c.size(); ++k, factorial *= static_cast<double>(k)) {
      c[c.size() - 1 - k] = 1.0 / factorial;
    }
    return c;
  }();
  const double p = horner(r, kExp);
  // The low bits of k hold n (two's complement); shifted into the exponent field, plus the bias.
  const uint64_t scale = (std::bit_cast<uint64_t>(k) << 52) + (uint64_t{1023} << 52);
  return select_f64(x < -708.0, 0.0, p * std::bit_cast<double>(scale));
}

// log(x) in double for finite normal x > 0, branch-free so loops vectorize: x = 2^e m with m in
// [sqrt(1/2), sqrt(2)) (from the bits; the exponent converted through the 2^52 trick, no int64
// conversion), log m = 2 atanh(f), f = (m - 1) / (m + 1), |f| <= 0.172, by its series to f^23
// (truncation below 1e-18). Within 3 ulp of std::log (measured over [1e-304, 1e304]). Other
// inputs give unspecified values (0 gives about -709.1).
inline double log_f64(double x) {
  const uint64_t bits = std::bit_cast<uint64_t>(x);
  const double m1 = std::bit_cast<double>((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  const bool high = m1 > 1.4142135623730951;
  const double m = select_f64(high, 0.5 * m1, m1);
  // The biased exponent (11 bits) as a double: its bits in a 2^52 mantissa, minus 2^52.
  const double biased =
      std::bit_cast<double>((bits >> 52) | 0x4330000000000000ull) - 4503599627370496.0;
  const double e = biased - 1023.0 + select_f64(high, 1.0, 0.0);
  const double f = (m - 1.0) / (m + 1.0);
  constexpr std::array<double, 12> kAtanh = {1.0 / 23, 1.0 / 21, 1.0 / 19, 1.0 / 17,
                                             1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9,
                                             1.0 / 7,  1.0 / 5,  1.0 / 3,  1.0};
  const double p = horner(f * f, kAtanh);
  return e * 6.93147180369123816490e-01 + (2.0 * f * p + e * 1.90821492927058770002e-10);
}

// c ? a : b on the bits, in float (see select_f64).
[[gnu::always_inline]] inline float select_f32(bool c, float a, float b) {
  const uint32_t m = uint32_t{0} - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}

// tanh(x) in float, branch-free so loops vectorize: sign(x) (1 - e) / (1 + e) with
// e = exp(-2|x|), and the odd Taylor polynomial x (1 - x^2/3 + 2x^4/15 - 17x^6/315) below
// |x| = 1/16 where 1 - e would cancel. Absolute error below 2e-7 everywhere.
[[gnu::always_inline]] inline float tanh_fast(float x) {
  const float ax = std::abs(x);
  const float e = exp_nonpositive(-2.0f * ax);
  const float big = std::copysign((1.0f - e) / (1.0f + e), x);
  const float x2 = x * x;
  const float small = x * (1.0f + x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315))));
  return select_f32(ax < 0.0625f, small, big);
}

// An element as f32 (bf16 widened exactly), for kernels templated on the element type, and back.
[[gnu::always_inline]] inline float as_f32(float v) { return v; }
[[gnu::always_inline]] inline float as_f32(uint16_t v) { return ::tbd::f32_from_bf16(v); }
// dst = v, or v rounded to bf16 (nearest even).
[[gnu::always_inline]] inline void store_as(float& dst, float v) { dst = v; }
[[gnu::always_inline]] inline void store_as(uint16_t& dst, float v) {
  dst = ::tbd::bf16_from_f32(v);
}

// max(m, s[0..n)) with sixteen running maxima, elementwise. GCC 12 leaves an `omp simd
// reduction(max:)` loop scalar (a chain of vmaxss: 40% of the fused attention's forward and
// most of the loss's max pass, measured), but vectorizes this; inlined into each SIMD clone at
// its width. NaN in s is not propagated (as std::max's fold).
template <class E>
[[gnu::always_inline]] inline float max_of(const E* s, int64_t n, float m) {
  constexpr int64_t kLanes = 16;
  float lane[kLanes];
  std::fill_n(lane, kLanes, m);
  int64_t j0 = 0;
  for (; j0 + kLanes <= n; j0 += kLanes) {
#pragma omp simd
    for (int64_t k = 0; k < kLanes; ++k) {
      const float x = as_f32(s[j0 + k]);
      lane[k] = lane[k] < x ? x : lane[k];
    }
  }
  for (int64_t j = j0; j < n; ++j) m = std::max(m, as_f32(s[j]));
  for (int64_t k = 0; k < kLanes; ++k) m = std::max(m, lane[k]);
  return m;
}

// 1 / (1 + exp(-x)) in float, branch-free: e = exp(-|x|) <= 1, then 1/(1+e) for x >= 0 and
// e/(1+e) below. Relative error within a few ulp.
[[gnu::always_inline]] inline float sigmoid_fast(float x) {
  const float e = exp_nonpositive(-std::abs(x));
  const float r = 1.0f / (1.0f + e);
  return select_f32(x >= 0, r, e * r);
}

// The f32 <-> bf16 conversions (core/bf16.h), for the kernels here.
using ::tbd::bf16_from_f32;
using ::tbd::f32_from_bf16;

}  // namespace tbd::cpu
