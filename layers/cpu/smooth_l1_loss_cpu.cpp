// layers/cpu/smooth_l1_loss_cpu.cpp: SmoothL1Loss, own loops.
//
// The loss sums fixed chunks of kChunk elements in double (OpenMP over chunks; each chunk's
// partial sum in a buffer allocated at build), then the partials in chunk order: the same bits
// whatever the thread count. The gradient is one elementwise pass.
#include "layers/cpu/simd.h"
#include "layers/smooth_l1_loss.h"

namespace tbd::cpu {
namespace {

constexpr int64_t kChunk = 8192;

// sum_i w_i * f(p_i - t_i) over n elements, in double.
TBD_SIMD_CLONES double smooth_l1_chunk(const float* p, const float* t, const float* w, int64_t n,
                                       float s2) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(w[i] * smooth_l1(p[i] - t[i], s2));
  return s;
}

// dp_i = g * w_i * f'(p_i - t_i).
TBD_SIMD_CLONES void smooth_l1_grad_chunk(float* dp, const float* p, const float* t, const float* w,
                                          int64_t n, float s2, float g) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dp[i] = g * w[i] * smooth_l1_grad(p[i] - t[i], s2);
}

class SmoothL1LossCpu final : public Layer {
 public:
  SmoothL1LossCpu(Backend& be, const std::string& name, const SmoothL1LossConfig& cfg,
                  const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    E_ = in[0].shape.numel();
    chunks_ = (E_ + kChunk - 1) / kChunk;
    partial_ = be.empty(Shape{2 * chunks_}, MemCategory::kWorkspace);  // doubles
  }

  // y: (1)  pred, target, weight: the same shape
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const float* p = x[0]->f32();
    const float* t = x[1]->f32();
    const float* w = x[2]->f32();
    double* part = partial_.data<double>();
    const float s2 = sigma2();
    const int64_t E = E_;
#pragma omp parallel for schedule(static) if (chunks_ > 1)
    for (int64_t c = 0; c < chunks_; ++c) {
      const int64_t b = c * kChunk;
      part[c] = smooth_l1_chunk(p + b, t + b, w + b, std::min(kChunk, E - b), s2);
    }
    double s = 0;
    for (int64_t c = 0; c < chunks_; ++c) s += part[c];
    y[0]->f32()[0] = static_cast<float>(cfg_.scale * s);
  }

  // dpred: like pred; target and weight get no gradient.
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs) override {
    if (dx[0] == nullptr) return;
    const float* p = x[0]->f32();
    const float* t = x[1]->f32();
    const float* w = x[2]->f32();
    float* dp = dx[0]->f32();
    const float g = static_cast<float>(cfg_.scale * dy[0]->f32()[0]);
    const float s2 = sigma2();
    const int64_t E = E_;
#pragma omp parallel for schedule(static) if (chunks_ > 1)
    for (int64_t c = 0; c < chunks_; ++c) {
      const int64_t b = c * kChunk;
      smooth_l1_grad_chunk(dp + b, p + b, t + b, w + b, std::min(kChunk, E - b), s2, g);
    }
  }

 private:
  float sigma2() const { return static_cast<float>(cfg_.sigma * cfg_.sigma); }

  SmoothL1LossConfig cfg_;
  int64_t E_ = 0, chunks_ = 0;
  Tensor partial_;  // chunks_ doubles (2 floats each)
};

TBD_REGISTER_LAYER(SmoothL1LossConfig, DeviceKind::kCpu, SmoothL1LossCpu);

}  // namespace
}  // namespace tbd::cpu
