// layers/cuda/attention_cuda.cu: MultiHeadAttention on cuBLAS plus own kernels.
//
// Semantics of layers/attention.h. cuDNN's fused attention is FP16/BF16/FP8 only on Hopper and
// its legacy multi-head attention API is deprecated (docs/cuda.md), so FP32 attention is
// built the way PyTorch's math path does it:
//   projections      cublasGemmEx, row-major via the C^T = B^T A^T identity
//   split heads      own kernel: (N*T, D) + bias -> (N, h, T, dh), so each (n, head) pair is one
//                    contiguous matrix and QK^T / PV are single strided-batched GEMMs
//   S = QK^T*scale   cublasGemmStridedBatchedEx over B = N*h
//   masks, softmax   own kernel, one block per row; causal and padding masks are both a prefix
//                    limit on the key index, so a row needs no mask tensor
//   dropout          own kernel, the counter-based mask of layers/attention.h
//                    (attention_dropout_keep, bit-identical to the CPU backend): backward
//                    recomputes it from (base, index) instead of storing a mask
//   O = P V          cublasGemmStridedBatchedEx; merge heads; output projection + bias
// Math mode (backend): strict FP32 -> CUBLAS_COMPUTE_32F_PEDANTIC, TF32 ->
// CUBLAS_COMPUTE_32F_FAST_TF32, read at every call. Bias gradients are cublasSgemv with a ones
// vector (column sums), accumulated (+=) like every parameter gradient.
// Saved for backward (feature_maps): the head-split Q, K, V, the probabilities P (and P after
// dropout), and the merged attention output O.
#include <cmath>
#include <limits>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/attention.h"

namespace tbd::cuda {
namespace {

constexpr int kThreads = 256;

cublasComputeType_t compute_type(MathMode m) {
  return m == MathMode::kFp32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F_FAST_TF32;
}

int as_int(int64_t v) {
  TBD_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "cuBLAS dimension ", v,
            " does not fit in int");
  return static_cast<int>(v);
}

// Row-major, batched: C_b (m x n) = alpha * op(A_b) (m x k) * op(B_b) (k x n) + beta * C_b.
// lda/ldb/ldc are the row strides of the stored matrices; sa/sb/sc the batch strides.
// cuBLAS is column-major: C^T (n x m) = op(B)^T op(A)^T, so B goes first.
void gemm_rm(CudaBackend& cb, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
             float alpha, const float* a, int64_t lda, int64_t sa, const float* b, int64_t ldb,
             int64_t sb, float beta, float* c, int64_t ldc, int64_t sc, int64_t batch = 1) {
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasComputeType_t ct = compute_type(cb.math_mode());
  if (batch == 1) {
    TBD_CUBLAS_CHECK(cublasGemmEx(cb.cublas(), op_b, op_a, as_int(n), as_int(m), as_int(k), &alpha,
                                  b, CUDA_R_32F, as_int(ldb), a, CUDA_R_32F, as_int(lda), &beta, c,
                                  CUDA_R_32F, as_int(ldc), ct, CUBLAS_GEMM_DEFAULT));
  } else {
    TBD_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        cb.cublas(), op_b, op_a, as_int(n), as_int(m), as_int(k), &alpha, b, CUDA_R_32F,
        as_int(ldb), sb, a, CUDA_R_32F, as_int(lda), sa, &beta, c, CUDA_R_32F, as_int(ldc), sc,
        as_int(batch), ct, CUBLAS_GEMM_DEFAULT));
  }
}

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 8));
}

// ---- kernels ----

// out (N, h, T, dh) = in (N*T, h*dh) [+ bias (h*dh)]
__global__ void split_heads_kernel(float* out, const float* in, const float* bias, int64_t N,
                                   int64_t T, int64_t heads, int64_t dh) {
  const int64_t total = N * heads * T * dh;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t e = o % dh, t = (o / dh) % T, hd = (o / (dh * T)) % heads;
    const int64_t n = o / (dh * T * heads);
    const int64_t col = hd * dh + e;
    out[o] = in[(n * T + t) * heads * dh + col] + (bias ? bias[col] : 0.0f);
  }
}

