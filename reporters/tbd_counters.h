// reporters/tbd_counters.h: the counters every tbd_bench row carries (schema: results/README.md).
//
// A fixture measures its timed loop into a RunMeasurement; set_tbd_counters() turns it into
// Google Benchmark user counters, which appear in the JSON rows and the console table. Rule:
// a counter that does not apply to a row is absent, never zero (no FLOPs -> no flop, flops,
// fp32_utilization, arithmetic_intensity, roofline_utilization; CPU -> no GPU counters;
// optimizers -> no items_per_second). The counter names and their meaning are defined once,
// in reporters/metrics.h.
//
// Roofline: with analytic bytes (BenchCase::bytes_per_iter, a lower bound of the traffic) a
// row gets bytes and bytes_per_second; with FLOPs as well, arithmetic_intensity = flop / bytes
// and roofline_utilization = achieved FLOP/s over min(peak FLOP/s, intensity x peak
// bandwidth) (core/roofline.h); without FLOPs (Embedding forward, copies),
// bandwidth_utilization = bytes_per_second / peak bandwidth. Both use analytic counts on every
// backend (the roof and the work are both models), unlike fp32_utilization on GPU.
//
// Rates are over the measured work time (host wall clock on CPU, CUDA events on GPU), not over
// Google Benchmark's default CPU time of the main thread, which undercounts a multi-threaded
// (OpenMP) step whenever the main thread waits or is descheduled. Google Benchmark's rate
// counters (Counter::kIsRate, and SetItemsProcessed, which makes one) divide by the time the
// benchmark is timed by: under manual time (device timers) that is exactly the work time, so
// there they do the division; on the host clock they would divide by that CPU time, and
// UseRealTime() would append /real_time to every row name (and include the loop's own
// overhead), so there the rate is divided here.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <benchmark/benchmark.h>

#include "core/allocator.h"
#include "core/counters.h"
#include "core/roofline.h"
#include "reporters/context.h"
#include "reporters/metrics.h"

namespace tbd {

struct RunMeasurement {
  int64_t iterations = 0;
  double work_s = 0;          // sum of the timed iterations' work time (host clock or events)
  double loop_wall_s = 0;     // wall time of the whole timed loop
  double process_cpu_s = 0;   // process CPU time during the loop
  int threads = 1;            // threads in use (CPU utilization's denominator)
  double flop_per_iter = 0;   // analytic; 0: not applicable
  double bytes_per_iter = 0;  // analytic lower bound of the traffic; 0: not applicable
  double items_per_iter = 0;  // samples; 0: not applicable
  std::map<std::string, double> extra_items_per_iter;  // "tokens" -> n: <what>_per_second
  double model_flop_per_iter = 0;  // the model's own FLOP convention (model_flop, mfu); 0: none
  MemoryStats memory;              // read after the loop; peaks reset just before it
  std::optional<DeviceCounters> device;  // GPU profiling passes of one iteration
};

// The run's context gives the peaks (unknown: the utilizations that divide by them are absent)
// and the timing (manual time or not); on GPU backends FP32 utilization comes from `device`.
void set_tbd_counters(benchmark::State& state, const RunMeasurement& m, const RunContext& ctx);

// Process CPU time (all threads) in seconds.
double process_cpu_seconds();

}  // namespace tbd
