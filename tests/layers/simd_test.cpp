// tests/layers/simd_test.cpp: the vectorisable double exp and log of layers/cpu/simd.h against
// libm (exp within 2 ulp, log within 3, over their ranges), their special values, the bitwise
// selects, and the float tanh and sigmoid the recurrent and attention kernels use.
#include "layers/cpu/simd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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

}  // namespace
}  // namespace tbd::test
