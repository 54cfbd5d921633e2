// layers/random_interpolation.h: a per-sample random interpolation of two batches (WGAN-GP's
// x_hat = real + alpha (fake - real)).
//
// RandomInterpolation:  x0, x1: (N, ...) same shape, row-major f32  y: like x0
//   y_n = x0_n + alpha_n (x1_n - x0_n) for each sample n, alpha_n ~ U[0, 1) drawn anew every
//   forward from a counter-based hash of (seed, layer name, step, n), step the forward's index
//   (Layer::set_call_numbering), as Dropout draws its
//   masks: a rerun with the same seed draws the same sequence, and the CPU and CUDA backends
//   draw the same values. alpha (N) is kept for backward (feature_maps).
//   Gradients: dx1 = alpha_n dy, dx0 = dy - dx1.
// FLOPs (E = elements of x0): fprop 3E (subtract, multiply, add), dgrad 2E.
// Bytes (FP32; a lower bound, layers/layer.h): fprop 4*(3E + N) (read x0, x1; write y and
//   alpha), dgrad 4*(3E + N) (read dy and alpha; write dx0, dx1), wgrad 0.
#pragma once

#include <cstdint>
#include <string>

#include "core/random.h"
#include "layers/layer.h"

namespace tbd {

struct RandomInterpolationConfig {
  static constexpr const char* kKind = "RandomInterpolation";
  uint64_t seed = 0;
};

Flops random_interpolation_flops(const Shape& x);
Bytes random_interpolation_bytes(const Shape& x);

// Contract: inputs x0, x1 (N, ...) f32 of one shape, rank >= 1; y like x0; no parameters.
template <>
Contract contract(const std::string& name, const RandomInterpolationConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const RandomInterpolationConfig& cfg,
                             const std::vector<TensorDesc>& in, const Contract& c);

// alpha_n of one forward, shared by every backend and the tests: the top 24 bits of one
// splitmix64 hash per sample, a float in [0, 1) (host and device code, core/splitmix.h).
inline uint64_t random_interpolation_key(const RandomInterpolationConfig& cfg,
                                         const std::string& layer_name) {
  return seed_for(cfg.seed, layer_name);
}
TBD_HOST_DEVICE inline float random_interpolation_alpha(uint64_t key, uint64_t step, int64_t n) {
  const uint64_t base = splitmix64(key ^ (step * 0xD1B54A32D192ED03ull));
  return static_cast<float>(splitmix64(base + static_cast<uint64_t>(n)) >> 40) * 0x1.0p-24f;
}

}  // namespace tbd
