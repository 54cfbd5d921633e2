// core/backend.cpp: backend selection.
#include "core/backend.h"

#include "core/error.h"

namespace tbd {

const char* to_string(MathMode m) { return m == MathMode::kFp32 ? "fp32" : "tf32"; }

void Backend::set_math_mode(MathMode m) {
  TBD_CHECK(m == MathMode::kFp32, "math mode ", to_string(m), " is not available on the ",
            to_string(kind()), " backend (strict fp32 only)");
}

Tensor Backend::empty(const TensorDesc& desc, MemCategory category) {
  for (int64_t d : desc.shape.dims()) {
    TBD_CHECK(d > 0, "Backend::empty: every dim must be positive, got ", desc.shape.to_string());
  }
  if (desc.layout == Layout::kNChw16c) {
    TBD_CHECK(desc.shape.rank() == 4 && desc.shape[1] % 16 == 0,
              "Backend::empty: nChw16c needs a 4-D shape with C % 16 == 0, got ",
              desc.shape.to_string());
  }
  return Tensor(desc, kind(), allocator_.allocate(desc.bytes(), category));
}

#ifndef TBD_WITH_CUDA
bool cuda_compiled() { return false; }
bool cuda_usable(std::string* why_not) {
  if (why_not) *why_not = "this build has no CUDA backend (configured with TBD_CUDA=OFF)";
  return false;
}
std::unique_ptr<Backend> make_cuda_backend_or_throw() {
  TBD_FAIL("--tbd_backend=cuda: this build has no CUDA backend (configured with TBD_CUDA=OFF)");
}
#else
std::unique_ptr<Backend> make_cuda_backend_or_throw();  // backends/cuda/cuda_backend.cu
#endif

std::unique_ptr<Backend> make_backend(BackendChoice choice, std::string* notice) {
  switch (choice) {
    case BackendChoice::kCpu: return make_cpu_backend();
    case BackendChoice::kCuda: return make_cuda_backend_or_throw();
    case BackendChoice::kAuto: {
      std::string why;
      if (cuda_usable(&why)) return make_cuda_backend_or_throw();
      if (notice) *notice = "tbd: no usable CUDA device (" + why + "); running on the CPU backend";
      return make_cpu_backend();
    }
  }
  return make_cpu_backend();
}

}  // namespace tbd
