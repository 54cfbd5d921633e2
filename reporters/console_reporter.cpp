// reporters/console_reporter.cpp: the compact console table.
#include "reporters/console_reporter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "reporters/tbd_counters.h"

namespace tbd {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

// Counter value or NaN when absent.
double counter_value(const benchmark::BenchmarkReporter::Run& r, const char* key) {
  auto it = r.counters.find(key);
  return it == r.counters.end() ? NAN : it->second.value;
}

std::string rate(double v) {  // 1234567 -> "1.23e+06"; small values plainly
  if (std::isnan(v)) return "-";
  if (v >= 1e6) return fmt("%.3g", v);
  if (v >= 100) return fmt("%.0f", v);
  return fmt("%.3g", v);
}

}  // namespace

std::string format_seconds(double s) {
  if (!(s >= 0) || std::isinf(s)) return "-";
  if (s < 1e-6) return fmt("%.1f ns", s * 1e9);
  if (s < 1e-3) return fmt("%.3g us", s * 1e6);
  if (s < 1) return fmt("%.3g ms", s * 1e3);
  return fmt("%.3g s", s);
}

bool TableReporter::ReportContext(const Context& context) {
  PrintBasicContext(&GetErrorStream(), context);
  for (const std::string& l : context_lines_) GetErrorStream() << l << "\n";
  name_width_ = std::min<std::size_t>(std::max<std::size_t>(context.name_field_width, 20), 72);
  std::ostream& out = GetOutputStream();
  std::string head = total_ > 0 ? std::string(2 * std::to_string(total_).size() + 4, ' ') : "";
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%s%-*s %10s %11s %10s %7s %10s", head.c_str(),
                static_cast<int>(name_width_), "benchmark", "time", "samples/s", "GFLOP/s",
                "util", "peak mem");
  out << buf << "\n" << std::string(std::string(buf).size(), '-') << "\n";
  out.flush();
  start_s_ = now_s();
  return true;
}

void TableReporter::ReportRuns(const std::vector<Run>& reports) {
  for (const Run& r : reports) {
    auto key = std::make_pair(r.family_index, r.per_family_instance_index);
    auto it = index_.find(key);
    int k = it != index_.end() ? it->second : (index_[key] = static_cast<int>(index_.size()) + 1);
    print_row(r, k);
  }
  GetOutputStream().flush();
}

void TableReporter::print_row(const Run& r, int k) {
  std::ostream& out = GetOutputStream();
  if (total_ > 0) {
    int w = static_cast<int>(std::to_string(total_).size());
    char p[32];
    std::snprintf(p, sizeof(p), "[%*d/%d] ", w, k, total_);
    out << p;
  }
  std::string name = r.benchmark_name();
  char nb[512];
  std::snprintf(nb, sizeof(nb), "%-*s", static_cast<int>(name_width_), name.c_str());
  out << nb;
  ++rows_;
  if (r.error_occurred) {
    ++errors_;
    out << " ERROR: " << r.error_message << "\n";
    return;
  }
  if (r.run_type == Run::RT_Aggregate && r.aggregate_unit == benchmark::kPercentage) {
    // A percentage aggregate holds its ratio unscaled (GetAdjustedRealTime would apply the
    // time unit and divide by the repetition count).
    out << " " << fmt("%9.2f%%", r.real_accumulated_time * 100) << "  (coefficient of variation)\n";
    return;
  }
  double secs = r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit);
  double gflops = counter_value(r, counter::kFlops) / 1e9;
  double util = counter_value(r, counter::kFp32Utilization) * 100;
  double mib = counter_value(r, counter::kPeakMemory) / (1 << 20);
  char buf[256];
  std::snprintf(buf, sizeof(buf), " %10s %11s %10s %7s %10s", format_seconds(secs).c_str(),
                rate(counter_value(r, counter::kItemsPerSecond)).c_str(),
                std::isnan(gflops) ? "-" : fmt("%.1f", gflops).c_str(),
                std::isnan(util) ? "-" : fmt("%.1f%%", util).c_str(),
                std::isnan(mib) ? "-" : fmt("%.1f MiB", mib).c_str());
  out << buf << "\n";
}

void TableReporter::Finalize() {
  std::ostream& out = GetOutputStream();
  out << rows_ << " rows (" << errors_ << " errors) in " << fmt("%.1f", now_s() - start_s_)
      << " s\n";
  out.flush();
}

}  // namespace tbd
