// layers/cpu/loss_cpu.cpp: SoftmaxCrossEntropy, MseLoss, GradientPenalty and ActorCriticLoss,
// own code (oneDNN has no losses).
//
// Cross-entropy works row by row (OpenMP over rows): max and sum of the logits in one pass,
// then sum exp(z - max) in a second, giving the numerically stable log-sum-exp that backward
// reuses (saved per row) to form softmax = exp(z - lse) without redoing the reductions. The
// exponentials use a vectorizable Cody-Waite + polynomial exp (cephes expf constants, ~1.5
// ulp), since libm's expf does not vectorize; it saturates at exp(-87) ~ 1.6e-38 rather than
// underflowing to 0, far below anything a softmax sum or gradient can notice.
// Per-row (per-block for MSE) partial losses are summed serially in double, so the loss is
// bit-identical across runs and thread schedules.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "layers/cpu/simd.h"
#include "layers/loss.h"

namespace tbd::cpu {
namespace {

// exp(x) for any float x (+-inf saturate to exp(-87) / exp(88), NaN propagates), ~1.5 ulp;
// vectorizes under `omp simd`: no calls and no branches. The clamp to [-87, 88] works on the
// bit pattern with mask arithmetic because GCC will not if-convert float compares (they may
// trap) in a loop that stores, nor a short-circuit &&. (A NaN input makes the int
// conversion below formally undefined; x86 yields INT_MIN and the NaN in p carries through.)
[[gnu::always_inline]] inline float exp_poly(float x) {
  int32_t b = std::bit_cast<int32_t>(x);
  const int32_t lo = std::bit_cast<int32_t>(-87.0f), hi = std::bit_cast<int32_t>(88.0f);
  const int32_t neg_inf = std::bit_cast<int32_t>(-std::numeric_limits<float>::infinity());
  const int32_t pos_inf = std::bit_cast<int32_t>(std::numeric_limits<float>::infinity());
  // Negative floats have negative bit patterns that grow with the magnitude.
  int32_t m = -static_cast<int32_t>((b > lo) & (b <= neg_inf));  // x < -87 or -inf
  b = (lo & m) | (b & ~m);
  m = -static_cast<int32_t>((b > hi) & (b <= pos_inf));  // x > 88 or +inf
  b = (hi & m) | (b & ~m);
  x = std::bit_cast<float>(b);
  // n = round(x / ln2) by the 1.5 * 2^23 trick (SSE2 has no round instruction).
  const float shifter = 12582912.0f;
  const float n = (x * 1.44269504088896341f + shifter) - shifter;
  float r = x - n * 0.693359375f;  // Cody-Waite: ln2 in two parts
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t e = static_cast<int32_t>(n) + 127;  // in [1, 254] after the clamp
  return p * std::bit_cast<float>(e << 23);
}

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 16384;

// ---- SoftmaxCrossEntropy ----

// Row kernels, compiled per SIMD width (layers/cpu/simd.h): the OpenMP loops over rows call
// them, so the exp polynomial runs at the machine's vector width, not at SSE2's.

// A row of V logits (f32 or bf16, widened exactly): its max and sum (the sum only when
// `want_sum`: label smoothing reads it).
template <class E>
[[gnu::always_inline]] inline void max_sum_of(const E* z, int64_t V, bool want_sum, float* mx,
                                              float* sum) {
  *mx = max_of(z, V, -std::numeric_limits<float>::infinity());
  float s = 0;
  if (want_sum) {
#pragma omp simd reduction(+ : s)
    for (int64_t v = 0; v < V; ++v) s += as_f32(z[v]);
  }
  *sum = s;
}
TBD_SIMD_CLONES void row_max_sum(const float* z, int64_t V, bool want_sum, float* mx, float* sum) {
  max_sum_of(z, V, want_sum, mx, sum);
}
TBD_SIMD_CLONES void row_max_sum(const uint16_t* z, int64_t V, bool want_sum, float* mx,
                                 float* sum) {
  max_sum_of(z, V, want_sum, mx, sum);
}

// sum_v exp(z[v] - mx).
template <class E>
[[gnu::always_inline]] inline float sum_exp_of(const E* z, int64_t V, float mx) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t v = 0; v < V; ++v) s += exp_poly(as_f32(z[v]) - mx);
  return s;
}
TBD_SIMD_CLONES float row_sum_exp(const float* z, int64_t V, float mx) {
  return sum_exp_of(z, V, mx);
}
TBD_SIMD_CLONES float row_sum_exp(const uint16_t* z, int64_t V, float mx) {
  return sum_exp_of(z, V, mx);
}

