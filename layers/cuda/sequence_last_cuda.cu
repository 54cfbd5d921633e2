// layers/cuda/sequence_last_cuda.cu: SequenceLast on CUDA (own kernels). A length outside
// [1, T] gives that sample a NaN row (a kernel cannot throw; layers/sequence_last.h).
#include <cmath>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/sequence_last.h"

namespace tbd::cuda {
namespace {

// y[n, r] = x[len[n] - 1, n, r]
__global__ void sequence_last_fwd_kernel(const float* __restrict__ x,
                                         const int32_t* __restrict__ len, float* __restrict__ y,
                                         int64_t T, int64_t N, int64_t R) {
  TBD_GRID_STRIDE(i, N * R) {
    const int64_t n = i / R, l = len[n];
    y[i] = l >= 1 && l <= T ? x[((l - 1) * N + n) * R + i % R] : nanf("");
  }
}

// dx[t, n, r] = dy[n, r] where t = len[n] - 1, else 0
__global__ void sequence_last_bwd_kernel(const float* __restrict__ dy,
                                         const int32_t* __restrict__ len, float* __restrict__ dx,
                                         int64_t T, int64_t N, int64_t R) {
  TBD_GRID_STRIDE(i, T * N * R) {
    const int64_t t = i / (N * R), nr = i % (N * R);
    dx[i] = t == len[nr / R] - 1 ? dy[nr] : 0.0f;
  }
}

class SequenceLastCuda final : public Layer {
 public:
  SequenceLastCuda(Backend& be, const std::string& name, const SequenceLastConfig& cfg,
                   const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cu_(as_cuda(be)) {
    T_ = in[0].shape[0], N_ = in[0].shape[1], R_ = in[0].shape.numel() / (T_ * N_);
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    sequence_last_fwd_kernel<<<grid_for(N_ * R_), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), x[1]->data<int32_t>(), y[0]->f32(), T_, N_, R_);
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs) override {
    if (!dx[0]) return;
    sequence_last_bwd_kernel<<<grid_for(T_ * N_ * R_), kBlock, 0, cu_.stream()>>>(
        dy[0]->f32(), x[1]->data<int32_t>(), dx[0]->f32(), T_, N_, R_);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  CudaBackend& cu_;
  int64_t T_ = 0, N_ = 0, R_ = 0;
};

TBD_REGISTER_LAYER(SequenceLastConfig, DeviceKind::kCuda, SequenceLastCuda);

}  // namespace
}  // namespace tbd::cuda
