// layers/cuda/random_interpolation_cuda.cu: RandomInterpolation on CUDA.
//
// alpha_n from the counter-based hash of layers/random_interpolation.h (host and device code),
// so the CUDA backend draws the CPU's values; the step lives in device memory
// (advance_step_kernel), so a captured graph draws new alphas per replay, as Dropout does.
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/random_interpolation.h"

namespace tbd::cuda {
namespace {

__global__ void draw_alpha_kernel(float* __restrict__ alpha, int64_t N, uint64_t key,
                                  const int32_t* __restrict__ counter, CallNumbering numbering) {
  const uint64_t step = numbering.index(static_cast<uint64_t>(counter[1]));
  TBD_GRID_STRIDE(n, N) { alpha[n] = random_interpolation_alpha(key, step, n); }
}

__global__ void interp_fwd_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                  const float* __restrict__ alpha, float* __restrict__ y,
                                  int64_t n_elems, int64_t S) {
  TBD_GRID_STRIDE(k, n_elems) { y[k] = a[k] + alpha[k / S] * (b[k] - a[k]); }
}

__global__ void interp_bwd_kernel(const float* __restrict__ dy, const float* __restrict__ alpha,
                                  float* __restrict__ d0, float* __restrict__ d1, int64_t n_elems,
                                  int64_t S) {
  TBD_GRID_STRIDE(k, n_elems) {
    const float t = alpha[k / S] * dy[k];
    if (d1) d1[k] = t;
    if (d0) d0[k] = dy[k] - t;
  }
}

class RandomInterpolationCuda final : public Layer {
 public:
  RandomInterpolationCuda(Backend& be, const std::string& name,
                          const RandomInterpolationConfig& cfg, const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x0", in[0]);
    check_row_major(kind(), name, "x1", in[1]);
    N_ = in[0].shape[0];
    E_ = in[0].shape.numel();
    key_ = random_interpolation_key(cfg, name);
    saved(alpha_, TensorDesc{Shape{N_}});
    // Forwards so far, in device memory (advance_step_kernel): new alphas each.
    counter_ = be.empty(TensorDesc{Shape{2}, DType::kI32}, MemCategory::kDynamic);
    TBD_CUDA_CHECK(cudaMemsetAsync(counter_.raw(), 0, counter_.bytes(), cu_.stream()));
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    advance_step_kernel<<<1, 1, 0, cu_.stream()>>>(counter_.data<int32_t>());
    TBD_CUDA_CHECK_LAST();
    draw_alpha_kernel<<<grid_for(N_), kBlock, 0, cu_.stream()>>>(
        alpha_.f32(), N_, key_, counter_.data<int32_t>(), call_numbering());
    TBD_CUDA_CHECK_LAST();
    interp_fwd_kernel<<<grid_for(E_), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), x[1]->f32(), alpha_.f32(), y[0]->f32(), E_, E_ / N_);
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    float* d0 = dx[0] ? dx[0]->f32() : nullptr;
    float* d1 = dx[1] ? dx[1]->f32() : nullptr;
    if (!d0 && !d1) return;
    interp_bwd_kernel<<<grid_for(E_), kBlock, 0, cu_.stream()>>>(dy[0]->f32(), alpha_.f32(), d0, d1,
                                                                 E_, E_ / N_);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  RandomInterpolationConfig cfg_;
  CudaBackend& cu_;
  int64_t N_ = 0, E_ = 0;
  uint64_t key_ = 0;
  Tensor alpha_;
  Tensor counter_;  // i32 [next step, step of the last forward] (device memory)
};

TBD_REGISTER_LAYER(RandomInterpolationConfig, DeviceKind::kCuda, RandomInterpolationCuda);

}  // namespace
}  // namespace tbd::cuda
