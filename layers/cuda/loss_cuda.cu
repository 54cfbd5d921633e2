// layers/cuda/loss_cuda.cu: SoftmaxCrossEntropy, MseLoss, GradientPenalty and ActorCriticLoss
// on CUDA (own kernels).
//
// Both losses reduce to one scalar in two fixed-shape passes (per-row or per-block partials,
// then one block summing them in order), so the loss is bit-identical from run to run.
// SoftmaxCrossEntropy keeps each row's log-sum-exp and the number of counted rows for
// backward (feature_maps) and recomputes the probabilities there; a block per row. When every
// row is ignored, loss and gradient are 0 (layers/loss.h).
// Deviation from the CPU backend: an out-of-range label (neither in [0, V) nor ignore_index)
// makes the loss NaN instead of throwing, since a kernel cannot throw and checking on the host
// would cost a synchronisation per step; a NaN loss is impossible to overlook. The same holds
// for ActorCriticLoss's actions outside [0, A).
#include <cmath>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/loss.h"

namespace tbd::cuda {
namespace {

// ---- SoftmaxCrossEntropy ----

// One block per row m: lse[m] = log sum exp z; row_loss[m] = -(1-ls) log p[t] - ls/V sum log p
// (0 for ignored rows); valid[m] = 1 if counted.
__global__ void xent_fwd_rows_kernel(const float* __restrict__ logits,
                                     const int32_t* __restrict__ labels, float* __restrict__ lse,
                                     double* __restrict__ row_loss, int64_t V, int64_t ignore_index,
                                     float smoothing) {
  __shared__ float shared_f[32];
  __shared__ double shared_d[32];
  const int64_t m = blockIdx.x;
  const float* z = logits + m * V;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) mx = fmaxf(mx, z[j]);
  mx = block_max(mx, shared_f);
  float se = 0;
  double sz = 0;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    se += expf(z[j] - mx);
    sz += z[j];
  }
  se = block_sum(se, shared_f);
  sz = block_sum(sz, shared_d);
  if (threadIdx.x == 0) {
    const float l = mx + logf(se);
    lse[m] = l;
    const int64_t t = labels[m];
    double loss = 0;
    if (t != ignore_index) {
      if (t < 0 || t >= V) {
        loss = NAN;
      } else {
        loss = -(1.0 - smoothing) * (static_cast<double>(z[t]) - l) -
               static_cast<double>(smoothing) / V * (sz - static_cast<double>(V) * l);
      }
    }
    row_loss[m] = loss;
  }
}

// One block: y = weight * sum(row_loss) / count, count = rows not ignored (0 when none: loss 0).
__global__ void xent_fwd_final_kernel(const double* __restrict__ row_loss,
                                      const int32_t* __restrict__ labels, int64_t M,
                                      int64_t ignore_index, double weight, float* __restrict__ y,
                                      float* __restrict__ count_out) {
  __shared__ double shared[32];
  double s = 0, c = 0;
  for (int64_t m = threadIdx.x; m < M; m += blockDim.x) {
    s += row_loss[m];
    c += labels[m] != ignore_index ? 1.0 : 0.0;
  }
  s = block_sum(s, shared);
  c = block_sum(c, shared);
  if (threadIdx.x == 0) {
    y[0] = c > 0 ? static_cast<float>(weight * s / c) : 0.f;
    count_out[0] = static_cast<float>(c);
  }
}

// dlogits[m, j] = weight * dy / count * (p[m, j] - (1-ls) [j == t] - ls/V), 0 on ignored rows.
__global__ void xent_bwd_kernel(const float* __restrict__ logits,
                                const int32_t* __restrict__ labels, const float* __restrict__ lse,
                                const float* __restrict__ count, const float* __restrict__ dy,
                                float* __restrict__ dlogits, int64_t total, int64_t V,
                                int64_t ignore_index, float smoothing, double weight) {
  const float c = count[0];
  const float scale = c > 0 ? static_cast<float>(weight * dy[0] / c) : 0.f;
  TBD_GRID_STRIDE(i, total) {
    const int64_t m = i / V, j = i % V;
    const int64_t t = labels[m];
    float g = 0.f;
    if (t != ignore_index) {
      const float p = expf(logits[i] - lse[m]);
      g = scale * (p - (j == t ? 1.f - smoothing : 0.f) - smoothing / V);
    }
    dlogits[i] = g;
  }
}

