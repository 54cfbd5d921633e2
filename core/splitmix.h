// core/splitmix.h: the counter-based hash behind every random number of the suite, usable on
// the host and in CUDA kernels (no other header, so .cu files can include it cheaply).
//
// splitmix64 (Steele, Lea, Flood 2014) is a bijective 64-bit mixer: hashing a counter gives
// independent-looking values with no state, so a dropout mask element depends only on
// (seed, step, index) and the CPU and CUDA backends draw bit-identical masks.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TBD_HOST_DEVICE __host__ __device__
#else
#define TBD_HOST_DEVICE
#endif

namespace tbd {

TBD_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Dropout masks. The key of one forward pass (computed once on the host per call):
//   key = splitmix64(seed ^ splitmix64(step)),
// element i is kept iff the top 24 bits of splitmix64(key + i) are >= threshold, where
// threshold = round(p * 2^24): an integer comparison, so both backends agree exactly.
inline uint64_t dropout_key(uint64_t seed, uint64_t step) {
  return splitmix64(seed ^ splitmix64(step));
}
inline uint32_t dropout_threshold(double p) {
  double t = p * 16777216.0 + 0.5;
  return t <= 0 ? 0u : t >= 16777216.0 ? 16777216u : static_cast<uint32_t>(t);
}
TBD_HOST_DEVICE inline bool dropout_keep(uint64_t key, uint64_t i, uint32_t threshold) {
  return static_cast<uint32_t>(splitmix64(key + i) >> 40) >= threshold;
}

}  // namespace tbd
