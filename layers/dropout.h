// layers/dropout.h: inverted dropout with seeded, reproducible masks.
//
//   x: any shape (row-major or blocked)  y: like x
//   Training: y = x * mask / (1 - p), mask[i] ~ Bernoulli(1 - p) from a counter-based hash of
//   (seed, layer name, step, i): the same seed gives the same sequence of masks on a rerun, a
//   new mask every forward (step is the training forward's index under the layer's call
//   numbering: 0, 1, 2, ... by default, r, r + P, ... on data-parallel rank r of P, see
//   Layer::set_call_numbering), and layers with the same seed still get independent masks. The mask
//   is kept for backward (feature_maps, one byte per element). Eval: y = x. p = 1 drops everything
//   (y = 0). Element i is the i-th element in memory order, so a blocked tensor's mask is a
//   different (equally distributed) one than its row-major twin's.
// FLOPs: fprop 2*E (compare, scale), dgrad E.
// Bytes (training; a lower bound, layers/layer.h): fprop 4*2E + E (read x, write y and the
//   one-byte mask), dgrad 4*2E + E (read dy and the mask, write dx), wgrad 0.
#pragma once

#include <cstdint>
#include <string>

#include "core/random.h"
#include "layers/layer.h"

namespace tbd {

struct DropoutConfig {
  static constexpr const char* kKind = "Dropout";
  double p = 0.1;
  uint64_t seed = 0;
};

Shape dropout_output_shape(const std::string& name, const DropoutConfig& cfg, const TensorDesc& x);
Flops dropout_flops(const Shape& x);
Bytes dropout_bytes(const Shape& x, DType t = DType::kF32);

// Contract: one input x; y like x; no parameters.
template <>
Contract contract(const std::string& name, const DropoutConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const DropoutConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// The mask, shared by every backend and by the tests' reference. One splitmix64 hash gives
// four 16-bit uniforms (elements 4j..4j+3); element i is dropped iff its uniform is below
// threshold = round(p * 2^16), so the drop probability is p to within 2^-17. The per-element
// functions are host and device code (TBD_HOST_DEVICE, core/host_device.h): CUDA kernels call them.
inline uint64_t dropout_key(const DropoutConfig& cfg, const std::string& layer_name) {
  return seed_for(cfg.seed, layer_name);
}
inline uint32_t dropout_threshold(double p) { return static_cast<uint32_t>(p * 65536.0 + 0.5); }
TBD_HOST_DEVICE inline uint64_t dropout_step_base(uint64_t key, uint64_t step) {
  return splitmix64(key ^ (step * 0xD1B54A32D192ED03ull));
}
TBD_HOST_DEVICE inline bool dropout_keep(uint64_t step_base, int64_t i, uint32_t threshold) {
  uint64_t h = splitmix64(step_base + static_cast<uint64_t>(i >> 2));
  return ((h >> (16 * (i & 3))) & 0xFFFFu) >= threshold;
}

}  // namespace tbd
