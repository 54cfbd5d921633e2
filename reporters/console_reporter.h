// reporters/console_reporter.h: the readable table tbd_bench prints while it runs.
//
// One line per row, in the order rows finish, with a [k/n] progress counter (n = benchmarks the
// filter selects; repetitions of one benchmark share its k):
//   [ 3/61] Conv2d/resnet50.layer2.1.conv2/fwd/batch:8   4.21 ms   1900   440.2  71.2%
//   comp  71.2%  38.5 MiB
// columns: time per iteration, samples/s, achieved GFLOP/s, FP32 utilization, the roofline
// bound (`mem` when arithmetic intensity x peak bandwidth is below the peak FLOP/s, else
// `comp`; core/roofline.h), roofline utilization (bandwidth utilization for rows without
// FLOPs, which are `mem`), peak memory. A counter a row does not have prints as "-". The table
// stays within 130 columns: the name column is as wide as the longest selected name up to what
// is left, and a longer name gets a line of its own with its values on the next. Errors print
// their message. The JSON file (--benchmark_out) holds everything; this table is for people.
#pragma once

#include <benchmark/benchmark.h>

#include "core/roofline.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tbd {

class TableReporter : public benchmark::BenchmarkReporter {
 public:
  // `total`: benchmarks selected (0: unknown, no progress counter); `context_lines`: the tbd
  // context, printed under Google Benchmark's own; `roofline`: the roofs `bound` uses.
  TableReporter(int total, std::vector<std::string> context_lines, Roofline roofline = {})
      : total_(total), context_lines_(std::move(context_lines)), roofline_(roofline) {}

  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& reports) override;
  void Finalize() override;

  int rows() const { return rows_; }
  int errors() const { return errors_; }

 private:
  void print_row(const Run& run, int k);

  int total_;
  std::vector<std::string> context_lines_;
  Roofline roofline_;
  std::size_t prefix_width_ = 0;                      // "[ k/n] "
  std::map<std::pair<int64_t, int64_t>, int> index_;  // (family, instance) -> k
  std::size_t name_width_ = 40;
  int rows_ = 0;
  int errors_ = 0;
  double start_s_ = 0;
};

// "4.21 ms": a duration in seconds with a unit that keeps 3 significant digits readable.
std::string format_seconds(double s);

}  // namespace tbd
