// layers/cpu/batchnorm_cpu.h: batch normalization on oneDNN batch_normalization, shared by
// BatchNorm2d (layers/cpu/batchnorm2d_cpu.cpp) and SequenceBatchNorm
// (layers/cpu/sequence_batchnorm_cpu.cpp), which differ only in the (N, C, H, W) their x is
// normalised as (BatchNormSpec). oneDNN gets x's own descriptor when x is that (N, C, H, W)
// (BatchNorm2d, plain, nChw16c or nhwc), else the 2-D `nc` (N, C) (SequenceBatchNorm's rows, H = W
// = 1), both with statistics per C.
//
// x and y share x's layout (plain, nChw16c or nhwc; nothing is reordered). Training:
// forward_training computes the batch mean and biased variance into saved state (feature maps, C
// floats each); our own loop then updates the running statistics with the unbiased variance
// (PyTorch). Eval: forward_inference with use_global_stats on the running statistics. Backward uses
// the saved batch statistics (or, in eval mode, the running ones as constants). oneDNN assigns
// diff_scale/diff_shift, so they go to workspace scratch and are added onto the gradients (+=).
// A fused ReLU (spec.relu) is oneDNN's fuse_norm_relu: training forward writes its mask into a
// workspace kept for backward (feature_maps), which masks dy with it. The paths oneDNN has no
// call for (no input gradient; eval-mode backward with the ReLU, which has no mask) run our own
// per-channel loop, masking dy where y is 0. Channels-last x trains on our own passes instead
// (layers/cpu/batchnorm_nhwc.cpp: faster than oneDNN 2.6's nhwc kernel), which mask dy by y and
// keep no workspace; eval mode stays on oneDNN.
#pragma once

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/onednn.h"
#include "core/bf16.h"
#include "layers/batchnorm2d.h"
#include "layers/cpu/batchnorm_nhwc.h"

namespace tbd::cpu {

class BatchNormOneDnn : public BatchNormLayer {
 public:
  using nf = dnnl::normalization_flags;

