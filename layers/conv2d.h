// layers/conv2d.h: 2-D convolution (cross-correlation), NCHW semantics.
//
//   x: (N, C, H, W)  w: (K, C/groups, R, S)  b: (K)  y: (N, K, P, Q)
//   P = (H + 2*pad_h - dilation_h*(R-1) - 1) / stride_h + 1, Q likewise.
// FLOPs (FMA = 2):
//   fprop         = 2*N*K*(C/groups)*R*S*P*Q  (+ N*K*P*Q with bias)
//   dgrad    = 2*N*K*(C/groups)*R*S*P*Q  (dgrad)
//   wgrad = 2*N*K*(C/groups)*R*S*P*Q  (wgrad, + N*K*P*Q for the bias gradient)
// Bytes (FP32, 4 per element; a lower bound, the model in layers/layer.h), with
// X = N*C*H*W, Y = N*K*P*Q, Wt = K*(C/groups)*R*S, B = K with bias else 0:
//   fprop         = 4*(X + Wt + B + Y)        read x, w, b; write y
//   dgrad    = 4*(Y + Wt + X)            read dy, w; write dx
//   wgrad = 4*(X + Y + 2*(Wt + B))    read x, dy; read and write dw, db (+=)
#pragma once

#include "layers/layer.h"

namespace tbd {

struct Conv2dConfig {
  static constexpr const char* kKind = "Conv2d";
  int64_t out_channels = 0;  // K
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  bool bias = false;

  // Square kernel, stride and padding: the common case.
  static Conv2dConfig square(int64_t k_out, int64_t kernel, int64_t stride = 1, int64_t pad = 0,
                             bool bias = false) {
    Conv2dConfig c;
    c.out_channels = k_out;
    c.kernel_h = c.kernel_w = kernel;
    c.stride_h = c.stride_w = stride;
    c.pad_h = c.pad_w = pad;
    c.bias = bias;
    return c;
  }
};

// Checks x against cfg (throws naming the layer) and returns y's shape.
Shape conv2d_output_shape(const std::string& name, const Conv2dConfig& cfg, const Shape& x);
Flops conv2d_flops(const Conv2dConfig& cfg, const Shape& x, const Shape& y);
// Under bf16 (t) x, y and the weights the products read are 2 bytes (layer.h: Bytes).
Bytes conv2d_bytes(const Conv2dConfig& cfg, const Shape& x, const Shape& y, DType t = DType::kF32);

// Contract: one input x (f32); y (N, K, P, Q) f32 row-major (an implementation may
// choose a blocked layout); weight (K, C/groups, R, S) He-normal with fan_in = C/groups*R*S,
// fan_out = K/groups*R*S [and bias (K) zeros, no decay].
template <>
Contract contract(const std::string& name, const Conv2dConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const Conv2dConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
