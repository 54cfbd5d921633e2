// reporters/metrics.h: every metric a tbd_bench row can carry, described once.
//
// Comparing two runs needs more than numbers: which way is better, which values describe the
// amount of work (two rows are comparable only if those match), which are deterministic (and
// so compared exactly), and which are reported but not gated. TBD_COUNTERS below is the one
// list of tbd's counters: it generates the counter-name constants (counter::kFlop, ...) that
// reporters/tbd_counters.cpp sets, and the table that tbd_bench writes into its JSON output as
// context.tbd_metrics, so a counter cannot be added without its entry. tests/bench checks that
// every key of every row of a real run has one. Schema: results/README.md.
//
// Directions: lower / higher (which way is better); work (the amount of work: must be equal
// for two rows to be comparable); info (reported, not gated). exact: deterministic, compared
// exactly rather than within noise.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tbd {

enum class MetricDirection { kLower, kHigher, kWork, kInfo };
const char* to_string(MetricDirection d);  // "lower", "higher", "work", "info"

// X(constant, key, direction, unit, exact, description)
#define TBD_COUNTERS(X)                                                                         \
  X(kItemsPerSecond, "items_per_second", kHigher, "samples/s", false,                           \
    "samples processed per second (images, sentences; batch rows for layers) over the "         \
    "measured work time")                                                                       \
  X(kFlop, "flop", kWork, "FLOP", true,                                                         \
    "analytic floating-point operations of one iteration (a multiply-add counts 2), from "      \
    "each layer's documented formula (layers/*.h)")                                             \
  X(kFlops, "flops", kHigher, "FLOP/s", false,                                                  \
    "achieved: flop over the measured time per iteration")                                      \
  X(kFp32Utilization, "fp32_utilization", kHigher, "fraction", false,                           \
    "executed FP32 FLOP/s over the device's peak FP32 FLOP/s (context peak_fp32_flops)")        \
  X(kBf16Utilization, "bf16_utilization", kHigher, "fraction", false,                           \
    "--tbd_math=bf16: FLOP/s over the device's bf16 peak (context peak_bf16_flops), all of "    \
    "a step's FLOPs counted at the bf16 roof (fp32_utilization is then absent)")                \
  X(kModelFlop, "model_flop", kWork, "FLOP", true,                                              \
    "language models: model FLOPs per iteration by the model's stated convention (GPT-2: "      \
    "llm.c's and PaLM's 6N + 6LCT per token, attention's causal half), not the executed flop")  \
  X(kMfu, "mfu", kHigher, "fraction", false,                                                    \
    "model FLOPs utilization: model_flop per second over the peak of the math in use (FP32, "   \
    "TF32 or bf16; the roofline's compute roof); absent where that peak is unknown")            \
  X(kDeviceFp32Flop, "device_fp32_flop", kInfo, "FLOP", false,                                  \
    "GPU: FP32 FLOPs per iteration executed on the device (CUPTI), next to the analytic flop")  \
  X(kTensorUtilization, "tensor_utilization", kHigher, "fraction", false,                       \
    "GPU: tensor-core (TF32) work over the TF32 peak (context peak_tf32_flops)")                \
  X(kGpuUtilization, "gpu_utilization", kHigher, "fraction", false,                             \
    "GPU: union of kernel-busy intervals over the wall time of one profiled iteration")         \
  X(kCpuUtilization, "cpu_utilization", kInfo, "fraction", false,                               \
    "process CPU time over wall time x threads in use during the timed loop")                   \
  X(kPeakMemory, "peak_memory_bytes", kLower, "bytes", true,                                    \
    "peak of all tracked device memory during the timed iterations")                            \
  X(kBreakdownCoverage, "breakdown_coverage", kInfo, "fraction", false,                         \
    "--tbd_breakdown: sum of the per-layer rows over the un-instrumented step time")            \
  X(kBytes, "bytes", kWork, "bytes", true,                                                      \
    "analytic bytes moved by one iteration: the minimal DRAM traffic of an ideal FP32 "         \
    "implementation, a lower bound (layers/layer.h)")                                           \
  X(kBytesPerSecond, "bytes_per_second", kHigher, "bytes/s", false,                             \
    "bytes over the measured time per iteration: the achieved (lower-bound) bandwidth")         \
  X(kArithmeticIntensity, "arithmetic_intensity", kWork, "FLOP/byte", true, "flop / bytes")     \
  X(kRooflineUtilization, "roofline_utilization", kHigher, "fraction", false,                   \
    "achieved FLOP/s over the roof min(peak FP32 FLOP/s, arithmetic_intensity x peak "          \
    "bandwidth); above 1 when the data stays in cache between iterations")                      \
  X(kBandwidthUtilization, "bandwidth_utilization", kHigher, "fraction", false,                 \
    "rows without FLOPs: bytes_per_second over the peak bandwidth "                             \
    "(context peak_bandwidth_bytes_per_s); above 1 when the data stays in cache")               \
  X(kRanks, "ranks", kWork, "ranks", true,                                                      \
    "data-parallel (--tbd_dist): processes the step or all-reduce ran over")                    \
  X(kBuckets, "buckets", kInfo, "buckets", true,                                                \
    "data-parallel: gradient buckets all-reduced per step (--tbd_bucket_mb)")                   \
  X(kGradBytes, "grad_bytes", kWork, "bytes", true,                                             \
    "data-parallel: gradient bytes all-reduced per step (the trained parameters x 4)")          \
  X(kWireBytesPerRank, "wire_bytes_per_rank", kInfo, "bytes", true,                             \
    "data-parallel: bytes each rank sends per step in a ring all-reduce, 2(P-1)/P x "           \
    "grad_bytes (the same received)")                                                           \
  X(kForwardCompute, "forward_compute_s", kLower, "s", false,                                   \
    "data-parallel: zero_grad and forward per step (PyTorch DDP's forward_compute_time; max "   \
    "over ranks of the per-rank mean)")                                                         \
  X(kBackwardCompute, "backward_compute_s", kLower, "s", false,                                 \
    "data-parallel: backward per step, bucket launches included (DDP's backward_compute_time)") \
  X(kBackwardComm, "backward_comm_s", kInfo, "s", false,                                        \
    "data-parallel: first bucket queued .. last bucket reduced (DDP's backward_comm_time)")     \
  X(kBackwardOverlap, "backward_compute_comm_overlap_s", kInfo, "s", false,                     \
    "data-parallel: first bucket queued .. backward done (DDP's "                               \
    "backward_compute_comm_overlap_time)")                                                      \
  X(kComm, "comm_s", kLower, "s", false,                                                        \
    "data-parallel: the step's all-reduces' own durations, summed (on the comm thread)")        \
  X(kCommExposed, "comm_exposed_s", kLower, "s", false,                                         \
    "data-parallel: backward done .. last bucket reduced: communication the step waits for "    \
    "(more than comm_s where the all-reduce waits to be scheduled on a busy machine)")          \
  X(kCommHidden, "comm_hidden_s", kInfo, "s", false,                                            \
    "data-parallel: comm_s - comm_exposed_s, 0 where that is negative (all-reduce time under "  \
    "backward)")                                                                                \
  X(kOverlapFraction, "overlap_fraction", kHigher, "fraction", false,                           \
    "data-parallel: comm_hidden_s / comm_s")                                                    \
  X(kWeakScaling, "weak_scaling_efficiency", kHigher, "fraction", false,                        \
    "data-parallel: the ranks:1 row's step time over this row's (same per-rank batch, same "    \
    "run); absent where the run has no ranks:1 row")                                            \
  X(kSharedCores, "shared_cores", kInfo, "flag", true,                                          \
    "data-parallel, CPU: 1 when the ranks on one machine take all its cores, leaving none for " \
    "their communication threads (no compute-scaling number)")                                  \
  X(kAlgBw, "algbw", kHigher, "bytes/s", false,                                                 \
    "AllReduce: bytes / time (nccl-tests' algorithm bandwidth)")                                \
  X(kBusBw, "busbw", kHigher, "bytes/s", false,                                                 \
    "AllReduce: algbw x 2(P-1)/P, comparable with the bottleneck link's bandwidth for any P "   \
    "(nccl-tests' bus bandwidth)")                                                              \
  X(kWrong, "wrong", kLower, "elements", true,                                                  \
    "AllReduce: elements of the checked result that differ from the exact sum (checked once "   \
    "per row; a row with any is an error)")

