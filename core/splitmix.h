// core/splitmix.h: the counter-based hash behind every random number of the suite, usable on
// the host and in CUDA kernels (no other header, so .cu files can include it cheaply).
//
// splitmix64 (Steele, Lea, Flood 2014) is a bijective 64-bit mixer: hashing a counter gives
// independent-looking values with no state, so a dropout mask element depends only on
// (key, step, index) and the CPU and CUDA backends draw bit-identical masks (layers/dropout.h).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace tbd {

TBD_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// How a layer numbers its random draws (Layer::set_call_numbering): its c-th call (c = 0, 1,
// ...) draws with index c * stride + offset. The default is 0, 1, 2, ...; rank r of a
// data-parallel group of P uses (P, r), the numbers one process running the P shards in turn
// gives its r-th shard. Kernels take it by value.
struct CallNumbering {
  uint64_t stride = 1, offset = 0;
  TBD_HOST_DEVICE uint64_t index(uint64_t count) const { return count * stride + offset; }
};

}  // namespace tbd