class SoftmaxCrossEntropyCuda final : public Layer {
 public:
  SoftmaxCrossEntropyCuda(Backend& be, const std::string& name,
                          const SoftmaxCrossEntropyConfig& cfg, const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    const char* k = kind();
    check_row_major(k, name, "logits", in[0]);
    check_row_major(k, name, "labels", in[1]);
    V_ = in[0].shape[-1];
    M_ = in[0].shape.numel() / V_;
    TBD_LAYER_CHECK(M_ <= INT32_MAX, k, name, "logits ", in[0].shape.to_string(),
                    " has more rows than a grid has blocks");
    saved(lse_, TensorDesc{Shape{M_}});
    saved(count_, TensorDesc{Shape{1}});
    row_loss_ = be.empty(Shape{2 * M_}, MemCategory::kWorkspace);  // M doubles
  }

  // y: (1)  logits: (M, V)  labels: (M) i32
  void fprop(MutTensorRefs y, TensorRefs x) override {
    auto* rows = static_cast<double*>(row_loss_.raw());
    xent_fwd_rows_kernel<<<static_cast<unsigned>(M_), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), x[1]->data<int32_t>(), lse_.f32(), rows, V_, cfg_.ignore_index,
        static_cast<float>(cfg_.label_smoothing));
    TBD_CUDA_CHECK_LAST();
    xent_fwd_final_kernel<<<1, 1024, 0, cu_.stream()>>>(
        rows, x[1]->data<int32_t>(), M_, cfg_.ignore_index, cfg_.weight, y[0]->f32(), count_.f32());
    TBD_CUDA_CHECK_LAST();
  }

  // dx[0]: dlogits (M, V); labels get no gradient.  dy: (1)
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    const int64_t total = M_ * V_;
    xent_bwd_kernel<<<grid_for(total), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), x[1]->data<int32_t>(), lse_.f32(), count_.f32(), dy[0]->f32(), dx[0]->f32(),
        total, V_, cfg_.ignore_index, static_cast<float>(cfg_.label_smoothing), cfg_.weight);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  SoftmaxCrossEntropyConfig cfg_;
  CudaBackend& cu_;
  int64_t M_ = 0, V_ = 0;
  Tensor lse_, count_, row_loss_;
};

TBD_REGISTER_LAYER(SoftmaxCrossEntropyConfig, DeviceKind::kCuda, SoftmaxCrossEntropyCuda);

// ---- MseLoss ----

// Block b sums (pred - target)^2 over its grid-stride share; the grid size is fixed per layer,
// so the partition (and the rounding) never changes.
__global__ void mse_partial_kernel(const float* __restrict__ p, const float* __restrict__ t,
                                   int64_t n, double* __restrict__ partial) {
  __shared__ double shared[32];
  double s = 0;
  TBD_GRID_STRIDE(i, n) {
    const double d = static_cast<double>(p[i]) - t[i];
    s += d * d;
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void mse_final_kernel(const double* __restrict__ partial, int parts, int64_t n,
                                 float* __restrict__ y) {
  __shared__ double shared[32];
  double s = 0;
  for (int i = threadIdx.x; i < parts; i += blockDim.x) s += partial[i];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) y[0] = static_cast<float>(s / n);
}

// dpred = 2 (pred - target) / E * dy; dtarget = -dpred (either may be null).
__global__ void mse_bwd_kernel(const float* __restrict__ p, const float* __restrict__ t,
                               const float* __restrict__ dy, float* __restrict__ dp,
                               float* __restrict__ dt, int64_t n) {
  const float scale = 2.f * dy[0] / static_cast<float>(n);
  TBD_GRID_STRIDE(i, n) {
    const float g = scale * (p[i] - t[i]);
    if (dp) dp[i] = g;
    if (dt) dt[i] = -g;
  }
}

class MseLossCuda final : public Layer {
 public:
  MseLossCuda(Backend& be, const std::string& name, const MseLossConfig& cfg,
              const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "pred", in[0]);
    check_row_major(kind(), name, "target", in[1]);
    n_ = in[0].shape.numel();
    parts_ = static_cast<int>(std::min<int64_t>(grid_for(n_), 1024));
    partial_ = be.empty(Shape{2 * int64_t{parts_}}, MemCategory::kWorkspace);  // doubles
  }

  // y: (1)  pred, target: same shape
  void fprop(MutTensorRefs y, TensorRefs x) override {
    auto* partial = static_cast<double*>(partial_.raw());
    mse_partial_kernel<<<static_cast<unsigned>(parts_), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), x[1]->f32(), n_, partial);
    TBD_CUDA_CHECK_LAST();
    mse_final_kernel<<<1, 1024, 0, cu_.stream()>>>(partial, parts_, n_, y[0]->f32());
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] == nullptr && dx[1] == nullptr) return;
    mse_bwd_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), x[1]->f32(), dy[0]->f32(), dx[0] ? dx[0]->f32() : nullptr,
        dx[1] ? dx[1]->f32() : nullptr, n_);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  CudaBackend& cu_;
  int64_t n_ = 0;
  int parts_ = 1;
  Tensor partial_;
};

