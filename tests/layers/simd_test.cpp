// tests/layers/simd_test.cpp: the vectorisable double exp and log of layers/cpu/simd.h against
// libm (exp within 2 ulp, log within 3, over their ranges), their special values, the bitwise
// selects, the float tanh and sigmoid the recurrent and attention kernels use, and the bf16
// conversions against a rounding computed in double.
#include "layers/cpu/simd.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/random.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

using cpu::exp_f64;
using cpu::log_f64;
using cpu::select_f64;

// |got - want| in units of the last place of want.
double ulps(double got, double want) {
  const double ulp =
      std::nextafter(std::abs(want), std::numeric_limits<double>::infinity()) - std::abs(want);
  return std::abs(got - want) / ulp;
}

TEST(SimdF64, ExpWithinTwoUlpOfLibm) {
  const Vec wide = random_vec(200000, 1, -708.0, 709.0), narrow = random_vec(200000, 2, -2, 2);
  double worst = 0;
  for (const Vec* v : {&wide, &narrow}) {
    for (double x : *v) worst = std::max(worst, ulps(exp_f64(x), std::exp(x)));
  }
  EXPECT_LE(worst, 2.0);
}

TEST(SimdF64, ExpSpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(exp_f64(0.0), 1.0);
  EXPECT_EQ(exp_f64(-inf), 0.0);  // unreachable CTC states: exactly nothing
  EXPECT_EQ(exp_f64(-708.5), 0.0);
  EXPECT_EQ(exp_f64(-1e300), 0.0);
  EXPECT_EQ(exp_f64(800.0), exp_f64(709.0));
  EXPECT_TRUE(std::isfinite(exp_f64(709.0)));
}

TEST(SimdF64, LogWithinThreeUlpOfLibm) {
  const Vec exps = random_vec(200000, 3, -700, 700), near_one = random_vec(200000, 4, 0.5, 3.0);
  double worst = 0;
  for (double e : exps) {
    const double x = std::exp(e);
    worst = std::max(worst, ulps(log_f64(x), std::log(x)));
  }
  for (double x : near_one) worst = std::max(worst, ulps(log_f64(x), std::log(x)));
  EXPECT_LE(worst, 3.0);
  EXPECT_EQ(log_f64(1.0), 0.0);
  EXPECT_EQ(log_f64(2.0), std::log(2.0));
}

// tanh within 2e-7 absolute (both sides of the switch to the polynomial at |x| = 1/16, and far
// out where it saturates), sigmoid within 4e-7 relative, against double libm.
TEST(SimdF32, TanhAndSigmoidAgainstLibm) {
  const Vec wide = random_vec(200000, 3, -20, 20), small = random_vec(200000, 4, -0.1, 0.1);
  double tanh_err = 0, sigmoid_err = 0;
  for (const Vec* v : {&wide, &small}) {
    for (double x : *v) {
      const float xf = static_cast<float>(x);
      tanh_err = std::max(tanh_err, std::abs(cpu::tanh_fast(xf) - std::tanh(double{xf})));
      const double s = 1.0 / (1.0 + std::exp(-double{xf}));
      sigmoid_err = std::max(sigmoid_err, std::abs(cpu::sigmoid_fast(xf) - s) / s);
    }
  }
  EXPECT_LT(tanh_err, 2e-7);
  EXPECT_LT(sigmoid_err, 4e-7);
  EXPECT_EQ(cpu::tanh_fast(0.0f), 0.0f);
  EXPECT_EQ(cpu::tanh_fast(100.0f), 1.0f);
  EXPECT_EQ(cpu::tanh_fast(-100.0f), -1.0f);
  EXPECT_EQ(cpu::sigmoid_fast(0.0f), 0.5f);
  EXPECT_EQ(cpu::select_f32(true, 1.5f, -2.0f), 1.5f);
  EXPECT_EQ(cpu::select_f32(false, 1.5f, -2.0f), -2.0f);
}

