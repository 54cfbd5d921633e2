// layers/cpu/ctc_loss_cpu.cpp: CtcLoss on the CPU, own code (oneDNN has no CTC).
//
// Samples in parallel (OpenMP over the batch, dynamic: lengths differ). Per sample: the
// log-softmax of its frames, then alpha (and in backward beta) over the extended label in
// double, in buffers of each thread's own, allocated at build for the thread count of the
// build. Per-sample losses are summed serially, so the loss does not depend on the schedule.
// The inputs are checked before forward's parallel region (lengths, label values), naming the
// sample.
//
// Vectorised (TBD_SIMD_CLONES kernels, one per row, below): at a frame every extended position
// depends only on the previous frame, so a whole row of the recursion is one loop over s. It is
// branch-free: rows carry two -inf entries on each side (the neighbours s-1, s-2 of alpha and
// s+1, s+2 of beta always exist) and the "may skip a blank" rule is an additive 0 / -inf row;
// the three-way log-sum-exp takes exp_f64/log_f64 (layers/cpu/simd.h), polynomials within 2 ulp
// of libm. Only the band of positions that can be reached from the start (alpha, s <= 2t + 1)
// or can still reach the end (beta) is computed; the rest stays -inf. Beta runs backwards two
// rows at a time, the gradient of each frame taken as soon as its beta row exists. The
// occupancy of a class is a scatter over the extended label (several positions share the
// blank), done serially in position order after a vectorised exp of the row.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "layers/cpu/simd.h"
#include "layers/ctc_loss.h"

namespace tbd::cpu {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr int64_t kPad = 2;  // -inf entries on each side of a recursion row

inline double log_add(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

// ---- row kernels (vectorised; called per sample from the OpenMP loop over samples) ----

// lsm = log_softmax(z) over C classes, in double.
TBD_SIMD_CLONES void log_softmax_row(double* lsm, const float* z, int64_t C) {
  double m = kNegInf;
#pragma omp simd reduction(max : m)
  for (int64_t k = 0; k < C; ++k) m = std::max(m, static_cast<double>(z[k]));
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < C; ++k) s += exp_f64(static_cast<double>(z[k]) - m);
  const double lse = m + std::log(s);
#pragma omp simd
  for (int64_t k = 0; k < C; ++k) lsm[k] = static_cast<double>(z[k]) - lse;
}

// One frame of the recursion over n positions: cur[i] = log(exp(p0[i]) + exp(p1[i]) +
// exp(p2[i] + skip[i])) + lsm[lab[i]], -inf where all three are -inf. Alpha passes the previous
// row at s, s-1, s-2; beta the next row at s, s+1, s+2 (and the skip rule of s+2).
TBD_SIMD_CLONES void recursion_row(double* cur, const double* p0, const double* p1,
                                   const double* p2, const double* skip, const double* lsm,
                                   const int32_t* lab, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const double a = p0[i], b = p1[i], c = p2[i] + skip[i];
    const double m = std::max(a, std::max(b, c));
    // The two that are not the maximum (whose own term is exp(0) = 1).
    const double x1 = select_f64(a == m, b, a);
    const double x2 = select_f64(a == m || b == m, c, b);
    const bool dead = m == kNegInf;
    const double ms = select_f64(dead, 0.0, m);  // dead: the exps below are exp(-inf) = 0
    const double sum = 1.0 + exp_f64(x1 - ms) + exp_f64(x2 - ms);
    cur[i] = select_f64(dead, kNegInf, ms + log_f64(sum) + lsm[lab[i]]);
  }
}

// occ[i] = alpha[i] beta[i] / (y[lab[i]] p) in log space, exp'd (0 where unreachable).
TBD_SIMD_CLONES void occupancy_row(double* occ, const double* alpha, const double* beta,
                                   const double* lsm, const int32_t* lab, double logp, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) occ[i] = exp_f64(alpha[i] + beta[i] - lsm[lab[i]] - logp);
}

