// layers/cuda/activation_pool_cuda.cu: Activation, Dropout, Pool2d and GlobalAvgPool2d on CUDA.
//
// Activation: cuDNN for relu, tanh and sigmoid (cudnnActivationForward/Backward); own kernels
// for leaky relu and the erf form of GELU, which cuDNN's legacy activation lacks.
// Dropout: the counter-based mask of layers/dropout.h (dropout_keep, host and device code), so
// masks are bit-identical to the CPU backend's; kept for backward as one byte per element
// (feature_maps), like the CPU.
// Pool2d: cuDNN pooling (deterministic max; average including or excluding padding).
// GlobalAvgPool2d: own kernels (a warp per (n, c) plane), with no limit on the window size.
// Shape checks and FLOP counts are the shared ones (layers/<kind>.cpp); only row-major tensors
// exist on CUDA, and elementwise layers would not care anyway.
#include "backends/cuda/cuda_backend.h"
#include "core/splitmix.h"
#include "layers/activation.h"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/cuda/kernel_util.cuh"
#include "layers/dropout.h"
#include "layers/pool2d.h"

namespace tbd::cuda {
namespace {

// ---- Activation ----

__global__ void leaky_relu_fwd_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                                      float alpha) {
  TBD_GRID_STRIDE(i, n) {
    const float v = x[i];
    y[i] = v > 0.f ? v : alpha * v;
  }
}

__global__ void leaky_relu_bwd_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                      float* __restrict__ dx, int64_t n, float alpha) {
  TBD_GRID_STRIDE(i, n) { dx[i] = x[i] > 0.f ? dy[i] : alpha * dy[i]; }
}

// GELU (erf): y = x * Phi(x), Phi(x) = 0.5 * (1 + erf(x / sqrt 2)); dy/dx = Phi(x) + x * phi(x).
__global__ void gelu_fwd_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  TBD_GRID_STRIDE(i, n) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
  }
}

__global__ void gelu_bwd_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                float* __restrict__ dx, int64_t n) {
  TBD_GRID_STRIDE(i, n) {
    const float v = x[i];
    const float cdf = 0.5f * (1.f + erff(v * 0.70710678118654752f));
    const float pdf = 0.39894228040143268f * expf(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

class ActivationCuda final : public Layer {
 public:
  ActivationCuda(Backend& be, const std::string& name, const ActivationConfig& cfg,
                 const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    n_ = in[0].shape.numel();
    if (uses_cudnn()) {
      cudnnActivationMode_t mode = cfg.act == ActKind::kRelu   ? CUDNN_ACTIVATION_RELU
                                   : cfg.act == ActKind::kTanh ? CUDNN_ACTIVATION_TANH
                                                               : CUDNN_ACTIVATION_SIGMOID;
      cudnnActivationDescriptor_t d = nullptr;
      TBD_CUDNN_CHECK(cudnnCreateActivationDescriptor(&d));
      act_ = CudnnActDesc(d);
      TBD_CUDNN_CHECK(cudnnSetActivationDescriptor(d, mode, CUDNN_PROPAGATE_NAN, 0.0));
      desc_ = make_tensor_desc(1, 1, 1, n_);  // elementwise: one flat row
    }
  }

  const char* kind() const override { return ActivationConfig::kKind; }
  std::string describe() const override {
    return detail::concat(to_string(cfg_.act), " x ", inputs_[0].shape.to_string(),
                          uses_cudnn() ? " | cudnn" : " | own kernel");
  }

  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), 1, "forward inputs");
    const float* xp = x[0]->f32();
    float* yp = y[0]->f32();
    if (uses_cudnn()) {
      TBD_CUDNN_CHECK(
          cudnnActivationForward(cu_.cudnn(), act_, &kOne, desc_, xp, &kZero, desc_, yp));
      return;
    }
    if (cfg_.act == ActKind::kLeakyRelu) {
      leaky_relu_fwd_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(
          xp, yp, n_, static_cast<float>(cfg_.alpha));
    } else {
      gelu_fwd_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(xp, yp, n_);
    }
    TBD_CUDA_CHECK_LAST();
  }

  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    if (dx[0] == nullptr) return;
    if (uses_cudnn()) {
      TBD_CUDNN_CHECK(cudnnActivationBackward(cu_.cudnn(), act_, &kOne, desc_, y[0]->raw(), desc_,
                                              dy[0]->raw(), desc_, x[0]->raw(), &kZero, desc_,
                                              dx[0]->raw()));
      return;
    }
    if (cfg_.act == ActKind::kLeakyRelu) {
      leaky_relu_bwd_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(
          x[0]->f32(), dy[0]->f32(), dx[0]->f32(), n_, static_cast<float>(cfg_.alpha));
    } else {
      gelu_bwd_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(x[0]->f32(), dy[0]->f32(),
                                                                 dx[0]->f32(), n_);
    }
    TBD_CUDA_CHECK_LAST();
  }

 private:
  bool uses_cudnn() const {
    return cfg_.act == ActKind::kRelu || cfg_.act == ActKind::kTanh ||
           cfg_.act == ActKind::kSigmoid;
  }

  ActivationConfig cfg_;
  CudaBackend& cu_;
  int64_t n_ = 0;
  CudnnActDesc act_;
  CudnnTensorDesc desc_;
};

