// layers/cuda/batchnorm_cuda.cuh: batch normalization on cuDNN, shared by BatchNorm2d
// (layers/cuda/batchnorm2d_cuda.cu) and SequenceBatchNorm
// (layers/cuda/sequence_batchnorm_cuda.cu), which differ only in the (N, C, H, W) their x is
// normalised as (BatchNormSpec): cuDNN gets x as that NCHW tensor. Included only by .cu files.
//
// cudnnBatchNormalizationForwardTraining/Backward in spatial mode; cuDNN keeps the saved mean
// and inverse standard deviation (feature_maps) and updates the running statistics (momentum as
// the exponential average factor, unbiased variance, as PyTorch). dgamma/dbeta accumulate
// through cuDNN's beta for parameter gradients. Two paths cuDNN has no call for use our own
// kernel: backward in eval mode (running statistics are constants) and backward without dx (a
// first layer fed by data). A fused ReLU (spec.relu) is our own pass over y after cuDNN's
// forward, and in backward dy masked where y is 0 into a workspace (cuDNN's fused
// normalisation-activation calls want NHWC half precision), which every path then reads.
#pragma once

#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/batchnorm2d.h"
#include "layers/cuda/cuda_layer_util.h"

namespace tbd::cuda {

// One block per channel c: dgamma[c] += sum dy*(x-mean)*invstd, dbeta[c] += sum dy, over
// (N, H, W). `stat` is the inverse standard deviation, or the variance when `stat_is_var`
// (eval mode: running statistics). With `dx`, also dx = dy * gamma * invstd (eval mode).
__global__ inline void bn_backward_own_kernel(
    const float* __restrict__ x, const float* __restrict__ dy, const float* __restrict__ mean,
    const float* __restrict__ stat, bool stat_is_var, float eps, const float* __restrict__ gamma,
    float* __restrict__ dx, float* __restrict__ dgamma, float* __restrict__ dbeta, int64_t N,
    int64_t C, int64_t HW) {
  __shared__ double shared[32];
  const int64_t c = blockIdx.x;
  const float mu = mean[c];
  const float invstd = stat_is_var ? rsqrtf(stat[c] + eps) : stat[c];
  const float scale = gamma[c] * invstd;
  double s_dyx = 0, s_dy = 0;
  for (int64_t j = threadIdx.x; j < N * HW; j += blockDim.x) {
    const int64_t idx = ((j / HW) * C + c) * HW + j % HW;
    const float g = dy[idx];
    s_dy += g;
    s_dyx += static_cast<double>(g) * (x[idx] - mu) * invstd;
    if (dx) dx[idx] = g * scale;
  }
  s_dyx = block_sum(s_dyx, shared);
  s_dy = block_sum(s_dy, shared);
  if (threadIdx.x == 0 && dgamma) {  // null: parameter gradients off (Layer::param_grads)
    dgamma[c] += static_cast<float>(s_dyx);
    dbeta[c] += static_cast<float>(s_dy);
  }
}

// Running statistics when each channel has a single value (N*H*W == 1): cuDNN would scale the
// batch variance by M/(M-1) = 1/0; like the CPU backend, use the biased variance (0) instead.
// y = max(0, y) in place; g = dy where y > 0, else 0.
__global__ inline void bn_relu_kernel(float* __restrict__ y, int64_t n) {
  TBD_GRID_STRIDE(i, n) { y[i] = fmaxf(y[i], 0.f); }
}
__global__ inline void bn_relu_mask_kernel(const float* __restrict__ dy,
                                           const float* __restrict__ y, float* __restrict__ g,
                                           int64_t n) {
  TBD_GRID_STRIDE(i, n) { g[i] = y[i] > 0.f ? dy[i] : 0.f; }
}

__global__ inline void bn_running_single_kernel(const float* __restrict__ batch_mean,
                                                float* __restrict__ rm, float* __restrict__ rv,
                                                int64_t C, float momentum) {
  TBD_GRID_STRIDE(c, C) {
    rm[c] = (1.f - momentum) * rm[c] + momentum * batch_mean[c];
    rv[c] = (1.f - momentum) * rv[c];
  }
}

class BatchNormCudnn : public BatchNormLayer {
 public:
  // `kind_contract` and `spec` are the kind's, for these inputs.
  BatchNormCudnn(Backend& be, const std::string& name, const std::vector<TensorDesc>& in,
                 const Contract& kind_contract, const BatchNormSpec& spec)
      : BatchNormLayer(be, name, in, kind_contract),
        eps_(spec.eps),
        momentum_(spec.momentum),
        relu_(spec.relu),
        cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x", in[0]);
    TBD_LAYER_CHECK(eps_ >= CUDNN_BN_MIN_EPSILON, kind(), name, "eps=", eps_,
                    " is below cuDNN's minimum ", CUDNN_BN_MIN_EPSILON);
    const Shape& nchw = spec.nchw;
    N_ = nchw[0], C_ = nchw[1], HW_ = nchw[2] * nchw[3];
    saved(save_mean_, TensorDesc{Shape{C_}});
    saved(save_invstd_, TensorDesc{Shape{C_}});
    x_desc_ = make_tensor_desc(nchw[0], nchw[1], nchw[2], nchw[3]);
    bn_desc_ = make_tensor_desc(1, C_, 1, 1);
    if (relu_) dy_masked_ = be.empty(nchw, MemCategory::kWorkspace);
    if (spec.frozen) freeze();
  }

