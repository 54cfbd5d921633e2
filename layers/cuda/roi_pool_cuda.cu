// layers/cuda/roi_pool_cuda.cu: RoIPool (max and align) on CUDA (own kernels, row-major).
//
// Forward: a thread per output value (r, c, ph, pw) walks its bin (kMax: saves the argmax) or
// its samples (kAlign), with the geometry of layers/roi_pool.h that the CPU uses. Backward:
// dx zeroed, then a thread per output value scatters dy with atomicAdd (RoIs overlap), as
// torchvision's kernels do; the sums' order, hence dx's last bits, vary from run to run.
// A RoI whose batch index is outside [0, N) (which the CPU reports as an error; a kernel
// cannot) gives 0 and takes no gradient.
#include <cfloat>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/roi_pool.h"

namespace tbd::cuda {
namespace {

struct RoIDims {
  int64_t N, C, H, W, PH, PW, sampling_ratio;
  float scale;
};

__device__ __forceinline__ int64_t roi_batch(const float* roi, int64_t N) {
  const float b = roi[0];
  return b >= 0.0f && b < static_cast<float>(N) ? static_cast<int64_t>(b) : -1;
}

// y, argmax: (R, C, PH, PW)  x: (N, C, H, W)  rois: (R, 5)
__global__ void roi_max_fwd_kernel(const float* __restrict__ x, const float* __restrict__ rois,
                                   float* __restrict__ y, int32_t* __restrict__ argmax,
                                   int64_t total, RoIDims d) {
  TBD_GRID_STRIDE(i, total) {
    const int64_t pw = i % d.PW, ph = (i / d.PW) % d.PH, c = (i / (d.PW * d.PH)) % d.C;
    const int64_t r = i / (d.PW * d.PH * d.C);
    const float* roi = rois + r * 5;
    const int64_t n = roi_batch(roi, d.N);
    float m = 0.0f;
    int32_t am = -1;
    if (n >= 0) {
      const RoIMaxBox box = roi_max_box(roi, d.scale, d.PH, d.PW);
      int64_t hs, he, ws, we;
      roi_max_bin(box.y, ph, d.H, &hs, &he);
      roi_max_bin(box.x, pw, d.W, &ws, &we);
      if (he > hs && we > ws) {
        m = -FLT_MAX;
        const float* xp = x + (n * d.C + c) * d.H * d.W;
        for (int64_t h = hs; h < he; ++h) {
          for (int64_t w = ws; w < we; ++w) {
            const int64_t k = h * d.W + w;
            if (xp[k] > m) m = xp[k], am = static_cast<int32_t>(k);
          }
        }
      }
    }
    y[i] = m;
    argmax[i] = am;
  }
}

__global__ void roi_max_bwd_kernel(const float* __restrict__ dy, const float* __restrict__ rois,
                                   const int32_t* __restrict__ argmax, float* __restrict__ dx,
                                   int64_t total, RoIDims d) {
  TBD_GRID_STRIDE(i, total) {
    const int64_t c = (i / (d.PW * d.PH)) % d.C, r = i / (d.PW * d.PH * d.C);
    const int64_t n = roi_batch(rois + r * 5, d.N);
    const int32_t k = argmax[i];
    if (n >= 0 && k >= 0) atomicAdd(dx + (n * d.C + c) * d.H * d.W + k, dy[i]);
  }
}

// kAlign forward, or backward (kBackward: scatters dy into dx instead of gathering x into y).
template <bool kBackward>
__global__ void roi_align_kernel(const float* __restrict__ x, const float* __restrict__ rois,
                                 float* __restrict__ y, const float* __restrict__ dy,
                                 float* __restrict__ dx, int64_t total, RoIDims d) {
  TBD_GRID_STRIDE(i, total) {
    const int64_t pw = i % d.PW, ph = (i / d.PW) % d.PH, c = (i / (d.PW * d.PH)) % d.C;
    const int64_t r = i / (d.PW * d.PH * d.C);
    const float* roi = rois + r * 5;
    const int64_t n = roi_batch(roi, d.N);
    if (n < 0) {
      if (!kBackward) y[i] = 0.0f;
      continue;
    }
    const RoIAlignBox box = roi_align_box(roi, d.scale, d.PH, d.PW, d.sampling_ratio);
    const int64_t plane = (n * d.C + c) * d.H * d.W;
    const float g = kBackward ? dy[i] / box.count : 0.0f;
    float acc = 0.0f;
    roi_align_samples(box, ph, pw, d.H, d.W, [&](const int64_t* cell, const float* wt) {
      for (int k = 0; k < 4; ++k) {
        if (kBackward) {
          atomicAdd(dx + plane + cell[k], g * wt[k]);
        } else {
          acc += wt[k] * x[plane + cell[k]];
        }
      }
    });
    if (!kBackward) y[i] = acc / box.count;
  }
}

class RoIPoolCuda final : public Layer {
 public:
  RoIPoolCuda(Backend& be, const std::string& name, const RoIPoolConfig& cfg,
              const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x", in[0]);
    const Shape& xs = in[0].shape;
    TBD_LAYER_CHECK(xs[2] * xs[3] <= INT32_MAX, kind(), name,
                    "input x's planes must hold at most 2^31 - 1 cells (the argmax is i32), got ",
                    xs.to_string());
    d_ = RoIDims{xs[0],
                 xs[1],
                 xs[2],
                 xs[3],
                 cfg.pooled_h,
                 cfg.pooled_w,
                 cfg.sampling_ratio,
                 static_cast<float>(cfg.spatial_scale)};
    if (cfg.mode == RoIPoolMode::kMax) {
      saved(argmax_, TensorDesc{outputs_[0].shape, DType::kI32});
    }
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    const int64_t n = outputs_[0].shape.numel();
    if (cfg_.mode == RoIPoolMode::kMax) {
      roi_max_fwd_kernel<<<grid_for(n), kBlock, 0, cu_.stream()>>>(
          x[0]->f32(), x[1]->f32(), y[0]->f32(), argmax_.data<int32_t>(), n, d_);
    } else {
      roi_align_kernel<false><<<grid_for(n), kBlock, 0, cu_.stream()>>>(
          x[0]->f32(), x[1]->f32(), y[0]->f32(), nullptr, nullptr, n, d_);
    }
    TBD_CUDA_CHECK_LAST();
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs) override {
    if (dx[0] == nullptr) return;
    TBD_CUDA_CHECK(cudaMemsetAsync(dx[0]->raw(), 0, dx[0]->bytes(), cu_.stream()));
    const int64_t n = outputs_[0].shape.numel();
    if (cfg_.mode == RoIPoolMode::kMax) {
      roi_max_bwd_kernel<<<grid_for(n), kBlock, 0, cu_.stream()>>>(
          dy[0]->f32(), x[1]->f32(), argmax_.data<int32_t>(), dx[0]->f32(), n, d_);
    } else {
      roi_align_kernel<true><<<grid_for(n), kBlock, 0, cu_.stream()>>>(
          nullptr, x[1]->f32(), nullptr, dy[0]->f32(), dx[0]->f32(), n, d_);
    }
    TBD_CUDA_CHECK_LAST();
  }

 private:
  RoIPoolConfig cfg_;
  CudaBackend& cu_;
  RoIDims d_{};
  Tensor argmax_;  // (R, C, PH, PW) i32, kMax only
};

TBD_REGISTER_LAYER(RoIPoolConfig, DeviceKind::kCuda, RoIPoolCuda);

}  // namespace
}  // namespace tbd::cuda
