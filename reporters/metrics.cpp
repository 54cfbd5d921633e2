// reporters/metrics.cpp: the metric table (TBD_COUNTERS plus times, memory categories and the
// per-second pattern) and its insertion into the JSON output's context.
#include "reporters/metrics.h"

#include <fstream>

namespace tbd {
namespace {

const char* mem_description(MemCategory c) {
  switch (c) {
    case MemCategory::kWeights:
      return "peak of parameters (4 bytes x parameters in FP32)";
    case MemCategory::kWeightGrads:
      return "peak of parameter gradients";
    case MemCategory::kOptimizerState:
      return "peak of optimizer state (momentum, Adam moments)";
    case MemCategory::kFeatureMaps:
      return "peak of activations kept for backward (layer rows: the layer's inputs and outputs)";
    case MemCategory::kWorkspace:
      return "peak of library scratch (oneDNN scratchpads, blocked weight copies, cuDNN and "
             "cuBLAS workspaces)";
    case MemCategory::kDynamic:
      return "peak of everything else: activation gradients, inputs and labels, temporaries";
    case MemCategory::kCount:
      break;
  }
  return "peak of this memory category";
}

bool matches(const std::string& pattern, const std::string& key) {
  std::size_t star = pattern.find('*');
  if (star == std::string::npos) return pattern == key;
  const std::string pre = pattern.substr(0, star), post = pattern.substr(star + 1);
  return key.size() >= pre.size() + post.size() && key.compare(0, pre.size(), pre) == 0 &&
         key.compare(key.size() - post.size(), post.size(), post) == 0;
}

}  // namespace

std::string counter::mem(MemCategory c) { return std::string("mem_") + to_string(c); }

const char* to_string(MetricDirection d) {
  switch (d) {
    case MetricDirection::kLower:
      return "lower";
    case MetricDirection::kHigher:
      return "higher";
    case MetricDirection::kWork:
      return "work";
    case MetricDirection::kInfo:
      return "info";
  }
  return "?";
}

const std::vector<MetricInfo>& metric_table() {
  static const std::vector<MetricInfo> table = [] {
    std::vector<MetricInfo> t;
    // Google Benchmark's own, per iteration in the row's time_unit.
    t.push_back({"real_time", MetricDirection::kLower, "time_unit", false,
                 "wall time per iteration (CPU: host steady clock; GPU: CUDA events)"});
    t.push_back({"cpu_time", MetricDirection::kLower, "time_unit", false,
                 "the main thread's CPU time per iteration"});
#define TBD_COUNTER_ENTRY(id, key, direction, unit, exact, description) \
  t.push_back({key, MetricDirection::direction, unit, exact, description});
    TBD_COUNTERS(TBD_COUNTER_ENTRY)
#undef TBD_COUNTER_ENTRY
    for (int c = 0; c < kNumMemCategories; ++c) {
      const MemCategory m = static_cast<MemCategory>(c);
      t.push_back({counter::mem(m), MetricDirection::kLower, "bytes", true, mem_description(m)});
    }
    t.push_back({std::string("*") + counter::kPerSecondSuffix, MetricDirection::kHigher, "items/s",
                 false,
                 "a model's extra items per second over the measured work time, e.g. "
                 "tokens_per_second"});
    return t;
  }();
  return table;
}

const MetricInfo* find_metric(const std::string& key) {
  for (const MetricInfo& m : metric_table()) {
    if (m.key == key) return &m;
  }
  for (const MetricInfo& m : metric_table()) {
    if (m.key.find('*') != std::string::npos && matches(m.key, key)) return &m;
  }
  return nullptr;
}

std::vector<std::string> metric_relative_to(const std::string& key) {
  if (key == counter::kFp32Utilization) return {"peak_fp32_flops"};
  if (key == counter::kTensorUtilization) return {"peak_tf32_flops"};
  if (key == counter::kBf16Utilization) return {"peak_bf16_flops"};
  if (key == counter::kRooflineUtilization) {
    return {"peak_fp32_flops", "peak_tf32_flops", "peak_bf16_flops", "peak_bandwidth_bytes_per_s",
            "roofline_compute_roof"};
  }
  if (key == counter::kBandwidthUtilization) return {"peak_bandwidth_bytes_per_s"};
  return {};
}

nlohmann::ordered_json metrics_json() {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const MetricInfo& m : metric_table()) {
    j[m.key] = {{"direction", to_string(m.direction)},
                {"unit", m.unit},
                {"exact", m.exact},
                {"description", m.description}};
    std::vector<std::string> rel = metric_relative_to(m.key);
    if (!rel.empty()) j[m.key]["relative_to"] = rel;
  }
  return j;
}

bool add_metrics_to_json_file(const std::string& path) {
  nlohmann::ordered_json doc;
  {
    std::ifstream in(path);
    if (!in) return false;
    doc = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  }
  if (doc.is_discarded() || !doc.is_object()) return false;
  doc["context"]["tbd_metrics"] = metrics_json();
  std::ofstream out(path, std::ios::trunc);
  // Invalid UTF-8 in a string (a host name, a device name) is replaced, not fatal.
  out << doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  return static_cast<bool>(out);
}

}  // namespace tbd
