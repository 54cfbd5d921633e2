// layers/cpu/linear_cpu.cpp: Linear and Gemm on oneDNN matmul primitives.
//
// Every product is one oneDNN matmul created at build (layers/cpu/matmul_onednn.h: transposed
// operands through strides, 2-D f32 products on jit sgemm). Parameter gradients use a sum
// post-op (dst += result), which is the gradient policy's accumulation without an extra pass; bias
// gradients are the column sums of dy, computed as ones(1, M) x dy(M, N) with the same sum post-op
// (a GEMV oneDNN runs at bandwidth). The weights stay row-major (D_out, D_in) as PyTorch stores
// them; matmul reads w^T through strides, so there is no weight reorder either.
//
// Under --tbd_math=bf16 the activations and their gradients are bf16 and every product takes
// bf16 operands with f32 accumulation (oneDNN's brgemm bf16 kernels): Linear casts its f32
// master weights into a bf16 transient at the forward and again at backward-data, and the weight
// and bias gradients come out f32, added (sum post-op) into the f32 gradients.
#include <vector>

#include "backends/cpu/onednn.h"
#include "layers/cpu/matmul_onednn.h"
#include "layers/linear.h"

namespace tbd::cpu {
namespace {

using dnnl::memory;
using dt = memory::data_type;

// The contract checked the dtype; oneDNN's matmul here is given plain row-major operands.
void check_row_major(const char* kind, const std::string& name, const char* arg,
                     const TensorDesc& d) {
  TBD_LAYER_CHECK(d.layout == Layout::kRowMajor, kind, name, "input ", arg,
                  " must be row-major, got ", d.to_string());
}

// ---- Linear: y = x w^T + b ----

class LinearOneDnn final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;  // x, y bf16; f32 master weights and gradients

  LinearOneDnn(Backend& be, const std::string& name, const LinearConfig& cfg,
               const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cpu_(as_cpu(be)) {
    check_row_major(kind(), name, "x", in[0]);
    const int64_t K = in[0].shape[-1], N = cfg.out_features;
    M_ = in[0].shape.numel() / K;
    bf16_ = in[0].dtype == DType::kBF16;
    const dt a = dnnl_dtype(in[0].dtype);  // activations and the weights as the products read them

    memory::desc none;
    memory::desc bias_md = cfg.bias ? mat(1, N, false) : none;
    // y (M, N) = x (M, K) x w^T (K, N)
    fwd_ = make_matmul(cpu_, kind(), name, "forward", mat(M_, K, false, a), mat(K, N, true, a),
                       bias_md, mat(M_, N, false, a), 1.f, false);
    // dx (M, K) = dy (M, N) x w (N, K)
    dgrad_ = make_matmul(cpu_, kind(), name, "backward data", mat(M_, N, false, a),
                         mat(N, K, false, a), none, mat(M_, K, false, a), 1.f, false);
    // dw (N, K) += dy^T (N, M) x x (M, K), f32
    wgrad_ = make_matmul(cpu_, kind(), name, "weight gradient", mat(N, M_, true, a),
                         mat(M_, K, false, a), none, mat(N, K, false), 1.f, true);
    if (cfg.bias) {
      // db (1, N) += ones (1, M) x dy (M, N), f32
      bgrad_ = make_matmul(cpu_, kind(), name, "bias gradient", mat(1, M_, false, a),
                           mat(M_, N, false, a), none, mat(1, N, false), 1.f, true);
      ones_ = ones_vector(be, M_, in[0].dtype);
    }
    if (bf16_) transient(w16_, TensorDesc{Shape{N, K}, DType::kBF16});
    if (const std::size_t b = max_scratch_bytes({&fwd_, &dgrad_, &wgrad_, &bgrad_}))
      transient(scratch_, b);
  }

  std::string implementation() const override {
    if (!bf16_) return {};
    return detail::concat("fwd ", fwd_.pd.impl_info_str(), " bwd ", dgrad_.pd.impl_info_str(), "/",
                          wgrad_.pd.impl_info_str(), " (bf16 weight copy made ",
                          param_copies_made(), ")");
  }

  // y: (..., D_out)  x: (..., D_in)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    run_matmul(cpu_, fwd_, x[0]->raw(), weights(), cfg_.bias ? params_[1].value.raw() : nullptr,
               y[0]->raw(), scratch_, "Linear forward");
  }

