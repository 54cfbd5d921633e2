// layers/cpu/ctc_loss_cpu.cpp: CtcLoss on the CPU, own code (oneDNN has no CTC).
//
// Samples in parallel (OpenMP over the batch, dynamic: lengths differ). Per sample: the
// log-softmax of its frames, then alpha (and in backward beta) over the extended label in
// double, in buffers of each thread's own, allocated at build for the thread count of the
// build. Per-sample losses are summed serially, so the loss does not depend on the schedule.
// The inputs are checked before forward's parallel region (lengths, label values), naming the
// sample.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "layers/ctc_loss.h"

namespace tbd::cpu {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

inline double log_add(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

class CtcLossCpu final : public Layer {
 public:
  CtcLossCpu(Backend& be, const std::string& name, const CtcLossConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract(name, cfg, in)), cfg_(cfg) {
    T_ = in[0].shape[0], N_ = in[0].shape[1], C_ = in[0].shape[2], S_ = in[1].shape[1];
    threads_ = std::max(1, omp_get_max_threads());
    per_thread_ = T_ * C_ + 2 * T_ * (2 * S_ + 1) + C_;
    scratch_ = be.empty(Shape{2 * (threads_ * per_thread_ + N_)}, MemCategory::kWorkspace);
  }

  const char* kind() const override { return CtcLossConfig::kKind; }
  std::string describe() const override {
    return detail::concat("logits ", inputs_[0].shape.to_string(), " labels ",
                          inputs_[1].shape.to_string());
  }

  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), 4, "forward inputs");
    check_values(x);
    double* nll = scratch_.data<double>() + threads_ * per_thread_;
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
    for (int64_t n = 0; n < N_; ++n) nll[n] = sample(n, x, nullptr, 0.0);
    double total = 0;
    for (int64_t n = 0; n < N_; ++n) total += nll[n];
    y[0]->f32()[0] = static_cast<float>(total / static_cast<double>(N_));
  }

  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
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
    double* buf = scratch_.data<double>() + omp_get_thread_num() * per_thread_;
    double* lsm = buf;              // (L, C) log-softmax
    double* alpha = lsm + T_ * C_;  // (L, X)
    double* beta = alpha + T_ * (2 * S_ + 1);
    auto ext = [&](int64_t s) -> int64_t { return s % 2 == 0 ? cfg_.blank : labels[s / 2]; };
    if (g != nullptr) {  // frames past the length, and impossible samples, get no gradient
      for (int64_t t = 0; t < T_; ++t) std::fill_n(g + (t * N_ + n) * C_, C_, 0.0f);
    }
    if (L == 0) return 0.0;  // nothing to align: p = 1 for an empty label, else impossible
    for (int64_t t = 0; t < L; ++t) {
      const float* zt = z + (t * N_ + n) * C_;
      double m = zt[0];
      for (int64_t k = 1; k < C_; ++k) m = std::max(m, static_cast<double>(zt[k]));
      double s = 0;
      for (int64_t k = 0; k < C_; ++k) s += std::exp(zt[k] - m);
      const double lse = m + std::log(s);
      for (int64_t k = 0; k < C_; ++k) lsm[t * C_ + k] = zt[k] - lse;
    }
    // alpha
    std::fill_n(alpha, L * X, kNegInf);
    alpha[0] = lsm[ext(0)];
    if (X > 1) alpha[1] = lsm[ext(1)];
    for (int64_t t = 1; t < L; ++t) {
      for (int64_t s = 0; s < X; ++s) {
        double a = alpha[(t - 1) * X + s];
        if (s >= 1) a = log_add(a, alpha[(t - 1) * X + s - 1]);
        if (s >= 2 && ext(s) != cfg_.blank && ext(s) != ext(s - 2)) {
          a = log_add(a, alpha[(t - 1) * X + s - 2]);
        }
        alpha[t * X + s] = a == kNegInf ? kNegInf : a + lsm[t * C_ + ext(s)];
      }
    }
    double logp = alpha[(L - 1) * X + X - 1];
    if (X > 1) logp = log_add(logp, alpha[(L - 1) * X + X - 2]);
    if (logp == kNegInf) return 0.0;  // impossible: zero loss, zero gradient (documented)
    if (g == nullptr) return -logp;
    // beta
    std::fill_n(beta, L * X, kNegInf);
    beta[(L - 1) * X + X - 1] = lsm[(L - 1) * C_ + ext(X - 1)];
    if (X > 1) beta[(L - 1) * X + X - 2] = lsm[(L - 1) * C_ + ext(X - 2)];
    for (int64_t t = L - 2; t >= 0; --t) {
      for (int64_t s = 0; s < X; ++s) {
        double b = beta[(t + 1) * X + s];
        if (s + 1 < X) b = log_add(b, beta[(t + 1) * X + s + 1]);
        if (s + 2 < X && ext(s) != cfg_.blank && ext(s + 2) != ext(s)) {
          b = log_add(b, beta[(t + 1) * X + s + 2]);
        }
        beta[t * X + s] = b == kNegInf ? kNegInf : b + lsm[t * C_ + ext(s)];
      }
    }
    // gradient: softmax - occupancy, occupancy_k = sum_{s: ext(s) = k} alpha beta / (y_k p)
    double* acc = beta + T_ * (2 * S_ + 1);  // (C) one frame's gradient, in double
    for (int64_t t = 0; t < L; ++t) {
      for (int64_t k = 0; k < C_; ++k) acc[k] = std::exp(lsm[t * C_ + k]);
      // Each extended position takes its share off its class (classes off the label: none).
      for (int64_t s = 0; s < X; ++s) {
        const double ab = alpha[t * X + s] + beta[t * X + s];
        if (ab == kNegInf) continue;
        const int64_t k = ext(s);
        acc[k] -= std::exp(ab - lsm[t * C_ + k] - logp);
      }
      float* gt = g + (t * N_ + n) * C_;
      for (int64_t k = 0; k < C_; ++k) gt[k] = static_cast<float>(up * acc[k]);
    }
    return -logp;
  }

  CtcLossConfig cfg_;
  int64_t T_ = 0, N_ = 0, C_ = 0, S_ = 0;
  int threads_ = 1;
  int64_t per_thread_ = 0;
  Tensor scratch_;  // per thread: lsm, alpha, beta, one frame's gradient; then N losses
};

TBD_REGISTER_LAYER(CtcLossConfig, DeviceKind::kCpu, CtcLossCpu);

}  // namespace
}  // namespace tbd::cpu
