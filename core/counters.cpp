// core/counters.cpp: counter-session lookup (CUPTI lives in backends/cuda).
#include "core/counters.h"

namespace tbd {

#ifdef TBD_WITH_CUDA
std::unique_ptr<CounterSession> make_cupti_session(Backend& be, std::string* why);
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
