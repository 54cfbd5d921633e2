// reporters/console_reporter.h: the readable table tbd_bench prints while it runs.
//
// One line per row, in the order rows finish, with a [k/n] progress counter (n = benchmarks the
// filter selects; repetitions of one benchmark share its k):
//   [ 3/61] Conv2d/resnet50.layer2.1.conv2/fwd/batch:8   4.21 ms   1900 /s   440 GFLOP/s  71.2 %  38.5 MiB
// columns: time per iteration, samples/s, achieved GFLOP/s, FP32 utilization, peak memory. A
// counter a row does not have prints as "-". Errors print their message. The JSON file
// (--benchmark_out) holds everything; this table is for people.
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tbd {

class TableReporter : public benchmark::BenchmarkReporter {
 public:
  // `total`: benchmarks selected (0: unknown, no progress counter); `context_lines`: the tbd
  // context, printed under Google Benchmark's own.
  TableReporter(int total, std::vector<std::string> context_lines)
      : total_(total), context_lines_(std::move(context_lines)) {}

  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& reports) override;
  void Finalize() override;

  int rows() const { return rows_; }
  int errors() const { return errors_; }

 private:
  void print_row(const Run& run, int k);

  int total_;
  std::vector<std::string> context_lines_;
  std::map<std::pair<int64_t, int64_t>, int> index_;  // (family, instance) -> k
  std::size_t name_width_ = 40;
  int rows_ = 0;
  int errors_ = 0;
  double start_s_ = 0;
};

// "4.21 ms": a duration in seconds with a unit that keeps 3 significant digits readable.
std::string format_seconds(double s);

}  // namespace tbd