TBD_REGISTER_LAYER(ActivationConfig, DeviceKind::kCuda, ActivationCuda);

// ---- Dropout ----

// The step comes from device memory (advance_step_kernel), the mask from (key, step, i).
__global__ void dropout_fwd_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   uint8_t* __restrict__ mask, int64_t n, uint64_t key,
                                   const int32_t* __restrict__ counter, uint32_t threshold,
                                   float scale) {
  const uint64_t step_base = dropout_step_base(key, static_cast<uint64_t>(counter[1]));
  TBD_GRID_STRIDE(i, n) {
    const bool keep = dropout_keep(step_base, i, threshold);
    mask[i] = keep;
    y[i] = keep ? x[i] * scale : 0.f;
  }
}

__global__ void dropout_bwd_kernel(const float* __restrict__ dy, const uint8_t* __restrict__ mask,
                                   float* __restrict__ dx, int64_t n, float scale) {
  TBD_GRID_STRIDE(i, n) { dx[i] = mask[i] ? dy[i] * scale : 0.f; }
}

class DropoutCuda final : public Layer {
 public:
  DropoutCuda(Backend& be, const std::string& name, const DropoutConfig& cfg,
              const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    n_ = in[0].shape.numel();
    key_ = dropout_key(cfg, name);
    threshold_ = dropout_threshold(cfg.p);
    scale_ = cfg.p < 1 ? static_cast<float>(1.0 / (1.0 - cfg.p)) : 0.f;  // p = 1: y = 0
    // One byte per element (the tensor dtypes have no u8).
    mask_ = be.empty(Shape{(n_ + 3) / 4}, MemCategory::kFeatureMaps);
    // Training forwards so far, in device memory (advance_step_kernel): a new mask each.
    counter_ = be.empty(TensorDesc{Shape{2}, DType::kI32}, MemCategory::kDynamic);
    TBD_CUDA_CHECK(cudaMemsetAsync(counter_.raw(), 0, counter_.bytes(), cu_.stream()));
  }

  const char* kind() const override { return DropoutConfig::kKind; }
  std::string describe() const override {
    return detail::concat("x ", inputs_[0].to_string(), " p=", cfg_.p);
  }

  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), 1, "forward inputs");
    if (!training_) {
      be_.reorder(*y[0], *x[0]);  // a copy
      return;
    }
    advance_step_kernel<<<1, 1, 0, cu_.stream()>>>(counter_.data<int32_t>());
    TBD_CUDA_CHECK_LAST();
    dropout_fwd_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), y[0]->f32(), mask_.data<uint8_t>(), n_, key_, counter_.data<int32_t>(),
        threshold_, scale_);
    TBD_CUDA_CHECK_LAST();
  }

  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    if (!training_) {
      be_.reorder(*dx[0], *dy[0]);
      return;
    }
    dropout_bwd_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(
        dy[0]->f32(), mask_.data<uint8_t>(), dx[0]->f32(), n_, scale_);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  DropoutConfig cfg_;
  CudaBackend& cu_;
  int64_t n_ = 0;
  uint64_t key_ = 0;
  uint32_t threshold_ = 0;
  float scale_ = 1.f;
  Tensor counter_;  // i32 [next step, step of the last forward] (device memory)
  Tensor mask_;
};

TBD_REGISTER_LAYER(DropoutConfig, DeviceKind::kCuda, DropoutCuda);

// ---- Pool2d ----

