// layers/cuda/pool2d_cuda.cu: Pool2d and GlobalAvgPool2d on CUDA.
//
// Pool2d: cuDNN pooling (deterministic max; average including or excluding padding).
// GlobalAvgPool2d: own kernels (a warp per (n, c) plane), with no limit on the window size.
// Shape checks and FLOP counts are the shared ones (layers/pool2d.cpp).
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/pool2d.h"

namespace tbd::cuda {
namespace {

// ---- Pool2d ----

class Pool2dCudnn final : public Layer {
 public:
  Pool2dCudnn(Backend& be, const std::string& name, const Pool2dConfig& cfg,
              const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
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

  // y: (N, C, P, Q)  x: (N, C, H, W)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    TBD_CUDNN_CHECK(cudnnPoolingForward(cu_.cudnn(), pool_, &kOne, x_desc_, x[0]->raw(), &kZero,
                                        y_desc_, y[0]->raw()));
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
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
      : Layer(be, name, in, contract_of(name, cfg, in)), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x", in[0]);
    const Shape& xs = in[0].shape;
    planes_ = xs[0] * xs[1];
    hw_ = xs[2] * xs[3];
  }

  // y: (N, C)  x: (N, C, H, W)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    unsigned blocks = static_cast<unsigned>((planes_ + kPlanesPerBlock - 1) / kPlanesPerBlock);
    gap_fwd_kernel<<<blocks, kBlock, 0, cu_.stream()>>>(x[0]->f32(), y[0]->f32(), planes_, hw_);
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
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