// out (N*T, h*dh) = in (N, h, T, dh)
__global__ void merge_heads_kernel(float* out, const float* in, int64_t N, int64_t T, int64_t heads,
                                   int64_t dh) {
  const int64_t total = N * heads * T * dh;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t col = o % (heads * dh), row = o / (heads * dh);
    const int64_t n = row / T, t = row % T, hd = col / dh, e = col % dh;
    out[o] = in[((n * heads + hd) * T + t) * dh + e];
  }
}

// y (M, D) += bias (D), row-broadcast
__global__ void add_bias_kernel(float* y, const float* bias, int64_t M, int64_t D) {
  const int64_t total = M * D;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] += bias[i % D];
  }
}

// attention_dropout_keep (layers/attention.h): element i of P is kept iff
// splitmix64(base + i) >= threshold with base = splitmix64(seed ^ splitmix64(step)). The step is
// the call numbering's index of counter[1] (the training forwards so far, in device memory,
// advanced by advance_step_kernel), so a captured CUDA graph draws a new mask on every replay;
// backward reads the same step.
struct DropoutParams {
  bool active;
  uint64_t seed, threshold;
  float inv_keep;  // 1 / (1 - p)
  const int32_t* counter;
  CallNumbering numbering;  // Layer::set_call_numbering: step = numbering.index(counter[1])
};
__device__ __forceinline__ uint64_t dropout_base(const DropoutParams& d) {
  return splitmix64(d.seed ^ splitmix64(d.numbering.index(static_cast<uint64_t>(d.counter[1]))));
}
__device__ __forceinline__ bool dropout_keep(uint64_t base, const DropoutParams& d, uint64_t i) {
  return splitmix64(base + i) >= d.threshold;
}

// Block-wide sum or max over kThreads threads (warp shuffles, then one warp over 8 partials).
template <bool kMax>
__device__ float block_reduce(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // `shared` may still be read from a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? shared[lane] : (kMax ? -INFINITY : 0.0f);
    for (int o = 16; o > 0; o >>= 1) {
      const float w = __shfl_xor_sync(0xffffffffu, v, o);
      v = kMax ? fmaxf(v, w) : v + w;
    }
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

// Key positions j >= limit are masked: causal (j > i) and padding (j >= kv_length[n]). A length
// outside [1, Tk] raises the sticky device flag `bad_length` (reported by the host) and is
// clamped, so the kernel stays in bounds.
__device__ __forceinline__ int key_limit(int64_t row, int Tq, int Tk, int heads, bool causal,
                                         const int32_t* lengths, int* bad_length) {
  int limit = Tk;
  if (lengths) {
    const int len = lengths[row / (static_cast<int64_t>(heads) * Tq)];
    if ((len < 1 || len > Tk) && threadIdx.x == 0) *bad_length = 1;
    limit = min(limit, max(len, 0));
  }
  if (causal) limit = min(limit, static_cast<int>(row % Tq) + 1);
  return limit;
}

// In place on s (rows, Tk), already scaled: masked softmax; fully masked rows become zeros.
// With dropout, pd = p * keep / (1 - p_drop) is written beside it (p_drop: cfg.dropout).
__global__ void __launch_bounds__(kThreads)
    softmax_forward_kernel(float* s, float* pd, int Tq, int Tk, int heads, bool causal,
                           const int32_t* lengths, int* bad_length, DropoutParams drop) {
  const uint64_t base = drop.active ? dropout_base(drop) : 0;
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  float* x = s + row * Tk;
  const int limit = key_limit(row, Tq, Tk, heads, causal, lengths, bad_length);
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < limit; j += kThreads) mx = fmaxf(mx, x[j]);
  mx = block_reduce<true>(mx, shared);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < limit; j += kThreads) sum += expf(x[j] - mx);
  sum = block_reduce<false>(sum, shared);
  const float inv = limit > 0 ? 1.0f / sum : 0.0f;
  for (int j = threadIdx.x; j < Tk; j += kThreads) {
    const float p = j < limit ? expf(x[j] - mx) * inv : 0.0f;
    x[j] = p;
    if (drop.active) {
      const bool keep = dropout_keep(base, drop, static_cast<uint64_t>(row) * Tk + j);
      pd[row * Tk + j] = keep ? p * drop.inv_keep : 0.0f;
    }
  }
}