namespace counter {
#define TBD_COUNTER_NAME(id, key, direction, unit, exact, description) \
  inline constexpr const char* id = key;
TBD_COUNTERS(TBD_COUNTER_NAME)
#undef TBD_COUNTER_NAME
// <what>_per_second: a model's extra item counts (tokens_per_second); pattern "*_per_second".
inline constexpr const char* kPerSecondSuffix = "_per_second";
// mem_<category> for every MemCategory: mem_weights, mem_weight_grads, mem_optimizer_state,
// mem_feature_maps, mem_workspace, mem_dynamic (each in the table with its own entry).
std::string mem(MemCategory c);
}  // namespace counter

struct MetricInfo {
  std::string key;  // a row key, or a pattern with one '*' ("*_per_second")
  MetricDirection direction;
  std::string unit;  // "time_unit": the row's own time_unit
  bool exact;
  std::string description;
};

// Every metric a row can carry: real_time and cpu_time, every TBD_COUNTERS entry, each
// mem_<category>, and the pattern "*_per_second".
const std::vector<MetricInfo>& metric_table();
// The entry for a row key: an exact key first, else a matching pattern; nullptr if none.
const MetricInfo* find_metric(const std::string& key);
// Context keys of the peak a utilization divides by ({} for other metrics). When they differ
// between two runs, the utilization moves although nothing ran faster or slower, so trackers
// report it without gating it (the rate it comes from is gated).
std::vector<std::string> metric_relative_to(const std::string& key);
// metric_table() as JSON: {"<key>": {"direction", "unit", "exact", "description"
// [, "relative_to": [...]]}, ...}.
nlohmann::ordered_json metrics_json();
// Inserts metrics_json() into a finished JSON file as context.tbd_metrics (an object), keeping
// everything else and its key order. False if the file could not be read, parsed or written.
bool add_metrics_to_json_file(const std::string& path);

}  // namespace tbd
