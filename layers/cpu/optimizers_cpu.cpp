// layers/cpu/optimizers_cpu.cpp: SGD (momentum, weight decay), Adam/AdamW and RMSprop on CPU.
//
// oneDNN has no optimizer ops, so these are own loops: the update rules of PyTorch's
// torch.optim (documented on the configs in layers/optimizer.h), in float32. At build the
// parameters are cut into chunks of at most kChunk elements, so one step is a single OpenMP
// loop over all chunks of all parameters (biases and 25M-element FC weights alike keep both
// cores busy) and each chunk runs a vectorized kernel (TBD_SIMD_CLONES). State buffers are
// allocated at build as optimizer_state; step() allocates nothing and reads the parameter
// pointers afresh (Graph::tie may re-point them). Gradient clipping (GradClip) happens inside
// the kernels on the value they read; the global norm is one parallel pass of per-chunk sums
// of squares in double, added up in chunk order, so a step is bit-identical from run to run
// and whatever the number of threads.
#include <cmath>
#include <limits>

#include "layers/cpu/simd.h"
#include "layers/optimizer.h"

namespace tbd::cpu {
namespace {

constexpr int64_t kChunk = 1 << 15;  // 128 KiB of f32 per array: fits L2 alongside its peers

// ---- kernels (one chunk of n elements) ----

// What one step's clipping does to each gradient element (GradClip): the global-norm scale
// (1 without max_norm), then the clip to [-limit, limit] (+inf without value). Off, the
// gradient comes through bit for bit.
struct ClipFactors {
  float scale = 1.f;
  float limit = std::numeric_limits<float>::infinity();
};

// The gradient an update reads; NaN stays NaN.
inline float clipped(float g, ClipFactors c) {
  return std::min(std::max(g * c.scale, -c.limit), c.limit);
}

// sum g^2 in double (the global norm's partial over one chunk).
TBD_SIMD_CLONES double sum_squares(const float* g, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(g[i]) * g[i];
  return s;
}

// v = momentum*v + (g + wd*w); w -= lr*v. v null: plain SGD, w -= lr*(g + wd*w).
TBD_SIMD_CLONES void sgd_chunk(float* w, const float* g, float* v, int64_t n, float lr,
                               float momentum, float wd, ClipFactors c) {
  if (v != nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      float vi = momentum * v[i] + (clipped(g[i], c) + wd * w[i]);
      v[i] = vi;
      w[i] -= lr * vi;
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) w[i] -= lr * (clipped(g[i], c) + wd * w[i]);
  }
}

// g' = g + l2*w (Adam's coupled decay; l2 = 0 for AdamW or no decay); w *= shrink (AdamW:
// 1 - lr*wd, else 1); m, v moments; w -= step_size * m / (sqrt(v)*inv_sqrt_bc2 + eps).
TBD_SIMD_CLONES void adam_chunk(float* w, const float* g, float* m, float* v, int64_t n, float b1,
                                float b2, float l2, float shrink, float step_size,
                                float inv_sqrt_bc2, float eps, ClipFactors c) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float gi = clipped(g[i], c) + l2 * w[i];
    float mi = b1 * m[i] + (1.f - b1) * gi;
    float vi = b2 * v[i] + (1.f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = w[i] * shrink - step_size * mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps);
  }
}

// sq = alpha*sq + (1-alpha)*g'^2 with g' = g + wd*w; u = g'/(sqrt(sq)+eps);
// buf = momentum*buf + u, w -= lr*buf (buf null: w -= lr*u).
TBD_SIMD_CLONES void rmsprop_chunk(float* w, const float* g, float* sq, float* buf, int64_t n,
                                   float lr, float alpha, float eps, float momentum, float wd,
                                   ClipFactors c) {
  if (buf != nullptr) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      float gi = clipped(g[i], c) + wd * w[i];
      float si = alpha * sq[i] + (1.f - alpha) * gi * gi;
      sq[i] = si;
      float bi = momentum * buf[i] + gi / (std::sqrt(si) + eps);
      buf[i] = bi;
      w[i] -= lr * bi;
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      float gi = clipped(g[i], c) + wd * w[i];
      float si = alpha * sq[i] + (1.f - alpha) * gi * gi;
      sq[i] = si;
      w[i] -= lr * gi / (std::sqrt(si) + eps);
    }
  }
}

