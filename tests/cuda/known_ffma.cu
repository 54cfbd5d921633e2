// tests/cuda/known_ffma.cu: a kernel with a known FFMA count (see known_ffma.h).
#include "backends/cuda/cuda_backend.h"
#include "tests/cuda/known_ffma.h"

namespace tbd::cuda {
namespace {

// Each thread runs a dependent chain of kKnownFfmaPerThread __fmaf_rn (one FFMA each) on values
// loaded at run time, so nothing folds; the bounds check and indexing are integer work only.
__global__ void known_ffma_kernel(float* out, const float* coef, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = coef[0], b = coef[1], c = coef[2];
#pragma unroll
  for (int k = 0; k < static_cast<int>(kKnownFfmaPerThread); ++k) a = __fmaf_rn(a, b, c);
  out[i] = a;
}

}  // namespace

double run_known_ffma_kernel(Backend& be, int64_t n) {
  TBD_CHECK(n > 0, "run_known_ffma_kernel: n must be positive, got ", n);
  CudaBackend& cb = as_cuda(be);
  Tensor out = be.empty(Shape{n}, MemCategory::kDynamic);
  Tensor coef = be.empty(Shape{3}, MemCategory::kDynamic);
  const float host_coef[3] = {1.0f, 0.999f, 0.001f};
  be.copy_from_host(coef, host_coef);
  constexpr int kThreads = 256;
  auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  known_ffma_kernel<<<blocks, kThreads, 0, cb.stream()>>>(out.f32(), coef.f32(), n);
  TBD_CUDA_CHECK_LAST();
  be.synchronize();
  return 2.0 * static_cast<double>(n) * static_cast<double>(kKnownFfmaPerThread);
}

}  // namespace tbd::cuda