  // `kind_contract` and `spec` are the kind's, for these inputs.
  BatchNormOneDnn(Backend& be, const std::string& name, const std::vector<TensorDesc>& in,
                  const Contract& kind_contract, const BatchNormSpec& spec)
      : BatchNormLayer(be, name, in, kind_contract),
        spec_(spec),
        N_(spec.nchw[0]),
        C_(spec.nchw[1]),
        HW_(spec.nchw[2] * spec.nchw[3]),
        layout_(in[0].layout),
        x_md_(in[0].shape == spec.nchw
                  ? md_of(in[0])
                  : dnnl::memory::desc({N_, C_}, dnnl_dtype(in[0].dtype),  // rows: HW 1
                                       dnnl::memory::format_tag::nc)),
        cpu_(as_cpu(be)),
        who_fwd_(std::string(spec.kind) + " forward"),
        who_fwd_eval_(std::string(spec.kind) + " forward (eval)"),
        who_bwd_(std::string(spec.kind) + " backward") {
    const int64_t C = C_;
    saved(mean_, TensorDesc{Shape{C}});
    saved(var_, TensorDesc{Shape{C}});
    transient(dscale_, TensorDesc{Shape{C}});  // backward only: computed, then added
    transient(dshift_, TensorDesc{Shape{C}});

    const dnnl::memory::desc& x_md = x_md_;
    const float feps = static_cast<float>(spec.eps);
    const nf plain = nf::use_scale | nf::use_shift;
    const nf flags = spec.relu ? plain | nf::fuse_norm_relu : plain;
    const nf global = plain | nf::use_global_stats;  // eval backward with the ReLU: own loop
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto& eng = cpu_.engine();
    using fwd = dnnl::batch_normalization_forward;
    using bwd = dnnl::batch_normalization_backward;
    // Channels-last (N, C, H, W): training runs our own passes (batchnorm_nhwc.h), which keep
    // no ReLU mask (the backward reads y); oneDNN's training primitives are not made.
    own_nhwc_ = layout_ == Layout::kNhwc && in[0].shape == spec.nchw;
    try {
      if (!own_nhwc_) {
        fwd_train_pd_ = fwd::primitive_desc(
            fwd::desc(dnnl::prop_kind::forward_training, x_md, feps, flags), attr, eng);
        bwd_train_pd_ =
            bwd::primitive_desc(bwd::desc(dnnl::prop_kind::backward, x_md, x_md, feps, flags), attr,
                                eng, fwd_train_pd_);
      }
      fwd_eval_pd_ =
          fwd::primitive_desc(fwd::desc(dnnl::prop_kind::forward_inference, x_md, feps,
                                        spec.relu ? global | nf::fuse_norm_relu : global),
                              attr, eng);
      // The hint must have the same flags, so it is a training-kind twin of the eval forward.
      fwd::primitive_desc global_hint(
          fwd::desc(dnnl::prop_kind::forward_training, x_md, feps, global), attr, eng);
      bwd_eval_pd_ = bwd::primitive_desc(
          bwd::desc(dnnl::prop_kind::backward, x_md, x_md, feps, global), attr, eng, global_hint);
    } catch (const dnnl::error& e) {
      throw_layer_error(spec.kind, name,
                        std::string("oneDNN has no batch normalization for x ") +
                            in[0].to_string() + ": " + e.what());
    }
    if (spec.frozen) freeze();
    std::size_t scratch = std::max(fwd_eval_pd_.scratchpad_desc().get_size(),
                                   bwd_eval_pd_.scratchpad_desc().get_size());
    if (own_nhwc_) {
      threads_ = cpu_.num_threads();
      transient(nhwc_work_, bn_nhwc_work_bytes(C, threads_));
    } else {
      if (spec.relu) {
        const std::size_t ws = fwd_train_pd_.workspace_desc().get_size();
        saved(ws_, TensorDesc{Shape{static_cast<int64_t>((ws + 3) / 4)}});
      }
      fwd_train_ = fwd(fwd_train_pd_);
      bwd_train_ = bwd(bwd_train_pd_);
      scratch = std::max({scratch, fwd_train_pd_.scratchpad_desc().get_size(),
                          bwd_train_pd_.scratchpad_desc().get_size()});
    }
    fwd_eval_ = fwd(fwd_eval_pd_);
    bwd_eval_ = bwd(bwd_eval_pd_);
    if (scratch) {
      transient(scratch_, scratch);
    }
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, x_mem(*x[0])},
                                               {DNNL_ARG_DST, x_mem(*y[0])},
                                               {DNNL_ARG_SCALE, mem_of(cpu_, params_[0].value)},
                                               {DNNL_ARG_SHIFT, mem_of(cpu_, params_[1].value)}};
    if (!training_) {
      args[DNNL_ARG_MEAN] = mem_of(cpu_, running_mean_);
      args[DNNL_ARG_VARIANCE] = mem_of(cpu_, running_var_);
      add_scratch(args, fwd_eval_pd_.scratchpad_desc());
      execute(cpu_, fwd_eval_, args, who_fwd_eval_.c_str());
      return;
    }
    if (own_nhwc_) {
      const float* g = params_[0].value.f32();
      const float* b = params_[1].value.f32();
      const int64_t M = N_ * HW_;
      if (x[0]->dtype() == DType::kBF16) {
        bn_nhwc_forward(x[0]->data<const uint16_t>(), y[0]->data<uint16_t>(), M, C_, g, b,
                        spec_.eps, spec_.relu, mean_.f32(), var_.f32(), threads_, nhwc_work_.raw());
      } else {
        bn_nhwc_forward(x[0]->f32(), y[0]->f32(), M, C_, g, b, spec_.eps, spec_.relu, mean_.f32(),
                        var_.f32(), threads_, nhwc_work_.raw());
      }
      update_running_stats();
      return;
    }
    args[DNNL_ARG_MEAN] = mem_of(cpu_, mean_);
    args[DNNL_ARG_VARIANCE] = mem_of(cpu_, var_);
    if (spec_.relu) args[DNNL_ARG_WORKSPACE] = ws_mem();
    add_scratch(args, fwd_train_pd_.scratchpad_desc());
    execute(cpu_, fwd_train_, args, who_fwd_.c_str());
    update_running_stats();
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    const Tensor& mean = training_ ? mean_ : running_mean_;
    const Tensor& var = training_ ? var_ : running_var_;
    const Tensor* relu_y = spec_.relu ? y[0] : nullptr;
    if (own_nhwc_ && training_) {
      nhwc_backward(*dy[0], *x[0], relu_y, dx[0]);
      return;
    }
    if (dx[0] == nullptr) {
      // No input gradient wanted (x is data): oneDNN would need a full-size diff_src buffer,
      // so the two per-channel reductions are done here instead.
      if (param_grads()) own_backward(*dy[0], *x[0], relu_y, mean, var, nullptr);
      return;
    }
    if (!training_ && !param_grads()) {  // frozen: dx = dy * gamma * rstd, in memory order
      eval_dx(*dy[0], relu_y, var, *dx[0]);
      return;
    }
    if (!training_ && spec_.relu) {  // constant statistics: dx is dy * gamma * rstd
      own_backward(*dy[0], *x[0], relu_y, mean, var, dx[0]);
      return;
    }
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, x_mem(*x[0])},
                                               {DNNL_ARG_DIFF_DST, x_mem(*dy[0])},
                                               {DNNL_ARG_MEAN, mem_of(cpu_, mean)},
                                               {DNNL_ARG_VARIANCE, mem_of(cpu_, var)},
                                               {DNNL_ARG_SCALE, mem_of(cpu_, params_[0].value)},
                                               // Unread, but oneDNN 2.6 lists it as an input.
                                               {DNNL_ARG_SHIFT, mem_of(cpu_, params_[1].value)},
                                               {DNNL_ARG_DIFF_SRC, x_mem(*dx[0])},
                                               {DNNL_ARG_DIFF_SCALE, mem_of(cpu_, dscale_)},
                                               {DNNL_ARG_DIFF_SHIFT, mem_of(cpu_, dshift_)}};
    if (training_ && spec_.relu) args[DNNL_ARG_WORKSPACE] = ws_mem();
    const auto& pd = training_ ? bwd_train_pd_ : bwd_eval_pd_;
    add_scratch(args, pd.scratchpad_desc());
    execute(cpu_, training_ ? bwd_train_ : bwd_eval_, args, who_bwd_.c_str());
    if (!param_grads()) return;  // oneDNN computed them into scratch; they are not added
    be_.accumulate(params_[0].grad, dscale_);
    be_.accumulate(params_[1].grad, dshift_);
  }

 private:
  // The channels-last training backward (own_nhwc_): dx where given, the parameter gradients
  // where they are on.
  void nhwc_backward(const Tensor& dy, const Tensor& x, const Tensor* relu_y, Tensor* dx) {
    const int64_t M = N_ * HW_;
    float* dg = param_grads() ? params_[0].grad.f32() : nullptr;
    float* db = param_grads() ? params_[1].grad.f32() : nullptr;
    if (dx == nullptr && dg == nullptr) return;
    const float* gamma = params_[0].value.f32();
    if (dy.dtype() == DType::kBF16) {
      bn_nhwc_backward(dy.data<const uint16_t>(), x.data<const uint16_t>(),
                       relu_y ? relu_y->data<const uint16_t>() : nullptr,
                       dx ? dx->data<uint16_t>() : nullptr, M, C_, gamma, mean_.f32(), var_.f32(),
                       spec_.eps, dg, db, threads_, nhwc_work_.raw());
    } else {
      bn_nhwc_backward(dy.f32(), x.f32(), relu_y ? relu_y->f32() : nullptr,
                       dx ? dx->f32() : nullptr, M, C_, gamma, mean_.f32(), var_.f32(), spec_.eps,
                       dg, db, threads_, nhwc_work_.raw());
    }
  }

  // An x-shaped tensor (x, y, dy, dx) as oneDNN sees x.
  dnnl::memory x_mem(const Tensor& t) { return mem_of(cpu_, x_md_, t.raw()); }
  dnnl::memory ws_mem() {
    return dnnl::memory(fwd_train_pd_.workspace_desc(), cpu_.engine(), ws_.raw());
  }
  void add_scratch(std::unordered_map<int, dnnl::memory>& args, const dnnl::memory::desc& md) {
    if (md.get_size()) args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(md, cpu_.engine(), scratch_.raw());
  }

  // running = (1 - m) * running + m * batch, with the unbiased batch variance. With a single
  // value per channel (N*HW == 1) the unbiased variance is undefined; the biased one (0) is
  // used rather than a division by zero.
  void update_running_stats() {
    const int64_t C = C_, M = N_ * HW_;
    const double m = spec_.momentum;
    const double unbias = M > 1 ? static_cast<double>(M) / static_cast<double>(M - 1) : 1.0;
    float* rm = running_mean_.f32();
    float* rv = running_var_.f32();
    const float* bm = mean_.f32();
    const float* bv = var_.f32();
    for (int64_t c = 0; c < C; ++c) {
      rm[c] = static_cast<float>((1 - m) * rm[c] + m * bm[c]);
      rv[c] = static_cast<float>((1 - m) * rv[c] + m * unbias * bv[c]);
    }
  }

  // Eval mode without parameter gradients (a frozen layer): dx = g * gamma / sqrt(var + eps),
  // g = dy (0 where relu_y, when given, is 0). One streaming pass in memory order (plain,
  // nChw16c or nhwc), unlike own_backward's per-channel walk; f32 or bf16 tensors (f32 arithmetic).
  void eval_dx(const Tensor& dy, const Tensor* relu_y, const Tensor& var, Tensor& dx) {
    const float* vp = var.f32();
    const float* gamma = params_[0].value.f32();
    float* scale = dscale_.f32();  // workspace: gamma * rstd per channel
    for (int64_t c = 0; c < C_; ++c) {
      scale[c] = static_cast<float>(gamma[c] / std::sqrt(static_cast<double>(vp[c]) + spec_.eps));
    }
    if (dy.dtype() == DType::kBF16) {
      eval_dx_pass(dy.data<const uint16_t>(), relu_y ? relu_y->data<const uint16_t>() : nullptr,
                   dx.data<uint16_t>(), scale);
    } else {
      eval_dx_pass(dy.f32(), relu_y ? relu_y->f32() : nullptr, dx.f32(), scale);
    }
  }

  template <class T>
  void eval_dx_pass(const T* dyp, const T* yp, T* dxp, const float* scale) const {
    auto load = [](T v) {
      if constexpr (std::is_same_v<T, float>) {
        return v;
      } else {
        return f32_from_bf16(v);
      }
    };
    auto store = [](float v) {
      if constexpr (std::is_same_v<T, float>) {
        return v;
      } else {
        return bf16_from_f32(v);
      }
    };
    const int64_t C = C_, HW = HW_, NC = N_ * C_;
    const bool blocked = layout_ == Layout::kNChw16c, nhwc = layout_ == Layout::kNhwc;
    // Rows of HW (plain: one channel each), of 16 * HW (nChw16c: 16 channels interleaved) or
    // of C (nhwc: one position's channels).
    const int64_t rows = blocked ? NC / 16 : nhwc ? N_ * HW : NC;
    const int64_t len = blocked ? 16 * HW : nhwc ? C : HW;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t off = r * len;
      if (nhwc) {
        for (int64_t c = 0; c < C; ++c) {
          const float g = yp && load(yp[off + c]) <= 0 ? 0.f : load(dyp[off + c]);
          dxp[off + c] = store(g * scale[c]);
        }
      } else if (blocked) {
        const float* s = scale + (r % (C / 16)) * 16;
        for (int64_t j = 0; j < HW; ++j) {
          const int64_t o = off + 16 * j;
          for (int64_t k = 0; k < 16; ++k) {
            const float g = yp && load(yp[o + k]) <= 0 ? 0.f : load(dyp[o + k]);
            dxp[o + k] = store(g * s[k]);
          }
        }
      } else {
        const float s = scale[r % C];
        for (int64_t i = 0; i < len; ++i) {
          const float g = yp && load(yp[off + i]) <= 0 ? 0.f : load(dyp[off + i]);
          dxp[off + i] = store(g * s);
        }
      }
    }
  }

  // own_backward is f32 only: under bf16 its paths (no input gradient, the eval-mode backward
  // with the fused ReLU) are an error naming them rather than a misread buffer.
  void check_f32_path(const Tensor& dy, const char* path) const {
    TBD_CHECK(dy.dtype() == DType::kF32, spec_.kind, " '", name(), "': ", path,
              " has no bf16 path (bf16 batch normalization runs in training mode with an input ",
              "gradient)");
  }

  // With g = dy (0 where relu_y, when given, is 0): dgamma += sum g * (x - mean) / sqrt(var +
  // eps), dbeta += sum g, per channel, when the parameter gradients are on; with dx (eval mode:
  // constant statistics) also dx = g * gamma / sqrt(var + eps). Plain, nChw16c and nhwc offsets.
  void own_backward(const Tensor& dy, const Tensor& x, const Tensor* relu_y, const Tensor& mean,
                    const Tensor& var, Tensor* dx) {
    check_f32_path(dy, dx ? "the eval-mode backward with the fused ReLU"
                          : "the backward without an input gradient");
    const int64_t N = N_, C = C_, HW = HW_;
    const Layout layout = layout_;
    const float* xp = x.f32();
    const float* dyp = dy.f32();
    const float* yp = relu_y ? relu_y->f32() : nullptr;
    const float* mp = mean.f32();
    const float* vp = var.f32();
    const float* gamma = params_[0].value.f32();
    float* dxp = dx ? dx->f32() : nullptr;
    float* dg = param_grads() ? params_[0].grad.f32() : nullptr;
    float* db = param_grads() ? params_[1].grad.f32() : nullptr;
    const double eps = spec_.eps;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < C; ++c) {
      double sg = 0, sb = 0;
      const double mu = mp[c], rstd = 1.0 / std::sqrt(static_cast<double>(vp[c]) + eps);
      const float scale = static_cast<float>(gamma[c] * rstd);
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t i = 0; i < HW; ++i) {
          const int64_t off = layout == Layout::kNChw16c
                                  ? ((n * (C / 16) + c / 16) * HW + i) * 16 + c % 16
                              : layout == Layout::kNhwc ? (n * HW + i) * C + c
                                                        : (n * C + c) * HW + i;
          const float g = yp && yp[off] <= 0 ? 0.f : dyp[off];
          sg += g * (xp[off] - mu) * rstd;
          sb += g;
          if (dxp) dxp[off] = g * scale;
        }
      }
      if (dg) {
        dg[c] += static_cast<float>(sg);
        db[c] += static_cast<float>(sb);
      }
    }
  }

  BatchNormSpec spec_;
  Tensor ws_;           // the fused ReLU's mask (oneDNN's workspace), forward to backward
  int64_t N_, C_, HW_;  // x as (N, C, HW) per channel c
  Layout layout_;       // x's: plain, nChw16c or nhwc
  dnnl::memory::desc x_md_;
  CpuBackend& cpu_;
  std::string who_fwd_, who_fwd_eval_, who_bwd_;  // what execute() names on a oneDNN failure
  dnnl::batch_normalization_forward::primitive_desc fwd_train_pd_, fwd_eval_pd_;
  dnnl::batch_normalization_backward::primitive_desc bwd_train_pd_, bwd_eval_pd_;
  dnnl::primitive fwd_train_, fwd_eval_, bwd_train_, bwd_eval_;
  Tensor mean_, var_, dscale_, dshift_, scratch_;
  bool own_nhwc_ = false;  // nhwc x: training on our own passes (batchnorm_nhwc.h)
  int threads_ = 1;
  Tensor nhwc_work_;  // their per-thread sums
};

}  // namespace tbd::cpu
