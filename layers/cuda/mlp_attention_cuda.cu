// layers/cuda/mlp_attention_cuda.cu: MlpAttention on CUDA (own kernels; cuDNN and cuBLAS have
// no additive attention, and the projections around it are Linear layers on cuBLAS).
//
// One block per sample. Forward: per valid position a block reduction gives the score (t is
// saved as it is computed), then the masked softmax over the scores in shared memory and the
// context with threads over D. Backward: per position a block reduction gives dalpha, then the
// score gradients in shared memory, dmemory with threads over D, dkeys, dquery and the sample's
// row of dv with threads over A; a second kernel sums the rows into dv in sample order, so dv
// is deterministic. A length outside [1, S] cannot throw from a kernel: that sample's context
// is NaN (layers/mlp_attention.h). Shape checks and counts are the shared ones.
#include <cmath>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/mlp_attention.h"

namespace tbd::cuda {
namespace {

// Dynamic shared memory: the S scores (forward) or S score gradients (backward).
__global__ void mlp_attention_fwd_kernel(const float* __restrict__ q,
                                         const float* __restrict__ keys,
                                         const float* __restrict__ mem, const float* __restrict__ v,
                                         const int32_t* __restrict__ lengths, float* __restrict__ t,
                                         float* __restrict__ alpha, float* __restrict__ ctx,
                                         int64_t S, int64_t A, int64_t D) {
  extern __shared__ float score[];
  __shared__ float red[32];
  const int64_t n = blockIdx.x;
  const int32_t L = lengths[n];
  if (L < 1 || L > S) {
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) ctx[n * D + d] = nanf("");
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) alpha[n * S + s] = nanf("");
    return;
  }
  const float* qn = q + n * A;
  for (int64_t s = 0; s < L; ++s) {
    const int64_t base = (n * S + s) * A;
    float part = 0;
    for (int64_t a = threadIdx.x; a < A; a += blockDim.x) {
      const float ts = tanhf(keys[base + a] + qn[a]);
      t[base + a] = ts;
      part += v[a] * ts;
    }
    const float e = block_sum(part, red);
    if (threadIdx.x == 0) score[s] = e;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int64_t s = threadIdx.x; s < L; s += blockDim.x) mx = fmaxf(mx, score[s]);
  mx = block_max(mx, red);
  float part = 0;
  for (int64_t s = threadIdx.x; s < L; s += blockDim.x) part += expf(score[s] - mx);
  const float inv = 1.0f / block_sum(part, red);
  __syncthreads();  // every thread has read the scores before they become probabilities
  for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
    const float p = s < L ? expf(score[s] - mx) * inv : 0.0f;
    score[s] = p;
    alpha[n * S + s] = p;
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float c = 0;
    for (int64_t s = 0; s < L; ++s) c += score[s] * mem[(n * S + s) * D + d];
    ctx[n * D + d] = c;
  }
}

