// layers/linear.h: fully connected layer and the raw GEMM op.
//
// Linear: x: (..., D_in) row-major, rank >= 2  w: (D_out, D_in)  b: (D_out)  y: (..., D_out)
//   y = x w^T + b, M = product of the leading dims.
//   FLOPs fprop 2*M*D_in*D_out (+M*D_out bias), dgrad 2*M*D_in*D_out,
//   wgrad 2*M*D_in*D_out (+M*D_out for the bias gradient).
//   Bytes (FP32; a lower bound, layers/layer.h), X = M*D_in, Y = M*D_out, Wt = D_out*D_in,
//   B = D_out with bias else 0: fprop 4*(X + Wt + B + Y) (read x, w, b; write y), dgrad
//   4*(Y + Wt + X) (read dy, w; write dx), wgrad 4*(X + Y + 2*(Wt + B)) (read x, dy;
//   read and write dw, db).
// Gemm: a: (B..., M, K) or (B..., K, M) with trans_a; b: (B..., K, N) or (B..., N, K) with
//   trans_b, or rank 2 (shared by every batch); y: (B..., M, N) = alpha * op(a) op(b) (+ bias
//   (N) parameter when `bias`). Both inputs get gradients.
//   FLOPs fprop 2*B*M*N*K (+B*M*N with bias), dgrad 4*B*M*N*K (da and db),
//   wgrad B*M*N (bias only; 0 without bias).
//   Bytes (FP32), A = B*M*K, Bm = K*N (b shared) or B*K*N, Y = B*M*N, Bias = N with bias else
//   0: fprop 4*(A + Bm + Bias + Y) (read a, b, bias; write y); dgrad 4*(Y + 2*A + 2*Bm) (read
//   dy, a, b; write da, db); wgrad 4*(Y + 2*N) with bias (read dy; read and write the
//   bias gradient), 0 without.
#pragma once

#include "layers/layer.h"

namespace tbd {

struct LinearConfig {
  static constexpr const char* kKind = "Linear";
  int64_t out_features = 0;
  bool bias = true;
  Init init = Init::kXavierUniform;  // kHeNormal before a ReLU (ResNet's fc uses uniform fan-in)
};

struct GemmConfig {
  static constexpr const char* kKind = "Gemm";
  bool trans_a = false;
  bool trans_b = false;
  double alpha = 1.0;
  bool bias = false;
};

// Checks x against cfg (throws naming the layer) and returns y's shape.
Shape linear_output_shape(const std::string& name, const LinearConfig& cfg, const Shape& x);
Flops linear_flops(const LinearConfig& cfg, const Shape& x);
Bytes linear_bytes(const LinearConfig& cfg, const Shape& x, DType t = DType::kF32);

// The problem a Gemm layer solves, after the batch dims are collapsed into one.
struct GemmDims {
  int64_t batch = 1;  // B: product of the batch dims (1 for rank-2 a)
  int64_t m = 0, n = 0, k = 0;
  bool b_shared = false;  // b has rank 2 while a is batched: one b for every batch
};
// Checks a and b against cfg (throws naming the layer and both shapes) and returns y's shape.
Shape gemm_output_shape(const std::string& name, const GemmConfig& cfg, const Shape& a,
                        const Shape& b, GemmDims* dims = nullptr);
Flops gemm_flops(const GemmConfig& cfg, const GemmDims& d);
Bytes gemm_bytes(const GemmConfig& cfg, const GemmDims& d, DType t = DType::kF32);

// Contract: one input x (..., K) f32; y (..., N) f32; weight (N, K) with cfg.init, fan_in K,
// fan_out N [and bias (N) zeros, no decay].
template <>
Contract contract(const std::string& name, const LinearConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const LinearConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// Contract: inputs a, b (f32); y as documented above, f32; [bias (N) zeros, no decay].
template <>
Contract contract(const std::string& name, const GemmConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const GemmConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