// What the optimizers share: the chunk list, up to two states per parameter, each state an
// arena of its own (one buffer, a view per parameter), and gradient clipping.
class CpuOptimizer : public Optimizer {
 protected:
  struct Chunk {
    int param;
    int64_t begin, size;
  };

  CpuOptimizer(Backend& be, const char* kind, std::vector<Param*> params, int num_states,
               const GradClip& clip)
      : Optimizer(std::move(params)), clip_(clip) {
    check_grad_clip(kind, clip);
    state_.resize(num_states);
    for (std::size_t p = 0; p < params_.size(); ++p) {
      const Param& prm = *params_[p];
      // Element-wise over the stored elements: any layout whose gradient is stored alike (a
      // packed parameter's zero padding stays zero, its gradient's padding being zero).
      TBD_CHECK(prm.value.dtype() == DType::kF32 && prm.value.layout() != Layout::kNChw16c &&
                    prm.grad.desc().same_storage(prm.value.desc()),
                kind, ": parameter '", prm.name, "' must be f32 with a gradient stored as it is, ",
                "got ", prm.value.desc().to_string(), " and ", prm.grad.desc().to_string());
      const int64_t n = prm.value.stored_numel();
      for (int64_t b = 0; b < n; b += kChunk) {
        chunks_.push_back(Chunk{static_cast<int>(p), b, std::min(kChunk, n - b)});
      }
    }
    for (auto& s : state_) s = state_arena(be, params_);
    if (clip.max_norm > 0) partial_.assign(chunks_.size(), 0.0);
  }

  // This step's clipping factors; with max_norm, one pass over every gradient for the norm.
  ClipFactors clip_factors() {
    ClipFactors c;
    if (clip_.value > 0) c.limit = static_cast<float>(clip_.value);
    if (clip_.max_norm > 0) {
      const int64_t count = static_cast<int64_t>(chunks_.size());
#pragma omp parallel for schedule(dynamic, 1)
      for (int64_t k = 0; k < count; ++k) {
        const Chunk& ch = chunks_[k];
        partial_[k] = sum_squares(params_[ch.param]->grad.f32() + ch.begin, ch.size);
      }
      double total = 0;
      for (double s : partial_) total += s;  // in chunk order: the same sum on every run
      c.scale =
          static_cast<float>(std::min(1.0, clip_.max_norm / (std::sqrt(total) + kClipNormEps)));
    }
    return c;
  }

  // Calls f(chunk, w, g, state0, state1) for every chunk, in parallel; absent states are null.
  template <class F>
  void for_each_chunk(F f) {
    const int64_t count = static_cast<int64_t>(chunks_.size());
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t c = 0; c < count; ++c) {
      const Chunk& ch = chunks_[c];
      const Param& p = *params_[ch.param];
      float* s0 = state_.size() > 0 ? state_[0][ch.param].f32() + ch.begin : nullptr;
      float* s1 = state_.size() > 1 ? state_[1][ch.param].f32() + ch.begin : nullptr;
      f(ch, p, p.value.f32() + ch.begin, p.grad.f32() + ch.begin, s0, s1);
    }
  }

  std::vector<Chunk> chunks_;
  std::vector<std::vector<Tensor>> state_;  // [state index][param]
  GradClip clip_;
  std::vector<double> partial_;  // per chunk: its sum of g^2 (global-norm clipping only)
};