// acc = softmax from its log.
TBD_SIMD_CLONES void exp_row(double* acc, const double* lsm, int64_t C) {
#pragma omp simd
  for (int64_t k = 0; k < C; ++k) acc[k] = exp_f64(lsm[k]);
}

// g = up * acc in float.
TBD_SIMD_CLONES void scale_row(float* g, const double* acc, double up, int64_t C) {
#pragma omp simd
  for (int64_t k = 0; k < C; ++k) g[k] = static_cast<float>(up * acc[k]);
}

class CtcLossCpu final : public Layer {
 public:
  CtcLossCpu(Backend& be, const std::string& name, const CtcLossConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    T_ = in[0].shape[0], N_ = in[0].shape[1], C_ = in[0].shape[2], S_ = in[1].shape[1];
    threads_ = std::max(1, omp_get_max_threads());
    W_ = 2 * S_ + 1 + 2 * kPad;
    // lsm (T, C); alpha (T, W); two beta rows, the skip row, the occupancy row (W each); the
    // extended label as i32 (W, in W doubles); one frame's gradient (C).
    per_thread_ = T_ * C_ + T_ * W_ + 5 * W_ + C_;
    scratch_ = be.empty(Shape{2 * (threads_ * per_thread_ + N_)}, MemCategory::kWorkspace);
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    check_values(x);
    double* nll = scratch_.data<double>() + threads_ * per_thread_;
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
    for (int64_t n = 0; n < N_; ++n) nll[n] = sample(n, x, nullptr, 0.0);
    double total = 0;
    for (int64_t n = 0; n < N_; ++n) total += nll[n];
    y[0]->f32()[0] = static_cast<float>(total / static_cast<double>(N_));
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;  // x was checked by the forward of this step
    const double up = static_cast<double>(dy[0]->f32()[0]) / static_cast<double>(N_);
    float* g = dx[0]->f32();
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
    for (int64_t n = 0; n < N_; ++n) sample(n, x, g, up);
  }

 private:
  // Lengths within bounds and labels in [0, C) other than blank; throws naming the sample.
  void check_values(TensorRefs x) const {
    const int32_t* labels = x[1]->data<int32_t>();
    const int32_t* in_len = x[2]->data<int32_t>();
    const int32_t* lab_len = x[3]->data<int32_t>();
    for (int64_t n = 0; n < N_; ++n) {
      TBD_LAYER_CHECK(in_len[n] >= 0 && in_len[n] <= T_, kind(), name_, "input_lengths[", n,
                      "] = ", in_len[n], " is outside [0, T=", T_, "]");
      TBD_LAYER_CHECK(lab_len[n] >= 0 && lab_len[n] <= S_, kind(), name_, "label_lengths[", n,
                      "] = ", lab_len[n], " is outside [0, S=", S_, "]");
      for (int64_t s = 0; s < lab_len[n]; ++s) {
        const int32_t l = labels[n * S_ + s];
        TBD_LAYER_CHECK(l >= 0 && l < C_ && l != cfg_.blank, kind(), name_, "labels[", n, ", ", s,
                        "] = ", l, " must be in [0, C=", C_, ") and not the blank ", cfg_.blank);
      }
    }
  }

