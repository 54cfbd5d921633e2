// layers/cuda/dropout_cuda.cu: Dropout on CUDA.
//
// The counter-based mask of layers/dropout.h (dropout_keep, host and device code), so masks are
// bit-identical to the CPU backend's; kept for backward as one byte per element (feature_maps),
// like the CPU. The mask step lives in device memory (advance_step_kernel), so a captured
// graph draws a new mask per replay.
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "core/splitmix.h"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/dropout.h"

namespace tbd::cuda {
namespace {

// ---- Dropout ----

// The step comes from device memory (advance_step_kernel), the mask from (key, step, i).
__global__ void dropout_fwd_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   uint8_t* __restrict__ mask, int64_t n, uint64_t key,
                                   const int32_t* __restrict__ counter, CallNumbering numbering,
                                   uint32_t threshold, float scale) {
  const uint64_t step_base =
      dropout_step_base(key, numbering.index(static_cast<uint64_t>(counter[1])));
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
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    n_ = in[0].shape.numel();
    key_ = dropout_key(cfg, name);
    threshold_ = dropout_threshold(cfg.p);
    scale_ = cfg.p < 1 ? static_cast<float>(1.0 / (1.0 - cfg.p)) : 0.f;  // p = 1: y = 0
    // One byte per element (the tensor dtypes have no u8).
    saved(mask_, TensorDesc{Shape{(n_ + 3) / 4}});
    // Training forwards so far, in device memory (advance_step_kernel): a new mask each.
    counter_ = be.empty(TensorDesc{Shape{2}, DType::kI32}, MemCategory::kDynamic);
    TBD_CUDA_CHECK(cudaMemsetAsync(counter_.raw(), 0, counter_.bytes(), cu_.stream()));
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    if (!training_) {
      be_.reorder(*y[0], *x[0]);  // a copy
      return;
    }
    advance_step_kernel<<<1, 1, 0, cu_.stream()>>>(counter_.data<int32_t>());
    TBD_CUDA_CHECK_LAST();
    dropout_fwd_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), y[0]->f32(), mask_.data<uint8_t>(), n_, key_, counter_.data<int32_t>(),
        call_numbering(), threshold_, scale_);
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
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

}  // namespace
}  // namespace tbd::cuda
