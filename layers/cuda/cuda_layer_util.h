// layers/cuda/cuda_layer_util.h: small helpers shared by the CUDA layer implementations.
//
// Shape checks: the CUDA layers check their inputs themselves against the contracts in
// layers/<kind>.h (same rules and message style as the CPU layers: kind, name, argument, dims),
// so a CUDA layer never depends on a CPU file. Only row-major tensors exist on CUDA.
#pragma once

#include <cstdint>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "layers/layer.h"

namespace tbd::cuda {

inline void check_row_major(const char* kind, const std::string& name, const char* arg,
                            const TensorDesc& d) {
  TBD_LAYER_CHECK(d.layout == Layout::kRowMajor, kind, name, "input ", arg,
                  " must be row-major on the CUDA backend, got ", d.to_string());
}

// Rank >= 1, positive dims, f32, row-major.
inline void check_plain_f32(const char* kind, const std::string& name, const char* arg,
                            const TensorDesc& d) {
  TBD_LAYER_CHECK(d.shape.rank() >= 1, kind, name, "input ", arg, " must have rank >= 1, got ",
                  d.shape.to_string());
  check_positive(kind, name, arg, d.shape);
  check_f32(kind, name, arg, d);
  check_row_major(kind, name, arg, d);
}

// dst = src on the backend's stream (nothing when they are the same buffer).
inline void copy_d2d(CudaBackend& cu, void* dst, const void* src, std::size_t bytes) {
  if (dst != src) {
    TBD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu.stream()));
  }
}

constexpr float kOne = 1.f;
constexpr float kZero = 0.f;

}  // namespace tbd::cuda