  // Sample n's -log p (0 when impossible). With g non-null, writes its frames' gradients,
  // scaled by up (the frames past its length get 0).
  double sample(int64_t n, TensorRefs x, float* g, double up) const {
    const float* z = x[0]->f32();
    const int32_t* labels = x[1]->data<int32_t>() + n * S_;
    const int64_t L = x[2]->data<int32_t>()[n], U = x[3]->data<int32_t>()[n];
    const int64_t X = 2 * U + 1;  // extended label: blank, l1, blank, ..., lU, blank
    double* lsm = scratch_.data<double>() + omp_get_thread_num() * per_thread_;  // (L, C)
    double* alpha = lsm + T_ * C_;        // (L, W): row t holds positions -2 .. X+1 at t * W
    double* beta_rows = alpha + T_ * W_;  // two rows (W each), alternating
    double* skip = beta_rows + 2 * W_;    // 0 where a path may come from s - 2, else -inf
    double* occ = skip + W_;
    auto* lab = reinterpret_cast<int32_t*>(occ + W_) + kPad;  // class of each position
    double* acc = occ + 2 * W_;                               // (C) one frame's gradient
    if (g != nullptr) {  // frames past the length, and impossible samples, get no gradient
      for (int64_t t = 0; t < T_; ++t) std::fill_n(g + (t * N_ + n) * C_, C_, 0.0f);
    }
    if (L == 0) return 0.0;  // nothing to align: p = 1 for an empty label, else impossible
    const int32_t blank = static_cast<int32_t>(cfg_.blank);
    for (int64_t s = 0; s < X; ++s) lab[s] = s % 2 == 0 ? blank : labels[s / 2];
    std::fill_n(skip, W_, kNegInf);
    for (int64_t s = 2; s < X; ++s) {
      if (lab[s] != blank && lab[s] != lab[s - 2]) skip[kPad + s] = 0.0;
    }
    for (int64_t t = 0; t < L; ++t) log_softmax_row(lsm + t * C_, z + (t * N_ + n) * C_, C_);
    // alpha: positions above 2t + 1 are unreachable at frame t and stay -inf.
    std::fill_n(alpha, L * W_, kNegInf);
    auto arow = [&](int64_t t) { return alpha + t * W_ + kPad; };
    for (int64_t s = 0; s < std::min<int64_t>(X, 2); ++s) arow(0)[s] = lsm[lab[s]];
    for (int64_t t = 1; t < L; ++t) {
      const double* prev = arow(t - 1);
      recursion_row(arow(t), prev, prev - 1, prev - 2, skip + kPad, lsm + t * C_, lab,
                    std::min(X, 2 * t + 2));
    }
    const double* last = arow(L - 1);
    double logp = last[X - 1];
    if (X > 1) logp = log_add(logp, last[X - 2]);
    if (logp == kNegInf) return 0.0;  // impossible: zero loss, zero gradient (documented)
    if (g == nullptr) return -logp;
    // beta, backwards two rows at a time; positions below X - 2(L - t) cannot reach the end
    // and stay -inf. Each frame's gradient: softmax - occupancy, occupancy_k = sum over the
    // positions s of class k of alpha beta / (y_k p).
    double* next = beta_rows + kPad;
    double* cur = beta_rows + W_ + kPad;
    std::fill_n(beta_rows, 2 * W_, kNegInf);
    for (int64_t s = std::max<int64_t>(X - 2, 0); s < X; ++s) {
      cur[s] = lsm[(L - 1) * C_ + lab[s]];
    }
    for (int64_t t = L - 1; t >= 0; --t) {
      if (t < L - 1) {
        std::swap(cur, next);
        const int64_t lo = std::max<int64_t>(X - 2 * (L - t), 0);
        std::fill_n(cur - kPad, W_, kNegInf);
        recursion_row(cur + lo, next + lo, next + lo + 1, next + lo + 2, skip + kPad + lo + 2,
                      lsm + t * C_, lab + lo, X - lo);
      }
      const double* lsm_t = lsm + t * C_;
      occupancy_row(occ, arow(t), cur, lsm_t, lab, logp, X);
      exp_row(acc, lsm_t, C_);
      for (int64_t s = 0; s < X; ++s) acc[lab[s]] -= occ[s];
      scale_row(g + (t * N_ + n) * C_, acc, up, C_);
    }
    return -logp;
  }

  CtcLossConfig cfg_;
  int64_t T_ = 0, N_ = 0, C_ = 0, S_ = 0, W_ = 0;
  int threads_ = 1;
  int64_t per_thread_ = 0;
  Tensor
      scratch_;  // per thread: lsm, alpha, beta rows, skip, occupancy, labels, gradient; N losses
};

TBD_REGISTER_LAYER(CtcLossConfig, DeviceKind::kCpu, CtcLossCpu);

}  // namespace
}  // namespace tbd::cpu