  // dx: (..., D_in)  dy: (..., D_out)  x: (..., D_in)
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    backward_in_two(dx, dy, x, y);
  }
  bool split_backward() const override { return true; }

  void dgrad(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0] != nullptr) {
      run_matmul(cpu_, dgrad_, dy[0]->raw(), weights(), nullptr, dx[0]->raw(), scratch_,
                 "Linear backward data");
    }
  }

  void wgrad(TensorRefs dy, TensorRefs x, TensorRefs) override {
    run_matmul(cpu_, wgrad_, dy[0]->raw(), x[0]->raw(), nullptr, params_[0].grad.raw(), scratch_,
               "Linear weight gradient");
    if (cfg_.bias) {
      run_matmul(cpu_, bgrad_, ones_.raw(), dy[0]->raw(), nullptr, params_[1].grad.raw(), scratch_,
                 "Linear bias gradient");
    }
  }

 private:
  // The f32 master, or under bf16 its cast (made once per forward pass in a graph).
  const void* weights() {
    const Tensor& w = params_[0].value;
    if (!bf16_) return w.raw();
    return bf16_param_copy(0, w16_, bf16_cast_of(w));
  }

  LinearConfig cfg_;
  CpuBackend& cpu_;
  int64_t M_ = 0;
  bool bf16_ = false;
  Matmul fwd_, dgrad_, wgrad_, bgrad_;
  Tensor ones_, scratch_;
  Tensor w16_;  // bf16 only: the weights' compute copy (transient)
};

TBD_REGISTER_LAYER(LinearConfig, DeviceKind::kCpu, LinearOneDnn);

// ---- Gemm: y = alpha * op(a) op(b) (+ bias) ----
//
// Batch dims are collapsed into one (B). With A = op(a) (M, K), Bm = op(b) (K, N):
//   dA = alpha dY Bm^T, dBm = alpha A^T dY; a transposed input's gradient is the transpose,
//   computed directly in its storage order (da^T = alpha Bm dY^T) so dst is always plain.
// A shared (rank-2) b sums its gradient over the batch: one 2-D matmul over the flattened
// (B*M) rows when a is not transposed, else one 2-D matmul per batch (assign, then +=).