// dv_rows (N, A): each sample's sum_s de_s t_s (null when dv is not wanted).
__global__ void mlp_attention_bwd_kernel(
    const float* __restrict__ dctx, const float* __restrict__ mem, const float* __restrict__ v,
    const int32_t* __restrict__ lengths, const float* __restrict__ t,
    const float* __restrict__ alpha, float* __restrict__ dq, float* __restrict__ dkeys,
    float* __restrict__ dmem, float* __restrict__ dv_rows, int64_t S, int64_t A, int64_t D) {
  extern __shared__ float de[];
  __shared__ float red[32];
  const int64_t n = blockIdx.x;
  const int64_t L = min(max(static_cast<int64_t>(lengths[n]), int64_t{0}), S);
  const float* dc = dctx + n * D;
  for (int64_t s = 0; s < L; ++s) {
    float part = 0;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) part += dc[d] * mem[(n * S + s) * D + d];
    const float da = block_sum(part, red);
    if (threadIdx.x == 0) de[s] = da;
  }
  __syncthreads();
  float part = 0;
  for (int64_t s = threadIdx.x; s < L; s += blockDim.x) part += alpha[n * S + s] * de[s];
  const float dot = block_sum(part, red);
  __syncthreads();
  for (int64_t s = threadIdx.x; s < L; s += blockDim.x) de[s] = alpha[n * S + s] * (de[s] - dot);
  __syncthreads();
  if (dmem) {
    for (int64_t i = threadIdx.x; i < S * D; i += blockDim.x) {
      const int64_t s = i / D;
      dmem[n * S * D + i] = s < L ? alpha[n * S + s] * dc[i % D] : 0.0f;
    }
  }
  for (int64_t a = threadIdx.x; a < A; a += blockDim.x) {
    float gq = 0, gv = 0;
    for (int64_t s = 0; s < S; ++s) {
      const int64_t i = (n * S + s) * A + a;
      float g = 0;
      if (s < L) {
        const float ts = t[i];
        g = de[s] * v[a] * (1.0f - ts * ts);
        gv += de[s] * ts;
      }
      if (dkeys) dkeys[i] = g;
      gq += g;
    }
    if (dq) dq[n * A + a] = gq;
    if (dv_rows) dv_rows[n * A + a] = gv;
  }
}

// dv[a] += sum over samples of dv_rows[n, a], in sample order.
__global__ void sum_rows_kernel(const float* __restrict__ rows, float* __restrict__ dv, int64_t N,
                                int64_t A) {
  TBD_GRID_STRIDE(a, A) {
    float s = 0;
    for (int64_t n = 0; n < N; ++n) s += rows[n * A + a];
    dv[a] += s;
  }
}

class MlpAttentionCuda final : public Layer {
 public:
  MlpAttentionCuda(Backend& be, const std::string& name, const MlpAttentionConfig& cfg,
                   const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)),
        d_(mlp_attention_dims(name, in)),
        cu_(as_cuda(be)) {
    saved(t_, TensorDesc{Shape{d_.N, d_.S, d_.A}});
    saved(alpha_, TensorDesc{Shape{d_.N, d_.S}});
    dv_rows_ = be.empty(Shape{d_.N, d_.A}, MemCategory::kWorkspace);
    shared_ = static_cast<std::size_t>(d_.S) * sizeof(float);
    TBD_LAYER_CHECK(shared_ <= 48 * 1024, kind(), name, "input keys ", in[1].shape.to_string(),
                    ": S=", d_.S, " scores exceed the 48 KiB of shared memory a block may use");
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    mlp_attention_fwd_kernel<<<static_cast<unsigned>(d_.N), kBlock, shared_, cu_.stream()>>>(
        x[0]->f32(), x[1]->f32(), x[2]->f32(), params_[0].value.f32(), x[3]->data<int32_t>(),
        t_.f32(), alpha_.f32(), y[0]->f32(), d_.S, d_.A, d_.D);
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs) override {
    float* rows = param_grads() ? dv_rows_.f32() : nullptr;
    mlp_attention_bwd_kernel<<<static_cast<unsigned>(d_.N), kBlock, shared_, cu_.stream()>>>(
        dy[0]->f32(), x[2]->f32(), params_[0].value.f32(), x[3]->data<int32_t>(), t_.f32(),
        alpha_.f32(), dx[0] ? dx[0]->f32() : nullptr, dx[1] ? dx[1]->f32() : nullptr,
        dx[2] ? dx[2]->f32() : nullptr, rows, d_.S, d_.A, d_.D);
    TBD_CUDA_CHECK_LAST();
    if (!rows) return;
    sum_rows_kernel<<<grid_for(d_.A), kBlock, 0, cu_.stream()>>>(rows, params_[0].grad.f32(), d_.N,
                                                                 d_.A);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  MlpAttentionDims d_;
  CudaBackend& cu_;
  Tensor t_, alpha_, dv_rows_;
  std::size_t shared_ = 0;
};

TBD_REGISTER_LAYER(MlpAttentionConfig, DeviceKind::kCuda, MlpAttentionCuda);

}  // namespace
}  // namespace tbd::cuda
