// layers/cuda/norm_cuda.cu: BatchNorm2d (cuDNN) and LayerNorm (own kernels) on CUDA.
//
// BatchNorm2d: cudnnBatchNormalizationForwardTraining/Backward in spatial mode; cuDNN keeps
// the saved mean and inverse standard deviation (feature_maps) and updates the running
// statistics (momentum as the exponential average factor, unbiased variance, as PyTorch).
// dgamma/dbeta accumulate through cuDNN's beta for parameter gradients. Two paths cuDNN has no
// call for use our own kernel: backward in eval mode (running statistics are constants) and
// backward without dx (a first layer fed by data).
// LayerNorm: a warp per row for forward and dx (saved per row: mean and 1/sqrt(var + eps),
// feature_maps); dgamma/dbeta as column sums over rows in
// fixed-size chunks (a partial-sum buffer, then an ordered final sum), so results are
// deterministic.
#include "backends/cuda/cuda_backend.h"
#include "layers/batchnorm2d.h"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/cuda/kernel_util.cuh"
#include "layers/layer_norm.h"

namespace tbd::cuda {
namespace {

// ---- BatchNorm2d ----

// One block per channel c: dgamma[c] += sum dy*(x-mean)*invstd, dbeta[c] += sum dy, over
// (N, H, W). `stat` is the inverse standard deviation, or the variance when `stat_is_var`
// (eval mode: running statistics). With `dx`, also dx = dy * gamma * invstd (eval mode).
__global__ void bn_backward_own_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                       const float* __restrict__ mean,
                                       const float* __restrict__ stat, bool stat_is_var, float eps,
                                       const float* __restrict__ gamma, float* __restrict__ dx,
                                       float* __restrict__ dgamma, float* __restrict__ dbeta,
                                       int64_t N, int64_t C, int64_t HW) {
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
__global__ void bn_running_single_kernel(const float* __restrict__ batch_mean,
                                         float* __restrict__ rm, float* __restrict__ rv, int64_t C,
                                         float momentum) {
  TBD_GRID_STRIDE(c, C) {
    rm[c] = (1.f - momentum) * rm[c] + momentum * batch_mean[c];
    rv[c] = (1.f - momentum) * rv[c];
  }
}

class BatchNorm2dCudnn final : public BatchNorm2dLayer {
 public:
  BatchNorm2dCudnn(Backend& be, const std::string& name, const BatchNorm2dConfig& cfg,
                   const std::vector<TensorDesc>& in)
      : BatchNorm2dLayer(be, name, in, contract(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x", in[0]);
    TBD_LAYER_CHECK(cfg.eps >= CUDNN_BN_MIN_EPSILON, kind(), name, "eps=", cfg.eps,
                    " is below cuDNN's minimum ", CUDNN_BN_MIN_EPSILON);
    const Shape& xs = in[0].shape;
    N_ = xs[0], C_ = xs[1], HW_ = xs[2] * xs[3];
    running_mean_ = be.empty(Shape{C_}, MemCategory::kDynamic);
    running_var_ = be.empty(Shape{C_}, MemCategory::kDynamic);
    be.fill(running_mean_, 0.f);
    be.fill(running_var_, 1.f);
    save_mean_ = be.empty(Shape{C_}, MemCategory::kFeatureMaps);
    save_invstd_ = be.empty(Shape{C_}, MemCategory::kFeatureMaps);
    x_desc_ = make_tensor_desc(xs[0], xs[1], xs[2], xs[3]);
    bn_desc_ = make_tensor_desc(1, C_, 1, 1);
  }

  const char* kind() const override { return BatchNorm2dConfig::kKind; }
  const Tensor& running_mean() const override { return running_mean_; }
  const Tensor& running_var() const override { return running_var_; }
  std::string describe() const override {
    return detail::concat("x ", inputs_[0].shape.to_string(), " eps=", cfg_.eps,
                          " momentum=", cfg_.momentum, " | cudnn spatial");
  }

  // y, x: (N, C, H, W)
  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), 1, "forward inputs");
    cudnnHandle_t h = cu_.cudnn();
    if (training_) {
      const bool single = N_ * HW_ == 1;  // cuDNN may take null running statistics
      TBD_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
          h, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_desc_, x[0]->raw(), x_desc_, y[0]->raw(),
          bn_desc_, params_[0].value.raw(), params_[1].value.raw(), cfg_.momentum,
          single ? nullptr : running_mean_.raw(), single ? nullptr : running_var_.raw(), cfg_.eps,
          save_mean_.raw(), save_invstd_.raw()));
      if (single) {
        bn_running_single_kernel<<<grid_for(C_), kBlock, 0, cu_.stream()>>>(
            save_mean_.f32(), running_mean_.f32(), running_var_.f32(), C_,
            static_cast<float>(cfg_.momentum));
        TBD_CUDA_CHECK_LAST();
      }
    } else {
      TBD_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
          h, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_desc_, x[0]->raw(), x_desc_, y[0]->raw(),
          bn_desc_, params_[0].value.raw(), params_[1].value.raw(), running_mean_.raw(),
          running_var_.raw(), cfg_.eps));
    }
  }

  // dx, dy, x: (N, C, H, W)
  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    const bool pg = param_grads();
    if (training_ && dx[0] != nullptr) {
      // Parameter gradients: alpha 1, beta 1 (accumulate); alpha 0 leaves them as they are.
      TBD_CUDNN_CHECK(cudnnBatchNormalizationBackward(
          cu_.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, pg ? &kOne : &kZero, &kOne, x_desc_,
          x[0]->raw(),
          x_desc_, dy[0]->raw(), x_desc_, dx[0]->raw(), bn_desc_, params_[0].value.raw(),
          params_[0].grad.raw(), params_[1].grad.raw(), cfg_.eps, save_mean_.raw(),
          save_invstd_.raw()));
      return;
    }
    const bool eval = !training_;
    if (!pg && !(eval && dx[0])) return;
    bn_backward_own_kernel<<<static_cast<unsigned>(C_), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), dy[0]->f32(), eval ? running_mean_.f32() : save_mean_.f32(),
        eval ? running_var_.f32() : save_invstd_.f32(), eval, static_cast<float>(cfg_.eps),
        params_[0].value.f32(), eval && dx[0] ? dx[0]->f32() : nullptr,
        pg ? params_[0].grad.f32() : nullptr, pg ? params_[1].grad.f32() : nullptr, N_, C_, HW_);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  BatchNorm2dConfig cfg_;
  CudaBackend& cu_;
  int64_t N_ = 0, C_ = 0, HW_ = 0;
  Tensor running_mean_, running_var_, save_mean_, save_invstd_;
  CudnnTensorDesc x_desc_, bn_desc_;
};

