// core/counters.h: device counters gathered in profiling passes, outside timed iterations.
//
// The reporter asks the backend's CounterSession (CUPTI on CUDA; none on CPU) to measure one
// run of the benchmarked work. Every field is optional: a counter that cannot be measured is
// absent, and `why_missing` says why (no permission, unsupported device, no GPU). Profiled
// passes run instrumented code and are never timed. No CUDA header here.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/backend.h"

namespace tbd {

struct DeviceCounters {
  std::optional<double> fp32_flop;         // executed FP32 FLOPs: 2*ffma + fadd + fmul
  std::optional<double> tf32_tensor_flop;  // tensor-core TF32 work, calibrated to FLOPs
  std::optional<double> kernel_busy_s;     // union of kernel intervals
  std::optional<double> wall_s;            // wall time of the profiled run
  std::map<int, double> kernel_s_by_tag;   // kernel time attributed to push_tag() ids
  std::string why_missing;                 // non-empty when something is absent
};

class CounterSession {
 public:
  virtual ~CounterSession() = default;
  // FLOP counters (Range Profiler, replays `work` once per pass until all passes are done).
  virtual DeviceCounters measure_flops(const std::function<void()>& work) = 0;
  // Kernel timeline (Activity API): busy fraction and per-tag kernel time of one run.
  virtual DeviceCounters measure_timeline(const std::function<void()>& work) = 0;
  // Attribute kernels launched between push and pop to `tag` (a layer id).
  virtual void push_tag(int tag) = 0;
  virtual void pop_tag() = 0;
  // How tf32_tensor_flop is obtained from the counters (its calibration), for the run's
  // context. The peaks the utilizations divide by are the backend's (Backend::peak_flops).
  virtual std::string tf32_tensor_flop_method() const = 0;
};

}  // namespace tbd
