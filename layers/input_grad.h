// layers/input_grad.h: input-gradient kinds, a kind's data gradient (dgrad) as a forward layer.
//
// Double backward (the gradient penalty of WGAN-GP, (||d critic / d x||_2 - 1)^2) needs the
// gradient of a function of an input gradient. These kinds compute a forward kind's dgrad as
// their *forward*, with the forward layer's weights tied in (Graph::tie), so that the ordinary
// backward of the graph differentiates through the input gradient: their own backward is the
// second derivative. models/double_backward.h appends them to a graph, one per forward node.
//
// Every input and output is row-major f32. dy: the forward kind's output gradient.
//
// LinearDgrad:     dy (..., out)  weight (out, in), tied  y = dx = dy W  (..., in)
//   backward: d(dy) = v W^T; d(weight) += dy^T v   (v = d(dx), the gradient flowing back).
// Conv2dDgrad:     dy (N, K, P, Q)  weight (K, C/groups, R, S), tied  y = dx (N, C, H, W), the
//   transposed convolution of dy (the forward conv's backward data). backward: d(dy) =
//   conv(v, W) (the forward conv without bias); d(weight) += wgrad(src = v, diff_dst = dy).
// ActivationDgrad: dy, x (same shape)  y = dx = dy * f'(x), for ReLU and leaky ReLU only: their
//   f' is piecewise constant, so d(dx)/dx = 0 (almost everywhere) and x takes no gradient
//   (Contract::input_grads); backward: d(dy) = v * f'(x). tanh, sigmoid and GELU have f'' != 0
//   and are refused with a message.
// Pool2dDgrad:     dy (N, C, P, Q)  y = dx (N, C, H, W), average pooling only (max pooling's
//   dgrad routes through argmax: not supported). backward: d(dy) = avgpool(v).
// LayerNormDgrad:  dy, x (..., D)  gamma (D), tied  y = dx; or, over (C, H, W), dy, x
//   (N, C, H, W) row-major, gamma (C), a row being a sample and gamma[c] applying to channel c
//   (layers/layer_norm.h; below, gamma means the entry of each value). With xh = (x - mean) r,
//   r = 1/sqrt(var + eps), g = dy * gamma, P(u) = u - mean(u) - xh mean(u xh) (per row):
//   dx = r P(g). backward (per row, means over D):
//     dg = r P(v);  d(dy) = dg * gamma;  d(gamma) += sum over rows (and over the channel's
//     positions) of dg * dy;
//     d(x) = r^2 [xh (mean(g xh) mean(v xh) - mean(v g) + mean(g) mean(v))
//                 - P(g) mean(v xh) - P(v) mean(g xh)].
//
// FLOPs and bytes (a lower bound, layers/layer.h): the forward kind's dgrad figures become
// fprop, its fprop figures (without bias) dgrad, and wgrad keeps its figures; the formulas are
// in layers/input_grad.cpp beside each contract.
#pragma once

#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/layer.h"
#include "layers/layer_norm.h"
#include "layers/pool2d.h"

namespace tbd {

struct LinearDgradConfig {
  static constexpr const char* kKind = "LinearDgrad";
  int64_t in_features = 0;  // the forward Linear's input features (dx's last dim)
};

struct Conv2dDgradConfig {
  static constexpr const char* kKind = "Conv2dDgrad";
  Conv2dConfig conv;                            // the forward convolution
  int64_t in_channels = 0, in_h = 0, in_w = 0;  // its input's C, H, W (dx's shape)
};

struct ActivationDgradConfig {
  static constexpr const char* kKind = "ActivationDgrad";
  ActivationConfig act;
};

struct Pool2dDgradConfig {
  static constexpr const char* kKind = "Pool2dDgrad";
  Pool2dConfig pool;
  int64_t in_h = 0, in_w = 0;  // the forward pooling's input H, W
};

struct LayerNormDgradConfig {
  static constexpr const char* kKind = "LayerNormDgrad";
  LayerNormConfig ln;
};

// Contracts (checks name the layer, the argument and the dims).
template <>
Contract contract(const std::string& name, const LinearDgradConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const LinearDgradConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);
template <>
Contract contract(const std::string& name, const Conv2dDgradConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const Conv2dDgradConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);
template <>
Contract contract(const std::string& name, const ActivationDgradConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const ActivationDgradConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);
template <>
Contract contract(const std::string& name, const Pool2dDgradConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const Pool2dDgradConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);
template <>
Contract contract(const std::string& name, const LayerNormDgradConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const LayerNormDgradConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// The forward pooling's input as seen by Pool2dDgrad: (N, C, in_h, in_w).
Shape pool2d_dgrad_input_shape(const Pool2dDgradConfig& cfg, const Shape& dy);

}  // namespace tbd
