// core/random.cpp: random fills through the host.
#include "core/random.h"

#include <cmath>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"

namespace tbd {

uint64_t seed_for(uint64_t seed, std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return splitmix64(h ^ splitmix64(seed));
}

double Rng::normal() {
  double u1 = uniform(), u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

int64_t Rng::randint(int64_t lo, int64_t hi_exclusive) {
  return lo + static_cast<int64_t>(next_u64() % static_cast<uint64_t>(hi_exclusive - lo));
}

namespace {
// Host floats into t: as they are (f32) or rounded to nearest even (bf16).
void copy_floats(Backend& be, const Tensor& t, const std::vector<float>& h) {
  if (t.dtype() == DType::kF32) {
    be.copy_from_host(t, h.data());
    return;
  }
  std::vector<uint16_t> b(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) b[i] = bf16_from_f32(h[i]);
  be.copy_from_host(t, b.data());
}
}  // namespace

void fill_uniform(Backend& be, const Tensor& t, Rng& rng, double lo, double hi) {
  TBD_CHECK(is_floating(t.dtype()), "fill_uniform: f32 or bf16 only, got ", to_string(t.dtype()));
  std::vector<float> h(t.numel());
  for (auto& v : h) v = static_cast<float>(rng.uniform(lo, hi));
  copy_floats(be, t, h);
}

void fill_normal(Backend& be, const Tensor& t, Rng& rng, double mean, double stddev) {
  TBD_CHECK(is_floating(t.dtype()), "fill_normal: f32 or bf16 only, got ", to_string(t.dtype()));
  std::vector<float> h(t.numel());
  for (auto& v : h) v = static_cast<float>(mean + stddev * rng.normal());
  copy_floats(be, t, h);
}

void fill_randint(Backend& be, const Tensor& t, Rng& rng, int64_t lo, int64_t hi) {
  if (t.dtype() == DType::kU8) {
    TBD_CHECK(lo >= 0 && hi <= 256 && lo < hi, "fill_randint: u8 values need 0 <= lo < hi <= 256, ",
              "got [", lo, ", ", hi, ")");
    std::vector<uint8_t> h(t.numel());
    for (auto& v : h) v = static_cast<uint8_t>(rng.randint(lo, hi));
    be.copy_from_host(t, h.data());
    return;
  }
  TBD_CHECK(t.dtype() == DType::kI32, "fill_randint: i32 or u8 only, got ", to_string(t.dtype()));
  std::vector<int32_t> h(t.numel());
  for (auto& v : h) v = static_cast<int32_t>(rng.randint(lo, hi));
  be.copy_from_host(t, h.data());
}

}  // namespace tbd
