// backends/backends.h: choosing and making a backend, and its hardware-counter session.
//
// The one place that knows the concrete backends: core/ declares the Backend and CounterSession
// interfaces, backends/cpu and backends/cuda implement them, and this makes one by choice.
#pragma once

#include <memory>
#include <string>

#include "core/backend.h"
#include "core/counters.h"

namespace tbd {

enum class BackendChoice { kAuto, kCpu, kCuda };

// kAuto: CUDA when a device is usable, else CPU; `notice` (if given) receives a one-line
// explanation of the fallback. kCuda without a usable device throws with the CUDA error text.
// cuda_device: which visible CUDA device a CUDA backend runs on (modulo the visible count, so
// any index names one; a data-parallel rank passes its local rank).
std::unique_ptr<Backend> make_backend(BackendChoice choice, std::string* notice = nullptr,
                                      int cuda_device = 0);
std::unique_ptr<Backend> make_cpu_backend();
// Whether this build has the CUDA backend, and if so whether a device is usable (why not).
bool cuda_compiled();
bool cuda_usable(std::string* why_not);

// nullptr for backends without counters (CPU) or when the CUDA build has none; `why` says so.
std::unique_ptr<CounterSession> make_counter_session(Backend& be, std::string* why);

}  // namespace tbd
