// layers/cuda/upsample_cuda.cu: Upsample2d on CUDA (own kernels, row-major).
//
// Forward: a thread per output value reads x[h / s, w / s]. Backward: a thread per input value
// sums its s x s square of dy (no atomics, deterministic).
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/upsample.h"

namespace tbd::cuda {
namespace {

__global__ void upsample_fwd_kernel(const float* __restrict__ x, float* __restrict__ y,
                                    int64_t planes, int64_t H, int64_t W, int64_t s) {
  const int64_t OH = H * s, OW = W * s;
  TBD_GRID_STRIDE(i, planes * OH * OW) {
    const int64_t ow = i % OW, oh = (i / OW) % OH, pl = i / (OH * OW);
    y[i] = x[(pl * H + oh / s) * W + ow / s];
  }
}

__global__ void upsample_bwd_kernel(const float* __restrict__ dy, float* __restrict__ dx,
                                    int64_t planes, int64_t H, int64_t W, int64_t s) {
  const int64_t OH = H * s, OW = W * s;
  TBD_GRID_STRIDE(i, planes * H * W) {
    const int64_t w = i % W, h = (i / W) % H, pl = i / (H * W);
    const float* g = dy + (pl * OH + h * s) * OW + w * s;
    float acc = 0.f;
    for (int64_t a = 0; a < s; ++a)
      for (int64_t b = 0; b < s; ++b) acc += g[a * OW + b];
    dx[i] = acc;
  }
}

class Upsample2dCuda final : public Layer {
 public:
  Upsample2dCuda(Backend& be, const std::string& name, const Upsample2dConfig& cfg,
                 const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x", in[0]);
    const Shape& xs = in[0].shape;
    planes_ = xs[0] * xs[1], H_ = xs[2], W_ = xs[3];
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    const int64_t n = outputs_[0].shape.numel();
    upsample_fwd_kernel<<<grid_for(n), kBlock, 0, cu_.stream()>>>(x[0]->f32(), y[0]->f32(), planes_,
                                                                  H_, W_, cfg_.scale);
    TBD_CUDA_CHECK_LAST();
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0] == nullptr) return;
    const int64_t n = inputs_[0].shape.numel();
    upsample_bwd_kernel<<<grid_for(n), kBlock, 0, cu_.stream()>>>(dy[0]->f32(), dx[0]->f32(),
                                                                  planes_, H_, W_, cfg_.scale);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  Upsample2dConfig cfg_;
  CudaBackend& cu_;
  int64_t planes_ = 0, H_ = 0, W_ = 0;
};

TBD_REGISTER_LAYER(Upsample2dConfig, DeviceKind::kCuda, Upsample2dCuda);

}  // namespace
}  // namespace tbd::cuda
