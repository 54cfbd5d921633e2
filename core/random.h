// core/random.h: deterministic, platform-independent random numbers for initialisation,
// synthetic data and dropout masks (splitmix64 + Box-Muller; no std:: distributions, whose
// output is implementation-defined).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/backend.h"
#include "core/splitmix.h"  // splitmix64, also usable in CUDA kernels

namespace tbd {

// FNV-1a of a name mixed with a seed: per-parameter streams independent of build order.
uint64_t seed_for(uint64_t seed, std::string_view name);

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64() { return splitmix64(state_++); }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal();
  int64_t randint(int64_t lo, int64_t hi_exclusive);

 private:
  uint64_t state_;
};

// Host-generated data copied to the tensor (plain layout on the host, any layout on device).
void fill_uniform(Backend& be, const Tensor& t, Rng& rng, double lo, double hi);
void fill_normal(Backend& be, const Tensor& t, Rng& rng, double mean, double stddev);
// Integer tensor (i32, or u8 with 0 <= lo < hi <= 256) with values in [lo, hi).
void fill_randint(Backend& be, const Tensor& t, Rng& rng, int64_t lo, int64_t hi);

}  // namespace tbd
