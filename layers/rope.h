// layers/rope.h: rotary position embedding (RoPE, Su et al. 2021) as Llama applies it to
// queries and keys.
//
// x: (N, T, W) row-major f32 or bf16, W a multiple of the head dimension d (even); y like x. Heads
// are consecutive column blocks of d. Within each of the first `rotate_heads` heads (0: all W/d),
// the pairs (2i, 2i+1) are rotated by the angle t * theta^(-2i/d), t the position along T:
//   y[2i]   = x[2i] cos - x[2i+1] sin
//   y[2i+1] = x[2i] sin + x[2i+1] cos
// (the interleaved pairs of Meta's reference code and torchtitan; Hugging Face's port pairs i
// with i + d/2 instead, the same rotation on permuted columns). The remaining columns are
// copied: a packed q|k|v projection rotates q and k and passes v through, one layer and no
// split. Llama 3.1/3.2's frequency scaling for 128K contexts is not applied (it changes which
// frequencies, not the work). The cos and sin tables (T x d/2 each) are computed once at build
// in float64 (kept f32). bf16 x: rotated in f32 registers, y rounded once. Backward rotates dy
// by the opposite angle; nothing is saved.
// FLOPs (E_rot = N*T*rotate_heads*d rotated elements): fprop 3*E_rot (two multiplies, one add
// per output), dgrad 3*E_rot; the copies none.
// Bytes (a lower bound, s = 4 or 2 bytes an element): fprop = s*2*N*T*W + 4*T*d (x, y, the
// tables), dgrad the same for dy, dx.
#pragma once

#include <vector>

#include "layers/layer.h"

namespace tbd {

struct RopeConfig {
  static constexpr const char* kKind = "RoPE";
  int64_t head_dim = 64;
  int64_t rotate_heads = 0;  // rotate the first this many heads (0: every head)
  double theta = 500000.0;   // Llama 3's base (Llama 2: 10000)
};

// The cos and sin tables every backend uses, computed in float64 and rounded: (2, T, d/2),
// cos(t * theta^(-2i/d)) at [0][t][i], sin at [1][t][i].
std::vector<float> rope_tables(const RopeConfig& cfg, int64_t T);

// The heads rotated for input x (checked): rotate_heads, or W / head_dim when 0.
int64_t rope_rotated_heads(const std::string& name, const RopeConfig& cfg, const TensorDesc& x);

template <>
Contract contract(const std::string& name, const RopeConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const RopeConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
