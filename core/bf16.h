// core/bf16.h: f32 <-> bf16 conversions on the bits (header-only, for loops that vectorize).
#pragma once

#include <bit>
#include <cstdint>

namespace tbd {

// f32 -> bf16 as PyTorch's c10::BFloat16 and CUDA's __float2bfloat16_rn round: to nearest,
// ties to even, on the bits. Subnormals are rounded like any value (AVX512-BF16's vcvtneps2bf16
// flushes them to zero instead), values from the largest bf16 plus half an ulp up round to
// infinity, and every NaN becomes PyTorch's canonical quiet NaN 0x7fc0. Branch-free, so loops
// over it vectorize. The bf16 mixed-precision path writes its weight copies with it.
[[gnu::always_inline]] inline uint16_t bf16_from_f32(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = uint32_t{0} - static_cast<uint32_t>((u & 0x7fffffffu) > 0x7f800000u);
  return static_cast<uint16_t>((0x7fc0u & nan) | (rounded & ~nan));
}

// bf16 -> f32: exact (bf16 is the upper half of an f32).
[[gnu::always_inline]] inline float f32_from_bf16(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

}  // namespace tbd