// d[v] = g * (exp(z[v] - lse) - smooth), in the logits' dtype (bf16 rounded once).
template <class E>
[[gnu::always_inline]] inline void softmax_grad_of(E* d, const E* z, int64_t V, float lse, float g,
                                                   float smooth) {
#pragma omp simd
  for (int64_t v = 0; v < V; ++v) store_as(d[v], g * (exp_poly(as_f32(z[v]) - lse) - smooth));
}
TBD_SIMD_CLONES void row_softmax_grad(float* d, const float* z, int64_t V, float lse, float g,
                                      float smooth) {
  softmax_grad_of(d, z, V, lse, g, smooth);
}
TBD_SIMD_CLONES void row_softmax_grad(uint16_t* d, const uint16_t* z, int64_t V, float lse, float g,
                                      float smooth) {
  softmax_grad_of(d, z, V, lse, g, smooth);
}

class SoftmaxCrossEntropyCpu final : public Layer {
 public:
  // bf16 logits are read and widened exactly (the f32 policy's numbers without a cast pass);
  // dlogits then bf16.
  static constexpr bool kTakesBf16 = true;

  SoftmaxCrossEntropyCpu(Backend& be, const std::string& name, const SoftmaxCrossEntropyConfig& cfg,
                         const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    TBD_LAYER_CHECK(in[0].layout == Layout::kRowMajor, kind(), name,
                    "input logits must be row-major, got ", in[0].to_string());
    V_ = in[0].shape[-1];
    M_ = in[0].shape.numel() / V_;
    saved(saved_, TensorDesc{Shape{M_ + 1}});  // lse per row, then count
    row_loss_ = be.empty(Shape{M_}, MemCategory::kWorkspace);
  }

  // y: (1)  x[0] = logits: (..., V)  x[1] = labels: (...) i32
  void fprop(MutTensorRefs y, TensorRefs x) override {
    if (x[0]->dtype() == DType::kBF16) {
      forward(*y[0], x[0]->data<const uint16_t>(), x[1]->data<const int32_t>());
    } else {
      forward(*y[0], x[0]->data<const float>(), x[1]->data<const int32_t>());
    }
  }

