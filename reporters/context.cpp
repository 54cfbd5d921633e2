// reporters/context.cpp: git state and the run's context.
#include "reporters/context.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

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

std::string get(const std::map<std::string, std::string>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? "?" : it->second;
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

void add_context(const std::map<std::string, std::string>& ctx) {
  for (const auto& [k, v] : ctx) benchmark::AddCustomContext(k, v);
}

std::vector<std::string> context_lines(const std::map<std::string, std::string>& c) {
  std::vector<std::string> v;
  double peak = std::atof(get(c, "peak_fp32_flops").c_str());
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%.1f GFLOP/s", peak / 1e9);
  v.push_back("tbd: backend " + get(c, "backend") + " (" + get(c, "device") + "), " +
              get(c, "threads") + " threads, math " + get(c, "math") + ", build " +
              get(c, "build_type"));
  v.push_back("tbd: peak FP32 " + (peak > 0 ? std::string(buf) : std::string("unknown")) + " (" +
              get(c, "peak_fp32_method") + ")");
  double bw = std::atof(get(c, "peak_bandwidth_bytes_per_s").c_str());
  std::snprintf(buf, sizeof(buf), "%.1f GB/s", bw / 1e9);
  v.push_back("tbd: peak bandwidth " + (bw > 0 ? std::string(buf) : std::string("unknown")) +
              " (" + get(c, "peak_bandwidth_method") + ")");
  std::string commit = get(c, "git_commit");
  v.push_back("tbd: commit " + commit.substr(0, 12) +
              (get(c, "git_dirty") == "true" ? " (dirty)" : ""));
  return v;
}

}  // namespace tbd
