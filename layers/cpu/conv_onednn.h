// layers/cpu/conv_onednn.h: a Conv2d problem as oneDNN describes it, shared by the convolution
// (conv2d_cpu.cpp) and its data-gradient kind (input_grad_cpu.cpp), which build the same three
// primitives for it.
#pragma once

#include <dnnl.hpp>

#include "backends/cpu/onednn.h"
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

  // Weights in a format oneDNN chooses, of dtype `t` (bf16 for a bf16 forward's and
  // backward-data's weights; the weight gradient stays f32).
  desc w_any(dnnl::memory::data_type t = dnnl::memory::data_type::f32) const {
    return desc(w_dims, t, dnnl::memory::format_tag::any);
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

namespace cpu {

// How a parameter or gradient bound as `d` is stored, as oneDNN describes it: `plain` (the
// convolution's oihw or goihw) where it is row-major, else its packing's descriptor.
inline dnnl::memory::desc stored_md(const TensorDesc& d, const dnnl::memory::desc& plain) {
  return d.layout == Layout::kRowMajor ? plain : md_of(d);
}

// A primitive's weights (`want`), read from a parameter in whatever layout it is bound in: the
// parameter itself where the two agree, else reordered into `copy` (a transient the layer
// declared with copy_bytes()); a bf16 `want` is the f32 master weights cast (to nearest even) in
// that reorder, at each call. A tied parameter is bound in its owner's layout (the data-gradient
// kinds read the convolution's weights), so the reorder is made at the first call that needs it.
// A row-major parameter is read as `plain` (OneDnnConv::w_user: oihw, or goihw for a grouped
// convolution, whose parameter is 4-D).
class WeightsAs {
 public:
  WeightsAs() = default;
  WeightsAs(const dnnl::memory::desc& want, const dnnl::memory::desc& plain)
      : want_(want), plain_(plain) {}
  std::size_t copy_bytes() const { return want_.get_size(); }
  bool reads_directly(const TensorDesc& param) const { return stored_md(param, plain_) == want_; }

  dnnl::memory read(CpuBackend& be, const Tensor& param, const Tensor& copy, const char* who) {
    const dnnl::memory::desc have = stored_md(param.desc(), plain_);
    if (have == want_) return dnnl::memory(want_, be.engine(), param.raw());
    TBD_CHECK(copy.defined(), who, ": the weights are stored as ", param.desc().to_string(),
              ", which the layer did not plan a copy for");
    if (!reorder_ || have != from_) {
      from_ = have;
      reorder_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(be.engine(), have, be.engine(), want_));
    }
    const dnnl::memory to(want_, be.engine(), copy.raw());
    execute(be, reorder_,
            {{DNNL_ARG_FROM, dnnl::memory(have, be.engine(), param.raw())}, {DNNL_ARG_TO, to}},
            who);
    return to;
  }

 private:
  dnnl::memory::desc want_, plain_, from_;
  dnnl::primitive reorder_;
};

// A weight gradient computed in a primitive's format (`from`) added into a parameter's gradient
// in whatever layout it is bound in: one reorder with a sum post-op (the += of the gradient
// policy), made at the first call.
// A row-major gradient is `plain`, as in WeightsAs.
class GradInto {
 public:
  GradInto() = default;
  GradInto(const dnnl::memory::desc& from, const dnnl::memory::desc& plain)
      : from_(from), plain_(plain) {}

  void add(CpuBackend& be, void* dw, const Tensor& grad, const char* who) {
    const dnnl::memory::desc to = stored_md(grad.desc(), plain_);
    if (!reorder_ || to != to_) {
      to_ = to;
      dnnl::primitive_attr sum;
      dnnl::post_ops po;
      po.append_sum(1.0f);
      sum.set_post_ops(po);
      reorder_ =
          dnnl::reorder(dnnl::reorder::primitive_desc(be.engine(), from_, be.engine(), to, sum));
    }
    execute(be, reorder_,
            {{DNNL_ARG_FROM, dnnl::memory(from_, be.engine(), dw)},
             {DNNL_ARG_TO, dnnl::memory(to, be.engine(), grad.raw())}},
            who);
  }

 private:
  dnnl::memory::desc from_, plain_, to_;
  dnnl::primitive reorder_;
};

}  // namespace cpu
}  // namespace tbd
