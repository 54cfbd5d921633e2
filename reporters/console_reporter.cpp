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

// The value columns after the name: time, samples/s, GFLOP/s, util, bound, roof, peak mem.
constexpr const char* kColumns = " %9s %10s %8s %6s %5s %6s %10s";
constexpr std::size_t kColumnsWidth = 1 + 9 + 1 + 10 + 1 + 8 + 1 + 6 + 1 + 5 + 1 + 6 + 1 + 10;
constexpr std::size_t kMaxLineWidth = 130;
constexpr std::size_t kMinNameWidth = 20;

bool TableReporter::ReportContext(const Context& context) {
  PrintBasicContext(&GetErrorStream(), context);
  for (const std::string& l : context_lines_) GetErrorStream() << l << "\n";
  prefix_width_ = total_ > 0 ? 2 * std::to_string(total_).size() + 4 : 0;
  const std::size_t room = kMaxLineWidth - prefix_width_ - kColumnsWidth;
  name_width_ = std::clamp<std::size_t>(context.name_field_width, kMinNameWidth,
                                        std::max(room, kMinNameWidth));
  std::ostream& out = GetOutputStream();
  std::string head(prefix_width_, ' ');
  char buf[512];
  int n = std::snprintf(buf, sizeof(buf), "%s%-*s", head.c_str(), static_cast<int>(name_width_),
                        "benchmark");
  std::snprintf(buf + n, sizeof(buf) - static_cast<std::size_t>(n), kColumns, "time", "samples/s",
                "GFLOP/s", "util", "bound", "roof", "peak mem");
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
  if (name.size() > name_width_ && !r.error_occurred) {
    // Too long for the column: the name on its own line, the values under the column.
    out << name << "\n" << std::string(prefix_width_ + name_width_, ' ');
  } else {
    char nb[512];
    std::snprintf(nb, sizeof(nb), "%-*s", static_cast<int>(name_width_), name.c_str());
    out << nb;
  }
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
  // Utilization against the roof of the math in use (bf16_utilization under bf16).
  double util = counter_value(r, counter::kFp32Utilization) * 100;
  if (std::isnan(util)) util = counter_value(r, counter::kBf16Utilization) * 100;
  double mib = counter_value(r, counter::kPeakMemory) / (1 << 20);
  // Roofline: FLOP rows against the roof at their intensity, rows with bytes but no FLOPs
  // against the bandwidth (memory-bound by definition). A standard deviation has no bound.
  double intensity = counter_value(r, counter::kArithmeticIntensity);
  double roof = counter_value(r, counter::kRooflineUtilization) * 100;
  const char* bound = "-";
  const bool spread =
      r.run_type == Run::RT_Aggregate && r.aggregate_name != "mean" && r.aggregate_name != "median";
  if (std::isnan(roof)) {
    roof = counter_value(r, counter::kBandwidthUtilization) * 100;
    if (!std::isnan(roof) && !spread) bound = "mem";
  } else if (!spread && roofline_.known() && intensity > 0) {
    bound = roofline_.memory_bound(intensity) ? "mem" : "comp";
  }
  char buf[256];
  std::snprintf(buf, sizeof(buf), kColumns, format_seconds(secs).c_str(),
                rate(counter_value(r, counter::kItemsPerSecond)).c_str(),
                std::isnan(gflops) ? "-" : fmt("%.1f", gflops).c_str(),
                std::isnan(util) ? "-" : fmt("%.1f%%", util).c_str(), bound,
                std::isnan(roof) ? "-" : fmt("%.1f%%", roof).c_str(),
                std::isnan(mib) ? "-" : fmt("%.1f MiB", mib).c_str());
  out << buf;
  // Data-parallel rows (--tbd_dist): the all-reduce's bus bandwidth; a step's scaling and the
  // communication it waits for.
  const double busbw = counter_value(r, counter::kBusBw);
  if (!std::isnan(busbw)) out << "  busbw " << fmt("%.3g GB/s", busbw / 1e9);
  const double eff = counter_value(r, counter::kWeakScaling);
  if (!std::isnan(eff)) out << "  scaling " << fmt("%.0f%%", eff * 100);
  const double exposed = counter_value(r, counter::kCommExposed);
  const double comm = counter_value(r, counter::kComm);
  if (!std::isnan(exposed) && !std::isnan(comm)) {
    out << "  comm " << format_seconds(comm) << ", exposed " << format_seconds(exposed);
  }
  out << "\n";
}

void TableReporter::Finalize() {
  std::ostream& out = GetOutputStream();
  out << rows_ << " rows (" << errors_ << " errors) in " << fmt("%.1f", now_s() - start_s_)
      << " s\n";
  out.flush();
}

}  // namespace tbd