  // dx[0]: (..., V) (dx[1], for labels, is ignored)  dy[0]: (1)
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    if (x[0]->dtype() == DType::kBF16) {
      backward(dx[0]->data<uint16_t>(), *dy[0], x[0]->data<const uint16_t>(),
               x[1]->data<const int32_t>());
    } else {
      backward(dx[0]->f32(), *dy[0], x[0]->data<const float>(), x[1]->data<const int32_t>());
    }
  }

 private:
  template <class E>
  void forward(Tensor& y, const E* z, const int32_t* labels) {
    float* lse = saved_.f32();
    float* row_loss = row_loss_.f32();
    const int64_t M = M_, V = V_, ignore = cfg_.ignore_index;
    const float ls = static_cast<float>(cfg_.label_smoothing);
    int64_t bad_row = -1;
#pragma omp parallel for schedule(static) if (parallel : M * V > kParallelMin)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t label = labels[m];
      if (label == ignore || label < 0 || label >= V) {
        if (label != ignore) {
#pragma omp atomic write
          bad_row = m;
        }
        lse[m] = 0;
        row_loss[m] = 0;
        continue;
      }
      const E* zr = z + m * V;
      float mx = 0, sum_z = 0;
      row_max_sum(zr, V, ls > 0, &mx, &sum_z);
      const float l = mx + std::log(row_sum_exp(zr, V, mx));
      lse[m] = l;
      // -(1-ls) log p[label] - ls/V sum_v log p[v], with log p[v] = z[v] - lse. The smoothing
      // term only when ls > 0: masked (-inf) logits make it 0 * inf otherwise.
      float row = (1 - ls) * (l - as_f32(zr[label]));
      if (ls > 0) row += ls * (l - sum_z / static_cast<float>(V));
      row_loss[m] = row;
    }
    if (bad_row >= 0) {
      throw_layer_error(
          kind(), name_,
          detail::concat("input labels: row ", bad_row, " has label ", labels[bad_row],
                         ", outside [0, ", V, ") and not ignore_index ", ignore));
    }
    double total = 0;
    int64_t count = 0;
    for (int64_t m = 0; m < M; ++m) {  // serial: a fixed summation order
      total += row_loss[m];
      count += labels[m] != ignore;
    }
    lse[M] = static_cast<float>(count);
    y.f32()[0] = count ? static_cast<float>(cfg_.weight * total / static_cast<double>(count)) : 0.f;
  }

  template <class E>
  void backward(E* dz, const Tensor& dy, const E* z, const int32_t* labels) {
    const float* lse = saved_.f32();
    const int64_t M = M_, V = V_, ignore = cfg_.ignore_index;
    const float count = lse[M];
    const float g = count > 0 ? static_cast<float>(cfg_.weight * dy.f32()[0] / count) : 0.f;
    const float ls = static_cast<float>(cfg_.label_smoothing);
    const float smooth = ls / static_cast<float>(V);
#pragma omp parallel for schedule(static) if (parallel : M * V > kParallelMin)
    for (int64_t m = 0; m < M; ++m) {
      E* dr = dz + m * V;
      const int64_t label = labels[m];
      if (label == ignore) {
        std::fill(dr, dr + V, E{});
        continue;
      }
      const E* zr = z + m * V;
      const float l = lse[m];
      row_softmax_grad(dr, zr, V, l, g, smooth);
      // The label's entry again in f32, so that bf16 rounds it once.
      store_as(dr[label], g * (exp_poly(as_f32(zr[label]) - l) - smooth) - g * (1 - ls));
    }
  }

 private:
  SoftmaxCrossEntropyConfig cfg_;
  int64_t M_ = 0, V_ = 0;
  Tensor saved_, row_loss_;
};

TBD_REGISTER_LAYER(SoftmaxCrossEntropyConfig, DeviceKind::kCpu, SoftmaxCrossEntropyCpu);

// ---- MseLoss ----

class MseLossCpu final : public Layer {
 public:
  // Fixed block size: partial sums do not depend on the thread count.
  static constexpr int64_t kBlock = 4096;

  MseLossCpu(Backend& be, const std::string& name, const MseLossConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)) {
    TBD_LAYER_CHECK(in[0].layout == Layout::kRowMajor && in[1].layout == Layout::kRowMajor, kind(),
                    name, "inputs pred and target must be row-major, got ", in[0].to_string(),
                    " and ", in[1].to_string());
    E_ = in[0].shape.numel();
    blocks_ = (E_ + kBlock - 1) / kBlock;
    partial_ = be.empty(Shape{2 * blocks_}, MemCategory::kWorkspace);  // blocks_ doubles
  }

  // y: (1)  x[0] = pred, x[1] = target: same shape
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const float* p = x[0]->f32();
    const float* t = x[1]->f32();
    double* partial = partial_.data<double>();
    const int64_t E = E_, nb = blocks_;
#pragma omp parallel for schedule(static) if (parallel : nb > 1)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t i1 = std::min(E, (b + 1) * kBlock);
      float s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = b * kBlock; i < i1; ++i) {
        const float d = p[i] - t[i];
        s += d * d;
      }
      partial[b] = s;
    }
    double total = 0;
    for (int64_t b = 0; b < nb; ++b) total += partial[b];
    y[0]->f32()[0] = static_cast<float>(total / static_cast<double>(E));
  }

  // dx[0] = dpred, dx[1] = dtarget (either may be null)  dy[0]: (1)
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    const float* p = x[0]->f32();
    const float* t = x[1]->f32();
    float* dp = dx[0] ? dx[0]->f32() : nullptr;
    float* dt = dx[1] ? dx[1]->f32() : nullptr;
    const float g = 2.0f * dy[0]->f32()[0] / static_cast<float>(E_);
    const int64_t E = E_;
    if (dp && dt) {
#pragma omp parallel for simd schedule(static) if (parallel : E > kParallelMin)
      for (int64_t i = 0; i < E; ++i) {
        const float d = g * (p[i] - t[i]);
        dp[i] = d;
        dt[i] = -d;
      }
    } else if (dp || dt) {
      float* out = dp ? dp : dt;
      const float s = dp ? g : -g;
#pragma omp parallel for simd schedule(static) if (parallel : E > kParallelMin)
      for (int64_t i = 0; i < E; ++i) out[i] = s * (p[i] - t[i]);
    }
  }

 private:
  int64_t E_ = 0, blocks_ = 0;
  Tensor partial_;
};