class SgdCpu final : public CpuOptimizer {
 public:
  SgdCpu(Backend& be, const SgdConfig& cfg, std::vector<Param*> params)
      : CpuOptimizer(be, SgdConfig::kKind, std::move(params), cfg.momentum != 0 ? 1 : 0, cfg.clip),
        cfg_(cfg) {
    set_work(sgd_flops(cfg, params_), sgd_bytes(cfg, params_));
  }
  const char* kind() const override { return SgdConfig::kKind; }
  void step() override {
    const float lr = static_cast<float>(cfg_.lr), mom = static_cast<float>(cfg_.momentum);
    const float wd = static_cast<float>(cfg_.weight_decay);
    const ClipFactors c = clip_factors();
    for_each_chunk([&](const Chunk& ch, const Param& p, float* w, const float* g, float* v,
                       float*) { sgd_chunk(w, g, v, ch.size, lr, mom, p.decay ? wd : 0.f, c); });
  }

 private:
  SgdConfig cfg_;
};

class AdamCpu final : public CpuOptimizer {
 public:
  AdamCpu(Backend& be, const AdamConfig& cfg, std::vector<Param*> params)
      : CpuOptimizer(be, cfg.decoupled ? "AdamW" : AdamConfig::kKind, std::move(params), 2,
                     cfg.clip),
        cfg_(cfg) {
    set_work(adam_flops(cfg, params_), adam_bytes(cfg, params_));
  }
  const char* kind() const override { return cfg_.decoupled ? "AdamW" : AdamConfig::kKind; }
  void step() override {
    ++t_;
    // Bias corrections in double (they are per step, not per element), as PyTorch does.
    const double bc1 = 1.0 - std::pow(cfg_.beta1, static_cast<double>(t_));
    const double bc2 = 1.0 - std::pow(cfg_.beta2, static_cast<double>(t_));
    const float step_size = static_cast<float>(cfg_.lr / bc1);
    const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
    const float b1 = static_cast<float>(cfg_.beta1), b2 = static_cast<float>(cfg_.beta2);
    const float eps = static_cast<float>(cfg_.eps), wd = static_cast<float>(cfg_.weight_decay);
    const float shrink_decay = static_cast<float>(1.0 - cfg_.lr * cfg_.weight_decay);
    const bool decoupled = cfg_.decoupled;
    const ClipFactors c = clip_factors();
    for_each_chunk(
        [&](const Chunk& ch, const Param& p, float* w, const float* g, float* m, float* v) {
          const float l2 = p.decay && !decoupled ? wd : 0.f;
          const float shrink = p.decay && decoupled ? shrink_decay : 1.f;
          adam_chunk(w, g, m, v, ch.size, b1, b2, l2, shrink, step_size, inv_sqrt_bc2, eps, c);
        });
  }

 private:
  AdamConfig cfg_;
  int64_t t_ = 0;  // steps taken, for the bias corrections
};

class RmspropCpu final : public CpuOptimizer {
 public:
  RmspropCpu(Backend& be, const RmspropConfig& cfg, std::vector<Param*> params)
      : CpuOptimizer(be, RmspropConfig::kKind, std::move(params), cfg.momentum != 0 ? 2 : 1,
                     cfg.clip),
        cfg_(cfg) {
    set_work(rmsprop_flops(cfg, params_), rmsprop_bytes(cfg, params_));
  }
  const char* kind() const override { return RmspropConfig::kKind; }
  void step() override {
    const float lr = static_cast<float>(cfg_.lr), alpha = static_cast<float>(cfg_.alpha);
    const float eps = static_cast<float>(cfg_.eps), mom = static_cast<float>(cfg_.momentum);
    const float wd = static_cast<float>(cfg_.weight_decay);
    const ClipFactors c = clip_factors();
    for_each_chunk(
        [&](const Chunk& ch, const Param& p, float* w, const float* g, float* sq, float* buf) {
          rmsprop_chunk(w, g, sq, buf, ch.size, lr, alpha, eps, mom, p.decay ? wd : 0.f, c);
        });
  }

 private:
  RmspropConfig cfg_;
};

TBD_REGISTER_OPTIMIZER(SgdConfig, DeviceKind::kCpu, SgdCpu);
TBD_REGISTER_OPTIMIZER(AdamConfig, DeviceKind::kCpu, AdamCpu);
TBD_REGISTER_OPTIMIZER(RmspropConfig, DeviceKind::kCpu, RmspropCpu);

}  // namespace
}  // namespace tbd::cpu
