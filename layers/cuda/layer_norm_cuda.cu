// layers/cuda/layer_norm_cuda.cu: LayerNorm on CUDA (own kernels).
//
// A warp per row for forward and dx (saved per row: mean and 1/sqrt(var + eps), feature_maps);
// dgamma/dbeta as column sums over rows in fixed-size chunks (a partial-sum buffer, then an
// ordered final sum), so results are deterministic. Over (C, H, W) (LayerNormOver::kChw) a row
// is a whole sample, too long for one warp: a block per sample for forward and dx, and a
// block per channel for dgamma/dbeta (a fixed-order sum over samples and positions).
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/layer_norm.h"

namespace tbd::cuda {
namespace {

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

// ---- over (C, H, W): a block per sample; gamma and beta entry i / G ----

__global__ void ln_chw_forward_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                      const float* __restrict__ beta, float* __restrict__ y,
                                      float* __restrict__ mean, float* __restrict__ rstd, int64_t D,
                                      int64_t G, float eps) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * D;
  float s = 0;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) s += xr[i];
  const float mu = block_sum(s, red) / static_cast<float>(D);
  float v = 0;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) v += (xr[i] - mu) * (xr[i] - mu);
  const float rs = rsqrtf(block_sum(v, red) / static_cast<float>(D) + eps);
  float* yr = y + row * D;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    yr[i] = (xr[i] - mu) * rs * gamma[i / G] + beta[i / G];
  }
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
}

__global__ void ln_chw_dx_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                 const float* __restrict__ gamma, const float* __restrict__ mean,
                                 const float* __restrict__ rstd, float* __restrict__ dx, int64_t D,
                                 int64_t G) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * D;
  const float* dyr = dy + row * D;
  const float mu = mean[row], rs = rstd[row];
  float sg = 0, sgx = 0;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const float g = dyr[i] * gamma[i / G];
    sg += g;
    sgx += g * (xr[i] - mu) * rs;
  }
  sg = block_sum(sg, red) / static_cast<float>(D);
  sgx = block_sum(sgx, red) / static_cast<float>(D);
  float* dxr = dx + row * D;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const float g = dyr[i] * gamma[i / G];
    dxr[i] = rs * (g - sg - (xr[i] - mu) * rs * sgx);
  }
}

// Block c: dgamma[c] += sum over samples and the G positions of dy * xhat, dbeta[c] += sum dy.
__global__ void ln_chw_param_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                    const float* __restrict__ mean, const float* __restrict__ rstd,
                                    float* __restrict__ dgamma, float* __restrict__ dbeta,
                                    int64_t M, int64_t D, int64_t G) {
  __shared__ float red[32];
  const int64_t c = blockIdx.x;
  float acc_g = 0, acc_b = 0;
  for (int64_t m = 0; m < M; ++m) {
    const int64_t base = m * D + c * G;
    for (int64_t q = threadIdx.x; q < G; q += blockDim.x) {
      const float g = dy[base + q];
      acc_g += g * (x[base + q] - mean[m]) * rstd[m];
      acc_b += g;
    }
  }
  acc_g = block_sum(acc_g, red);
  acc_b = block_sum(acc_b, red);
  if (threadIdx.x == 0) {
    dgamma[c] += acc_g;
    dbeta[c] += acc_b;
  }
}

class LayerNormCuda final : public Layer {
 public:
  LayerNormCuda(Backend& be, const std::string& name, const LayerNormConfig& cfg,
                const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x", in[0]);
    const Shape& xs = in[0].shape;
    rows_ = layer_norm_rows(cfg, xs);
    D_ = rows_.D;
    M_ = rows_.M;
    TBD_LAYER_CHECK(D_ <= INT32_MAX, kind(), name, "last dim of x ", xs.to_string(),
                    " is too large");
    saved(mean_, TensorDesc{Shape{M_}});
    saved(rstd_, TensorDesc{Shape{M_}});
    // Enough row chunks to spread the column sums over the device, at least 32 rows each.
    chunks_ = static_cast<int>(std::clamp<int64_t>((M_ + 31) / 32, 1, 2 * cu_.sm_count()));
    rows_per_chunk_ = (M_ + chunks_ - 1) / chunks_;
    if (cfg.over == LayerNormOver::kLastDim) {
      partial_ = be.empty(Shape{2, chunks_, D_}, MemCategory::kWorkspace);
    }
  }

  // y, x: (..., D), or (N, C, H, W) over (C, H, W)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    if (cfg_.over == LayerNormOver::kChw) {
      ln_chw_forward_kernel<<<static_cast<unsigned>(M_), kBlock, 0, cu_.stream()>>>(
          x[0]->f32(), params_[0].value.f32(), params_[1].value.f32(), y[0]->f32(), mean_.f32(),
          rstd_.f32(), D_, rows_.G, static_cast<float>(cfg_.eps));
      TBD_CUDA_CHECK_LAST();
      return;
    }
    unsigned blocks = static_cast<unsigned>((M_ + kRowsPerBlock - 1) / kRowsPerBlock);
    ln_forward_kernel<<<blocks, kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), params_[0].value.f32(), params_[1].value.f32(), y[0]->f32(), mean_.f32(),
        rstd_.f32(), M_, static_cast<int>(D_), static_cast<float>(cfg_.eps));
    TBD_CUDA_CHECK_LAST();
  }

  // dx, dy, x: (..., D)
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (cfg_.over == LayerNormOver::kChw) {
      if (dx[0] != nullptr) {
        ln_chw_dx_kernel<<<static_cast<unsigned>(M_), kBlock, 0, cu_.stream()>>>(
            x[0]->f32(), dy[0]->f32(), params_[0].value.f32(), mean_.f32(), rstd_.f32(),
            dx[0]->f32(), D_, rows_.G);
        TBD_CUDA_CHECK_LAST();
      }
      if (!param_grads()) return;
      ln_chw_param_kernel<<<static_cast<unsigned>(rows_.P), kBlock, 0, cu_.stream()>>>(
          x[0]->f32(), dy[0]->f32(), mean_.f32(), rstd_.f32(), params_[0].grad.f32(),
          params_[1].grad.f32(), M_, D_, rows_.G);
      TBD_CUDA_CHECK_LAST();
      return;
    }
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
  LayerNormRows rows_;
  int64_t D_ = 0, M_ = 0;
  int chunks_ = 1;
  int64_t rows_per_chunk_ = 1;
  Tensor mean_, rstd_, partial_;
};

TBD_REGISTER_LAYER(LayerNormConfig, DeviceKind::kCuda, LayerNormCuda);

}  // namespace
}  // namespace tbd::cuda
