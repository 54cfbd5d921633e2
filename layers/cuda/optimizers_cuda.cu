// layers/cuda/optimizers_cuda.cu: SGD (momentum), Adam/AdamW and RMSprop as fused kernels.
//
// One kernel updates up to kMaxTensors parameters at once (multi-tensor apply: the pointer
// table travels in the kernel's arguments, blockIdx.y picks the tensor), reading every value,
// gradient and state element once and writing it once; ResNet-50's 161 parameter tensors take
// 6 launches per step. Pointers are read from the Params at each step (Graph::tie may re-point
// them). Formulas: layers/optimizer.h (PyTorch conventions); weight decay applies only to
// parameters with Param::decay. State is zero-initialised, category optimizer_state.
//
// Gradient clipping (GradClip): the update kernels clip the gradient they read (Param::grad is
// left alone). With max_norm, a reduction pass before the update writes every (tensor, block)
// partial sum of g^2 (in double) to workspace, and one block adds them up in a fixed order and
// writes the scale to device memory, which the update kernels read: nothing syncs to the host,
// a captured CUDA graph recomputes it on every replay, and the grid and block shapes are fixed
// at build, so a step is bit-identical from run to run.
#include <cmath>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/optimizer.h"

namespace tbd::cuda {
namespace {

constexpr int kMaxTensors = 32;

// Kernel-argument table (about 1.4 KB, well under the 4 KB argument limit).
struct TensorTable {
  float* w[kMaxTensors];
  const float* g[kMaxTensors];
  float* s1[kMaxTensors];  // first state (momentum / m / square average), may be null
  float* s2[kMaxTensors];  // second state (v / momentum buffer), may be null
  int64_t n[kMaxTensors];
  float wd[kMaxTensors];  // weight decay of this tensor (0 when Param::decay is false)
};

struct SgdArgs {
  float lr, momentum;
};
// The step t is read from device memory (counter[1], advanced by advance_step_kernel before
// each step), so a captured CUDA graph applies t = 1, 2, 3, ... on its replays (PyTorch's
// capturable Adam); each thread computes the bias corrections 1 / (1 - beta^t) once.
struct AdamArgs {
  float lr, beta1, beta2, eps;
  bool decoupled;
  const int32_t* counter;
};
struct RmspropArgs {
  float lr, alpha, eps, momentum;
};

// What one step's clipping does to each gradient element: times *scale (the global-norm
// factor, in device memory; null without max_norm), then clipped to [-limit, limit] (+inf
// without value).
struct ClipArgs {
  const float* scale;
  float limit;
};

// The gradient an update reads; NaN stays NaN (as on the CPU).
__device__ __forceinline__ float clipped(float g, float scale, float limit) {
  const float v = g * scale;
  return v < -limit ? -limit : (v > limit ? limit : v);
}

__device__ __forceinline__ float scale_of(const ClipArgs& c) { return c.scale ? *c.scale : 1.f; }

#define TBD_TENSOR_LOOP(t, i)                                              \
  const int t = blockIdx.y;                                                \
  const int64_t n_ = tab.n[t];                                             \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n_; \
       i += int64_t{blockDim.x} * gridDim.x)

// partial[(first + t) * gridDim.x + blockIdx.x] = this block's sum of g^2 over tensor t.
__global__ void sum_squares_kernel(TensorTable tab, double* __restrict__ partial, int64_t first) {
  __shared__ double shared[32];
  double s = 0;
  TBD_TENSOR_LOOP(t, i) {
    const double g = tab.g[t][i];
    s += g * g;
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) partial[(first + blockIdx.y) * gridDim.x + blockIdx.x] = s;
}

// *scale = min(1, max_norm / (sqrt(sum of the n partials) + eps)); one block, a fixed order.
__global__ void clip_scale_kernel(const double* __restrict__ partial, int64_t n, double max_norm,
                                  double eps, float* __restrict__ scale) {
  __shared__ double shared[32];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += partial[i];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) *scale = static_cast<float>(fmin(1.0, max_norm / (sqrt(s) + eps)));
}

__global__ void sgd_kernel(TensorTable tab, SgdArgs a, ClipArgs c) {
  const float gs = scale_of(c);
  TBD_TENSOR_LOOP(t, i) {
    float* w = tab.w[t];
    float g = clipped(tab.g[t][i], gs, c.limit) + tab.wd[t] * w[i];
    if (a.momentum != 0.f) {
      float* v = tab.s1[t];
      v[i] = a.momentum * v[i] + g;
      g = v[i];
    }
    w[i] -= a.lr * g;
  }
}