TEST(SimdF64, SelectPicksByTheCondition) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(select_f64(true, 1.5, -2.0), 1.5);
  EXPECT_EQ(select_f64(false, 1.5, -2.0), -2.0);
  EXPECT_EQ(select_f64(true, -inf, 0.0), -inf);
  EXPECT_TRUE(std::signbit(select_f64(false, 0.0, -0.0)));
}

// The value of a bf16 bit pattern in double; 0x7f80 / 0xff80 (infinity) as +-2^128, the value the
// exponent sequence continues with, so that rounding to nearest can choose it (RNE overflow).
double bf16_value(uint32_t h) {
  if ((h & 0x7fffu) == 0x7f80u) return (h & 0x8000u) ? -std::ldexp(1.0, 128) : std::ldexp(1.0, 128);
  return static_cast<double>(std::bit_cast<float>(h << 16));
}

// Round to nearest, ties to even, chosen by distance in double between the two bf16 neighbours
// of f (the truncation and the next pattern away from zero).
uint16_t bf16_reference(float f) {
  if (std::isnan(f)) return 0x7fc0;
  const uint32_t lo = std::bit_cast<uint32_t>(f) >> 16;
  if ((std::bit_cast<uint32_t>(f) & 0xffffu) == 0 || (lo & 0x7fffu) == 0x7f80u) {
    return static_cast<uint16_t>(lo);  // exact (infinities too)
  }
  const uint32_t hi = lo + 1;
  const double x = f, dl = std::abs(x - bf16_value(lo)), dh = std::abs(bf16_value(hi) - x);
  if (dl != dh) return static_cast<uint16_t>(dl < dh ? lo : hi);
  return static_cast<uint16_t>((lo & 1u) ? hi : lo);
}

// Every bf16 pattern as the upper half, under lower halves that probe the rounding: exact,
// just below, at and just above the tie, the largest, and random ones; subnormals, the largest
// finite values (rounding to infinity), infinities and NaNs among them.
TEST(SimdBf16, RoundsToNearestEvenLikePyTorch) {
  Rng rng(3);
  int64_t checked = 0, mismatches = 0;
  for (uint32_t upper = 0; upper <= 0xffffu; ++upper) {
    uint32_t lowers[] = {0x0000u,
                         0x0001u,
                         0x7fffu,
                         0x8000u,
                         0x8001u,
                         0xffffu,
                         static_cast<uint32_t>(rng.next_u64() & 0xffffu)};
    for (uint32_t lower : lowers) {
      const float f = std::bit_cast<float>((upper << 16) | lower);
      const uint16_t got = cpu::bf16_from_f32(f), want = bf16_reference(f);
      ++checked;
      if (got != want && ++mismatches <= 5) {
        ADD_FAILURE() << std::hex << "f32 bits 0x" << ((upper << 16) | lower) << ": got 0x" << got
                      << ", want 0x" << want;
      }
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << checked;
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(cpu::bf16_from_f32(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(cpu::bf16_from_f32(-inf), 0xff80);
  EXPECT_EQ(cpu::bf16_from_f32(-std::numeric_limits<float>::quiet_NaN()), 0x7fc0);
  EXPECT_EQ(cpu::bf16_from_f32(std::numeric_limits<float>::signaling_NaN()), 0x7fc0);
  EXPECT_EQ(cpu::bf16_from_f32(1.0f + 0x1p-8f), 0x3f80);  // a tie: to the even 1.0
  EXPECT_EQ(cpu::bf16_from_f32(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(cpu::bf16_from_f32(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(cpu::bf16_from_f32(0x1p-133f), 0x0001);  // the smallest bf16 subnormal, kept
}

TEST(SimdBf16, WidensExactly) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const float f = cpu::f32_from_bf16(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(cpu::bf16_from_f32(f), h) << std::hex << h;
  }
}

}  // namespace
}  // namespace tbd::test