TBD_REGISTER_LAYER(MseLossConfig, DeviceKind::kCuda, MseLossCuda);

// ---- GradientPenalty ----

// norm[n] = ||g_n||_2 in double; a block per sample.
__global__ void gp_norm_kernel(const float* __restrict__ g, int64_t D, double* __restrict__ norm) {
  __shared__ double shared[32];
  const float* gn = g + blockIdx.x * D;
  double s = 0;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) s += static_cast<double>(gn[i]) * gn[i];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) norm[blockIdx.x] = sqrt(s);
}

// y = weight * mean_n (norm[n] - target)^2, samples summed in a fixed order.
__global__ void gp_loss_kernel(const double* __restrict__ norm, int64_t N, double weight,
                               double target, float* __restrict__ y) {
  __shared__ double shared[32];
  double s = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x)
    s += (norm[n] - target) * (norm[n] - target);
  s = block_sum(s, shared);
  if (threadIdx.x == 0) y[0] = static_cast<float>(weight * s / static_cast<double>(N));
}

// dg_n = dy * weight * 2 (norm - target) / N * g_n / norm (0 where norm = 0).
__global__ void gp_bwd_kernel(const float* __restrict__ g, const double* __restrict__ norm,
                              const float* __restrict__ dy, float* __restrict__ dg, int64_t N,
                              int64_t D, double weight, double target) {
  const double scale = static_cast<double>(dy[0]) * weight * 2.0 / static_cast<double>(N);
  TBD_GRID_STRIDE(i, N * D) {
    const double nn = norm[i / D];
    dg[i] = nn > 0 ? static_cast<float>(scale * (nn - target) / nn * g[i]) : 0.f;
  }
}

class GradientPenaltyCuda final : public Layer {
 public:
  GradientPenaltyCuda(Backend& be, const std::string& name, const GradientPenaltyConfig& cfg,
                      const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    N_ = in[0].shape[0];
    D_ = in[0].shape.numel() / N_;
    norms_ = be.empty(Shape{2 * N_}, MemCategory::kWorkspace);  // N_ doubles
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    auto* norm = static_cast<double*>(norms_.raw());
    gp_norm_kernel<<<static_cast<unsigned>(N_), kBlock, 0, cu_.stream()>>>(x[0]->f32(), D_, norm);
    TBD_CUDA_CHECK_LAST();
    gp_loss_kernel<<<1, kBlock, 0, cu_.stream()>>>(norm, N_, cfg_.weight, cfg_.target, y[0]->f32());
    TBD_CUDA_CHECK_LAST();
  }

  // The norms are recomputed (forward's are still there unless another call came between).
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    auto* norm = static_cast<double*>(norms_.raw());
    gp_norm_kernel<<<static_cast<unsigned>(N_), kBlock, 0, cu_.stream()>>>(x[0]->f32(), D_, norm);
    TBD_CUDA_CHECK_LAST();
    gp_bwd_kernel<<<grid_for(N_ * D_), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), norm, dy[0]->f32(), dx[0]->f32(), N_, D_, cfg_.weight, cfg_.target);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  GradientPenaltyConfig cfg_;
  CudaBackend& cu_;
  int64_t N_ = 0, D_ = 0;
  Tensor norms_;
};

TBD_REGISTER_LAYER(GradientPenaltyConfig, DeviceKind::kCuda, GradientPenaltyCuda);

// ---- ActorCriticLoss ----

// Row n's softmax statistics: the max logit and sum_j exp(z_j - max), in double (A is a
// handful of actions; the probabilities are recomputed from them where needed, no arrays).
struct RowSoftmax {
  double mx, sum;
  __device__ double p(const float* zr, int64_t j) const { return exp(zr[j] - mx) / sum; }
};
__device__ RowSoftmax row_softmax(const float* zr, int64_t A) {
  double mx = zr[0];
  for (int64_t j = 1; j < A; ++j) mx = fmax(mx, static_cast<double>(zr[j]));
  double sum = 0;
  for (int64_t j = 0; j < A; ++j) sum += exp(zr[j] - mx);
  return RowSoftmax{mx, sum};
}

