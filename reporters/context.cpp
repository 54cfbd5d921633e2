// reporters/context.cpp: git state and the run's context as JSON strings and console lines.
#include "reporters/context.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>

namespace tbd {
namespace {

// Runs a shell command; returns its stdout (trailing newline stripped) and whether it exited 0.
bool run_capture(const std::string& cmd, std::string* out) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return false;
  char buf[4096];
  std::string s;
  std::size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) s.append(buf, n);
  int rc = pclose(p);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  *out = s;
  return rc == 0;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string fmt_g(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

}  // namespace

GitState git_state(const std::string& dir) {
  GitState g;
  std::string out;
  if (run_capture("git -C " + quote(dir) + " rev-parse HEAD 2>/dev/null", &out) && !out.empty()) {
    g.commit = out;
    if (run_capture("git -C " + quote(dir) + " status --porcelain --untracked-files=no 2>/dev/null",
                    &out)) {
      g.dirty = out.empty() ? "false" : "true";
    }
  }
  return g;
}

std::map<std::string, std::string> context_entries(const RunContext& c) {
  std::map<std::string, std::string> m;
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  m["backend"] = to_string(c.backend);
  m["backend_flag"] = c.backend_flag;
  m["device"] = c.device;
  m["threads"] = std::to_string(c.threads);
  // Every mode of the run ("fp32,bf16" where rows name theirs).
  std::string modes;
  for (MathMode mm : c.math_modes) {
    if (!modes.empty()) modes += ',';
    modes += to_string(mm);
  }
  m["math"] = c.math_modes.size() > 1 ? modes : to_string(c.math);
  m["build_type"] = c.build_type;
  m["timing"] = c.device_timer ? "device timer per iteration (manual time)"
                               : "host steady clock per iteration";
  m["rates_over"] = "measured work time (counters: items_per_second, flops, <x>_per_second)";
  m["memory_limit_bytes"] = std::to_string(c.memory_limit_bytes);
  m["quick"] = flag(c.quick);
  m["cold_l2"] = flag(c.cold_l2);
  m["breakdown"] = flag(c.breakdown);
  m["h2d_per_step"] = flag(c.h2d_per_step);
  m["memory_plan"] = c.memory_plan ? "on" : "off";
  m["denormals"] = c.denormals;
  // OpenMP's waiting policy changes small-layer times a lot on a busy machine (spinning
  // threads hold cores that descheduled peers need), so it is part of what was measured.
  m["omp_wait_policy"] = c.omp_wait_policy;
  for (const auto& [k, v] : c.backend_facts) m.emplace(k, v);  // library versions etc.
  for (const auto& [k, v] : c.dist) m.emplace(k, v);
  m["git_commit"] = c.git.commit;
  m["git_dirty"] = c.git.dirty;
  if (c.peaks_measured) {
    m["gpu_counters"] = c.gpu_counters;
    m["peak_fp32_flops"] = fmt_g(c.peak_fp32.per_s);
    m["peak_fp32_method"] = c.peak_fp32.method;
    if (c.backend != DeviceKind::kCpu) {
      m["peak_tf32_flops"] = fmt_g(c.peak_tf32.per_s);
      m["peak_tf32_method"] = c.peak_tf32.method;
    }
    // The bf16 roof of this machine; absent where unknown (no avx512_bf16), the method says why.
    if (c.peak_bf16.per_s > 0) m["peak_bf16_flops"] = fmt_g(c.peak_bf16.per_s);
    m["peak_bf16_method"] = c.peak_bf16.method;
    if (!c.tf32_tensor_flop_method.empty()) {
      m["tf32_tensor_flop_method"] = c.tf32_tensor_flop_method;
    }
    m["peak_bandwidth_bytes_per_s"] = fmt_g(c.bandwidth.per_s);
    m["peak_bandwidth_method"] = c.bandwidth.method;
    m["roofline_compute_roof"] = c.tf32_roof()   ? "peak_tf32_flops"
                                 : c.bf16_roof() ? "peak_bf16_flops"
                                                 : "peak_fp32_flops";
  }
  return m;
}

void add_context(const RunContext& c) {
  for (const auto& [k, v] : context_entries(c)) benchmark::AddCustomContext(k, v);
}

std::vector<std::string> context_lines(const RunContext& c) {
  std::vector<std::string> v;
  auto rate = [](double per_s, const char* unit) {
    if (!(per_s > 0)) return std::string("unknown");
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.1f %s", per_s / 1e9, unit);
    return std::string(buf);
  };
  v.push_back("tbd: backend " + std::string(to_string(c.backend)) + " (" + c.device + "), " +
              std::to_string(c.threads) + " threads, math " + to_string(c.math) + ", build " +
              c.build_type);
  v.push_back("tbd: peak FP32 " + rate(c.peak_fp32.per_s, "GFLOP/s") + " (" + c.peak_fp32.method +
              ")");
  const bool bf16 = c.math == MathMode::kBf16 || std::find(c.math_modes.begin(), c.math_modes.end(),
                                                           MathMode::kBf16) != c.math_modes.end();
  if (bf16) {
    v.push_back("tbd: peak bf16 " + rate(c.peak_bf16.per_s, "GFLOP/s") + " (" + c.peak_bf16.method +
                ")");
  }
  v.push_back("tbd: peak bandwidth " + rate(c.bandwidth.per_s, "GB/s") + " (" + c.bandwidth.method +
              ")");
  if (auto it = c.dist.find("dist_summary"); it != c.dist.end())
    v.push_back("tbd: data-parallel " + it->second);
  if (auto it = c.dist.find("dist_shared_cores"); it != c.dist.end() && it->second != "no")
    v.push_back("tbd: " + it->second);
  v.push_back("tbd: commit " + c.git.commit.substr(0, 12) +
              (c.git.dirty == "true" ? " (dirty)" : ""));
  return v;
}

}  // namespace tbd