// In place on g (rows, Tk): g = dL/d(P after dropout) -> dL/dS (before the scale), with
// dP = g * keep / (1 - p_drop) and dS = P * (dP - sum_j dP_j P_j).
__global__ void __launch_bounds__(kThreads)
    softmax_backward_kernel(float* g, const float* p, int Tk, DropoutParams drop) {
  const uint64_t base = drop.active ? dropout_base(drop) : 0;
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  float* gr = g + row * Tk;
  const float* pr = p + row * Tk;
  auto dp = [&](int j) {
    float v = gr[j];
    if (drop.active) {
      v = dropout_keep(base, drop, static_cast<uint64_t>(row) * Tk + j) ? v * drop.inv_keep : 0.0f;
    }
    return v;
  };
  float dot = 0.0f;
  for (int j = threadIdx.x; j < Tk; j += kThreads) dot += dp(j) * pr[j];
  dot = block_reduce<false>(dot, shared);
  for (int j = threadIdx.x; j < Tk; j += kThreads) gr[j] = pr[j] * (dp(j) - dot);
}

// ---- the layer ----

enum ParamIndex { kWq, kWk, kWv, kWo, kBq, kBk, kBv, kBo };

class MultiHeadAttentionCublas final : public Layer {
 public:
  MultiHeadAttentionCublas(Backend& be, const std::string& name,
                           const MultiHeadAttentionConfig& cfg, const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cb_(as_cuda(be)) {
    const AttentionDims d = attention_dims(name, cfg, in);  // the checks shared with the CPU
    N_ = d.N, Tq_ = d.Tq, Tk_ = d.Tk, D_ = d.D, H_ = d.h, dh_ = d.dh;
    dims_ = d;

    const int64_t Mq = N_ * Tq_, Mk = N_ * Tk_, Mmax = std::max(Mq, Mk);
    tmp_ = be.empty(Shape{Mmax, D_}, MemCategory::kDynamic);
    saved(qh_, TensorDesc{Shape{N_, H_, Tq_, dh_}});
    saved(kh_, TensorDesc{Shape{N_, H_, Tk_, dh_}});
    saved(vh_, TensorDesc{Shape{N_, H_, Tk_, dh_}});
    saved(p_, TensorDesc{Shape{N_, H_, Tq_, Tk_}});
    if (cfg.dropout > 0) saved(pd_, TensorDesc{Shape{N_, H_, Tq_, Tk_}});
    saved(o_, TensorDesc{Shape{Mq, D_}});
    oh_ = be.empty(Shape{N_, H_, Tq_, dh_}, MemCategory::kDynamic);
    dp_ = be.empty(Shape{N_, H_, Tq_, Tk_}, MemCategory::kDynamic);
    dkh_ = be.empty(Shape{N_, H_, Tk_, dh_}, MemCategory::kDynamic);
    dvh_ = be.empty(Shape{N_, H_, Tk_, dh_}, MemCategory::kDynamic);
    if (cfg.bias) {
      ones_ = be.empty(Shape{Mmax}, MemCategory::kWorkspace);
      be.fill(ones_, 1.0f);
    }
    step_counter_ = be.empty(Shape{2}, MemCategory::kDynamic, Layout::kRowMajor, DType::kI32);
    TBD_CUDA_CHECK(cudaMemsetAsync(step_counter_.raw(), 0, step_counter_.bytes(), cb_.stream()));
    if (cfg.padding_mask) {
      bad_length_ = be.empty(Shape{1}, MemCategory::kDynamic, Layout::kRowMajor, DType::kI32);
      TBD_CUDA_CHECK(cudaMemsetAsync(bad_length_.raw(), 0, sizeof(int), cb_.stream()));
      TBD_CUDA_CHECK(cudaMallocHost(&bad_length_host_, sizeof(int)));
      *bad_length_host_ = 0;
      TBD_CUDA_CHECK(cudaEventCreateWithFlags(&bad_length_copied_, cudaEventDisableTiming));
    }
  }

  ~MultiHeadAttentionCublas() override {
    if (bad_length_copied_) cudaEventDestroy(bad_length_copied_);
    if (bad_length_host_) cudaFreeHost(bad_length_host_);
  }

  void set_training(bool training) override {
    Layer::set_training(training);
    const bool dropout = training && cfg_.dropout > 0;
    set_work(attention_flops(cfg_, dims_, dropout), attention_bytes(cfg_, dims_, dropout));
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    const float* q_in = x[0]->f32();
    const float* kv_in = cfg_.cross ? x[1]->f32() : q_in;
    const int32_t* lengths = cfg_.padding_mask ? x.back()->data<int32_t>() : nullptr;
    const int64_t Mq = N_ * Tq_, Mk = N_ * Tk_, B = N_ * H_;
    report_bad_lengths();

    project_split(qh_, q_in, Mq, Tq_, kWq, kBq);
    project_split(kh_, kv_in, Mk, Tk_, kWk, kBk);
    project_split(vh_, kv_in, Mk, Tk_, kWv, kBv);

    const float scale = 1.0f / std::sqrt(static_cast<float>(dh_));
    gemm_rm(cb_, false, true, Tq_, Tk_, dh_, scale, qh_.f32(), dh_, Tq_ * dh_, kh_.f32(), dh_,
            Tk_ * dh_, 0.0f, p_.f32(), Tk_, Tq_ * Tk_, B);
    // The mask of this forward (layers/attention.h): step is this training forward's index
    // under the layer's call numbering (0, 1, 2, ... by default).
    drop_ = DropoutParams{
        training_ && cfg_.dropout > 0, 0, 0, 1.0f, step_counter_.data<int32_t>(), call_numbering()};
    if (drop_.active) {
      advance_step_kernel<<<1, 1, 0, cb_.stream()>>>(step_counter_.data<int32_t>());
      TBD_CUDA_CHECK_LAST();
      drop_.seed = cfg_.seed;
      drop_.threshold = attention_dropout_threshold(cfg_.dropout);
      drop_.inv_keep = static_cast<float>(1.0 / (1.0 - cfg_.dropout));
    }
    softmax_forward_kernel<<<static_cast<unsigned>(B * Tq_), kThreads, 0, cb_.stream()>>>(
        p_.f32(), drop_.active ? pd_.f32() : nullptr, static_cast<int>(Tq_), static_cast<int>(Tk_),
        static_cast<int>(H_), cfg_.causal, lengths, lengths ? bad_length_.data<int>() : nullptr,
        drop_);
    TBD_CUDA_CHECK_LAST();
    if (lengths) {
      // Checked on the device; read back without blocking and reported by a later call.
      TBD_CUDA_CHECK(cudaMemcpyAsync(bad_length_host_, bad_length_.raw(), sizeof(int),
                                     cudaMemcpyDeviceToHost, cb_.stream()));
      TBD_CUDA_CHECK(cudaEventRecord(bad_length_copied_, cb_.stream()));
    }
    const float* pd = drop_.active ? pd_.f32() : p_.f32();
    gemm_rm(cb_, false, false, Tq_, dh_, Tk_, 1.0f, pd, Tk_, Tq_ * Tk_, vh_.f32(), dh_, Tk_ * dh_,
            0.0f, oh_.f32(), dh_, Tq_ * dh_, B);
    merge_heads_kernel<<<blocks_for(Mq * D_), kThreads, 0, cb_.stream()>>>(o_.f32(), oh_.f32(), N_,
                                                                           Tq_, H_, dh_);
    TBD_CUDA_CHECK_LAST();
    gemm_rm(cb_, false, true, Mq, D_, D_, 1.0f, o_.f32(), D_, 0, w(kWo), D_, 0, 0.0f, y[0]->f32(),
            D_, 0);
    if (cfg_.bias) {
      add_bias_kernel<<<blocks_for(Mq * D_), kThreads, 0, cb_.stream()>>>(y[0]->f32(), b(kBo), Mq,
                                                                          D_);
      TBD_CUDA_CHECK_LAST();
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    report_bad_lengths();
    const float* q_in = x[0]->f32();
    const float* kv_in = cfg_.cross ? x[1]->f32() : q_in;
    float* dq_in = dx[0] ? dx[0]->f32() : nullptr;
    float* dkv_in = cfg_.cross ? (dx[1] ? dx[1]->f32() : nullptr) : dq_in;
    const float* g = dy[0]->f32();
    const int64_t Mq = N_ * Tq_, Mk = N_ * Tk_, B = N_ * H_;

    // Output projection: dWo += dY^T O, dbo += colsum(dY), dO = dY Wo.
    if (param_grads()) {
      gemm_rm(cb_, true, false, D_, D_, Mq, 1.0f, g, D_, 0, o_.f32(), D_, 0, 1.0f, dw(kWo), D_, 0);
      bias_grad(kBo, g, Mq);
    }
    gemm_rm(cb_, false, false, Mq, D_, D_, 1.0f, g, D_, 0, w(kWo), D_, 0, 0.0f, tmp_.f32(), D_, 0);
    split_heads_kernel<<<blocks_for(Mq * D_), kThreads, 0, cb_.stream()>>>(
        oh_.f32(), tmp_.f32(), nullptr, N_, Tq_, H_, dh_);  // oh_ now holds dO per head
    TBD_CUDA_CHECK_LAST();

    // Attention core. dPd = dO V^T, dV = Pd^T dO, dS = softmax'(dropout'(dPd)).
    const float* pd = drop_.active ? pd_.f32() : p_.f32();
    gemm_rm(cb_, false, true, Tq_, Tk_, dh_, 1.0f, oh_.f32(), dh_, Tq_ * dh_, vh_.f32(), dh_,
            Tk_ * dh_, 0.0f, dp_.f32(), Tk_, Tq_ * Tk_, B);
    gemm_rm(cb_, true, false, Tk_, dh_, Tq_, 1.0f, pd, Tk_, Tq_ * Tk_, oh_.f32(), dh_, Tq_ * dh_,
            0.0f, dvh_.f32(), dh_, Tk_ * dh_, B);
    softmax_backward_kernel<<<static_cast<unsigned>(B * Tq_), kThreads, 0, cb_.stream()>>>(
        dp_.f32(), p_.f32(), static_cast<int>(Tk_), drop_);
    TBD_CUDA_CHECK_LAST();
    // S = scale * Q K^T: dQ = scale * dS K, dK = scale * dS^T Q (dQ reuses oh_).
    const float scale = 1.0f / std::sqrt(static_cast<float>(dh_));
    gemm_rm(cb_, false, false, Tq_, dh_, Tk_, scale, dp_.f32(), Tk_, Tq_ * Tk_, kh_.f32(), dh_,
            Tk_ * dh_, 0.0f, oh_.f32(), dh_, Tq_ * dh_, B);
    gemm_rm(cb_, true, false, Tk_, dh_, Tq_, scale, dp_.f32(), Tk_, Tq_ * Tk_, qh_.f32(), dh_,
            Tq_ * dh_, 0.0f, dkh_.f32(), dh_, Tk_ * dh_, B);

    // Input projections, each: merge heads, dW += dP^T x, db += colsum, dx (+)= dP W.
    merge_project(oh_, q_in, Mq, Tq_, kWq, kBq, dq_in, /*accumulate=*/false);
    merge_project(dkh_, kv_in, Mk, Tk_, kWk, kBk, dkv_in, /*accumulate=*/!cfg_.cross);
    merge_project(dvh_, kv_in, Mk, Tk_, kWv, kBv, dkv_in, /*accumulate=*/true);
  }

 private:
  float* w(int i) { return params_[static_cast<std::size_t>(i)].value.f32(); }
  float* dw(int i) { return params_[static_cast<std::size_t>(i)].grad.f32(); }
  const float* b(int i) { return cfg_.bias ? w(i) : nullptr; }

  // kv_lengths must lie in [1, Tk] (layers/attention.h). The device flags a bad length; the
  // flag is copied back asynchronously and checked here once that copy has completed, so a
  // timed step never waits for it (a bad length is reported one call late).
  void report_bad_lengths() {
    if (!cfg_.padding_mask || cudaEventQuery(bad_length_copied_) != cudaSuccess) return;
    TBD_LAYER_CHECK(*bad_length_host_ == 0, kind(), name_,
                    "input kv_lengths has a value outside [1, Tk=", Tk_, "] (found on the device)");
  }

  // heads (N, h, T, dh) = split(x (M, D) W^T) + bias
  void project_split(const Tensor& heads, const float* x, int64_t M, int64_t T, int wi, int bi) {
    gemm_rm(cb_, false, true, M, D_, D_, 1.0f, x, D_, 0, w(wi), D_, 0, 0.0f, tmp_.f32(), D_, 0);
    split_heads_kernel<<<blocks_for(M * D_), kThreads, 0, cb_.stream()>>>(heads.f32(), tmp_.f32(),
                                                                          b(bi), N_, T, H_, dh_);
    TBD_CUDA_CHECK_LAST();
  }

  // dP = merge(d_heads) (M, D); dW += dP^T x; db += colsum(dP); dx = dP W (+= when accumulate).
  void merge_project(const Tensor& d_heads, const float* x, int64_t M, int64_t T, int wi, int bi,
                     float* dx, bool accumulate) {
    merge_heads_kernel<<<blocks_for(M * D_), kThreads, 0, cb_.stream()>>>(tmp_.f32(), d_heads.f32(),
                                                                          N_, T, H_, dh_);
    TBD_CUDA_CHECK_LAST();
    if (param_grads()) {
      gemm_rm(cb_, true, false, D_, D_, M, 1.0f, tmp_.f32(), D_, 0, x, D_, 0, 1.0f, dw(wi), D_, 0);
      bias_grad(bi, tmp_.f32(), M);
    }
    if (dx) {
      gemm_rm(cb_, false, false, M, D_, D_, 1.0f, tmp_.f32(), D_, 0, w(wi), D_, 0,
              accumulate ? 1.0f : 0.0f, dx, D_, 0);
    }
  }

  // db (D) += column sums of g (M, D): column-major g is (D x M), times ones (M).
  void bias_grad(int bi, const float* g, int64_t M) {
    if (!cfg_.bias) return;
    const float one = 1.0f;
    TBD_CUBLAS_CHECK(cublasSgemv(cb_.cublas(), CUBLAS_OP_N, as_int(D_), as_int(M), &one, g,
                                 as_int(D_), ones_.f32(), 1, &one, dw(bi), 1));
  }

  MultiHeadAttentionConfig cfg_;
  CudaBackend& cb_;
  int64_t N_ = 0, Tq_ = 0, Tk_ = 0, D_ = 0, H_ = 0, dh_ = 0;
  Tensor tmp_, qh_, kh_, vh_, p_, pd_, o_, oh_, dp_, dkh_, dvh_, ones_;
  AttentionDims dims_{};
  Tensor step_counter_;   // i32 [next step, step of the last forward]: the mask counter (device)
  DropoutParams drop_{};  // the mask of the last forward, for its backward
  Tensor bad_length_;     // i32 flag: some kv_lengths[n] outside [1, Tk] (sticky)
  int* bad_length_host_ = nullptr;  // pinned copy of it
  cudaEvent_t bad_length_copied_ = nullptr;
};

TBD_REGISTER_LAYER(MultiHeadAttentionConfig, DeviceKind::kCuda, MultiHeadAttentionCublas);

}  // namespace
}  // namespace tbd::cuda