TBD_REGISTER_LAYER(BatchNorm2dConfig, DeviceKind::kCuda, BatchNorm2dCudnn);

// ---- LayerNorm ----

constexpr int kRowsPerBlock = kBlock / 32;  // one warp per row

__global__ void ln_forward_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                  const float* __restrict__ beta, float* __restrict__ y,
                                  float* __restrict__ mean, float* __restrict__ rstd, int64_t M,
                                  int D, float eps) {
  const int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= M) return;  // whole warps leave together
  const float* xr = x + row * D;
  float s = 0;
  for (int i = lane; i < D; i += 32) s += xr[i];
  const float mu = warp_sum(s) / D;
  float v = 0;
  for (int i = lane; i < D; i += 32) {
    const float d = xr[i] - mu;
    v += d * d;
  }
  const float rs = rsqrtf(warp_sum(v) / D + eps);
  float* yr = y + row * D;
  for (int i = lane; i < D; i += 32) yr[i] = (xr[i] - mu) * rs * gamma[i] + beta[i];
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
__global__ void ln_backward_dx_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                      const float* __restrict__ gamma,
                                      const float* __restrict__ mean,
                                      const float* __restrict__ rstd, float* __restrict__ dx,
                                      int64_t M, int D) {
  const int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= M) return;
  const float* xr = x + row * D;
  const float* dyr = dy + row * D;
  const float mu = mean[row], rs = rstd[row];
  float sg = 0, sgx = 0;
  for (int i = lane; i < D; i += 32) {
    const float g = dyr[i] * gamma[i];
    sg += g;
    sgx += g * (xr[i] - mu) * rs;
  }
  sg = warp_sum(sg) / D;
  sgx = warp_sum(sgx) / D;
  float* dxr = dx + row * D;
  for (int i = lane; i < D; i += 32) {
    const float g = dyr[i] * gamma[i];
    dxr[i] = rs * (g - sg - (xr[i] - mu) * rs * sgx);
  }
}

// Partial column sums of dy*xhat and dy over one chunk of rows: block (32, 8) covers 32
// columns; blockIdx.y is the chunk.
constexpr int kColTile = 32, kRowThreads = 8;
__global__ void ln_param_partial_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                        const float* __restrict__ mean,
                                        const float* __restrict__ rstd, float* __restrict__ part_g,
                                        float* __restrict__ part_b, int64_t M, int D,
                                        int64_t rows_per_chunk) {
  __shared__ float sg[kRowThreads][kColTile + 1];
  __shared__ float sb[kRowThreads][kColTile + 1];
  const int col = blockIdx.x * kColTile + threadIdx.x;
  const int64_t r0 = blockIdx.y * rows_per_chunk;
  const int64_t r1 = min(M, r0 + rows_per_chunk);
  float acc_g = 0, acc_b = 0;
  if (col < D) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowThreads) {
      const float g = dy[r * D + col];
      acc_g += g * (x[r * D + col] - mean[r]) * rstd[r];
      acc_b += g;
    }
  }
  sg[threadIdx.y][threadIdx.x] = acc_g;
  sb[threadIdx.y][threadIdx.x] = acc_b;
  __syncthreads();
  if (threadIdx.y == 0 && col < D) {
    float tg = 0, tb = 0;
    for (int k = 0; k < kRowThreads; ++k) {
      tg += sg[k][threadIdx.x];
      tb += sb[k][threadIdx.x];
    }
    part_g[blockIdx.y * int64_t{D} + col] = tg;
    part_b[blockIdx.y * int64_t{D} + col] = tb;
  }
}

