// reporters/tbd_counters.h: the counters every tbd_bench row carries (schema: results/README.md).
//
// A fixture measures its timed loop into a RunMeasurement; set_tbd_counters() turns it into
// Google Benchmark user counters, which appear in the JSON rows and the console table. Rule:
// a counter that does not apply to a row is absent, never zero (no FLOPs -> no flop, flops,
// fp32_utilization; CPU -> no GPU counters; optimizers -> no items_per_second).
//
// Rates are computed over the measured work time (host wall clock on CPU, CUDA events on
// GPU), not over Google Benchmark's default CPU time of the main thread, which undercounts a
// multi-threaded (OpenMP) step whenever the main thread waits or is descheduled. That is why
// items_per_second is set here rather than with State::SetItemsProcessed, whose rate divides
// by that CPU time unless a benchmark uses real or manual time.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <benchmark/benchmark.h>

#include "core/allocator.h"
#include "core/counters.h"

namespace tbd {

namespace counter {
inline constexpr const char* kItemsPerSecond = "items_per_second";  // samples/s
inline constexpr const char* kFlop = "flop";                        // analytic, per iteration
inline constexpr const char* kFlops = "flops";                      // achieved FLOP/s
inline constexpr const char* kFp32Utilization = "fp32_utilization";
inline constexpr const char* kPeakMemory = "peak_memory_bytes";
inline constexpr const char* kCpuUtilization = "cpu_utilization";
inline constexpr const char* kGpuUtilization = "gpu_utilization";
inline constexpr const char* kTensorUtilization = "tensor_utilization";
inline constexpr const char* kDeviceFp32Flop = "device_fp32_flop";  // CUPTI, per iteration
// mem_<category> for every MemCategory: mem_weights, mem_weight_grads, mem_optimizer_state,
// mem_feature_maps, mem_workspace, mem_dynamic.
std::string mem(MemCategory c);
}  // namespace counter

struct RunMeasurement {
  int64_t iterations = 0;
  double work_s = 0;          // sum of the timed iterations' work time (host clock or events)
  double loop_wall_s = 0;     // wall time of the whole timed loop
  double process_cpu_s = 0;   // process CPU time during the loop
  int threads = 1;            // threads in use (CPU utilization's denominator)
  double flop_per_iter = 0;   // analytic; 0: not applicable
  double items_per_iter = 0;  // samples; 0: not applicable
  std::map<std::string, double> extra_items_per_iter;  // "tokens" -> n: <what>_per_second
  MemoryStats memory;         // read after the loop; peaks reset just before it
  bool cpu_device = true;     // false on GPU backends: utilization from `device` counters
  double peak_fp32_flops = 0;  // 0: unknown -> fp32_utilization absent
  double peak_tf32_flops = 0;
  std::optional<DeviceCounters> device;  // GPU profiling passes of one iteration
};

void set_tbd_counters(benchmark::State& state, const RunMeasurement& m);

// Process CPU time (all threads) in seconds.
double process_cpu_seconds();

}  // namespace tbd