TBD_REGISTER_LAYER(MseLossConfig, DeviceKind::kCpu, MseLossCpu);

// ---- GradientPenalty ----

// Per sample (OpenMP over samples): the norm in double, then the loss summed serially.
class GradientPenaltyCpu final : public Layer {
 public:
  GradientPenaltyCpu(Backend& be, const std::string& name, const GradientPenaltyConfig& cfg,
                     const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    N_ = in[0].shape[0];
    D_ = in[0].shape.numel() / N_;
    norms_ = be.empty(Shape{2 * N_}, MemCategory::kWorkspace);  // N_ doubles
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    compute_norms(x[0]->f32());
    const double* norm = norms_.data<double>();
    double total = 0;
    for (int64_t n = 0; n < N_; ++n) total += (norm[n] - cfg_.target) * (norm[n] - cfg_.target);
    y[0]->f32()[0] = static_cast<float>(cfg_.weight * total / static_cast<double>(N_));
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    const float* g = x[0]->f32();
    float* dg = dx[0]->f32();
    compute_norms(g);  // cheap against what produced g; keeps forward free of saved state
    const double* norm = norms_.data<double>();
    const double scale =
        static_cast<double>(dy[0]->f32()[0]) * cfg_.weight * 2.0 / static_cast<double>(N_);
    const int64_t D = D_;
#pragma omp parallel for schedule(static) if (parallel : N_ * D > kParallelMin)
    for (int64_t n = 0; n < N_; ++n) {
      const float s =
          norm[n] > 0 ? static_cast<float>(scale * (norm[n] - cfg_.target) / norm[n]) : 0.0f;
      const float* gn = g + n * D;
      float* dn = dg + n * D;
#pragma omp simd
      for (int64_t i = 0; i < D; ++i) dn[i] = s * gn[i];
    }
  }

 private:
  void compute_norms(const float* g) {
    double* norm = norms_.data<double>();
    const int64_t D = D_;
#pragma omp parallel for schedule(static) if (parallel : N_ * D > kParallelMin)
    for (int64_t n = 0; n < N_; ++n) {
      const float* gn = g + n * D;
      double s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < D; ++i) s += static_cast<double>(gn[i]) * gn[i];
      norm[n] = std::sqrt(s);
    }
  }

  GradientPenaltyConfig cfg_;
  int64_t N_ = 0, D_ = 0;
  Tensor norms_;
};

TBD_REGISTER_LAYER(GradientPenaltyConfig, DeviceKind::kCpu, GradientPenaltyCpu);

// ---- ActorCriticLoss ----

// Per row in double (A is a handful of actions; the rows are few): softmax, q = p + eps, the
// row's loss, and in backward the gradient of layers/loss.h. Rows run in parallel into
// per-row partials, summed serially: the loss is the same for any thread count.
class ActorCriticLossCpu final : public Layer {
 public:
  ActorCriticLossCpu(Backend& be, const std::string& name, const ActorCriticLossConfig& cfg,
                     const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    N_ = in[0].shape[0];
    A_ = in[0].shape[1];
    row_loss_ = be.empty(Shape{2 * N_}, MemCategory::kWorkspace);  // N doubles
  }

