// layers/cuda/linear_cuda.cu: Linear and Gemm on cuBLAS/cuBLASLt.
//
// All matrices are row-major; cuBLAS is column-major, so a row-major C = op(A) op(B) is
// computed as the column-major C^T = op(B)^T op(A)^T (gemm_rm below), with the compute type of
// the math mode the layer was built in (strict FP32: CUBLAS_COMPUTE_32F_PEDANTIC; TF32:
// CUBLAS_COMPUTE_32F_FAST_TF32). Linear's forward uses cuBLASLt's bias epilogue (one kernel for
// x W^T + b) when cuBLASLt offers an algorithm for the problem in that compute type, else a
// GEMM plus a bias kernel. Weight gradients accumulate with beta = 1; bias gradients are
// column sums done as a GEMV against a vector of ones (beta = 1).
// Shape checks and FLOP counts are the shared ones (layers/linear.cpp).
#include <cmath>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_bf16.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/linear.h"

namespace tbd::cuda {
namespace {

int as_int(int64_t v, const char* kind, const std::string& name, const char* what) {
  TBD_LAYER_CHECK(v <= INT32_MAX, kind, name, what, " = ", v, " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

// The element types of a product: A and B (f32, or bf16 under bf16), C (f32 or bf16).
struct GemmTypes {
  cudaDataType_t ab = CUDA_R_32F;
  cudaDataType_t c = CUDA_R_32F;
};
constexpr GemmTypes kF32{};

// Row-major C (M, N) = alpha * op(A) op(B) + beta * C for `batch` problems at element strides
// sA, sB, sC. op(A) is (M, K): A is stored (M, K), or (K, M) when ta. op(B) is (K, N): B is
// stored (K, N), or (N, K) when tb.
void gemm_rm(CudaBackend& cu, cublasComputeType_t ct, GemmTypes t, bool ta, bool tb, int M, int N,
             int K, float alpha, const void* A, int64_t sA, const void* B, int64_t sB, float beta,
             void* C, int64_t sC, int batch) {
  const int lda = ta ? M : K;
  const int ldb = tb ? K : N;
  const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1) {
    TBD_CUBLAS_CHECK(cublasGemmEx(cu.cublas(), opb, opa, N, M, K, &alpha, B, t.ab, ldb, A, t.ab,
                                  lda, &beta, C, t.c, N, ct, CUBLAS_GEMM_DEFAULT));
    return;
  }
  TBD_CUBLAS_CHECK(cublasGemmStridedBatchedEx(cu.cublas(), opb, opa, N, M, K, &alpha, B, t.ab, ldb,
                                              sB, A, t.ab, lda, sA, &beta, C, t.c, N, sC, batch, ct,
                                              CUBLAS_GEMM_DEFAULT));
}
void gemm_rm(CudaBackend& cu, cublasComputeType_t ct, bool ta, bool tb, int M, int N, int K,
             float alpha, const float* A, int64_t sA, const float* B, int64_t sB, float beta,
             float* C, int64_t sC, int batch) {
  gemm_rm(cu, ct, kF32, ta, tb, M, N, K, alpha, A, sA, B, sB, beta, C, sC, batch);
}

// out (n) += column sums of the row-major a (rows, n), as a^T-times-ones on cuBLAS.
void col_sum_accumulate(CudaBackend& cu, const float* a, int rows, int n, const float* ones,
                        float* out) {
  TBD_CUBLAS_CHECK(
      cublasSgemv(cu.cublas(), CUBLAS_OP_N, n, rows, &kOne, a, n, ones, 1, &kOne, out, 1));
}

// y (rows, n) += bias (n) per row.
__global__ void add_bias_rows_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                     int64_t total, int64_t n) {
  TBD_GRID_STRIDE(i, total) { y[i] += bias[i % n]; }
}

void add_bias_rows(CudaBackend& cu, float* y, const float* bias, int64_t rows, int64_t n) {
  add_bias_rows_kernel<<<grid_for(rows * n), kBlock, 0, cu.stream()>>>(y, bias, rows * n, n);
  TBD_CUDA_CHECK_LAST();
}

Tensor ones_vector(Backend& be, int64_t n) {
  Tensor t = be.empty(Shape{n}, MemCategory::kDynamic);
  be.fill(t, 1.f);
  return t;
}

// n ones in bf16 (the bias gradient of a bf16 product: ones^T dy, accumulated in f32).
Tensor ones_vector_bf16(CudaBackend& cu, int64_t n) {
  Tensor f = ones_vector(cu, n);
  Tensor t = cu.empty(Shape{n}, MemCategory::kDynamic, Layout::kRowMajor, DType::kBF16);
  cast_to_bf16(cu, t.raw(), f.f32(), n);
  cu.synchronize();  // f goes away on return
  return t;
}

constexpr GemmTypes kBf16Out{CUDA_R_16BF, CUDA_R_16BF};   // bf16 operands and result
constexpr GemmTypes kBf16ToF32{CUDA_R_16BF, CUDA_R_32F};  // bf16 operands, f32 result

// db (n, f32) += ones (rows, bf16)^T dy (rows, n; bf16): one GEMM with f32 output, beta = 1.
void col_sum_accumulate_bf16(CudaBackend& cu, const void* dy, int rows, int n, const void* ones,
                             float* db) {
  gemm_rm(cu, CUBLAS_COMPUTE_32F, kBf16ToF32, false, false, 1, n, rows, 1.f, ones, 0, dy, 0, 1.f,
          db, 0, 1);
}

// ---- Linear ----

// Under bf16 (autocast's linear): x, y, dx bf16; the weights' bf16 copy (made once per forward
// pass in a graph: Layer::param_copy) and the bias rounded into y, which the GEMM then adds to
// with beta = 1 (one rounding of the f32 sum); dW and db f32, accumulated by GEMMs with f32
// output (beta = 1).
class LinearCublas final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  LinearCublas(Backend& be, const std::string& name, const LinearConfig& cfg,
               const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x", in[0]);
    const Shape& xs = in[0].shape;
    din_ = as_int(xs[-1], kind(), name, "D_in");
    dout_ = as_int(cfg.out_features, kind(), name, "D_out");
    m_ = as_int(xs.numel() / din_, kind(), name, "M");
    bf16_ = in[0].dtype == DType::kBF16;
    math_ = cu_.math_mode();
    compute_ = cublas_compute_type(math_);
    if (bf16_) {
      if (cfg.bias) ones_ = ones_vector_bf16(cu_, m_);
      transient(w16_, TensorDesc{Shape{dout_, din_}, DType::kBF16});
      return;
    }
    if (cfg.bias) ones_ = ones_vector(be, m_);
    if (cfg.bias) lt_ready_ = setup_lt();
  }