class Pool2dCudnn final : public Layer {
 public:
  Pool2dCudnn(Backend& be, const std::string& name, const Pool2dConfig& cfg,
              const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x", in[0]);
    const Shape& xs = in[0].shape;
    const Shape ys = outputs_[0].shape;
    const int64_t P = ys[2], Q = ys[3];

    cudnnPoolingMode_t mode = cfg.pool == PoolKind::kMax ? CUDNN_POOLING_MAX_DETERMINISTIC
                              : cfg.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                      : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    cudnnPoolingDescriptor_t d = nullptr;
    TBD_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d));
    pool_ = CudnnPoolDesc(d);
    TBD_CUDNN_CHECK(cudnnSetPooling2dDescriptor(
        d, mode, CUDNN_PROPAGATE_NAN, static_cast<int>(cfg.kernel_h),
        static_cast<int>(cfg.kernel_w), static_cast<int>(cfg.pad_h), static_cast<int>(cfg.pad_w),
        static_cast<int>(cfg.stride_h), static_cast<int>(cfg.stride_w)));
    x_desc_ = make_tensor_desc(xs[0], xs[1], xs[2], xs[3]);
    y_desc_ = make_tensor_desc(ys[0], ys[1], ys[2], ys[3]);
    int n = 0, c = 0, p = 0, q = 0;
    TBD_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(pool_, x_desc_, &n, &c, &p, &q));
    TBD_LAYER_CHECK(p == P && q == Q, kind(), name, "cuDNN's output shape (", n, ", ", c, ", ", p,
                    ", ", q, ") differs from the expected ", ys.to_string());
  }

  const char* kind() const override { return Pool2dConfig::kKind; }
  std::string describe() const override {
    return detail::concat(to_string(cfg_.pool), " x ", inputs_[0].shape.to_string(), " ",
                          cfg_.kernel_h, "x", cfg_.kernel_w, " s", cfg_.stride_h, " p", cfg_.pad_h);
  }

  // y: (N, C, P, Q)  x: (N, C, H, W)
  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), 1, "forward inputs");
    TBD_CUDNN_CHECK(cudnnPoolingForward(cu_.cudnn(), pool_, &kOne, x_desc_, x[0]->raw(), &kZero,
                                        y_desc_, y[0]->raw()));
  }

  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    if (dx[0] == nullptr) return;
    TBD_CUDNN_CHECK(cudnnPoolingBackward(cu_.cudnn(), pool_, &kOne, y_desc_, y[0]->raw(), y_desc_,
                                         dy[0]->raw(), x_desc_, x[0]->raw(), &kZero, x_desc_,
                                         dx[0]->raw()));
  }

 private:
  Pool2dConfig cfg_;
  CudaBackend& cu_;
  CudnnPoolDesc pool_;
  CudnnTensorDesc x_desc_, y_desc_;
};

TBD_REGISTER_LAYER(Pool2dConfig, DeviceKind::kCuda, Pool2dCudnn);

// ---- GlobalAvgPool2d ----

constexpr int kPlanesPerBlock = kBlock / 32;  // one warp per (n, c) plane

__global__ void gap_fwd_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t planes,
                               int64_t hw) {
  const int64_t plane = blockIdx.x * int64_t{kPlanesPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (plane >= planes) return;
  const float* xp = x + plane * hw;
  float s = 0;
  for (int64_t i = lane; i < hw; i += 32) s += xp[i];
  s = warp_sum(s);
  if (lane == 0) y[plane] = s / static_cast<float>(hw);
}

__global__ void gap_bwd_kernel(const float* __restrict__ dy, float* __restrict__ dx, int64_t n,
                               int64_t hw) {
  const float inv = 1.f / static_cast<float>(hw);
  TBD_GRID_STRIDE(i, n) { dx[i] = dy[i / hw] * inv; }
}

class GlobalAvgPool2dCuda final : public Layer {
 public:
  GlobalAvgPool2dCuda(Backend& be, const std::string& name, const GlobalAvgPool2dConfig& cfg,
                      const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract(name, cfg, in)), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x", in[0]);
    const Shape& xs = in[0].shape;
    planes_ = xs[0] * xs[1];
    hw_ = xs[2] * xs[3];
  }

  const char* kind() const override { return GlobalAvgPool2dConfig::kKind; }
  std::string describe() const override {
    return detail::concat("x ", inputs_[0].shape.to_string());
  }

  // y: (N, C)  x: (N, C, H, W)
  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), 1, "forward inputs");
    unsigned blocks = static_cast<unsigned>((planes_ + kPlanesPerBlock - 1) / kPlanesPerBlock);
    gap_fwd_kernel<<<blocks, kBlock, 0, cu_.stream()>>>(x[0]->f32(), y[0]->f32(), planes_, hw_);
    TBD_CUDA_CHECK_LAST();
  }

  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    const int64_t n = planes_ * hw_;
    gap_bwd_kernel<<<grid_for(n), kBlock, 0, cu_.stream()>>>(dy[0]->f32(), dx[0]->f32(), n, hw_);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  CudaBackend& cu_;
  int64_t planes_ = 0, hw_ = 0;
};

TBD_REGISTER_LAYER(GlobalAvgPool2dConfig, DeviceKind::kCuda, GlobalAvgPool2dCuda);

}  // namespace
}  // namespace tbd::cuda
