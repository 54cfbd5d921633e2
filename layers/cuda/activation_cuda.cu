// layers/cuda/activation_cuda.cu: Activation on CUDA.
//
// cuDNN for the forward of relu, tanh and sigmoid (cudnnActivationForward); own kernels for leaky
// relu and the erf form of GELU, which cuDNN's legacy activation lacks, and for clipped relu,
// whose gradient must pass exactly where 0 < x < ceiling (layers/activation.h). The backward of
// relu, tanh, sigmoid and clipped relu is an own kernel that reads y alone (what the kind saves:
// cudnnActivationBackward takes x as well, which would keep x alive for backward). Shape checks and
// FLOP counts are the shared ones (layers/activation.cpp); only row-major tensors exist on CUDA,
// and an elementwise layer would not care anyway.
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/activation.h"
#include "layers/cuda/cuda_layer_util.h"

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

// From y when alpha >= 0 (y > 0 exactly where x > 0), else from x.
__global__ void leaky_relu_bwd_kernel(const float* __restrict__ x_or_y,
                                      const float* __restrict__ dy, float* __restrict__ dx,
                                      int64_t n, float alpha) {
  TBD_GRID_STRIDE(i, n) { dx[i] = x_or_y[i] > 0.f ? dy[i] : alpha * dy[i]; }
}

__global__ void clipped_relu_fwd_kernel(const float* __restrict__ x, float* __restrict__ y,
                                        int64_t n, float ceiling) {
  TBD_GRID_STRIDE(i, n) {
    const float v = x[i];
    // NaN passes through, as the cuDNN activations propagate it.
    y[i] = v < 0.f ? 0.f : (v > ceiling ? ceiling : v);
  }
}

// From y: y = clip(x, 0, ceiling) is strictly inside (0, ceiling) exactly where x is.
__global__ void clipped_relu_bwd_kernel(const float* __restrict__ y, const float* __restrict__ dy,
                                        float* __restrict__ dx, int64_t n, float ceiling) {
  TBD_GRID_STRIDE(i, n) {
    const float v = y[i];
    dx[i] = v > 0.f && v < ceiling ? dy[i] : 0.f;
  }
}

// relu, tanh and sigmoid from y alone: dy (y > 0), dy (1 - y^2), dy y (1 - y).
__global__ void relu_bwd_kernel(const float* __restrict__ y, const float* __restrict__ dy,
                                float* __restrict__ dx, int64_t n) {
  TBD_GRID_STRIDE(i, n) { dx[i] = y[i] > 0.f ? dy[i] : 0.f; }
}

__global__ void tanh_bwd_kernel(const float* __restrict__ y, const float* __restrict__ dy,
                                float* __restrict__ dx, int64_t n) {
  TBD_GRID_STRIDE(i, n) {
    const float v = y[i];
    dx[i] = dy[i] * (1.f - v * v);
  }
}

__global__ void sigmoid_bwd_kernel(const float* __restrict__ y, const float* __restrict__ dy,
                                   float* __restrict__ dx, int64_t n) {
  TBD_GRID_STRIDE(i, n) {
    const float v = y[i];
    dx[i] = dy[i] * v * (1.f - v);
  }
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

// GELU (tanh approximation, GPT-2's): y = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3);
// dy/dx = (1 + t)/2 + x/2 (1 - t^2) du/dx, du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
__global__ void gelu_tanh_fwd_kernel(const float* __restrict__ x, float* __restrict__ y,
                                     int64_t n) {
  TBD_GRID_STRIDE(i, n) {
    const float v = x[i];
    const float u = 0.79788456080286536f * (v + 0.044715f * v * v * v);
    y[i] = 0.5f * v * (1.f + tanhf(u));
  }
}

__global__ void gelu_tanh_bwd_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                     float* __restrict__ dx, int64_t n) {
  TBD_GRID_STRIDE(i, n) {
    const float v = x[i];
    const float t = tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v));
    const float du = 0.79788456080286536f * (1.f + 0.134145f * v * v);
    dx[i] = dy[i] * (0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * du);
  }
}

class ActivationCuda final : public Layer {
 public:
  ActivationCuda(Backend& be, const std::string& name, const ActivationConfig& cfg,
                 const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
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

  std::string implementation() const override { return uses_cudnn() ? "cudnn" : "own kernel"; }

  void fprop(MutTensorRefs y, TensorRefs x) override {
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
    } else if (cfg_.act == ActKind::kClippedRelu) {
      clipped_relu_fwd_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(
          xp, yp, n_, static_cast<float>(cfg_.ceiling));
    } else if (cfg_.act == ActKind::kGeluTanh) {
      gelu_tanh_fwd_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(xp, yp, n_);
    } else {
      gelu_fwd_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(xp, yp, n_);
    }
    TBD_CUDA_CHECK_LAST();
  }

  // x or y, whichever the kind saves (activation_saves_output, layers/activation.h).
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    if (dx[0] == nullptr) return;
    const unsigned grid = grid_for(n_);
    cudaStream_t s = cu_.stream();
    if (cfg_.act == ActKind::kRelu) {
      relu_bwd_kernel<<<grid, kBlock, 0, s>>>(y[0]->f32(), dy[0]->f32(), dx[0]->f32(), n_);
    } else if (cfg_.act == ActKind::kTanh) {
      tanh_bwd_kernel<<<grid, kBlock, 0, s>>>(y[0]->f32(), dy[0]->f32(), dx[0]->f32(), n_);
    } else if (cfg_.act == ActKind::kSigmoid) {
      sigmoid_bwd_kernel<<<grid, kBlock, 0, s>>>(y[0]->f32(), dy[0]->f32(), dx[0]->f32(), n_);
    } else if (cfg_.act == ActKind::kLeakyRelu) {
      const Tensor* saved = activation_saves_output(cfg_) ? y[0] : x[0];
      leaky_relu_bwd_kernel<<<grid, kBlock, 0, s>>>(saved->f32(), dy[0]->f32(), dx[0]->f32(), n_,
                                                    static_cast<float>(cfg_.alpha));
    } else if (cfg_.act == ActKind::kClippedRelu) {
      clipped_relu_bwd_kernel<<<grid, kBlock, 0, s>>>(y[0]->f32(), dy[0]->f32(), dx[0]->f32(), n_,
                                                      static_cast<float>(cfg_.ceiling));
    } else if (cfg_.act == ActKind::kGeluTanh) {
      gelu_tanh_bwd_kernel<<<grid, kBlock, 0, s>>>(x[0]->f32(), dy[0]->f32(), dx[0]->f32(), n_);
    } else {
      gelu_bwd_kernel<<<grid, kBlock, 0, s>>>(x[0]->f32(), dy[0]->f32(), dx[0]->f32(), n_);
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

}  // namespace
}  // namespace tbd::cuda