  std::string implementation() const override {
    if (bf16_) {
      return detail::concat("cublas bf16 (f32 accumulate)", cfg_.bias ? ", bias rows + gemm" : "",
                            ", bf16 weight copy made ", param_copies_made());
    }
    return detail::concat("cublas ", to_string(math_),
                          !cfg_.bias  ? ""
                          : lt_ready_ ? ", cublasLt bias epilogue"
                                      : ", gemm + bias kernel");
  }

  // y: (..., D_out)  x: (..., D_in)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    if (bf16_) {
      float beta = 0.f;
      if (cfg_.bias) {
        bias_rows_bf16(cu_, y[0]->raw(), params_[1].value.f32(), m_, dout_);
        beta = 1.f;
      }
      gemm_rm(cu_, compute_, kBf16Out, false, true, m_, dout_, din_, 1.f, x[0]->raw(), 0,
              weights16(), 0, beta, y[0]->raw(), 0, 1);
      return;
    }
    const float* w = params_[0].value.f32();
    if (lt_ready_) {
      const void* bias = params_[1].value.raw();
      TBD_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt_desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &bias, sizeof(bias)));
      TBD_CUBLAS_CHECK(cublasLtMatmul(cu_.cublaslt(), lt_desc_, &kOne, w, lt_a_, x[0]->raw(), lt_b_,
                                      &kZero, y[0]->raw(), lt_c_, y[0]->raw(), lt_c_, &lt_algo_,
                                      cu_.cublas_workspace(), cu_.cublas_workspace_bytes(),
                                      cu_.stream()));
      return;
    }
    gemm_rm(cu_, compute_, false, true, m_, dout_, din_, 1.f, x[0]->f32(), 0, w, 0, 0.f,
            y[0]->f32(), 0, 1);
    if (cfg_.bias) add_bias_rows(cu_, y[0]->f32(), params_[1].value.f32(), m_, dout_);
  }

  // dx: (..., D_in) or null  dy: (..., D_out)
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    backward_in_two(dx, dy, x, y);
  }
  bool split_backward() const override { return true; }

  void dgrad(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0] == nullptr) return;
    if (bf16_) {  // dx = dy W (bf16)
      gemm_rm(cu_, compute_, kBf16Out, false, false, m_, din_, dout_, 1.f, dy[0]->raw(), 0,
              weights16(), 0, 0.f, dx[0]->raw(), 0, 1);
      return;
    }
    gemm_rm(cu_, compute_, false, false, m_, din_, dout_, 1.f, dy[0]->f32(), 0,  // dx = dy W
            params_[0].value.f32(), 0, 0.f, dx[0]->f32(), 0, 1);
  }

  // dW += dy^T x
  void wgrad(TensorRefs dy, TensorRefs x, TensorRefs) override {
    if (bf16_) {
      gemm_rm(cu_, compute_, kBf16ToF32, true, false, dout_, din_, m_, 1.f, dy[0]->raw(), 0,
              x[0]->raw(), 0, 1.f, params_[0].grad.raw(), 0, 1);
      if (cfg_.bias) {
        col_sum_accumulate_bf16(cu_, dy[0]->raw(), m_, dout_, ones_.raw(), params_[1].grad.f32());
      }
      return;
    }
    gemm_rm(cu_, compute_, true, false, dout_, din_, m_, 1.f, dy[0]->f32(), 0, x[0]->f32(), 0, 1.f,
            params_[0].grad.f32(), 0, 1);
    if (cfg_.bias) {
      col_sum_accumulate(cu_, dy[0]->f32(), m_, dout_, ones_.f32(), params_[1].grad.f32());
    }
  }

 private:
  // The weights' bf16 copy (Layer::param_copy).
  const void* weights16() {
    const Tensor& w = params_[0].value;
    return bf16_param_copy(0, w16_, [&](void* dst) { cast_to_bf16(cu_, dst, w.f32(), w.numel()); });
  }

  // cuBLASLt: column-major D (D_out, M) = op(W) x^T + bias, W seen as (D_in, D_out) with
  // TRANSA = T. False when cuBLASLt has no algorithm (then the GEMM + kernel path runs).
  bool setup_lt() {
    cublasLtMatmulDesc_t d = nullptr;
    if (cublasLtMatmulDescCreate(&d, compute_, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return false;
    lt_desc_ = LtMatmulDesc(d);
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const void* bias = params_[1].value.raw();
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    bool ok =
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)) ==
            CUBLAS_STATUS_SUCCESS &&
        cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, din_, dout_, din_) == CUBLAS_STATUS_SUCCESS;
    lt_a_ = LtLayout(a);
    ok = ok && cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, din_, m_, din_) == CUBLAS_STATUS_SUCCESS;
    lt_b_ = LtLayout(b);
    ok =
        ok && cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, dout_, m_, dout_) == CUBLAS_STATUS_SUCCESS;
    lt_c_ = LtLayout(c);
    if (!ok) return false;
    cublasLtMatmulPreference_t p = nullptr;
    if (cublasLtMatmulPreferenceCreate(&p) != CUBLAS_STATUS_SUCCESS) return false;
    LtPreference pref(p);
    const uint64_t ws = cu_.cublas_workspace_bytes();
    if (cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                             sizeof(ws)) != CUBLAS_STATUS_SUCCESS) {
      return false;
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (cublasLtMatmulAlgoGetHeuristic(cu_.cublaslt(), d, a, b, c, c, p, 1, &result, &found) !=
            CUBLAS_STATUS_SUCCESS ||
        found == 0) {
      return false;
    }
    lt_algo_ = result.algo;
    return true;
  }

  LinearConfig cfg_;
  CudaBackend& cu_;
  int din_ = 0, dout_ = 0, m_ = 0;
  bool bf16_ = false;
  Tensor w16_;  // bf16: the weights' copy when run alone (transient)
  MathMode math_ = MathMode::kFp32;
  cublasComputeType_t compute_ = CUBLAS_COMPUTE_32F_PEDANTIC;
  Tensor ones_;
  bool lt_ready_ = false;
  LtMatmulDesc lt_desc_;
  LtLayout lt_a_, lt_b_, lt_c_;
  cublasLtMatmulAlgo_t lt_algo_{};
};

