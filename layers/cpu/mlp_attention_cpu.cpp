// layers/cpu/mlp_attention_cpu.cpp: MlpAttention on the CPU, own code (oneDNN has no additive
// attention; the query and key projections around it are Linear layers on oneDNN).
//
// Samples in parallel (OpenMP over the batch); per sample one pass over its valid positions
// computes t = tanh(keys + query), the scores, the masked softmax and the context, in
// vectorized per-sample kernels (TBD_SIMD_CLONES, tanh_fast and exp_nonpositive from simd.h).
// Backward writes each sample's contribution to dv into a row of its own, summed over the
// samples serially afterwards, so dv does not depend on the thread schedule.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "layers/cpu/simd.h"
#include "layers/mlp_attention.h"

namespace tbd::cpu {
namespace {

// Below this many elements of t a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 16384;

// One sample: t (S, A) and alpha (S) saved, ctx (D) written. L valid positions.
TBD_SIMD_CLONES
void attend_forward(const float* q, const float* keys, const float* mem, const float* v, int64_t L,
                    int64_t S, int64_t A, int64_t D, float* t, float* alpha, float* ctx) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t s = 0; s < L; ++s) {
    const float* k = keys + s * A;
    float* ts = t + s * A;
    float e = 0;
#pragma omp simd reduction(+ : e)
    for (int64_t a = 0; a < A; ++a) {
      ts[a] = tanh_fast(k[a] + q[a]);
      e += v[a] * ts[a];
    }
    alpha[s] = e;
    mx = std::max(mx, e);
  }
  float sum = 0;
  for (int64_t s = 0; s < L; ++s) sum += alpha[s] = exp_nonpositive(alpha[s] - mx);
  const float inv = 1.0f / sum;
  for (int64_t s = 0; s < L; ++s) alpha[s] *= inv;
  for (int64_t s = L; s < S; ++s) alpha[s] = 0;
  std::fill(ctx, ctx + D, 0.0f);
  for (int64_t s = 0; s < L; ++s) {
    const float w = alpha[s];
    const float* m = mem + s * D;
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) ctx[d] += w * m[d];
  }
}

// One sample's gradients; null outputs are skipped. dv_row (A) gets this sample's
// sum_s de_s t_s. de (S) is scratch.
TBD_SIMD_CLONES
void attend_backward(const float* dctx, const float* mem, const float* v, const float* t,
                     const float* alpha, int64_t L, int64_t S, int64_t A, int64_t D, float* de,
                     float* dq, float* dkeys, float* dmem, float* dv_row) {
  float dot = 0;
  for (int64_t s = 0; s < L; ++s) {
    const float* m = mem + s * D;
    float da = 0;
#pragma omp simd reduction(+ : da)
    for (int64_t d = 0; d < D; ++d) da += dctx[d] * m[d];
    de[s] = da;
    dot += alpha[s] * da;
  }
  for (int64_t s = 0; s < L; ++s) de[s] = alpha[s] * (de[s] - dot);
  if (dmem) {
    for (int64_t s = 0; s < L; ++s) {
      float* dm = dmem + s * D;
      const float w = alpha[s];
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) dm[d] = w * dctx[d];
    }
    std::fill(dmem + L * D, dmem + S * D, 0.0f);
  }
  if (dq) std::fill(dq, dq + A, 0.0f);
  if (dv_row) std::fill(dv_row, dv_row + A, 0.0f);
  for (int64_t s = 0; s < L; ++s) {
    const float* ts = t + s * A;
    const float g = de[s];
    if (dq || dkeys) {
      float* dk = dkeys ? dkeys + s * A : nullptr;
#pragma omp simd
      for (int64_t a = 0; a < A; ++a) {
        const float gs = g * v[a] * (1.0f - ts[a] * ts[a]);
        if (dk) dk[a] = gs;
        if (dq) dq[a] += gs;
      }
    }
    if (dv_row) {
#pragma omp simd
      for (int64_t a = 0; a < A; ++a) dv_row[a] += g * ts[a];
    }
  }
  if (dkeys) std::fill(dkeys + L * A, dkeys + S * A, 0.0f);
}

class MlpAttentionCpu final : public Layer {
 public:
  MlpAttentionCpu(Backend& be, const std::string& name, const MlpAttentionConfig& cfg,
                  const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), d_(mlp_attention_dims(name, in)) {
    const int64_t N = d_.N, S = d_.S, A = d_.A;
    saved(t_, TensorDesc{Shape{N, S, A}});
    saved(alpha_, TensorDesc{Shape{N, S}});
    // Per sample: the score gradients de (S) and its row of dv (A).
    scratch_ = be.empty(Shape{N, S + A}, MemCategory::kWorkspace);
  }

  // y[0] = ctx (N, D)  x = query, keys, memory, lengths
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const int32_t* len = x[3]->data<int32_t>();
    for (int64_t n = 0; n < d_.N; ++n) {
      TBD_LAYER_CHECK(len[n] >= 1 && len[n] <= d_.S, kind(), name_, "input lengths: sample ", n,
                      " has length ", len[n], ", outside [1, S=", d_.S, "]");
    }
    const int64_t N = d_.N, S = d_.S, A = d_.A, D = d_.D;
    const float *q = x[0]->f32(), *keys = x[1]->f32(), *mem = x[2]->f32();
    const float* v = params_[0].value.f32();
    float *t = t_.f32(), *alpha = alpha_.f32(), *ctx = y[0]->f32();
#pragma omp parallel for schedule(static) if (N * S * A > kParallelMin)
    for (int64_t n = 0; n < N; ++n) {
      attend_forward(q + n * A, keys + n * S * A, mem + n * S * D, v, len[n], S, A, D,
                     t + n * S * A, alpha + n * S, ctx + n * D);
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs) override {
    const int64_t N = d_.N, S = d_.S, A = d_.A, D = d_.D;
    const int32_t* len = x[3]->data<int32_t>();
    const float *dctx = dy[0]->f32(), *mem = x[2]->f32(), *v = params_[0].value.f32();
    const float *t = t_.f32(), *alpha = alpha_.f32();
    float* dq = dx[0] ? dx[0]->f32() : nullptr;
    float* dkeys = dx[1] ? dx[1]->f32() : nullptr;
    float* dmem = dx[2] ? dx[2]->f32() : nullptr;
    float* scratch = scratch_.f32();
    const bool wgrad = param_grads_;
#pragma omp parallel for schedule(static) if (N * S * A > kParallelMin)
    for (int64_t n = 0; n < N; ++n) {
      float* row = scratch + n * (S + A);
      attend_backward(dctx + n * D, mem + n * S * D, v, t + n * S * A, alpha + n * S, len[n], S, A,
                      D, row, dq ? dq + n * A : nullptr, dkeys ? dkeys + n * S * A : nullptr,
                      dmem ? dmem + n * S * D : nullptr, wgrad ? row + S : nullptr);
    }
    if (!wgrad) return;
    float* dv = params_[0].grad.f32();
    for (int64_t n = 0; n < N; ++n) {
      const float* row = scratch + n * (S + A) + S;
#pragma omp simd
      for (int64_t a = 0; a < A; ++a) dv[a] += row[a];
    }
  }

 private:
  MlpAttentionDims d_;
  Tensor t_, alpha_, scratch_;
};

}  // namespace

TBD_REGISTER_LAYER(MlpAttentionConfig, DeviceKind::kCpu, MlpAttentionCpu);

}  // namespace tbd::cpu
