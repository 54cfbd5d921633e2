// layers/cuda/embedding_cuda.cu: Embedding on CUDA (own kernels).
//
// The weight gradient scatters with atomicAdd: rows hit by several ids sum in an unspecified
// order, so dW may differ in the last bits from run to run (documented non-determinism). An id
// outside [0, V) cannot throw from a kernel (checking on the host would cost a synchronisation
// per step): its output row is NaN and it adds no gradient. Shape checks and FLOP counts are
// the shared ones (layers/embedding.cpp).
#include <cmath>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/embedding.h"

namespace tbd::cuda {
namespace {

// ---- Embedding ----

// y[m, :] = scale * w[ids[m], :]; an id outside [0, V) yields NaN rows (never clamped).
__global__ void embedding_fwd_kernel(const int32_t* __restrict__ ids, const float* __restrict__ w,
                                     float* __restrict__ y, int64_t total, int64_t dim,
                                     int64_t vocab, float scale) {
  TBD_GRID_STRIDE(i, total) {
    const int64_t id = ids[i / dim];
    y[i] = id >= 0 && id < vocab ? scale * w[id * dim + i % dim] : nanf("");
  }
}

// dw[ids[m], :] += scale * dy[m, :], skipping padding_idx and invalid ids.
__global__ void embedding_bwd_kernel(const int32_t* __restrict__ ids, const float* __restrict__ dy,
                                     float* __restrict__ dw, int64_t total, int64_t dim,
                                     int64_t vocab, int64_t padding, float scale) {
  TBD_GRID_STRIDE(i, total) {
    const int64_t id = ids[i / dim];
    if (id >= 0 && id < vocab && id != padding) atomicAdd(&dw[id * dim + i % dim], scale * dy[i]);
  }
}

class EmbeddingCuda final : public Layer {
 public:
  EmbeddingCuda(Backend& be, const std::string& name, const EmbeddingConfig& cfg,
                const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "ids", in[0]);
    m_ = in[0].shape.numel();
  }

  std::string implementation() const override { return "atomicAdd scatter (non-deterministic dW)"; }

  // y: (..., dim)  ids: (...) i32
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const int64_t total = m_ * cfg_.dim;
    embedding_fwd_kernel<<<grid_for(total), kBlock, 0, cu_.stream()>>>(
        x[0]->data<int32_t>(), params_[0].value.f32(), y[0]->f32(), total, cfg_.dim,
        cfg_.num_embeddings, static_cast<float>(cfg_.scale));
    TBD_CUDA_CHECK_LAST();
  }

  // ids get no gradient; dW accumulates.
  void bprop(MutTensorRefs /*dx*/, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (!param_grads()) return;  // ids take no gradient: nothing else to do
    const int64_t total = m_ * cfg_.dim;
    embedding_bwd_kernel<<<grid_for(total), kBlock, 0, cu_.stream()>>>(
        x[0]->data<int32_t>(), dy[0]->f32(), params_[0].grad.f32(), total, cfg_.dim,
        cfg_.num_embeddings, cfg_.padding_idx, static_cast<float>(cfg_.scale));
    TBD_CUDA_CHECK_LAST();
  }

 private:
  EmbeddingConfig cfg_;
  CudaBackend& cu_;
  int64_t m_ = 0;
};

TBD_REGISTER_LAYER(EmbeddingConfig, DeviceKind::kCuda, EmbeddingCuda);

}  // namespace
}  // namespace tbd::cuda