// One block of a fixed size: each thread sums its rows' losses (layers/loss.h), then a block
// sum in a fixed order. A bad action gives NaN (see the top).
__global__ void actor_critic_fwd_kernel(const float* __restrict__ z, const float* __restrict__ v,
                                        const int32_t* __restrict__ act,
                                        const float* __restrict__ ret, float* __restrict__ y,
                                        int64_t N, int64_t A, double beta, double c, double eps) {
  __shared__ double shared[32];
  double acc = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    const float* zr = z + n * A;
    const int64_t a = act[n];
    if (a < 0 || a >= A) {
      acc += nan("");
      continue;
    }
    const RowSoftmax s = row_softmax(zr, A);
    double entropy = 0;
    for (int64_t j = 0; j < A; ++j) {
      const double q = s.p(zr, j) + eps;
      entropy -= q * log(q);
    }
    const double adv = static_cast<double>(ret[n]) - v[n];
    acc += -log(s.p(zr, a) + eps) * adv - beta * entropy + c * adv * adv;
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) y[0] = static_cast<float>(acc);
}

// A thread per row: dlogits (dz may be null) and dvalue (dv may be null).
__global__ void actor_critic_bwd_kernel(const float* __restrict__ z, const float* __restrict__ v,
                                        const int32_t* __restrict__ act,
                                        const float* __restrict__ ret, const float* __restrict__ dy,
                                        float* __restrict__ dz, float* __restrict__ dv, int64_t N,
                                        int64_t A, double beta, double c, double eps) {
  const double g0 = dy[0];
  TBD_GRID_STRIDE(n, N) {
    const double adv = static_cast<double>(ret[n]) - v[n];
    if (dv != nullptr) dv[n] = static_cast<float>(g0 * 2 * c * -adv);
    if (dz == nullptr) continue;
    const float* zr = z + n * A;
    const int64_t a = act[n];
    const RowSoftmax s = row_softmax(zr, A);
    // g_j = -adv [j = a] / q_a + beta (log q_j + 1); dz_j = p_j (g_j - sum_k p_k g_k)
    auto g = [&](int64_t j, double p) {
      return beta * (log(p + eps) + 1) - (j == a ? adv / (p + eps) : 0.0);
    };
    double pg = 0;
    for (int64_t j = 0; j < A; ++j) {
      const double p = s.p(zr, j);
      pg += p * g(j, p);
    }
    for (int64_t j = 0; j < A; ++j) {
      const double p = s.p(zr, j);
      dz[n * A + j] = static_cast<float>(g0 * p * (g(j, p) - pg));
    }
  }
}

class ActorCriticLossCuda final : public Layer {
 public:
  ActorCriticLossCuda(Backend& be, const std::string& name, const ActorCriticLossConfig& cfg,
                      const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    N_ = in[0].shape[0];
    A_ = in[0].shape[1];
  }

  // y: (1)  x: logits (N, A), value (N, 1), actions (N) i32, returns (N)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    actor_critic_fwd_kernel<<<1, kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), x[1]->f32(), x[2]->data<int32_t>(), x[3]->f32(), y[0]->f32(), N_, A_,
        cfg_.entropy_beta, cfg_.value_weight, cfg_.prob_eps);
    TBD_CUDA_CHECK_LAST();
  }

  // dx[0]: dlogits (N, A), dx[1]: dvalue (N, 1); none to actions and returns.  dy: (1)
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] == nullptr && dx[1] == nullptr) return;
    actor_critic_bwd_kernel<<<grid_for(N_), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), x[1]->f32(), x[2]->data<int32_t>(), x[3]->f32(), dy[0]->f32(),
        dx[0] ? dx[0]->f32() : nullptr, dx[1] ? dx[1]->f32() : nullptr, N_, A_, cfg_.entropy_beta,
        cfg_.value_weight, cfg_.prob_eps);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  ActorCriticLossConfig cfg_;
  CudaBackend& cu_;
  int64_t N_ = 0, A_ = 0;
};

TBD_REGISTER_LAYER(ActorCriticLossConfig, DeviceKind::kCuda, ActorCriticLossCuda);

}  // namespace
}  // namespace tbd::cuda