  // y: (1)  x: logits (N, A), value (N, 1), actions (N) i32, returns (N)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const float* z = x[0]->f32();
    const float* v = x[1]->f32();
    const int32_t* act = x[2]->data<int32_t>();
    const float* ret = x[3]->f32();
    auto* rows = static_cast<double*>(row_loss_.raw());
    const int64_t N = N_, A = A_;
    const double beta = cfg_.entropy_beta, c = cfg_.value_weight, eps = cfg_.prob_eps;
    for (int64_t n = 0; n < N; ++n) {
      if (act[n] < 0 || act[n] >= A) {
        throw_layer_error(kind(), name_,
                          detail::concat("input actions: row ", n, " has action ", act[n],
                                         ", outside [0, ", A, ")"));
      }
    }
#pragma omp parallel for schedule(static) if (parallel : N * A > kParallelMin)
    for (int64_t n = 0; n < N; ++n) {
      double p[kMaxStackActions];
      std::vector<double> heap;
      double* pr = probs(z + n * A, A, p, heap);
      double entropy = 0;
      for (int64_t j = 0; j < A; ++j) entropy -= (pr[j] + eps) * std::log(pr[j] + eps);
      const double adv = static_cast<double>(ret[n]) - v[n];
      const double verr = static_cast<double>(v[n]) - ret[n];
      rows[n] = -std::log(pr[act[n]] + eps) * adv - beta * entropy + c * verr * verr;
    }
    double total = 0;
    for (int64_t n = 0; n < N; ++n) total += rows[n];  // serial: a fixed summation order
    y[0]->f32()[0] = static_cast<float>(total);
  }

  // dx[0]: dlogits (N, A), dx[1]: dvalue (N, 1); actions and returns get none.  dy: (1)
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    const float* z = x[0]->f32();
    const float* v = x[1]->f32();
    const int32_t* act = x[2]->data<int32_t>();
    const float* ret = x[3]->f32();
    const double g0 = dy[0]->f32()[0];
    const int64_t N = N_, A = A_;
    const double beta = cfg_.entropy_beta, c = cfg_.value_weight, eps = cfg_.prob_eps;
    if (dx[1] != nullptr) {
      float* dv = dx[1]->f32();
      for (int64_t n = 0; n < N; ++n) dv[n] = static_cast<float>(g0 * 2 * c * (v[n] - ret[n]));
    }
    if (dx[0] == nullptr) return;
    float* dz = dx[0]->f32();
#pragma omp parallel for schedule(static) if (parallel : N * A > kParallelMin)
    for (int64_t n = 0; n < N; ++n) {
      double p[kMaxStackActions], g[kMaxStackActions];
      std::vector<double> heap, heap_g;
      double* pr = probs(z + n * A, A, p, heap);
      double* gr = g;
      if (A > kMaxStackActions) {
        heap_g.resize(A);
        gr = heap_g.data();
      }
      const double adv = static_cast<double>(ret[n]) - v[n];
      double pg = 0;
      for (int64_t j = 0; j < A; ++j) {
        gr[j] = beta * (std::log(pr[j] + eps) + 1);
        if (j == act[n]) gr[j] -= adv / (pr[j] + eps);
        pg += pr[j] * gr[j];
      }
      for (int64_t j = 0; j < A; ++j) dz[n * A + j] = static_cast<float>(g0 * pr[j] * (gr[j] - pg));
    }
  }

 private:
  static constexpr int64_t kMaxStackActions = 64;  // Atari has at most 18 actions

  // softmax of one row in double, into `stack` (A <= kMaxStackActions) or `heap`.
  static double* probs(const float* zr, int64_t A, double* stack, std::vector<double>& heap) {
    double* p = stack;
    if (A > kMaxStackActions) {
      heap.resize(A);
      p = heap.data();
    }
    double mx = zr[0];
    for (int64_t j = 1; j < A; ++j) mx = std::max(mx, static_cast<double>(zr[j]));
    double sum = 0;
    for (int64_t j = 0; j < A; ++j) sum += p[j] = std::exp(zr[j] - mx);
    for (int64_t j = 0; j < A; ++j) p[j] /= sum;
    return p;
  }

  ActorCriticLossConfig cfg_;
  int64_t N_ = 0, A_ = 0;
  Tensor row_loss_;
};

TBD_REGISTER_LAYER(ActorCriticLossConfig, DeviceKind::kCpu, ActorCriticLossCpu);

}  // namespace
}  // namespace tbd::cpu