__global__ void ln_param_final_kernel(const float* __restrict__ part_g,
                                      const float* __restrict__ part_b, int chunks, int D,
                                      float* __restrict__ dgamma, float* __restrict__ dbeta) {
  TBD_GRID_STRIDE(col, D) {
    float tg = 0, tb = 0;
    for (int k = 0; k < chunks; ++k) {
      tg += part_g[k * int64_t{D} + col];
      tb += part_b[k * int64_t{D} + col];
    }
    dgamma[col] += tg;
    dbeta[col] += tb;
  }
}

class LayerNormCuda final : public Layer {
 public:
  LayerNormCuda(Backend& be, const std::string& name, const LayerNormConfig& cfg,
                const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x", in[0]);
    const Shape& xs = in[0].shape;
    D_ = xs[-1];
    M_ = xs.numel() / D_;
    TBD_LAYER_CHECK(D_ <= INT32_MAX, kind(), name, "last dim of x ", xs.to_string(),
                    " is too large");
    mean_ = be.empty(Shape{M_}, MemCategory::kFeatureMaps);
    rstd_ = be.empty(Shape{M_}, MemCategory::kFeatureMaps);
    // Enough row chunks to spread the column sums over the device, at least 32 rows each.
    chunks_ = static_cast<int>(std::clamp<int64_t>((M_ + 31) / 32, 1, 2 * cu_.sm_count()));
    rows_per_chunk_ = (M_ + chunks_ - 1) / chunks_;
    partial_ = be.empty(Shape{2, chunks_, D_}, MemCategory::kWorkspace);
  }

  const char* kind() const override { return LayerNormConfig::kKind; }
  std::string describe() const override {
    return detail::concat("x ", inputs_[0].shape.to_string(), " eps=", cfg_.eps);
  }

  // y, x: (..., D)
  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), 1, "forward inputs");
    unsigned blocks = static_cast<unsigned>((M_ + kRowsPerBlock - 1) / kRowsPerBlock);
    ln_forward_kernel<<<blocks, kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), params_[0].value.f32(), params_[1].value.f32(), y[0]->f32(), mean_.f32(),
        rstd_.f32(), M_, static_cast<int>(D_), static_cast<float>(cfg_.eps));
    TBD_CUDA_CHECK_LAST();
  }

  // dx, dy, x: (..., D)
  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    const int D = static_cast<int>(D_);
    if (dx[0] != nullptr) {
      unsigned blocks = static_cast<unsigned>((M_ + kRowsPerBlock - 1) / kRowsPerBlock);
      ln_backward_dx_kernel<<<blocks, kBlock, 0, cu_.stream()>>>(
          x[0]->f32(), dy[0]->f32(), params_[0].value.f32(), mean_.f32(), rstd_.f32(), dx[0]->f32(),
          M_, D);
      TBD_CUDA_CHECK_LAST();
    }
    if (!param_grads()) return;
    float* part_g = partial_.f32();
    float* part_b = part_g + static_cast<int64_t>(chunks_) * D_;
    dim3 grid(static_cast<unsigned>((D_ + kColTile - 1) / kColTile),
              static_cast<unsigned>(chunks_));
    ln_param_partial_kernel<<<grid, dim3(kColTile, kRowThreads), 0, cu_.stream()>>>(
        x[0]->f32(), dy[0]->f32(), mean_.f32(), rstd_.f32(), part_g, part_b, M_, D,
        rows_per_chunk_);
    TBD_CUDA_CHECK_LAST();
    ln_param_final_kernel<<<grid_for(D_), kBlock, 0, cu_.stream()>>>(
        part_g, part_b, chunks_, D, params_[0].grad.f32(), params_[1].grad.f32());
    TBD_CUDA_CHECK_LAST();
  }

 private:
  LayerNormConfig cfg_;
  CudaBackend& cu_;
  int64_t D_ = 0, M_ = 0;
  int chunks_ = 1;
  int64_t rows_per_chunk_ = 1;
  Tensor mean_, rstd_, partial_;
};

TBD_REGISTER_LAYER(LayerNormConfig, DeviceKind::kCuda, LayerNormCuda);

}  // namespace
}  // namespace tbd::cuda
