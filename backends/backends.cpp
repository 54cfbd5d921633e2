// backends/backends.cpp: backend and counter-session selection.
#include "backends/backends.h"

#include "core/error.h"

namespace tbd {

#ifndef TBD_WITH_CUDA
bool cuda_compiled() { return false; }
bool cuda_usable(std::string* why_not) {
  if (why_not) *why_not = "this build has no CUDA backend (configured with TBD_CUDA=OFF)";
  return false;
}
std::unique_ptr<Backend> make_cuda_backend_or_throw(int) {
  TBD_FAIL("--tbd_backend=cuda: this build has no CUDA backend (configured with TBD_CUDA=OFF)");
}
#else
std::unique_ptr<Backend> make_cuda_backend_or_throw(int device);  // backends/cuda/cuda_backend.cu
#endif

std::unique_ptr<Backend> make_backend(BackendChoice choice, std::string* notice, int cuda_device) {
  switch (choice) {
    case BackendChoice::kCpu:
      return make_cpu_backend();
    case BackendChoice::kCuda:
      return make_cuda_backend_or_throw(cuda_device);
    case BackendChoice::kAuto: {
      std::string why;
      if (cuda_usable(&why)) return make_cuda_backend_or_throw(cuda_device);
      if (notice) *notice = "tbd: no usable CUDA device (" + why + "); running on the CPU backend";
      return make_cpu_backend();
    }
  }
  return make_cpu_backend();
}

#ifdef TBD_WITH_CUDA
std::unique_ptr<CounterSession> make_cupti_session(Backend& be,
                                                   std::string* why);  // cupti_session.cu
#endif

std::unique_ptr<CounterSession> make_counter_session(Backend& be, std::string* why) {
  if (be.kind() == DeviceKind::kCuda) {
#ifdef TBD_WITH_CUDA
    return make_cupti_session(be, why);
#endif
  }
  if (why) *why = "hardware counters exist only on the CUDA backend (CUPTI)";
  return nullptr;
}

}  // namespace tbd