class GemmOneDnn final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;  // a, b, y bf16; an f32 bias and its gradient

  GemmOneDnn(Backend& be, const std::string& name, const GemmConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cpu_(as_cpu(be)) {
    gemm_output_shape(name, cfg, in[0].shape, in[1].shape, &d_);
    check_row_major(kind(), name, "a", in[0]);
    check_row_major(kind(), name, "b", in[1]);
    const int64_t B = d_.batch, M = d_.m, N = d_.n, K = d_.k, Bb = d_.b_shared ? 1 : B;
    const bool ta = cfg.trans_a, tb = cfg.trans_b;
    const float alpha = static_cast<float>(cfg.alpha);
    const dt a = dnnl_dtype(in[0].dtype);
    elem_ = dtype_size(in[0].dtype);

    memory::desc none;
    // The bias is a binary-add post-op rather than the matmul's bias argument: oneDNN 2.x
    // computes scale * (src x wei + bias), and the bias must not be scaled by alpha.
    memory::desc bias_md = cfg.bias ? mat(1, 1, N, false) : none;  // f32
    fwd_ = make_matmul(cpu_, kind(), name, "forward", mat(B, M, K, ta, a), mat(Bb, K, N, tb, a),
                       none, mat(B, M, N, false, a), alpha, false, bias_md);
    // da
    if (!ta) {  // da (B, M, K) = alpha dY (B, M, N) x Bm^T (Bb, N, K)
      dgrad_a_ = make_matmul(cpu_, kind(), name, "gradient of a", mat(B, M, N, false, a),
                             mat(Bb, N, K, !tb, a), none, mat(B, M, K, false, a), alpha, false);
    } else {  // da (B, K, M) = alpha Bm (Bb, K, N) x dY^T (B, N, M)
      dgrad_a_ = make_matmul(cpu_, kind(), name, "gradient of a", mat(Bb, K, N, tb, a),
                             mat(B, N, M, true, a), none, mat(B, K, M, false, a), alpha, false);
    }
    // db: stored (K, N) when !tb, (N, K) when tb.
    if (!d_.b_shared) {
      if (!tb) {  // db (B, K, N) = alpha A^T (B, K, M) x dY (B, M, N)
        dgrad_b_ = make_matmul(cpu_, kind(), name, "gradient of b", mat(B, K, M, !ta, a),
                               mat(B, M, N, false, a), none, mat(B, K, N, false, a), alpha, false);
      } else {  // db (B, N, K) = alpha dY^T (B, N, M) x A (B, M, K)
        dgrad_b_ = make_matmul(cpu_, kind(), name, "gradient of b", mat(B, N, M, true, a),
                               mat(B, M, K, ta, a), none, mat(B, N, K, false, a), alpha, false);
      }
    } else if (!ta) {  // one 2-D product over the flattened B*M rows
      memory::desc a_t = mat_strided(K, B * M, 1, K, a);   // A^T (K, B*M) of a (B*M, K)
      memory::desc dy_t = mat_strided(N, B * M, 1, N, a);  // dY^T (N, B*M) of dy (B*M, N)
      if (!tb) {
        dgrad_b_ = make_matmul(cpu_, kind(), name, "gradient of b", a_t, mat(B * M, N, false, a),
                               none, mat(K, N, false, a), alpha, false);
      } else {
        dgrad_b_ = make_matmul(cpu_, kind(), name, "gradient of b", dy_t, mat(B * M, K, false, a),
                               none, mat(N, K, false, a), alpha, false);
      }
    } else {  // per batch: a_b stored (K, M)
      for (int acc = 0; acc < 2; ++acc) {
        Matmul& m = acc ? dgrad_b_acc_ : dgrad_b_;
        if (!tb) {  // db (K, N) (+)= alpha A_b^T (K, M) x dY_b (M, N)
          m = make_matmul(cpu_, kind(), name, "gradient of b", mat(K, M, false, a),
                          mat(M, N, false, a), none, mat(K, N, false, a), alpha, acc == 1);
        } else {  // db (N, K) (+)= alpha dY_b^T (N, M) x A_b (M, K)
          m = make_matmul(cpu_, kind(), name, "gradient of b", mat(N, M, true, a),
                          mat(M, K, true, a), none, mat(N, K, false, a), alpha, acc == 1);
        }
      }
      per_batch_db_ = true;
    }
    if (cfg.bias) {
      // dbias (1, N) += ones (1, B*M) x dy (B*M, N)
      bgrad_ = make_matmul(cpu_, kind(), name, "bias gradient", mat(1, B * M, false, a),
                           mat(B * M, N, false, a), none, mat(1, N, false), 1.f, true);
      ones_ = ones_vector(be, B * M, in[0].dtype);
    }
    if (const std::size_t b =
            max_scratch_bytes({&fwd_, &dgrad_a_, &dgrad_b_, &dgrad_b_acc_, &bgrad_}))
      transient(scratch_, b);
  }

  // y: (B..., M, N)  x[0] = a: (B..., M, K) or (B..., K, M)  x[1] = b: (B..., K, N) or
  // (B..., N, K) or rank 2
  void fprop(MutTensorRefs y, TensorRefs x) override {
    run_matmul(cpu_, fwd_, x[0]->raw(), x[1]->raw(), nullptr, y[0]->raw(), scratch_, "Gemm forward",
               cfg_.bias ? params_[0].value.raw() : nullptr);
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    const void* a = x[0]->raw();
    const void* b = x[1]->raw();
    const void* g = dy[0]->raw();
    const bool ta = cfg_.trans_a, tb = cfg_.trans_b;
    if (dx[0] != nullptr) {
      if (!ta) {
        run_matmul(cpu_, dgrad_a_, g, b, nullptr, dx[0]->raw(), scratch_, "Gemm gradient of a");
      } else {
        run_matmul(cpu_, dgrad_a_, b, g, nullptr, dx[0]->raw(), scratch_, "Gemm gradient of a");
      }
    }
    if (dx[1] != nullptr) {
      void* db = dx[1]->raw();
      if (!per_batch_db_) {
        if (!tb) {
          run_matmul(cpu_, dgrad_b_, a, g, nullptr, db, scratch_, "Gemm gradient of b");
        } else {
          run_matmul(cpu_, dgrad_b_, g, a, nullptr, db, scratch_, "Gemm gradient of b");
        }
      } else {
        const int64_t a_stride = d_.m * d_.k, y_stride = d_.m * d_.n;
        for (int64_t i = 0; i < d_.batch; ++i) {
          const char* ai = static_cast<const char*>(a) + i * a_stride * elem_;
          const char* gi = static_cast<const char*>(g) + i * y_stride * elem_;
          const Matmul& m = i == 0 ? dgrad_b_ : dgrad_b_acc_;
          if (!tb) {
            run_matmul(cpu_, m, ai, gi, nullptr, db, scratch_, "Gemm gradient of b");
          } else {
            run_matmul(cpu_, m, gi, ai, nullptr, db, scratch_, "Gemm gradient of b");
          }
        }
      }
    }
    if (cfg_.bias && param_grads()) {
      run_matmul(cpu_, bgrad_, ones_.raw(), g, nullptr, params_[0].grad.raw(), scratch_,
                 "Gemm bias gradient");
    }
  }

 private:
  GemmConfig cfg_;
  CpuBackend& cpu_;
  GemmDims d_;
  bool per_batch_db_ = false;
  std::size_t elem_ = 4;  // bytes per element of a, b and y
  Matmul fwd_, dgrad_a_, dgrad_b_, dgrad_b_acc_, bgrad_;
  Tensor ones_, scratch_;
};

TBD_REGISTER_LAYER(GemmConfig, DeviceKind::kCpu, GemmOneDnn);

}  // namespace
}  // namespace tbd::cpu
