// layers/pool2d.h: max and average pooling, and global average pooling.
//
// Pool2d:           x: (N, C, H, W) any layout  y: (N, C, P, Q) same layout
//   P = (H + 2*pad_h - kernel_h) / stride_h + 1 (floor), Q likewise.
// GlobalAvgPool2d:  x: (N, C, H, W) any layout  y: (N, C) row-major (ready for Linear)
// FLOPs: max fprop N*C*P*Q*R*S compares, dgrad N*C*P*Q; avg fprop N*C*P*Q*(R*S+1),
// dgrad N*C*P*Q*(R*S+1); global avg: fprop N*C*H*W, dgrad N*C*H*W.
// Bytes (FP32; a lower bound, layers/layer.h), X = N*C*H*W, Y = N*C*P*Q (global: N*C):
//   fprop 4*(X + Y) (read x, write y); wgrad 0;
//   dgrad: avg and global avg 4*(Y + X) (read dy, write dx); max 4*(Y + 2X) (read dy and x,
//   where the maximum is found again, write dx: the model saves no argmax workspace, so the
//   index workspace oneDNN and cuDNN keep is their own extra traffic).
#pragma once

#include "layers/layer.h"

namespace tbd {

enum class PoolKind { kMax, kAvg };

struct Pool2dConfig {
  static constexpr const char* kKind = "Pool2d";
  PoolKind pool = PoolKind::kMax;
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;
  bool count_include_pad = true;  // average pooling divisor (PyTorch default)

  static Pool2dConfig square(PoolKind kind, int64_t kernel, int64_t stride, int64_t pad = 0) {
    Pool2dConfig c;
    c.pool = kind;
    c.kernel_h = c.kernel_w = kernel;
    c.stride_h = c.stride_w = stride;
    c.pad_h = c.pad_w = pad;
    return c;
  }
};

struct GlobalAvgPool2dConfig {
  static constexpr const char* kKind = "GlobalAvgPool2d";
};

const char* to_string(PoolKind k);  // "max", "avg"

// Checks x (rank 4 f32, positive dims) and cfg (kernel, stride > 0; 0 <= pad < kernel, so no
// window lies wholly in padding; the padded input holds one window); returns (N, C, P, Q).
Shape pool2d_output_shape(const std::string& name, const Pool2dConfig& cfg, const TensorDesc& x);
Flops pool2d_flops(const Pool2dConfig& cfg, const Shape& x, const Shape& y);
Bytes pool2d_bytes(const Pool2dConfig& cfg, const Shape& x, const Shape& y, DType t = DType::kF32);
// Checks x (rank 4 f32, positive dims); returns (N, C).
Shape global_avg_pool2d_output_shape(const std::string& name, const TensorDesc& x);
Flops global_avg_pool2d_flops(const Shape& x);
Bytes global_avg_pool2d_bytes(const Shape& x, DType t = DType::kF32);

// Contract: one input x (N, C, H, W) f32; y (N, C, P, Q) in x's layout; no parameters.
template <>
Contract contract(const std::string& name, const Pool2dConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const Pool2dConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// Contract: one input x (N, C, H, W) f32; y (N, C) row-major; no parameters.
template <>
Contract contract(const std::string& name, const GlobalAvgPool2dConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const GlobalAvgPool2dConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
