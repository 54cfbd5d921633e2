// layers/cpu/conv_onednn.h: a Conv2d problem as oneDNN describes it, shared by the convolution
// (conv2d_cpu.cpp) and its data-gradient kind (input_grad_cpu.cpp), which build the same three
// primitives for it.
#pragma once

#include <dnnl.hpp>

#include "core/tensor.h"
#include "layers/conv2d.h"

namespace tbd {

// x (N, C, H, W) -> y (N, K, P, Q) under `c`: the weights' dims (grouped: G, K/G, C/G, R, S) and
// their user format (oihw or goihw: the parameter's row-major layout); strides, the dilation as
// oneDNN counts it (extra gaps) and the right padding that makes oneDNN's output-size formula
// give exactly P and Q. The primitive descriptors take memory descriptors for x, the weights,
// the bias (empty: none) and y, where format `any` lets oneDNN choose; their scratchpad is the
// caller's (scratchpad_mode::user). They throw dnnl::error where oneDNN has no implementation.
struct OneDnnConv {
  using desc = dnnl::memory::desc;

  OneDnnConv(const Conv2dConfig& c, const Shape& xs, const Shape& ys)
      : w_dims(c.groups == 1 ? dnnl::memory::dims{c.out_channels, xs[1], c.kernel_h, c.kernel_w}
                             : dnnl::memory::dims{c.groups, c.out_channels / c.groups,
                                                  xs[1] / c.groups, c.kernel_h, c.kernel_w}),
        strides{c.stride_h, c.stride_w},
        dilation{c.dilation_h - 1, c.dilation_w - 1},
        pad_l{c.pad_h, c.pad_w},
        pad_r{(ys[2] - 1) * c.stride_h + (c.kernel_h - 1) * c.dilation_h + 1 - xs[2] - c.pad_h,
              (ys[3] - 1) * c.stride_w + (c.kernel_w - 1) * c.dilation_w + 1 - xs[3] - c.pad_w},
        w_user(w_dims, dnnl::memory::data_type::f32,
               c.groups == 1 ? dnnl::memory::format_tag::oihw : dnnl::memory::format_tag::goihw) {
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  }

  desc w_any() const {
    return desc(w_dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
  }

  dnnl::convolution_forward::primitive_desc forward(const desc& x, const desc& w, const desc& b,
                                                    const desc& y, const dnnl::engine& eng) const {
    return {dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                            dnnl::algorithm::convolution_direct, x, w, b, y,
                                            strides, dilation, pad_l, pad_r),
            attr, eng};
  }
  dnnl::convolution_backward_data::primitive_desc backward_data(
      const desc& x, const desc& w, const desc& y, const dnnl::engine& eng,
      const dnnl::convolution_forward::primitive_desc& hint) const {
    return {dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, x, w, y,
                                                  strides, dilation, pad_l, pad_r),
            attr, eng, hint};
  }
  dnnl::convolution_backward_weights::primitive_desc backward_weights(
      const desc& x, const desc& w, const desc& b, const desc& y, const dnnl::engine& eng,
      const dnnl::convolution_forward::primitive_desc& hint) const {
    return {dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, x, w, b,
                                                     y, strides, dilation, pad_l, pad_r),
            attr, eng, hint};
  }

  dnnl::memory::dims w_dims, strides, dilation, pad_l, pad_r;
  desc w_user;
  dnnl::primitive_attr attr;
};

}  // namespace tbd