  std::string implementation() const override { return "cudnn spatial"; }

  // y, x: (N, C, H, W) as cuDNN sees them
  void fprop(MutTensorRefs y, TensorRefs x) override {
    cudnnHandle_t h = cu_.cudnn();
    if (training_) {
      const bool single = N_ * HW_ == 1;  // cuDNN may take null running statistics
      TBD_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
          h, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_desc_, x[0]->raw(), x_desc_, y[0]->raw(),
          bn_desc_, params_[0].value.raw(), params_[1].value.raw(), momentum_,
          single ? nullptr : running_mean_.raw(), single ? nullptr : running_var_.raw(), eps_,
          save_mean_.raw(), save_invstd_.raw()));
      if (single) {
        bn_running_single_kernel<<<grid_for(C_), kBlock, 0, cu_.stream()>>>(
            save_mean_.f32(), running_mean_.f32(), running_var_.f32(), C_,
            static_cast<float>(momentum_));
        TBD_CUDA_CHECK_LAST();
      }
    } else {
      TBD_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
          h, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_desc_, x[0]->raw(), x_desc_, y[0]->raw(),
          bn_desc_, params_[0].value.raw(), params_[1].value.raw(), running_mean_.raw(),
          running_var_.raw(), eps_));
    }
    if (relu_) {
      const int64_t n = N_ * C_ * HW_;
      bn_relu_kernel<<<grid_for(n), kBlock, 0, cu_.stream()>>>(y[0]->f32(), n);
      TBD_CUDA_CHECK_LAST();
    }
  }

  // dx, dy, x: (N, C, H, W) as cuDNN sees them
  void bprop(MutTensorRefs dx, TensorRefs dy_in, TensorRefs x, TensorRefs y) override {
    const bool pg = param_grads();
    const Tensor* g = dy_in[0];
    if (relu_) {
      const int64_t n = N_ * C_ * HW_;
      bn_relu_mask_kernel<<<grid_for(n), kBlock, 0, cu_.stream()>>>(dy_in[0]->f32(), y[0]->f32(),
                                                                    dy_masked_.f32(), n);
      TBD_CUDA_CHECK_LAST();
      g = &dy_masked_;
    }
    const Tensor* dy[] = {g};
    if (training_ && dx[0] != nullptr) {
      // Parameter gradients: alpha 1, beta 1 (accumulate); alpha 0 leaves them as they are.
      TBD_CUDNN_CHECK(cudnnBatchNormalizationBackward(
          cu_.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, pg ? &kOne : &kZero, &kOne, x_desc_,
          x[0]->raw(), x_desc_, dy[0]->raw(), x_desc_, dx[0]->raw(), bn_desc_,
          params_[0].value.raw(), params_[0].grad.raw(), params_[1].grad.raw(), eps_,
          save_mean_.raw(), save_invstd_.raw()));
      return;
    }
    const bool eval = !training_;
    if (!pg && !(eval && dx[0])) return;
    bn_backward_own_kernel<<<static_cast<unsigned>(C_), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), dy[0]->f32(), eval ? running_mean_.f32() : save_mean_.f32(),
        eval ? running_var_.f32() : save_invstd_.f32(), eval, static_cast<float>(eps_),
        params_[0].value.f32(), eval && dx[0] ? dx[0]->f32() : nullptr,
        pg ? params_[0].grad.f32() : nullptr, pg ? params_[1].grad.f32() : nullptr, N_, C_, HW_);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  double eps_, momentum_;
  bool relu_;
  CudaBackend& cu_;
  int64_t N_ = 0, C_ = 0, HW_ = 0;
  Tensor save_mean_, save_invstd_, dy_masked_;
  CudnnTensorDesc x_desc_, bn_desc_;
};

}  // namespace tbd::cuda