TBD_REGISTER_LAYER(LinearConfig, DeviceKind::kCuda, LinearCublas);

// ---- Gemm ----

// Under bf16: a, b, y and the input gradients bf16 (f32 accumulation), the bias f32 (rounded
// into y, then the GEMM adds with beta = 1) and its gradient f32.
class GemmCublas final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  GemmCublas(Backend& be, const std::string& name, const GemmConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    const char* k = kind();
    GemmDims d;
    gemm_output_shape(name, cfg, in[0].shape, in[1].shape, &d);
    for (int i = 0; i < 2; ++i) check_row_major(k, name, i == 0 ? "a" : "b", in[i]);
    shared_b_ = d.b_shared;
    M_ = as_int(d.m, k, name, "M");
    N_ = as_int(d.n, k, name, "N");
    K_ = as_int(d.k, k, name, "K");
    B_ = as_int(d.batch, k, name, "batch");
    as_int(d.batch * d.m, k, name, "batch*M");
    bf16_ = in[0].dtype == DType::kBF16;
    TBD_LAYER_CHECK(in[1].dtype == in[0].dtype, k, name, "a is ", to_string(in[0].dtype), " and b ",
                    to_string(in[1].dtype), ": they must agree");
    t_ = bf16_ ? kBf16Out : kF32;
    esize_ = bf16_ ? 2 : 4;
    if (cfg.bias) {
      const int64_t rows = static_cast<int64_t>(B_) * M_;
      ones_ = bf16_ ? ones_vector_bf16(cu_, rows) : ones_vector(be, rows);
    }
    math_ = cu_.math_mode();
    compute_ = cublas_compute_type(math_);
  }

  std::string implementation() const override {
    return bf16_ ? std::string("cublas bf16 (f32 accumulate)")
                 : detail::concat("cublas ", to_string(math_));
  }

  // y: (B..., M, N)  a: (B..., M, K) or (B..., K, M)  b: (B..., K, N) or (B..., N, K) or 2-D
  void fprop(MutTensorRefs y, TensorRefs x) override {
    float beta = 0.f;
    if (cfg_.bias && bf16_) {
      bias_rows_bf16(cu_, y[0]->raw(), params_[0].value.f32(), int64_t{B_} * M_, N_);
      beta = 1.f;
    }
    gemm_rm(cu_, compute_, t_, cfg_.trans_a, cfg_.trans_b, M_, N_, K_, alpha(), x[0]->raw(), sa(),
            x[1]->raw(), sb(), beta, y[0]->raw(), sy(), B_);
    if (cfg_.bias && !bf16_) {
      add_bias_rows(cu_, y[0]->f32(), params_[0].value.f32(), int64_t{B_} * M_, N_);
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    const void* a = x[0]->raw();
    const void* b = x[1]->raw();
    const void* g = dy[0]->raw();
    const bool ta = cfg_.trans_a, tb = cfg_.trans_b;
    if (dx[0] != nullptr) {
      void* da = dx[0]->raw();
      if (!ta) {  // da (M, K) = alpha dy op(b)^T
        gemm_rm(cu_, compute_, t_, false, !tb, M_, K_, N_, alpha(), g, sy(), b, sb(), 0.f, da, sa(),
                B_);
      } else {  // da (K, M) = alpha op(b) dy^T
        gemm_rm(cu_, compute_, t_, tb, true, K_, M_, N_, alpha(), b, sb(), g, sy(), 0.f, da, sa(),
                B_);
      }
    }
    if (dx[1] != nullptr) {
      void* db = dx[1]->raw();
      if (!shared_b_) {
        db_gemm(a, g, db, 0.f, B_);
      } else if (!ta) {  // a and dy stack their batches as rows: one GEMM over B*M rows
        const int rows = B_ * M_;
        if (!tb) {  // db (K, N) = alpha a^T dy
          gemm_rm(cu_, compute_, t_, true, false, K_, N_, rows, alpha(), a, 0, g, 0, 0.f, db, 0, 1);
        } else {  // db (N, K) = alpha dy^T a
          gemm_rm(cu_, compute_, t_, true, false, N_, K_, rows, alpha(), g, 0, a, 0, 0.f, db, 0, 1);
        }
      } else {  // transposed batches do not stack: sum them one by one
        for (int i = 0; i < B_; ++i) {
          db_gemm(at(a, i * sa()), at(g, i * sy()), db, i == 0 ? 0.f : 1.f, 1);
        }
      }
    }
    if (cfg_.bias && param_grads()) {
      if (bf16_) {
        col_sum_accumulate_bf16(cu_, g, B_ * M_, N_, ones_.raw(), params_[0].grad.f32());
      } else {
        col_sum_accumulate(cu_, static_cast<const float*>(g), B_ * M_, N_, ones_.f32(),
                           params_[0].grad.f32());
      }
    }
  }

 private:
  // p advanced by `elements` of the operands' type.
  const void* at(const void* p, int64_t elements) const {
    return static_cast<const char*>(p) + elements * esize_;
  }
  // Per-batch gradient of b: (K, N) = alpha op(a)^T dy, or (N, K) = alpha dy^T op(a).
  void db_gemm(const void* a, const void* g, void* db, float beta, int batch) {
    if (!cfg_.trans_b) {
      gemm_rm(cu_, compute_, t_, !cfg_.trans_a, false, K_, N_, M_, alpha(), a, sa(), g, sy(), beta,
              db, sb(), batch);
    } else {
      gemm_rm(cu_, compute_, t_, true, cfg_.trans_a, N_, K_, M_, alpha(), g, sy(), a, sa(), beta,
              db, sb(), batch);
    }
  }
  float alpha() const { return static_cast<float>(cfg_.alpha); }
  int64_t sa() const { return int64_t{M_} * K_; }
  int64_t sb() const { return shared_b_ ? 0 : int64_t{K_} * N_; }
  int64_t sy() const { return int64_t{M_} * N_; }

  GemmConfig cfg_;
  CudaBackend& cu_;
  int M_ = 0, N_ = 0, K_ = 0, B_ = 1;
  bool shared_b_ = false;
  bool bf16_ = false;
  GemmTypes t_;
  int64_t esize_ = 4;  // bytes per element of a, b, y
  MathMode math_ = MathMode::kFp32;
  cublasComputeType_t compute_ = CUBLAS_COMPUTE_32F_PEDANTIC;
  Tensor ones_;
};

TBD_REGISTER_LAYER(GemmConfig, DeviceKind::kCuda, GemmCublas);

}  // namespace
}  // namespace tbd::cuda
