// layers/cuda/positional_encoding_cuda.cu: PositionalEncoding on CUDA: adds a constant (T, D)
// table built on the host at construction; dx = dy is a copy.
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/positional_encoding.h"

namespace tbd::cuda {
namespace {

// ---- PositionalEncoding ----

// y[n, t, d] = x[n, t, d] + table[t, d]: the table repeats every T*D elements.
__global__ void add_table_kernel(const float* __restrict__ x, const float* __restrict__ table,
                                 float* __restrict__ y, int64_t n, int64_t period) {
  TBD_GRID_STRIDE(i, n) { y[i] = x[i] + table[i % period]; }
}

class PositionalEncodingCuda final : public Layer {
 public:
  PositionalEncodingCuda(Backend& be, const std::string& name, const PositionalEncodingConfig& cfg,
                         const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x", in[0]);
    const Shape& s = in[0].shape;
    n_ = s.numel();
    table_ = be.empty(Shape{s[1], s[2]}, MemCategory::kDynamic);
    std::vector<float> h(s[1] * s[2]);
    for (int64_t t = 0; t < s[1]; ++t) {
      for (int64_t d = 0; d < s[2]; ++d) {
        h[t * s[2] + d] = static_cast<float>(sinusoid(t, d, s[2]));
      }
    }
    be.copy_from_host(table_, h.data());
  }

  // y, x: (N, T, D)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    add_table_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(x[0]->f32(), table_.f32(),
                                                                y[0]->f32(), n_, table_.numel());
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] != nullptr) copy_d2d(cu_, dx[0]->raw(), dy[0]->raw(), dy[0]->bytes());
  }

 private:
  CudaBackend& cu_;
  int64_t n_ = 0;
  Tensor table_;  // (T, D)
};

TBD_REGISTER_LAYER(PositionalEncodingConfig, DeviceKind::kCuda, PositionalEncodingCuda);

}  // namespace
}  // namespace tbd::cuda