__global__ void adam_kernel(TensorTable tab, AdamArgs a, ClipArgs c) {
  const float gs = scale_of(c);
  const double step = static_cast<double>(a.counter[1]);
  const float inv_c1 = static_cast<float>(1.0 / (1.0 - pow(static_cast<double>(a.beta1), step)));
  const float inv_c2 = static_cast<float>(1.0 / (1.0 - pow(static_cast<double>(a.beta2), step)));
  TBD_TENSOR_LOOP(t, i) {
    float* w = tab.w[t];
    float g = clipped(tab.g[t][i], gs, c.limit);
    if (a.decoupled) {
      w[i] -= a.lr * tab.wd[t] * w[i];
    } else {
      g += tab.wd[t] * w[i];
    }
    float* m = tab.s1[t];
    float* v = tab.s2[t];
    m[i] = a.beta1 * m[i] + (1.f - a.beta1) * g;
    v[i] = a.beta2 * v[i] + (1.f - a.beta2) * g * g;
    w[i] -= a.lr * (m[i] * inv_c1) / (sqrtf(v[i] * inv_c2) + a.eps);
  }
}

__global__ void rmsprop_kernel(TensorTable tab, RmspropArgs a, ClipArgs c) {
  const float gs = scale_of(c);
  TBD_TENSOR_LOOP(t, i) {
    float* w = tab.w[t];
    const float g = clipped(tab.g[t][i], gs, c.limit) + tab.wd[t] * w[i];
    float* sq = tab.s1[t];
    sq[i] = a.alpha * sq[i] + (1.f - a.alpha) * g * g;
    const float step = g / (sqrtf(sq[i]) + a.eps);
    if (a.momentum != 0.f) {
      float* buf = tab.s2[t];
      buf[i] = a.momentum * buf[i] + step;
      w[i] -= a.lr * buf[i];
    } else {
      w[i] -= a.lr * step;
    }
  }
}

// Shared parts: parameter checks, state allocation, batching into launches, clipping.
class CudaOptimizerBase : public Optimizer {
 protected:
  CudaOptimizerBase(Backend& be, const char* kind, std::vector<Param*> params, double wd,
                    int num_states, const GradClip& clip)
      : Optimizer(std::move(params)), cu_(as_cuda(be)), wd_(wd), clip_(clip) {
    check_grad_clip(kind, clip);
    for (Param* p : params_) {
      TBD_CHECK(p != nullptr && p->value.defined() && p->grad.defined() &&
                    p->value.dtype() == DType::kF32 && p->value.layout() == Layout::kRowMajor &&
                    p->grad.shape() == p->value.shape() && p->value.device() == DeviceKind::kCuda,
                kind, ": parameter '", p ? p->name : "?",
                "' must have an f32 CUDA value and a gradient of the same shape");
    }
    // Each state is an arena of its own (one buffer, a view per parameter); absent states are
    // undefined tensors.
    state1_ = num_states > 0 ? state_arena(be, params_) : std::vector<Tensor>(params_.size());
    state2_ = num_states > 1 ? state_arena(be, params_) : std::vector<Tensor>(params_.size());
    if (clip.max_norm > 0 && !params_.empty()) {
      // A fixed number of norm blocks per tensor (the grid never depends on the step), enough
      // to fill the device for the largest tensor; one double per (tensor, block).
      int64_t max_n = 0;
      for (const Param* p : params_) max_n = std::max(max_n, p->value.numel());
      norm_blocks_ = std::min<unsigned>(grid_for(max_n), static_cast<unsigned>(cu_.sm_count()));
      const int64_t n = static_cast<int64_t>(params_.size() * norm_blocks_);
      partial_ = be.empty(Shape{2 * n}, MemCategory::kWorkspace);  // n doubles
      scale_ = be.empty(Shape{1}, MemCategory::kWorkspace);
    }
  }

  // This step's clipping; with max_norm, launches the norm's reduction and the scale kernel.
  ClipArgs clip_args() {
    ClipArgs c{nullptr, clip_.value > 0 ? static_cast<float>(clip_.value) : INFINITY};
    if (!scale_.defined()) return c;
    double* partial = static_cast<double*>(partial_.raw());
    for_each_group([&](const TensorTable& tab, dim3 grid, std::size_t first) {
      sum_squares_kernel<<<dim3(norm_blocks_, grid.y), kBlock, 0, cu_.stream()>>>(
          tab, partial, static_cast<int64_t>(first));
    });
    clip_scale_kernel<<<1, kBlock, 0, cu_.stream()>>>(
        partial, static_cast<int64_t>(params_.size() * norm_blocks_), clip_.max_norm, kClipNormEps,
        scale_.f32());
    TBD_CUDA_CHECK_LAST();
    c.scale = scale_.f32();
    return c;
  }

  // Calls launch(table, grid, first) for each group of up to kMaxTensors parameters, the
  // first of them params_[first].
  template <class Launch>
  void for_each_group(Launch launch) {
    for (std::size_t first = 0; first < params_.size(); first += kMaxTensors) {
      TensorTable tab{};
      int count = 0;
      int64_t max_n = 0;
      for (std::size_t k = first; k < params_.size() && count < kMaxTensors; ++k, ++count) {
        Param* p = params_[k];
        tab.w[count] = p->value.f32();
        tab.g[count] = p->grad.f32();
        tab.s1[count] = state1_[k].defined() ? state1_[k].f32() : nullptr;
        tab.s2[count] = state2_[k].defined() ? state2_[k].f32() : nullptr;
        tab.n[count] = p->value.numel();
        tab.wd[count] = p->decay ? static_cast<float>(wd_) : 0.f;
        max_n = std::max(max_n, tab.n[count]);
      }
      // Enough blocks per tensor to fill the device; each grid-strides over its tensor.
      const unsigned bx = std::min<unsigned>(grid_for(max_n), 4u * cu_.sm_count());
      launch(tab, dim3(bx, static_cast<unsigned>(count)), first);
      TBD_CUDA_CHECK_LAST();
    }
  }

