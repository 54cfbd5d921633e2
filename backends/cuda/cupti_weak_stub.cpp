// backends/cuda/cupti_weak_stub.cpp: a weak stand-in for make_cupti_session (core/counters.cpp
// calls it in CUDA builds), so that a CUDA build links before the CUPTI counters exist. The
// real definition (backends/cuda, CUPTI) is strong and replaces this one at link time; delete
// this file once it has landed.
#include <memory>
#include <string>

#include "core/counters.h"

namespace tbd {

__attribute__((weak)) std::unique_ptr<CounterSession> make_cupti_session(Backend&,
                                                                         std::string* why) {
  if (why) *why = "this build has no CUPTI counters yet";
  return nullptr;
}

}  // namespace tbd
