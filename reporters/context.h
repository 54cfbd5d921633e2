// reporters/context.h: the facts of a run that every row shares (the JSON "context").
//
// One typed RunContext is filled once, before the benchmarks run (fixtures/run_setup.h): the
// backend and device, the math mode in effect, the peak rates utilizations and the roofline
// divide by (Backend::peak_flops for FP32 and TF32, Backend::peak_bandwidth) and how they were
// obtained, threads, library versions (Backend::describe()), git commit and whether the tree
// was dirty, build type, and the options that change what is measured. The counters
// (reporters/tbd_counters.h), the console table and the per-layer breakdown read its numbers;
// the JSON file gets its strings, added to Google Benchmark's own context (date, host, CPU,
// caches, load) with benchmark::AddCustomContext. Keys: results/README.md. (The metric table,
// context.tbd_metrics, is an object, not a string: it is inserted after the run,
// reporters/metrics.h.)
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/roofline.h"

namespace tbd {

struct GitState {
  std::string commit = "unknown";  // full hash
  std::string dirty = "unknown";   // "true" | "false" | "unknown"
};
// `git -C dir rev-parse HEAD` and `git -C dir status --porcelain --untracked-files=no`
// (untracked files such as earlier results do not make a tree dirty).
GitState git_state(const std::string& dir);

struct RunContext {
  DeviceKind backend = DeviceKind::kCpu;
  std::string backend_flag = "auto";  // --tbd_backend as given
  std::string device;
  int threads = 1;
  MathMode math = MathMode::kFp32;  // the mode in effect (the CPU keeps FP32 under tf32)
  // --tbd_math's modes in effect, in order (one, or several: each row then names its own,
  // .../math:<mode>, and `math` is the running row's while it runs).
  std::vector<MathMode> math_modes = {MathMode::kFp32};
  std::string build_type;
  bool device_timer = false;  // timed by device events, reported as manual time
  std::size_t memory_limit_bytes = 0;
  bool quick = false;
  bool cold_l2 = false;  // in effect: GPU backends only
  bool breakdown = false;
  bool h2d_per_step = false;
  bool memory_plan = true;  // --tbd_memory_plan
  std::string denormals;    // what the CPU's FTZ/DAZ setting did
  std::string omp_wait_policy = "default";
  std::map<std::string, std::string> backend_facts;  // Backend::describe()
  // --tbd_dist runs: "dist_backend", "dist_ranks", "dist_library", the bucket caps and plans,
  // the launch command, whether ranks share cores (fixtures/parallel_fixture.cpp); empty otherwise.
  std::map<std::string, std::string> dist;
  GitState git;

  // The peaks, measured unless the run only lists its benchmarks (then none of them, nor
  // gpu_counters, is in the context).
  bool peaks_measured = false;
  PeakRate peak_fp32;        // Backend::peak_flops(kFp32)
  PeakRate peak_tf32;        // Backend::peak_flops(kTf32); in the context on GPU backends only
  PeakRate peak_bf16;        // Backend::peak_flops(kBf16): the bf16 roof (flops where known)
  PeakRate bandwidth;        // Backend::peak_bandwidth()
  std::string gpu_counters;  // "CUPTI", "unavailable: <why>", "not applicable (...)"
  std::string tf32_tensor_flop_method;  // with CUPTI: how tf32_tensor_flop is counted

  // The compute roof is the peak of the math in effect: TF32 tensor cores when they may run,
  // the bf16 peak under bf16.
  bool tf32_roof() const { return math == MathMode::kTf32 && peak_tf32.per_s > 0; }
  bool bf16_roof() const { return math == MathMode::kBf16 && peak_bf16.per_s > 0; }
  Roofline roofline() const {
    return {tf32_roof()   ? peak_tf32.per_s
            : bf16_roof() ? peak_bf16.per_s
                          : peak_fp32.per_s,
            bandwidth.per_s};
  }
};

// The context as the JSON file records it: key -> string.
std::map<std::string, std::string> context_entries(const RunContext& c);
// Adds every entry with benchmark::AddCustomContext (keys must be new).
void add_context(const RunContext& c);

// A few readable lines summarising the context, for the console.
std::vector<std::string> context_lines(const RunContext& c);

}  // namespace tbd