  CudaBackend& cu_;
  double wd_;
  GradClip clip_;
  std::vector<Tensor> state1_, state2_;
  unsigned norm_blocks_ = 0;  // blocks per tensor of the norm's reduction
  Tensor partial_, scale_;    // workspace (max_norm only): the partial sums; the scale
};

class SgdCuda final : public CudaOptimizerBase {
 public:
  SgdCuda(Backend& be, const SgdConfig& cfg, std::vector<Param*> params)
      : CudaOptimizerBase(be, SgdConfig::kKind, std::move(params), cfg.weight_decay,
                          cfg.momentum != 0 ? 1 : 0, cfg.clip),
        cfg_(cfg) {
    set_work(sgd_flops(cfg, params_), sgd_bytes(cfg, params_));
  }
  const char* kind() const override { return SgdConfig::kKind; }
  void step() override {
    const SgdArgs a{static_cast<float>(cfg_.lr), static_cast<float>(cfg_.momentum)};
    const ClipArgs c = clip_args();
    for_each_group([&](const TensorTable& tab, dim3 grid, std::size_t) {
      sgd_kernel<<<grid, kBlock, 0, cu_.stream()>>>(tab, a, c);
    });
  }

 private:
  SgdConfig cfg_;
};

class AdamCuda final : public CudaOptimizerBase {
 public:
  AdamCuda(Backend& be, const AdamConfig& cfg, std::vector<Param*> params)
      : CudaOptimizerBase(be, cfg.decoupled ? "AdamW" : AdamConfig::kKind, std::move(params),
                          cfg.weight_decay, 2, cfg.clip),
        cfg_(cfg) {
    set_work(adam_flops(cfg, params_), adam_bytes(cfg, params_));
    // Steps taken, in device memory: [next step, step being applied] (t counts from 1). Eight
    // bytes, kept out of optimizer_state so that it stays 4 bytes x elements x states exactly.
    counter_ = be.empty(Shape{2}, MemCategory::kDynamic, Layout::kRowMajor, DType::kI32);
    const int32_t start[2] = {1, 0};
    be.copy_from_host(counter_, start);
  }
  const char* kind() const override { return cfg_.decoupled ? "AdamW" : AdamConfig::kKind; }
  void step() override {
    advance_step_kernel<<<1, 1, 0, cu_.stream()>>>(counter_.data<int32_t>());
    TBD_CUDA_CHECK_LAST();
    const AdamArgs a{static_cast<float>(cfg_.lr),
                     static_cast<float>(cfg_.beta1),
                     static_cast<float>(cfg_.beta2),
                     static_cast<float>(cfg_.eps),
                     cfg_.decoupled,
                     counter_.data<int32_t>()};
    const ClipArgs c = clip_args();
    for_each_group([&](const TensorTable& tab, dim3 grid, std::size_t) {
      adam_kernel<<<grid, kBlock, 0, cu_.stream()>>>(tab, a, c);
    });
  }

 private:
  AdamConfig cfg_;
  Tensor counter_;  // i32 [next step, step being applied], device memory
};

class RmspropCuda final : public CudaOptimizerBase {
 public:
  RmspropCuda(Backend& be, const RmspropConfig& cfg, std::vector<Param*> params)
      : CudaOptimizerBase(be, RmspropConfig::kKind, std::move(params), cfg.weight_decay,
                          cfg.momentum != 0 ? 2 : 1, cfg.clip),
        cfg_(cfg) {
    set_work(rmsprop_flops(cfg, params_), rmsprop_bytes(cfg, params_));
  }
  const char* kind() const override { return RmspropConfig::kKind; }
  void step() override {
    const RmspropArgs a{static_cast<float>(cfg_.lr), static_cast<float>(cfg_.alpha),
                        static_cast<float>(cfg_.eps), static_cast<float>(cfg_.momentum)};
    const ClipArgs c = clip_args();
    for_each_group([&](const TensorTable& tab, dim3 grid, std::size_t) {
      rmsprop_kernel<<<grid, kBlock, 0, cu_.stream()>>>(tab, a, c);
    });
  }

 private:
  RmspropConfig cfg_;
};

TBD_REGISTER_OPTIMIZER(SgdConfig, DeviceKind::kCuda, SgdCuda);
TBD_REGISTER_OPTIMIZER(AdamConfig, DeviceKind::kCuda, AdamCuda);
TBD_REGISTER_OPTIMIZER(RmspropConfig, DeviceKind::kCuda, RmspropCuda);

}  // namespace
}  // namespace tbd::cuda
