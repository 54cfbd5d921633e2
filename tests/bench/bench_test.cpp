// tests/bench/bench_test.cpp: tbd_bench, run as users run it, on tiny configurations.
//
// The binary is started as a subprocess (its path comes from CMake: TBD_BENCH_BINARY) with
// Google Benchmark's own flags (--benchmark_filter, --benchmark_min_time=0.01,
// --benchmark_out) and the suite's (--tbd_batches=1, --tbd_memory_limit, --tbd_test_models),
// and its JSON is parsed and checked, not eyeballed: counters present and in range, absent
// where they do not apply, the memory breakdown consistent, weights = 4 x parameters, filters
// selecting what they say, bad flags failing with their message, a failing configuration
// reported as an error row while the others run, and the output file complete with no
// temporary left behind; every key of every row described in context.tbd_metrics, and the
// roofline counters consistent with bytes worked out by hand. Also unit tests of the name
// grammar (fixtures/names.h), the metric table (reporters/metrics.h), the CPU bandwidth
// triad (backends/cpu/cpu_bandwidth.h) and the run context's strings (reporters/context.h).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <omp.h>

#include "backends/backends.h"
#include "backends/cpu/cpu_bandwidth.h"
#include "backends/cpu/cpu_peak.h"
#include "fixtures/names.h"
#include "reporters/context.h"
#include "reporters/json_output.h"
#include "reporters/metrics.h"

namespace tbd::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Result {
  int rc = -1;
  std::string out;  // stdout and stderr together
};

// Runs tbd_bench (the tests' variant, with the test model; `binary` for another) with `args`
// (a shell-quoted string) and captures its output.
Result run_bench(const std::string& args, const char* binary = TBD_BENCH_BINARY) {
  std::string cmd = std::string(binary) + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string l;
  while (std::getline(ss, l)) {
    if (!l.empty()) v.push_back(l);
  }
  return v;
}

// Benchmark names from --benchmark_list_tests output (the CPU-fallback notice is skipped).
std::vector<std::string> list(const std::string& args) {
  Result r = run_bench("--tbd_backend=cpu --benchmark_list_tests " + args);
  EXPECT_EQ(r.rc, 0) << r.out;
  std::vector<std::string> names;
  for (const std::string& l : lines(r.out)) {
    if (l.rfind("tbd:", 0) != 0) names.push_back(l);
  }
  return names;
}

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "tbd_bench_test.XXXXXX").string();
    path_ = mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& f) const { return fs::path(path_) / f; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs with JSON output and returns the parsed file; checks it is complete and no .tmp is left.
json run_json(const std::string& args, Result* result = nullptr) {
  TempDir dir;
  fs::path out = dir / "run.json";
  Result r = run_bench(
      "--tbd_backend=cpu --benchmark_min_time=0.01 --benchmark_out=" + out.string() + " " + args);
  if (result) *result = r;
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_FALSE(fs::exists(out.string() + ".tmp")) << "temporary JSON left behind";
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename(), "run.json") << "unexpected file " << e.path();
  }
  std::ifstream f(out);
  EXPECT_TRUE(f.good()) << "no JSON written\n" << r.out;
  if (!f.good()) return json::object();
  return json::parse(f);  // throws (test error) on a truncated file
}

const json* find_row(const json& j, const std::string& name) {
  for (const json& b : j["benchmarks"]) {
    if (b["name"] == name) return &b;
  }
  return nullptr;
}

const char* kMemCounters[] = {"mem_weights",      "mem_weight_grads", "mem_optimizer_state",
                              "mem_feature_maps", "mem_workspace",    "mem_dynamic"};

// The counters every successful row has, in range.
void expect_common_counters(const json& b) {
  SCOPED_TRACE(b["name"].get<std::string>());
  ASSERT_FALSE(b.value("error_occurred", false)) << b.value("error_message", "");
  for (const char* k :
       {"flop", "flops", "fp32_utilization", "peak_memory_bytes", "cpu_utilization"}) {
    EXPECT_TRUE(b.contains(k)) << k;
  }
  EXPECT_GT(b["flop"].get<double>(), 0);
  EXPECT_GT(b["flops"].get<double>(), 0);
  double u = b["fp32_utilization"];
  EXPECT_GT(u, 0);
  EXPECT_LE(u, 1);
  double cpu = b["cpu_utilization"];
  EXPECT_GT(cpu, 0);
  // Process CPU time over wall x threads. The two clocks are read separately and these rows'
  // loops last milliseconds: on this 2-vCPU VM short rows measured up to 1.10 when run alone
  // (no other load), hence the slack; a real accounting error (threads miscounted) is 2x.
  EXPECT_LE(cpu, 1.2);
  double sum = 0;
  for (const char* k : kMemCounters) {
    ASSERT_TRUE(b.contains(k)) << k;
    EXPECT_GE(b[k].get<double>(), 0) << k;
    sum += b[k].get<double>();
  }
  EXPECT_LE(sum, b["peak_memory_bytes"].get<double>());
  EXPECT_GT(b["peak_memory_bytes"].get<double>(), 0);
  // GPU-only counters are absent on the CPU (never zero).
  for (const char* k : {"gpu_utilization", "tensor_utilization", "device_fp32_flop"}) {
    EXPECT_FALSE(b.contains(k)) << k;
  }
  // Roofline: analytic bytes, their rate, the intensity and the position under the roof (both
  // roofs are measured on the CPU); bandwidth_utilization only on rows without FLOPs.
  for (const char* k :
       {"bytes", "bytes_per_second", "arithmetic_intensity", "roofline_utilization"}) {
    ASSERT_TRUE(b.contains(k)) << k;
  }
  EXPECT_FALSE(b.contains("bandwidth_utilization"));
  const double bytes = b["bytes"], flop = b["flop"];
  EXPECT_GT(bytes, 0);
  EXPECT_DOUBLE_EQ(b["arithmetic_intensity"].get<double>(), flop / bytes);
  EXPECT_NEAR(b["bytes_per_second"].get<double>() / b["flops"].get<double>(), bytes / flop,
              1e-9 * bytes / flop);
  double roof = b["roofline_utilization"];
  EXPECT_TRUE(std::isfinite(roof) && roof > 0) << roof;
  // The roof is never above the compute peak, so the roofline utilization is at least the FP32
  // utilization (it may exceed 1 when the data stays in cache: see results/README.md).
  EXPECT_GE(roof, u * (1 - 1e-9));
}

// ---- the name grammar ----

TEST(BenchNames, ParsesLayerNames) {
  auto n = parse_bench_name("Conv2d/resnet50.layer2.0.conv2/fwd/batch:32");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->family, BenchFamily::kLayer);
  EXPECT_EQ(n->kind, "Conv2d");
  EXPECT_EQ(n->model, "resnet50");
  EXPECT_EQ(n->layer, "layer2.0.conv2");
  EXPECT_EQ(n->phase, "fwd");
  EXPECT_EQ(n->batch, 32);
  EXPECT_EQ(n->str(), "Conv2d/resnet50.layer2.0.conv2/fwd/batch:32");

  auto g = parse_bench_name("Gemm/square1024/fwdbwd/batch:1");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->model, "");
  EXPECT_EQ(g->layer, "square1024");
  EXPECT_EQ(g->phase, "fwdbwd");
}

TEST(BenchNames, ParsesOptimizerAndModelNames) {
  auto o = parse_bench_name("Adam/resnet50/step");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->family, BenchFamily::kOptimizer);
  EXPECT_EQ(o->kind, "Adam");
  EXPECT_EQ(o->model, "resnet50");
  EXPECT_EQ(o->batch, -1);
  EXPECT_EQ(o->str(), "Adam/resnet50/step");

  auto m = parse_bench_name("Transformer/train/batch:8");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->family, BenchFamily::kModel);
  EXPECT_EQ(m->kind, "Transformer");
  EXPECT_EQ(m->batch, 8);
  EXPECT_EQ(m->str(), "Transformer/train/batch:8");
}

TEST(BenchNames, ParsesModelParametersAfterTheBatch) {
  auto m = parse_bench_name("Transformer/train/batch:8/len:32");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->family, BenchFamily::kModel);
  EXPECT_EQ(m->batch, 8);
  EXPECT_EQ(m->params, (std::vector<std::pair<std::string, int64_t>>{{"len", 32}}));
  EXPECT_EQ(m->str(), "Transformer/train/batch:8/len:32");
  auto r = parse_bench_name("Transformer/train/batch:8/len:32/manual_time_mean");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->str(), "Transformer/train/batch:8/len:32");
  EXPECT_EQ(r->suffixes, (std::vector<std::string>{"manual_time"}));
  for (const char* bad : {"Transformer/train/batch:8/len", "Transformer/train/batch:8/len:0",
                          "Transformer/train/batch:8/batch:4"}) {
    EXPECT_FALSE(parse_bench_name(bad)) << bad;
  }
}

TEST(BenchNames, DataParallelRowsAndCollectives) {
  auto m = parse_bench_name("ResNet50/train/batch:32/ranks:2/manual_time");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->family, BenchFamily::kModel);
  EXPECT_EQ(m->params, (NameParams{{"ranks", 2}}));
  EXPECT_EQ(m->str(), "ResNet50/train/batch:32/ranks:2");
  auto c = parse_bench_name("AllReduce/mpi/bytes:1048576/ranks:4/manual_time");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->family, BenchFamily::kCollective);
  EXPECT_EQ(c->kind, "AllReduce");
  EXPECT_EQ(c->subject, "mpi");
  EXPECT_EQ(c->str(), "AllReduce/mpi/bytes:1048576/ranks:4");
  EXPECT_EQ(c->str(), collective_bench_parts("AllReduce", "mpi", 1048576, 4).str());
  for (const char* bad : {"AllReduce/mpi/bytes:0/ranks:2", "AllReduce/mpi/ranks:2/bytes:8",
                          "AllReduce/mpi/bytes:8"}) {
    EXPECT_FALSE(parse_bench_name(bad)) << bad;
  }
}

TEST(BenchNames, KeepsGoogleBenchmarkSuffixesApart) {
  auto n = parse_bench_name("LSTM/seq2seq.decoder/bwd/batch:64/repeats:3/manual_time_stddev");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->kind, "LSTM");
  EXPECT_EQ(n->batch, 64);
  EXPECT_EQ(n->aggregate, "stddev");
  EXPECT_EQ(n->suffixes, (std::vector<std::string>{"repeats:3", "manual_time"}));
  EXPECT_EQ(n->str(), "LSTM/seq2seq.decoder/bwd/batch:64");
  auto m = parse_bench_name("ResNet50/train/batch:32_mean");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->aggregate, "mean");
  EXPECT_EQ(m->batch, 32);
}

TEST(BenchNames, MathModeIsTheLastComponentOfModelAndLayerRows) {
  auto m = parse_bench_name("ResNet50/train/batch:32/math:bf16");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->family, BenchFamily::kModel);
  EXPECT_EQ(m->batch, 32);
  EXPECT_TRUE(m->params.empty());
  EXPECT_EQ(m->math, "bf16");
  EXPECT_EQ(m->str(), "ResNet50/train/batch:32/math:bf16");
  auto r = parse_bench_name("Transformer/train/batch:8/len:32/math:fp32/repeats:3_median");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->math, "fp32");
  EXPECT_EQ(r->str(), "Transformer/train/batch:8/len:32/math:fp32");
  auto l = parse_bench_name("Conv2d/resnet50.conv1/wgrad/batch:2/math:bf16");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->family, BenchFamily::kLayer);
  EXPECT_EQ(l->math, "bf16");
  EXPECT_EQ(parse_bench_name("ResNet50/train/batch:32")->math, "");
  BenchNameParts p = model_bench_parts("ResNet50", 4, {});
  p.math = "bf16";
  EXPECT_EQ(p.str(), "ResNet50/train/batch:4/math:bf16");
  for (const char* bad : {"ResNet50/train/batch:32/math:fp16", "ResNet50/train/math:bf16",
                          "ResNet50/train/batch:32/math:bf16/len:4", "SGD/resnet50/step/math:bf16",
                          "AllReduce/mpi/bytes:8/ranks:2/math:bf16"}) {
    EXPECT_FALSE(parse_bench_name(bad)) << bad;
  }
}

TEST(BenchNames, RejectsWhatIsNotInTheGrammar) {
  for (const char* bad :
       {"", "Conv2d", "Conv2d/resnet50.conv1/fwd", "Conv2d/resnet50.conv1/up/batch:1",
        "Conv2d/resnet50.conv1/fwd/batch:0", "Conv2d/resnet50.conv1/fwd/batch:x",
        "Conv2d//fwd/batch:1", "Conv2d/.conv1/fwd/batch:1", "ResNet50/train/8",
        "SGD/resnet50/steps", "a/b/c/d/e"}) {
    EXPECT_FALSE(parse_bench_name(bad)) << bad;
  }
}

TEST(BenchNames, FormattersMatchTheGrammar) {
  EXPECT_EQ(layer_bench_name("Linear", "transformer.output_proj", "bwd", 8),
            "Linear/transformer.output_proj/bwd/batch:8");
  EXPECT_EQ(optimizer_bench_name("RMSprop", "resnet50"), "RMSprop/resnet50/step");
  EXPECT_EQ(model_bench_name("ResNet50", 96), "ResNet50/train/batch:96");
}

// What Google Benchmark is given: the base it registers, and the batch and model parameters as
// named arguments, which it appends as /<name>:<value> (the binary's tests check the result).
TEST(BenchNames, PartsSplitTheBaseFromGoogleBenchmarksArguments) {
  BenchNameParts m = model_bench_parts("Transformer", 8, {{"len", 32}});
  EXPECT_EQ(m.base, "Transformer/train");
  EXPECT_EQ(m.args, (NameParams{{"batch", 8}, {"len", 32}}));
  EXPECT_EQ(m.str(), "Transformer/train/batch:8/len:32");
  BenchNameParts l = layer_bench_parts("Conv2d", "resnet50.layer2.0.conv2", "fwd", 32);
  EXPECT_EQ(l.base, "Conv2d/resnet50.layer2.0.conv2/fwd");
  EXPECT_EQ(l.args, (NameParams{{"batch", 32}}));
  BenchNameParts o = optimizer_bench_parts("SGD", "resnet50");
  EXPECT_EQ(o.base, "SGD/resnet50/step");
  EXPECT_TRUE(o.args.empty());
}

// ---- the metric table and the bandwidth triad ----

TEST(Metrics, EveryCounterHasOneEntryAndPatternsMatch) {
  std::set<std::string> keys;
  for (const MetricInfo& m : metric_table()) {
    EXPECT_TRUE(keys.insert(m.key).second) << "duplicate entry " << m.key;
    EXPECT_FALSE(m.unit.empty()) << m.key;
    EXPECT_FALSE(m.description.empty()) << m.key;
  }
  for (const char* k : {"real_time",
                        "cpu_time",
                        "items_per_second",
                        "flop",
                        "flops",
                        "model_flop",
                        "mfu",
                        "fp32_utilization",
                        "device_fp32_flop",
                        "tensor_utilization",
                        "bf16_utilization",
                        "gpu_utilization",
                        "cpu_utilization",
                        "peak_memory_bytes",
                        "breakdown_coverage",
                        "bytes",
                        "bytes_per_second",
                        "arithmetic_intensity",
                        "roofline_utilization",
                        "bandwidth_utilization",
                        "mem_weights",
                        "mem_weight_grads",
                        "mem_optimizer_state",
                        "mem_feature_maps",
                        "mem_workspace",
                        "mem_dynamic"}) {
    const MetricInfo* m = find_metric(k);
    ASSERT_NE(m, nullptr) << k;
    EXPECT_EQ(m->key, k) << "an exact entry wins over a pattern";
  }
  const MetricInfo* tokens = find_metric("tokens_per_second");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->key, "*_per_second");
  EXPECT_EQ(tokens->direction, MetricDirection::kHigher);
  EXPECT_EQ(find_metric("per_second_tokens"), nullptr);
  EXPECT_EQ(find_metric("not_a_counter"), nullptr);
  // The semantics the comparison tools rely on.
  EXPECT_EQ(find_metric("real_time")->unit, "time_unit");
  EXPECT_EQ(find_metric("real_time")->direction, MetricDirection::kLower);
  for (const char* k : {"flop", "bytes", "arithmetic_intensity"}) {
    EXPECT_EQ(find_metric(k)->direction, MetricDirection::kWork) << k;
    EXPECT_TRUE(find_metric(k)->exact) << k;
  }
  for (const char* k : {"cpu_utilization", "breakdown_coverage", "device_fp32_flop"}) {
    EXPECT_EQ(find_metric(k)->direction, MetricDirection::kInfo) << k;
  }
  for (const char* k : {"peak_memory_bytes", "mem_weights", "mem_dynamic"}) {
    EXPECT_EQ(find_metric(k)->direction, MetricDirection::kLower) << k;
    EXPECT_TRUE(find_metric(k)->exact) << k;
  }
  for (const char* k : {"items_per_second", "bytes_per_second", "roofline_utilization"}) {
    EXPECT_EQ(find_metric(k)->direction, MetricDirection::kHigher) << k;
  }
}

TEST(CpuBandwidth, ArraysAreSizedFromTheCache) {
  const std::size_t mib = std::size_t{1} << 20;
  EXPECT_EQ(triad_array_bytes(0, 0), 64 * mib);                    // unknown cache: the minimum
  EXPECT_EQ(triad_array_bytes(32 * mib, 0), 64 * mib);             // small caches: the minimum
  EXPECT_EQ(triad_array_bytes(105 * mib, 0), 104 * mib);           // one LLC, 2 MiB granules
  EXPECT_EQ(triad_array_bytes(480 * mib, 0), 256 * mib);           // huge caches: capped
  EXPECT_EQ(triad_array_bytes(480 * mib, 1200 * mib), 100 * mib);  // a twelfth of free memory
  EXPECT_EQ(triad_array_bytes(480 * mib, 12 * mib), 2 * mib);      // never below one granule
}

TEST(CpuBandwidth, TriadIsPlausibleAndQuick) {
  auto t0 = std::chrono::steady_clock::now();
  CpuBandwidth bw = measure_cpu_bandwidth(omp_get_max_threads());
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(std::isfinite(bw.bytes_per_s));
  EXPECT_GT(bw.bytes_per_s, 1e9) << bw.method;   // 1 GB/s: below any machine's DRAM
  EXPECT_LT(bw.bytes_per_s, 2e12) << bw.method;  // 2 TB/s: above any CPU socket's
  for (const char* s :
       {"measured: STREAM triad", "3 arrays of", "best of", "write-allocate traffic not counted"}) {
    EXPECT_NE(bw.method.find(s), std::string::npos) << bw.method;
  }
  // About 1 s alone on 2 cores; the bound leaves room for ctest -j running another test beside
  // it (2.09 s seen in CI) and still catches a triad sized wrong (arrays of GBs, many passes).
  EXPECT_LT(s, 5.0) << "the triad runs at every tbd_bench start";
}

TEST(CpuBackend, GivesItsPeaksPerMathMode) {
  std::unique_ptr<Backend> be = make_cpu_backend();
  PeakRate tf32 = be->peak_flops(MathMode::kTf32);  // no TF32 on the CPU: 0, with the reason
  EXPECT_EQ(tf32.per_s, 0.0);
  EXPECT_NE(tf32.method.find("no tf32"), std::string::npos) << tf32.method;
  PeakRate bw = be->peak_bandwidth();
  EXPECT_GT(bw.per_s, 1e9) << bw.method;
  EXPECT_NE(bw.method.find("STREAM triad"), std::string::npos) << bw.method;
  EXPECT_EQ(be->peak_bandwidth().per_s, bw.per_s) << "measured once, then kept";
}

// The bf16 roof: measured where the CPU has avx512_bf16 (a dot product of bf16 pairs per lane,
// so about twice the FP32 FMA rate on the same pipes) and on AMX's tiles where it has those,
// else absent with the reason. The bounds
// catch a miscounted kernel (FLOPs per instruction off by 2x either way); one thread each, the
// best ratio of three tries, so that a test running beside it on the other core cannot fail it.
TEST(CpuBackend, MeasuresItsBf16PeakWhereTheIsaHasIt) {
  std::unique_ptr<Backend> be = make_cpu_backend();
  PeakRate bf16 = be->peak_flops(MathMode::kBf16);
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) {
    EXPECT_EQ(bf16.per_s, 0.0);
    EXPECT_NE(bf16.method.find("no avx512_bf16"), std::string::npos) << bf16.method;
    return;
  }
  EXPECT_GT(bf16.per_s, 0.0);
  EXPECT_NE(bf16.method.find("vdpbf16ps"), std::string::npos) << bf16.method;
  EXPECT_EQ(be->peak_flops(MathMode::kBf16).per_s, bf16.per_s) << "measured once, then kept";
  // AMX (tdpbf16ps, 1024 FLOP per cycle per core against AVX-512 FMA's 64: 16x, measured 14.6
  // alone) where the CPU has it; else vdpbf16ps (2x FMA's FLOP per instruction). Two hardware
  // threads of one core share its AMX unit, so a test running bf16 kernels on the other one
  // can halve the AMX rate (6.3 was seen under ctest -j2): the lower bound says only that the
  // tiles beat the vector units by far; the upper one still catches a FLOP count 2x too high.
  const bool amx = measure_cpu_peak_bf16(1).isa == "amx_bf16";
  if (amx) {
    EXPECT_NE(bf16.method.find("tdpbf16ps"), std::string::npos) << bf16.method;
  }
  double ratio = 0;
  for (int i = 0; i < 3; ++i) {
    const double f = measure_cpu_peak_fp32(1).flops, b = measure_cpu_peak_bf16(1).flops;
    ratio = std::max(ratio, b / f);
  }
  EXPECT_GT(ratio, amx ? 4.0 : 1.2) << bf16.method;
  EXPECT_LT(ratio, amx ? 24.0 : 3.5) << bf16.method;
}

// The JSON context's strings are written from the typed run context: the keys trackers read,
// peaks as %.6g, the GPU-only keys, the compute roof of the math in effect (a GPU context is
// made up here: no GPU is needed to check its strings).
TEST(RunContext, TheJsonStringsComeFromTheTypedFields) {
  RunContext c;
  c.backend = DeviceKind::kCuda;
  c.device = "NVIDIA H200";
  c.math = MathMode::kTf32;
  c.build_type = "Release";
  c.device_timer = true;
  c.memory_limit_bytes = std::size_t{1} << 30;
  c.backend_facts = {{"device", "not this: the typed field wins"}, {"cudnn_version", "9.1.0"}};
  c.git = {"0123456789abcdef0123", "true"};
  c.peaks_measured = true;
  c.peak_fp32 = {6.69e13, "2 x 128 FP32 lanes/SM"};
  c.peak_tf32 = {4.9468e14, "2048 dense FLOP/clk/SM"};
  c.peak_bf16 = {9.8936e14, "4096 dense FLOP/clk/SM"};
  c.bandwidth = {4.1234567e12, "cudaMemcpyAsync"};
  c.gpu_counters = "CUPTI";
  c.tf32_tensor_flop_method = "sm__ops_path_tensor_src_tf32_dst_fp32.sum x 1";
  std::map<std::string, std::string> m = context_entries(c);
  EXPECT_EQ(m["backend"], "cuda");
  EXPECT_EQ(m["device"], "NVIDIA H200");
  EXPECT_EQ(m["cudnn_version"], "9.1.0");
  EXPECT_EQ(m["threads"], "1");
  EXPECT_EQ(m["math"], "tf32");
  EXPECT_EQ(m["timing"], "device timer per iteration (manual time)");
  EXPECT_EQ(m["memory_limit_bytes"], "1073741824");
  EXPECT_EQ(m["peak_fp32_flops"], "6.69e+13");
  EXPECT_EQ(m["peak_fp32_method"], "2 x 128 FP32 lanes/SM");
  EXPECT_EQ(m["peak_tf32_flops"], "4.9468e+14");
  EXPECT_EQ(m["peak_bf16_flops"], "9.8936e+14");
  EXPECT_EQ(m["peak_bf16_method"], "4096 dense FLOP/clk/SM");
  EXPECT_EQ(m["peak_bandwidth_bytes_per_s"], "4.12346e+12");
  EXPECT_EQ(m["roofline_compute_roof"], "peak_tf32_flops");
  EXPECT_EQ(m["gpu_counters"], "CUPTI");
  EXPECT_EQ(m["tf32_tensor_flop_method"], c.tf32_tensor_flop_method);
  EXPECT_EQ(c.roofline().peak_flops, 4.9468e14);
  EXPECT_EQ(c.roofline().peak_bytes_per_s, 4.1234567e12);
  std::vector<std::string> lines = context_lines(c);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1], "tbd: peak FP32 66900.0 GFLOP/s (2 x 128 FP32 lanes/SM)");
  EXPECT_EQ(lines[3], "tbd: commit 0123456789ab (dirty)");
  c.math_modes = {MathMode::kTf32, MathMode::kBf16};  // a bf16 run also prints the bf16 roof
  lines = context_lines(c);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[2], "tbd: peak bf16 989360.0 GFLOP/s (4096 dense FLOP/clk/SM)");
  c.math_modes = {c.math};

  c.peak_tf32.per_s = 0;  // no TF32 peak: the FP32 roof
  EXPECT_EQ(context_entries(c)["roofline_compute_roof"], "peak_fp32_flops");
  EXPECT_EQ(c.roofline().peak_flops, 6.69e13);

  c.backend = DeviceKind::kCpu;  // the CPU: no TF32 keys
  c.tf32_tensor_flop_method.clear();
  m = context_entries(c);
  EXPECT_EQ(m.count("peak_tf32_flops") + m.count("peak_tf32_method"), 0u);
  EXPECT_EQ(m.count("tf32_tensor_flop_method"), 0u);
  c.peak_bf16 = {0, "not measured: this CPU has no avx512_bf16"};  // unknown: absent, says why
  m = context_entries(c);
  EXPECT_EQ(m.count("peak_bf16_flops"), 0u);
  EXPECT_EQ(m["peak_bf16_method"], c.peak_bf16.method);

  c.peaks_measured = false;  // --benchmark_list_tests: nothing measured, nothing claimed
  m = context_entries(c);
  for (const char* k :
       {"peak_fp32_flops", "peak_bandwidth_bytes_per_s", "gpu_counters", "roofline_compute_roof"}) {
    EXPECT_EQ(m.count(k), 0u) << k;
  }
}

TEST(JsonOutput, NonFiniteNumbersBecomeNullOutsideStrings) {
  std::string in =
      R"({"a": NaN, "b": -Infinity, "c": [Infinity, -NaN], "s": "NaN \" Infinity", "d": 1.5})";
  std::string want =
      R"({"a": null, "b": null, "c": [null, null], "s": "NaN \" Infinity", "d": 1.5})";
  EXPECT_EQ(sanitize_json_numbers(in), want);
  EXPECT_NO_THROW(json::parse(sanitize_json_numbers(in)));
}

// ---- the binary: listing, filters, flags ----

TEST(TbdBench, ListsEveryKindAndEveryNameParses) {
  std::vector<std::string> names = list("");
  std::set<std::string> kinds, phases, unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size()) << "duplicate benchmark names";
  for (const std::string& s : names) {
    auto n = parse_bench_name(s);
    ASSERT_TRUE(n) << s;
    EXPECT_EQ(n->str(), s);
    kinds.insert(n->kind);
    phases.insert(n->phase);
  }
  // Every kind the registered models use (layer benchmarks are derived from their graphs).
  for (const char* k : {"Conv2d",
                        "BatchNorm2d",
                        "Activation",
                        "Pool2d",
                        "GlobalAvgPool2d",
                        "Linear",
                        "Gemm",
                        "MultiHeadAttention",
                        "LayerNorm",
                        "SoftmaxCrossEntropy",
                        "Add",
                        "Embedding",
                        "PositionalEncoding",
                        "Reshape",
                        "Dropout",
                        "SGD",
                        "Adam",
                        "RMSprop",
                        "ResNet50",
                        "Transformer",
                        "LSTM",
                        "LSTMCell",
                        "GRU",
                        "MlpAttention",
                        "SequenceLast",
                        "SequenceBatchNorm",
                        "CtcLoss",
                        "Reverse",
                        "Split",
                        "Concat",
                        "Transpose",
                        "Seq2Seq",
                        "DeepSpeech2"}) {
    EXPECT_TRUE(kinds.count(k)) << k;
  }
  EXPECT_EQ(phases,
            (std::set<std::string>{"fwd", "bwd", "fwdbwd", "dgrad", "wgrad", "step", "train"}));
  for (const char* must :
       {"Conv2d/resnet50.layer2.0.conv2/fwd/batch:32", "Gemm/square1024/fwd/batch:1",
        "SGD/resnet50/step", "ResNet50/train/batch:128", "Transformer/train/batch:8",
        "Conv2d/resnet50.conv1/bwd/batch:64",
        "Activation/resnet50.layer1.0.relu/fwd/batch:8",  // after the add
        "Activation/resnet50.layer1.0.conv1.relu/fwd/batch:8",
        "Linear/transformer.output_proj/fwdbwd/batch:32",
        "MultiHeadAttention/transformer.decoder.0.cross_attn/bwd/batch:1", "Adam/transformer/step",
        "GRU/deepspeech2.rnn.l0/bwd/batch:8", "LSTMCell/seq2seq.decoder.step0.l0/fwdbwd/batch:32",
        "MlpAttention/seq2seq.decoder.step0.attention/fwd/batch:8",
        "CtcLoss/deepspeech2.ctc/bwd/batch:8", "Seq2Seq/train/batch:16",
        "DeepSpeech2/train/batch:2"}) {
    EXPECT_TRUE(unique.count(must)) << must;
  }
}

TEST(TbdBench, FiltersSelectWhatTheySay) {
  std::vector<std::string> t = list("--benchmark_filter=Transformer");
  ASSERT_FALSE(t.empty());
  for (const std::string& s : t) EXPECT_EQ(s.rfind("Transformer/train/batch:", 0), 0u) << s;
  std::vector<std::string> len = list("--benchmark_filter=Transformer --tbd_seq_len=32");
  ASSERT_FALSE(len.empty());
  for (const std::string& s : len) {
    auto n = parse_bench_name(s);
    ASSERT_TRUE(n) << s;
    EXPECT_EQ(n->params, (std::vector<std::pair<std::string, int64_t>>{{"len", 32}})) << s;
    EXPECT_EQ(n->str(), s);
  }

  std::vector<std::string> c = list("'--benchmark_filter=^Conv2d/.*/fwd/' --tbd_batches=1");
  ASSERT_FALSE(c.empty());
  for (const std::string& s : c) {
    auto n = parse_bench_name(s);
    ASSERT_TRUE(n) << s;
    EXPECT_EQ(n->kind, "Conv2d");
    EXPECT_EQ(n->phase, "fwd");
    EXPECT_EQ(n->batch, 1);
  }
  EXPECT_GE(c.size(), 20u);  // every distinct ResNet-50 convolution

  std::vector<std::string> neg = list("--benchmark_filter=-batch: --tbd_batches=1");
  std::vector<std::string> optimizers;
  for (const char* model : {"a3c", "deepspeech2", "fasterrcnn", "gpt2", "inceptionv3", "llama",
                            "resnet50", "seq2seq", "transformer", "wgan"}) {
    for (const char* opt : {"SGD", "Adam", "RMSprop"}) {
      optimizers.push_back(std::string(opt) + "/" + model + "/step");
    }
  }
  EXPECT_EQ(neg, optimizers);
}

// The test model is test-only code: the product binary does not have it and says so.
TEST(TbdBench, TheProductHasNoTestModel) {
  Result r =
      run_bench("--tbd_backend=cpu --tbd_test_models --benchmark_list_tests", TBD_BENCH_PRODUCT);
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.out.find("--tbd_test_models: this binary has no test model"), std::string::npos)
      << r.out;
  Result ok = run_bench("--tbd_backend=cpu --benchmark_list_tests --benchmark_filter=TestConvNet",
                        TBD_BENCH_PRODUCT);
  EXPECT_EQ(ok.out.find("TestConvNet/"), std::string::npos) << ok.out;
}

// The layer benchmarks are the models' own layers: the test model's graph (conv1, conv2, a
// mean loss) gives exactly those, named by the model, plus the optimizers over its parameters;
// a model built with parameters (len) puts them on its layers' names too.
TEST(TbdBench, LayerBenchmarksComeFromTheModelGraphs) {
  std::vector<std::string> t =
      list("--tbd_test_models --benchmark_filter=testconvnet --tbd_batches=2");
  EXPECT_EQ(
      t,
      (std::vector<std::string>{
          "Conv2d/testconvnet.conv1/fwd/batch:2", "Conv2d/testconvnet.conv1/bwd/batch:2",
          "Conv2d/testconvnet.conv1/fwdbwd/batch:2",
          // conv1's input is the data: no data gradient, so no dgrad row
          "Conv2d/testconvnet.conv1/wgrad/batch:2", "Conv2d/testconvnet.conv2/fwd/batch:2",
          "Conv2d/testconvnet.conv2/bwd/batch:2", "Conv2d/testconvnet.conv2/fwdbwd/batch:2",
          "Conv2d/testconvnet.conv2/dgrad/batch:2", "Conv2d/testconvnet.conv2/wgrad/batch:2",
          "TestMeanLoss/testconvnet.loss/fwd/batch:2", "TestMeanLoss/testconvnet.loss/bwd/batch:2",
          "TestMeanLoss/testconvnet.loss/fwdbwd/batch:2", "SGD/testconvnet/step",
          "Adam/testconvnet/step", "RMSprop/testconvnet/step"}));
  std::vector<std::string> fc1 = list(
      "--tbd_seq_len=32 --benchmark_filter=transformer.encoder.0.ffn.fc1/fwd/ --tbd_batches=8");
  EXPECT_EQ(fc1,
            (std::vector<std::string>{"Linear/transformer.encoder.0.ffn.fc1/fwd/batch:8/len:32"}));
}

// Layers whose inputs have structure are fed what their model feeds them, at a batch other than
// the model's: per-sample lengths in [1, T] (a data input's range), a detector's ground truth,
// RoIs and sampled labels (Model::set_sample_values). None of them is an error row.
TEST(TbdBench, StructuredInputsAreFedAsTheModelFeedsThem) {
  Result r;
  json j = run_json(
      "'--benchmark_filter=^(SequenceLast/seq2seq\\.encoder\\.last|MlpAttention/"
      "seq2seq\\.decoder\\.step0\\.attention|AnchorTarget/fasterrcnn\\.rpn\\.anchor_target|"
      "ProposalTarget/fasterrcnn\\.proposal_target|RoIPool/fasterrcnn\\.roi_pool|"
      "SoftmaxCrossEntropy/fasterrcnn\\.rcnn\\.cls_loss)/fwd/' "
      "--tbd_batches=8",
      &r);
  ASSERT_TRUE(j.contains("benchmarks")) << r.out;
  EXPECT_EQ(j["benchmarks"].size(), 6u) << r.out;
  for (const json& b : j["benchmarks"]) {
    EXPECT_FALSE(b.value("error_occurred", false))
        << b.value("name", "") << ": " << b.value("error_message", "");
  }
}

TEST(TbdBench, BatchesAndQuickShapeTheAxis) {
  for (const std::string& s : list("--tbd_batches=2,16")) {
    auto n = parse_bench_name(s);
    ASSERT_TRUE(n) << s;
    if (n->batch != -1) {
      EXPECT_TRUE(n->batch == 2 || n->batch == 16) << s;
    }
  }
  std::vector<std::string> quick = list("--tbd_quick");
  std::set<std::string> kinds;
  for (const std::string& s : quick) kinds.insert(parse_bench_name(s)->kind);
  EXPECT_GE(kinds.size(), 20u);
  // One layer per kind (three phases each), every model and the optimizers: it grows with the
  // kinds and models, but stays far from every distinct layer (thousands).
  EXPECT_LT(quick.size(), 200u);
  EXPECT_TRUE(std::count(quick.begin(), quick.end(), "ResNet50/train/batch:1") == 1);
}

TEST(TbdBench, BadFlagsFailWithTheirMessage) {
  struct Case {
    const char* args;
    std::vector<const char*> says;
  };
  for (const Case& c : {Case{"--tbd_backend=tpu", {"--tbd_backend", "auto|cpu|cuda", "tpu"}},
                        Case{"--tbd_math=fp16", {"--tbd_math", "fp32|tf32|bf16"}},
                        Case{"--tbd_math=fp32,fp16", {"--tbd_math", "fp32|tf32|bf16"}},
                        Case{"--tbd_math=bf16,bf16", {"--tbd_math", "bf16 twice"}},
                        Case{"--tbd_math=fp32,", {"--tbd_math", "fp32|tf32|bf16"}},
                        Case{"--tbd_batches=1,0", {"--tbd_batches", "positive integers"}},
                        Case{"--tbd_memory_limit=lots", {"--tbd_memory_limit", "GiB"}},
                        Case{"--tbd_threads=-2", {"--tbd_threads", "positive integer"}},
                        Case{"--tbd_threads=5000", {"--tbd_threads", "up to 4096"}},
                        Case{"--tbd_seq_len=100000", {"--tbd_seq_len", "up to 65536"}},
                        Case{"--tbd_batches=1,20000000", {"--tbd_batches", "at most 16777216"}},
                        Case{"--tbd_quick=maybe", {"--tbd_quick", "true|false"}},
                        Case{"--tbd_denormals=sometimes", {"--tbd_denormals", "flush|keep"}},
                        Case{"--tbd_model_args=frames", {"--tbd_model_args", "key:N"}},
                        Case{"--tbd_model_args=frames:0", {"--tbd_model_args", "positive"}},
                        Case{"--tbd_model_args=speed:2",
                             {"no model takes 'speed'", "frames (DeepSpeech2)", "len (Seq2Seq)"}},
                        Case{"--tbd_model_args=size:500m",
                             {"GPT2 takes size:124|350|774, Llama takes size:1498|45, not 500m"}},
                        Case{"--tbd_model_args=size:m", {"--tbd_model_args", "key:N"}},
                        Case{"--tbd_backend", {"--tbd_backend", "needs a value"}},
                        Case{"--tbd_fast", {"unknown flag --tbd_fast", "--tbd_backend"}},
                        Case{"--benchmark_nonsense=1", {"--benchmark_nonsense"}}}) {
    Result r = run_bench(std::string(c.args) + " --benchmark_list_tests");
    EXPECT_NE(r.rc, 0) << c.args;
    for (const char* s : c.says)
      EXPECT_NE(r.out.find(s), std::string::npos) << c.args << ": " << r.out;
  }
}

TEST(TbdBench, HelpListsTheTbdFlags) {
  Result r = run_bench("--help");
  EXPECT_EQ(r.rc, 0);
  for (const char* s :
       {"--benchmark_filter", "--tbd_backend=auto|cpu|cuda", "--tbd_math", "--tbd_batches",
        "--tbd_quick", "--tbd_memory_limit", "--tbd_threads", "--tbd_breakdown", "--tbd_cold_l2"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  }
}

// ---- the binary: rows, counters, context ----

TEST(TbdBench, LayerRowsCarryTheCountersAndTheContext) {
  Result r;
  json j = run_json("'--benchmark_filter=^Conv2d/resnet50.layer1.0.conv1/' --tbd_batches=1", &r);
  ASSERT_TRUE(j.contains("benchmarks")) << r.out;
  ASSERT_EQ(j["benchmarks"].size(), 5u) << r.out;
  // layer1.0.conv1: 64 -> 64 channels, 1x1, on 56x56: 64*64 weights, 2*N*K*C*P*Q FLOPs per pass.
  const double pass = 2.0 * 1 * 64 * 64 * 56 * 56;
  const double flop[] = {pass, 2 * pass, 3 * pass, pass, pass};
  // Bytes (layers/conv2d.h): x = y = 64*56*56 floats, w = 64*64. fwd reads x, w and writes y;
  // dgrad reads dy, w and writes dx; wgrad reads x, dy and reads and writes dw.
  const double x = 64.0 * 56 * 56, w = 64.0 * 64;
  const double fwd = 4 * (x + w + x), dgrad = 4 * (x + w + x), wgrad = 4 * (x + x + 2 * w);
  const double bytes[] = {fwd, dgrad + wgrad, fwd + dgrad + wgrad, dgrad, wgrad};
  int i = 0;
  for (const char* phase : {"fwd", "bwd", "fwdbwd", "dgrad", "wgrad"}) {
    const json* b =
        find_row(j, std::string("Conv2d/resnet50.layer1.0.conv1/") + phase + "/batch:1");
    ASSERT_NE(b, nullptr) << phase;
    expect_common_counters(*b);
    EXPECT_DOUBLE_EQ((*b)["bytes"].get<double>(), bytes[i]) << phase;
    EXPECT_DOUBLE_EQ((*b)["flop"].get<double>(), flop[i++]) << phase;
    EXPECT_EQ((*b)["mem_weights"].get<double>(), 4.0 * 64 * 64) << phase;
    EXPECT_EQ((*b)["mem_optimizer_state"].get<double>(), 0) << phase;
    ASSERT_TRUE(b->contains("items_per_second"));
    // items = samples (batch 1): samples/s times FLOPs per sample is the FLOP rate.
    EXPECT_NEAR((*b)["items_per_second"].get<double>() * (*b)["flop"].get<double>(),
                (*b)["flops"].get<double>(), 1e-6 * (*b)["flops"].get<double>());
  }
  const json& ctx = j["context"];
  for (const char* k :
       {"backend", "device", "peak_fp32_flops", "peak_fp32_method", "threads", "math", "git_commit",
        "git_dirty", "build_type", "onednn_version", "timing"}) {
    EXPECT_TRUE(ctx.contains(k)) << k;
  }
  EXPECT_EQ(ctx["backend"], "cpu");
  EXPECT_GT(std::stod(ctx["peak_fp32_flops"].get<std::string>()), 1e9);
  EXPECT_NE(ctx["peak_fp32_method"].get<std::string>().find("measured"), std::string::npos);
  // The memory roof: a STREAM triad, in a plausible range for any machine.
  double bw = std::stod(ctx["peak_bandwidth_bytes_per_s"].get<std::string>());
  EXPECT_GT(bw, 1e9);
  EXPECT_LT(bw, 2e12);
  EXPECT_NE(ctx["peak_bandwidth_method"].get<std::string>().find("triad"), std::string::npos);
  EXPECT_EQ(ctx["roofline_compute_roof"], "peak_fp32_flops");
  EXPECT_EQ(ctx["git_commit"].get<std::string>().size(), 40u);
  // The readable table: progress counter and the columns.
  EXPECT_NE(r.out.find("[1/5]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GFLOP/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bound"), std::string::npos) << r.out;
  for (const std::string& l : lines(r.out)) {
    if (l.rfind("[", 0) == 0) {
      EXPECT_LE(l.size(), 130u) << l;
      // A 1x1 convolution at batch 1 sits one side of the ridge or the other: never "-".
      EXPECT_TRUE(l.find(" mem ") != std::string::npos || l.find(" comp ") != std::string::npos)
          << l;
    }
  }
}

// Every key of every row (iterations, aggregates, a model with a breakdown and extra items)
// is either one of Google Benchmark's own row fields or described in context.tbd_metrics, and
// the context keeps what Google Benchmark and its tools expect.
TEST(TbdBench, MetricTableDescribesEveryRowKey) {
  Result r;
  json j = run_json(
      "--tbd_test_models --tbd_breakdown '--benchmark_filter=^TestConvNet/|"
      "^Conv2d/resnet50.layer1.0.conv1/fwd/' --tbd_batches=1 "
      "--benchmark_repetitions=2",
      &r);
  ASSERT_TRUE(j.contains("context") && j["context"].is_object()) << r.out;
  const json& ctx = j["context"];
  ASSERT_TRUE(ctx.contains("tbd_metrics"));
  const json& metrics = ctx["tbd_metrics"];
  ASSERT_TRUE(metrics.is_object()) << "tbd_metrics must be an object, not a string";
  const std::set<std::string> directions{"lower", "higher", "work", "info"};
  for (const auto& [key, m] : metrics.items()) {
    ASSERT_TRUE(m.is_object()) << key;
    EXPECT_TRUE(directions.count(m.value("direction", ""))) << key;
    EXPECT_TRUE(m["unit"].is_string()) << key;
    EXPECT_TRUE(m["exact"].is_boolean()) << key;
    EXPECT_TRUE(m["description"].is_string()) << key;
  }
  auto described = [&](const std::string& key) {
    if (metrics.contains(key)) return true;
    for (const auto& [pattern, m] : metrics.items()) {
      std::size_t star = pattern.find('*');
      if (star == std::string::npos) continue;
      std::string pre = pattern.substr(0, star), post = pattern.substr(star + 1);
      if (key.size() >= pre.size() + post.size() && key.rfind(pre, 0) == 0 &&
          key.compare(key.size() - post.size(), post.size(), post) == 0) {
        return true;
      }
    }
    return false;
  };
  // Google Benchmark's row fields that are not metrics (its JSON reporter, 1.7).
  const std::set<std::string> gb_fields{"name",
                                        "family_index",
                                        "per_family_instance_index",
                                        "run_name",
                                        "run_type",
                                        "repetitions",
                                        "repetition_index",
                                        "threads",
                                        "iterations",
                                        "time_unit",
                                        "aggregate_name",
                                        "aggregate_unit",
                                        "label",
                                        "error_occurred",
                                        "error_message"};
  std::set<std::string> seen;
  ASSERT_GE(j["benchmarks"].size(), 4u) << r.out;
  for (const json& b : j["benchmarks"]) {
    for (const auto& [key, v] : b.items()) {
      if (gb_fields.count(key)) continue;
      seen.insert(key);
      EXPECT_TRUE(described(key)) << b["name"] << ": " << key << " has no tbd_metrics entry";
    }
  }
  // Utilizations name the context peak they divide by: when it moved between two runs, a
  // tracker reports the utilization without gating it.
  for (const char* k : {"fp32_utilization", "roofline_utilization", "bandwidth_utilization"}) {
    ASSERT_TRUE(metrics[k].contains("relative_to")) << k;
    for (const json& c : metrics[k]["relative_to"]) EXPECT_TRUE(c.is_string()) << k;
  }
  EXPECT_TRUE(ctx.contains(metrics["fp32_utilization"]["relative_to"][0].get<std::string>()));
  EXPECT_FALSE(metrics["real_time"].contains("relative_to"));
  // The run exercised the metrics that appear only sometimes.
  for (const char* k : {"real_time", "breakdown_coverage", "pixels_per_second", "bytes",
                        "roofline_utilization", "mem_optimizer_state"}) {
    EXPECT_TRUE(seen.count(k)) << k;
  }
  // Google Benchmark's own context, as its tools read it; tbd's other entries are strings.
  for (const char* k : {"date", "host_name", "executable", "library_build_type"}) {
    EXPECT_TRUE(ctx[k].is_string()) << k;
  }
  EXPECT_TRUE(ctx["num_cpus"].is_number());
  EXPECT_TRUE(ctx["mhz_per_cpu"].is_number());
  EXPECT_TRUE(ctx["cpu_scaling_enabled"].is_boolean());
  EXPECT_TRUE(ctx["caches"].is_array());
  for (const char* k : {"backend", "peak_fp32_flops", "peak_bandwidth_bytes_per_s",
                        "peak_bandwidth_method", "git_commit"}) {
    EXPECT_TRUE(ctx[k].is_string()) << k;
  }
  // The breakdown rows carry the roofline too.
  ASSERT_TRUE(j.contains("tbd_breakdown"));
  for (const json& row : j["tbd_breakdown"]) {
    EXPECT_TRUE(row.contains("bound")) << row.dump();
    if (row["layer"] == "conv1") {
      EXPECT_GT(row["bytes"].get<double>(), 0);
      EXPECT_TRUE(row.contains("arithmetic_intensity"));
      EXPECT_TRUE(row.contains("roofline_utilization"));
      // Its backward is two calls, of which only the weight gradient runs (the image needs no
      // gradient): no dgrad time, the wgrad time is the whole backward.
      EXPECT_TRUE(row["backward_split"].get<bool>());
      EXPECT_FALSE(row.contains("dgrad_time_s"));
      EXPECT_DOUBLE_EQ(row["wgrad_time_s"].get<double>(), row["bwd_time_s"].get<double>());
    }
    if (row["layer"] == "conv2") {
      EXPECT_TRUE(row["backward_split"].get<bool>());
      EXPECT_NEAR(row["dgrad_time_s"].get<double>() + row["wgrad_time_s"].get<double>(),
                  row["bwd_time_s"].get<double>(), 1e-12);
    }
    if (row["layer"] == "loss") {
      EXPECT_FALSE(row["backward_split"].get<bool>());
    }
    if (row["layer"] == "(zero_grad)") {  // no FLOPs: bandwidth, never an intensity
      EXPECT_EQ(row["bound"], "mem");
      EXPECT_FALSE(row.contains("arithmetic_intensity"));
      EXPECT_TRUE(row.contains("bandwidth_utilization"));
    }
  }
}

// Denormals are flushed on every CPU thread unless --tbd_denormals=keep; the context says which.
TEST(TbdBench, DenormalsAreFlushedUnlessKept) {
  json a = run_json("'--benchmark_filter=^Gemm/square1024/fwd/'");
  EXPECT_EQ(a["context"]["denormals"].get<std::string>().rfind("flushed to zero (FTZ+DAZ on ", 0),
            0u)
      << a["context"]["denormals"];
  json b = run_json("'--benchmark_filter=^Gemm/square1024/fwd/' --tbd_denormals=keep");
  EXPECT_EQ(b["context"]["denormals"], "kept (IEEE)");
}

// The breakdown rows carry the name of the row they break down, model parameters included
// (they once said "Transformer/train/batch:1" under a row named ".../batch:1/len:4").
TEST(TbdBench, BreakdownRowsCarryTheRowsName) {
  json j = run_json(
      "'--benchmark_filter=^Transformer/train/batch:1/' --tbd_batches=1 "
      "--tbd_seq_len=4 --tbd_breakdown");
  ASSERT_NE(find_row(j, "Transformer/train/batch:1/len:4"), nullptr) << j.dump(1);
  ASSERT_TRUE(j.contains("tbd_breakdown"));
  ASSERT_FALSE(j["tbd_breakdown"].empty());
  for (const json& row : j["tbd_breakdown"]) {
    EXPECT_EQ(row["benchmark"], "Transformer/train/batch:1/len:4") << row.dump();
  }
}

TEST(TbdBench, ModelFixtureTimesTrainingSteps) {
  json j = run_json("--tbd_test_models '--benchmark_filter=^TestConvNet/' --tbd_batches=2");
  const json* b = find_row(j, "TestConvNet/train/batch:2");
  ASSERT_NE(b, nullptr) << j.dump(1);
  expect_common_counters(*b);
  // Weights are exactly 4 bytes per parameter; the test model's SGD keeps no state.
  EXPECT_EQ((*b)["mem_weights"].get<double>(), 4.0 * (16 * 3 * 3 * 3 + 16 * 16 * 3 * 3));
  EXPECT_EQ((*b)["mem_weight_grads"].get<double>(), (*b)["mem_weights"].get<double>());
  EXPECT_EQ((*b)["mem_optimizer_state"].get<double>(), 0);
  EXPECT_GT((*b)["mem_feature_maps"].get<double>(), 0);
  // Extra items: 16x16 pixels per sample, per second.
  ASSERT_TRUE(b->contains("pixels_per_second"));
  EXPECT_NEAR((*b)["pixels_per_second"].get<double>(), 256 * (*b)["items_per_second"].get<double>(),
              1e-6 * (*b)["pixels_per_second"].get<double>());
  // Bytes of the step, by hand (layers/conv2d.h; the test model's loss and SGD in
  // fixtures/test_model.cpp), summed as the FLOPs are: every layer's phases that run (conv1 has
  // no data gradient: its input is the data), plus zero_grad's writes and the optimizer.
  // conv1: x (2, 3, 16, 16) = 1536, y (2, 16, 16, 16) = 8192, w 432; conv2: x 8192,
  // y (2, 16, 8, 8) = 2048, w 2304; the mean loss reads 2048.
  const double conv1 = 4 * (1536 + 432 + 8192) + 4 * (1536 + 8192 + 2 * 432);
  const double conv2 =
      4 * (8192 + 2304 + 2048) + 4 * (2048 + 2304 + 8192) + 4 * (8192 + 2048 + 2 * 2304);
  const double loss = 4 * (2048 + 1) + 4 * (1 + 2048);
  const double params = 432 + 2304;
  const double zero_grad = 4 * params, sgd = 4 * 3 * params;  // read w, g; write w
  EXPECT_DOUBLE_EQ((*b)["bytes"].get<double>(), conv1 + conv2 + loss + zero_grad + sgd);
}

// --tbd_math=fp32,bf16: each model and layer row in both modes, named last, each with the
// utilization of its mode's roof; the context names both modes; the recurrent Seq2Seq trains in
// bf16 too.
TEST(TbdBench, SeveralMathModesRunSideBySide) {
  Result list = run_bench(
      "--tbd_backend=cpu --tbd_math=bf16 --benchmark_list_tests "
      "--benchmark_filter=^ResNet50/train/batch:1$");
  if (list.rc != 0 && list.out.find("AVX512-BF16") != std::string::npos) {
    GTEST_SKIP() << "no bf16 on this CPU: " << list.out;
  }
  Result r;
  json j = run_json(
      "--tbd_math=fp32,bf16 --tbd_batches=1 "
      "'--benchmark_filter=^(ResNet50/train|Seq2Seq/train|Gemm/square1024/fwd)/'",
      &r);
  EXPECT_EQ(j["context"]["math"], "fp32,bf16");
  const json* f = find_row(j, "ResNet50/train/batch:1/math:fp32");
  const json* b = find_row(j, "ResNet50/train/batch:1/math:bf16");
  ASSERT_NE(f, nullptr) << r.out;
  ASSERT_NE(b, nullptr) << r.out;
  EXPECT_TRUE(f->contains("fp32_utilization"));
  EXPECT_FALSE(f->contains("bf16_utilization"));
  EXPECT_TRUE(b->contains("bf16_utilization"));
  EXPECT_FALSE(b->contains("fp32_utilization"));
  // bf16 activations: the step's feature maps are smaller than fp32's.
  EXPECT_LT((*b)["mem_feature_maps"].get<double>(), (*f)["mem_feature_maps"].get<double>());
  EXPECT_NE(find_row(j, "Gemm/square1024/fwd/batch:1/math:bf16"), nullptr);
  const json* s = find_row(j, "Seq2Seq/train/batch:1/math:bf16");
  ASSERT_NE(s, nullptr) << r.out;
  EXPECT_FALSE(s->contains("error_message")) << s->dump();
  EXPECT_TRUE(s->contains("bf16_utilization"));
  EXPECT_NE(find_row(j, "Seq2Seq/train/batch:1/math:fp32"), nullptr);
}

TEST(TbdBench, AFailingConfigIsAnErrorRowAndTheRunGoesOn) {
  // 4 MiB: layer1.0.conv1 fits at batch 1 (1.6 MiB) but not at batch 8, and the optimizer's
  // 25.6 M parameters (100 MB) do not fit at all.
  Result r;
  json j = run_json(
      "'--benchmark_filter=^Conv2d/resnet50.layer1.0.conv1/fwd/|^SGD/resnet50/' "
      "--tbd_batches=1,8 --tbd_memory_limit=0.004",
      &r);
  ASSERT_EQ(j["benchmarks"].size(), 3u) << r.out;
  const json* ok = find_row(j, "Conv2d/resnet50.layer1.0.conv1/fwd/batch:1");
  ASSERT_NE(ok, nullptr);
  expect_common_counters(*ok);
  for (const char* name : {"Conv2d/resnet50.layer1.0.conv1/fwd/batch:8", "SGD/resnet50/step"}) {
    const json* b = find_row(j, name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_TRUE(b->value("error_occurred", false)) << name;
    std::string msg = b->value("error_message", "");
    EXPECT_EQ(msg.rfind("out of memory: needs ", 0), 0u) << msg;
    EXPECT_NE(msg.find("have "), std::string::npos) << msg;
    EXPECT_FALSE(b->contains("flops")) << name;
  }
  EXPECT_NE(r.out.find("ERROR: out of memory"), std::string::npos) << r.out;
}

// A recurrent model that does not fit at a large batch is an error row; its small batch runs
// (Seq2Seq: about 0.5 GiB at batch 1 and 2 GiB at batch 128, with a 1 GiB limit).
TEST(TbdBench, RecurrentModelOutOfMemoryIsAnErrorRow) {
  Result r;
  json j =
      run_json("'--benchmark_filter=^Seq2Seq/train/' --tbd_batches=1,128 --tbd_memory_limit=1", &r);
  ASSERT_EQ(j["benchmarks"].size(), 2u) << r.out;
  const json* ok = find_row(j, "Seq2Seq/train/batch:1");
  ASSERT_NE(ok, nullptr) << r.out;
  EXPECT_FALSE(ok->value("error_occurred", false)) << ok->value("error_message", "");
  EXPECT_DOUBLE_EQ(
      (*ok)["tokens_per_second"].get<double>() / (*ok)["items_per_second"].get<double>(), 30.0);
  const json* big = find_row(j, "Seq2Seq/train/batch:128");
  ASSERT_NE(big, nullptr) << r.out;
  EXPECT_TRUE(big->value("error_occurred", false));
  EXPECT_EQ(big->value("error_message", "").rfind("out of memory: needs ", 0), 0u)
      << big->value("error_message", "");
}

// Model arguments appear in the names of the models that take them, and only those; GPT2's
// rows always name their length, and its size once given (written 350m on the command line).
TEST(TbdBench, ModelArgsNameTheModelsThatTakeThem) {
  bool llama_said = false;
  for (const std::string& s : list("--tbd_model_args=frames:500,mask:1,size:350m "
                                   "--tbd_batches=2 '--benchmark_filter=/train/'")) {
    // Llama takes size: but not 350: its layers get no rows, and the run says why.
    if (s.rfind("tbd_bench: no layer benchmarks from Llama: ", 0) == 0) {
      EXPECT_NE(s.find("size:350 is not one of 1498m"), std::string::npos) << s;
      llama_said = true;
      continue;
    }
    auto n = parse_bench_name(s);
    ASSERT_TRUE(n) << s;
    using Params = std::vector<std::pair<std::string, int64_t>>;
    if (n->kind == "DeepSpeech2") {
      EXPECT_EQ(n->params, (Params{{"frames", 500}})) << s;
    } else if (n->kind == "Seq2Seq") {
      EXPECT_EQ(n->params, (Params{{"mask", 1}})) << s;
    } else if (n->kind == "A3C") {
      // Always named: its workers default to the backend's threads.
      ASSERT_EQ(n->params.size(), 1u) << s;
      EXPECT_EQ(n->params[0].first, "actors") << s;
      EXPECT_GE(n->params[0].second, 1) << s;
    } else if (n->kind == "GPT2" || n->kind == "Llama") {
      // Llama takes size: too; 350 is none of its sizes, so its rows are error rows.
      EXPECT_EQ(n->params, (Params{{"len", 1024}, {"size", 350}})) << s;
    } else {
      EXPECT_TRUE(n->params.empty()) << s;
    }
  }
  EXPECT_TRUE(llama_said);
}

TEST(TbdBench, RepetitionsAggregateAndNamesStillParse) {
  json j = run_json(
      "'--benchmark_filter=^Conv2d/resnet50.layer1.0.conv1/fwd/' --tbd_batches=1 "
      "--benchmark_repetitions=2 --benchmark_report_aggregates_only=true");
  ASSERT_GE(j["benchmarks"].size(), 3u);
  for (const json& b : j["benchmarks"]) {
    auto n = parse_bench_name(b["name"]);
    ASSERT_TRUE(n) << b["name"];
    EXPECT_FALSE(n->aggregate.empty());
    EXPECT_EQ(n->str(), "Conv2d/resnet50.layer1.0.conv1/fwd/batch:1");
  }
}

// The console's coefficient-of-variation row agrees with the JSON's ratio (it once printed the
// ratio scaled by the time unit over the repetition count: "264923.40%").
TEST(TbdBench, ConsoleCoefficientOfVariationIsAPercentage) {
  TempDir dir;
  fs::path out = dir / "cv.json";
  Result r = run_bench(
      "--tbd_backend=cpu --benchmark_min_time=0.01 "
      "'--benchmark_filter=^Conv2d/resnet50.layer1.0.conv1/fwd/' --tbd_batches=1 "
      "--benchmark_repetitions=3 --benchmark_report_aggregates_only=true "
      "--benchmark_out=" +
      out.string());
  ASSERT_EQ(r.rc, 0) << r.out;
  double json_cv = -1;
  const json j = json::parse(std::ifstream(out));
  for (const json& b : j["benchmarks"]) {
    if (b["aggregate_name"] == "cv") json_cv = b["real_time"].get<double>() * 100;
  }
  ASSERT_GE(json_cv, 0) << "no cv aggregate in the JSON";
  double console_cv = -1;
  for (const std::string& l : lines(r.out)) {
    if (l.find("(coefficient of variation)") == std::string::npos) continue;
    std::string before = l.substr(0, l.find('%'));
    console_cv = std::stod(before.substr(before.find_last_of(' ') + 1));
  }
  EXPECT_NEAR(console_cv, json_cv, 0.01) << r.out;
}

TEST(TbdBench, AnInterruptedRunLeavesNoFile) {
  TempDir dir;
  fs::path out = dir / "run.json";
  std::string cmd =
      std::string(TBD_BENCH_BINARY) +
      " --tbd_backend=cpu --benchmark_min_time=30 '--benchmark_filter=^Conv2d/resnet50.conv1/fwd/' "
      "--tbd_batches=1 --benchmark_out=" +
      out.string() +
      " >/dev/null 2>&1 & pid=$!; "
      "sleep 2; kill -INT $pid; wait $pid";
  std::system(("bash -c '" +
               [&] {
                 std::string q;
                 for (char c : cmd) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
                 return q;
               }() +
               "'")
                  .c_str());
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::is_empty(dir.path())) << "a temporary was left behind";
}

// Runs `script` under bash (single quotes in it are escaped here).
int run_bash(const std::string& script) {
  std::string q;
  for (char c : script) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  const int status = std::system(("bash -c '" + q + "'").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// SIGHUP (a closed terminal) removes the temporary as SIGINT and SIGTERM do.
TEST(TbdBench, AHangUpLeavesNoFile) {
  TempDir dir;
  fs::path out = dir / "run.json";
  run_bash(std::string(TBD_BENCH_BINARY) +
           " --tbd_backend=cpu --benchmark_min_time=30 '--benchmark_filter=^Conv2d/resnet50.conv1/"
           "fwd/' --tbd_batches=1 --benchmark_out=" +
           out.string() + " >/dev/null 2>&1 & pid=$!; sleep 2; kill -HUP $pid; wait $pid");
  EXPECT_TRUE(fs::is_empty(dir.path())) << "a file or temporary was left behind";
}

// Two runs given the same --benchmark_out: each writes a temporary of its own, and the one
// that finishes second keeps the first one's file and writes its own to run.2.json, saying so.
TEST(TbdBench, TwoRunsWritingOneFileLoseNothing) {
  TempDir dir;
  const fs::path out = dir / "run.json";
  const std::string bench = std::string(TBD_BENCH_BINARY) +
                            " --tbd_backend=cpu '--benchmark_filter=^Gemm/square1024/fwd/' "
                            "--tbd_batches=1 --benchmark_out=" +
                            out.string();
  // The long run starts first and ends last; the short one runs entirely inside it.
  const int rc = run_bash(bench + " --benchmark_min_time=4 >" + (dir / "long.log").string() +
                          " 2>&1 & pid=$!; sleep 0.5; " + bench + " --benchmark_min_time=0.05 >" +
                          (dir / "short.log").string() + " 2>&1 || exit 3; wait $pid || exit 4");
  ASSERT_EQ(rc, 0) << read_text(dir / "long.log") << read_text(dir / "short.log");
  const fs::path second = dir / "run.2.json";
  ASSERT_TRUE(fs::exists(out));
  ASSERT_TRUE(fs::exists(second)) << read_text(dir / "long.log");
  for (const fs::path& p : {out, second}) {
    std::ifstream f(p);
    const json j = json::parse(f);  // complete JSON, or the test errors
    EXPECT_EQ(j["benchmarks"].size(), 1u) << p;
  }
  EXPECT_NE(read_text(dir / "short.log").find("wrote " + out.string()), std::string::npos);
  const std::string long_log = read_text(dir / "long.log");
  EXPECT_NE(long_log.find("was written by another run"), std::string::npos) << long_log;
  EXPECT_NE(long_log.find("wrote " + second.string()), std::string::npos) << long_log;
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    ++files;
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
  }
  EXPECT_EQ(files, 4);  // the two results and the two logs
}

// An output that cannot be written is refused before the first row, with exit 2: a folder, a
// missing parent, and --benchmark_out given twice (Google Benchmark would take the last).
TEST(TbdBench, UnwritableOutputIsRefusedBeforeTheRun) {
  TempDir dir;
  const std::string filter = " --tbd_backend=cpu '--benchmark_filter=^Gemm/square1024/fwd/' ";
  Result folder = run_bench(filter + "--benchmark_out=" + dir.path());
  EXPECT_EQ(folder.rc, 2) << folder.out;
  EXPECT_NE(folder.out.find("is a folder"), std::string::npos) << folder.out;
  EXPECT_EQ(folder.out.find("Gemm/square1024"), std::string::npos) << "a row ran: " << folder.out;
  Result parent = run_bench(filter + "--benchmark_out=" + (dir / "no/such/run.json").string());
  EXPECT_EQ(parent.rc, 2) << parent.out;
  EXPECT_NE(parent.out.find("cannot create"), std::string::npos) << parent.out;
  Result twice = run_bench(filter + "--benchmark_out=" + (dir / "a.json").string() +
                           " --benchmark_out=" + (dir / "b.json").string());
  EXPECT_EQ(twice.rc, 2) << twice.out;
  EXPECT_NE(twice.out.find("--benchmark_out given twice"), std::string::npos) << twice.out;
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

// Google Benchmark's own flags get the --tbd_* treatment: a bad value or a flag given twice is
// exit 2 with the flag named, before anything runs (Google Benchmark would abort, print its
// usage and exit 0, or run nothing and exit 0).
TEST(TbdBench, BadGoogleBenchmarkFlagsAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"--benchmark_repetitions=-1", "--benchmark_repetitions=-1: not a whole number"},
      {"--benchmark_repetitions=2x", "--benchmark_repetitions=2x: not a whole number"},
      {"--benchmark_min_time=abc", "--benchmark_min_time=abc: not a positive number"},
      {"--benchmark_min_time=1s", "--benchmark_min_time=1s: not a positive number"},
      {"--benchmark_min_time=0", "--benchmark_min_time=0: not a positive number"},
      {"--benchmark_min_warmup_time=-1", "--benchmark_min_warmup_time=-1: not a number"},
      {"--benchmark_out_format=bogus", "--benchmark_out_format=bogus: unknown format"},
      {"--benchmark_format=xml", "--benchmark_format=xml: unknown format"},
      {"'--benchmark_filter=Conv2d/(resnet'", "--benchmark_filter=Conv2d/(resnet: not a valid"},
      {"'--benchmark_filter=-[a'", "--benchmark_filter=-[a: not a valid"},
      {"--benchmark_list_tests=maybe", "--benchmark_list_tests=maybe: not true or false"},
      {"--benchmark_filter=Gemm --benchmark_filter=Conv2d", "--benchmark_filter given twice"},
  };
  for (const auto& [args, message] : cases) {
    Result r = run_bench(std::string("--tbd_backend=cpu ") + args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find("Gemm/"), std::string::npos) << "a row ran: " << r.out;
  }
  // A filter deep or long enough to overflow a recursive regex compiler is refused before
  // either compiler sees it (30,000 nested groups or 100,000 characters were SIGSEGV).
  const std::pair<std::string, const char*> huge[] = {
      {std::string(30000, '(') + "a" + std::string(30000, ')'), "groups nested 30000 deep"},
      {std::string(257, '(') + "a" + std::string(257, ')'), "groups nested 257 deep"},
      {std::string(100000, 'a'), "longer than 4096 characters"},
      // libstdc++ reads a count into a long unchecked (UB) and copies the repeated part.
      {"Gemm{25555555555555555555555}", "a repetition count of over 10^12"},
      {"Gemm{1,25555555555555555555555", "a repetition count of over 10^12"},
      {"Gemm{2,256}", "a repetition count of 256, more than 255 (RE_DUP_MAX)"},
      {"((Gemm{100}){100}){100}", "expand it to about 1040100 states"},
      {"((x{255}){255}){255}", "states, more than the 100000 a filter may have"},
      // glibc's regcomp copies x for x+: nested, they double and redouble.
      {std::string(20, '(') + "Gemm" +
           [] {
             std::string s;
             for (int i = 0; i < 20; ++i) s += ")+";
             return s;
           }(),
       "states, more than the 100000 a filter may have"},
      // Stacked, 28 '+'s took it past 3 GB and 70 '*'s past 5 s (libFuzzer).
      {"Gemm" + std::string(28, '+'), "repetition operators one after another"},
      {"Gemm" + std::string(70, '*'), "repetition operators one after another"},
      {"Gemm{2}{3}", "repetition operators one after another"},
  };
  for (const auto& [filter, message] : huge) {
    Result r =
        run_bench("--tbd_backend=cpu --benchmark_list_tests '--benchmark_filter=" + filter + "'");
    EXPECT_EQ(r.rc, 2) << filter.size() << " characters\n" << r.out.substr(0, 400);
    EXPECT_NE(r.out.find(message), std::string::npos) << r.out.substr(0, 400);
    EXPECT_LT(r.out.size(), 4096u) << "the message quotes the whole filter";
  }
  // At the bound, an escaped or bracketed parenthesis is not a group: these are valid.
  std::string escaped =
      "Gemm|x{0,255}|(x{20}){20}|x[]{9999}]|x[[:alpha:]{9999}]|x" + std::string(300, '[') + "(]|x";
  for (int i = 0; i < 300; ++i) escaped += "\\(";
  for (const std::string& filter :
       {std::string(256, '(') + "Gemm" + std::string(256, ')'), escaped}) {
    Result r =
        run_bench("--tbd_backend=cpu --benchmark_list_tests '--benchmark_filter=" + filter + "'");
    EXPECT_EQ(r.rc, 0) << filter.substr(0, 80) << "\n" << r.out.substr(0, 400);
    EXPECT_NE(r.out.find("Gemm/square1024/fwd"), std::string::npos) << r.out.substr(0, 400);
  }
  // Nested repetitions, on which std::regex's backtracking never finished matching a name, are
  // matched by the C library's regexec: the list comes back at once.
  Result nested = run_bench(
      "--tbd_backend=cpu --benchmark_list_tests '--benchmark_filter=(.*)*(.*)*(.*)*(.*)*Gemm/s'");
  EXPECT_EQ(nested.rc, 0) << nested.out;
  EXPECT_NE(nested.out.find("Gemm/square1024/fwd"), std::string::npos) << nested.out;
  // Valid ones still run: a negated filter (every name not starting with G).
  Result ok = run_bench(
      "--tbd_backend=cpu --benchmark_list_tests '--benchmark_filter=-^[A-FH-Z]' "
      "--benchmark_min_time=0.01");
  EXPECT_EQ(ok.rc, 0) << ok.out;
  EXPECT_NE(ok.out.find("Gemm/square1024/fwd"), std::string::npos) << ok.out;
}

// A filter that matches no row exits 1, with or without an output file and in list mode.
TEST(TbdBench, FilterMatchingNothingExitsOne) {
  const std::string file = testing::TempDir() + "tbd_no_match.json";
  for (const std::string& extra :
       {std::string(), std::string(" --benchmark_list_tests"), " --benchmark_out=" + file}) {
    Result r = run_bench("--tbd_backend=cpu --benchmark_filter=^NoSuchRow/" + extra);
    EXPECT_EQ(r.rc, 1) << extra << "\n" << r.out;
    EXPECT_NE(r.out.find("--benchmark_filter=^NoSuchRow/ selects no benchmark"), std::string::npos)
        << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(file));
}

// A --tbd_* flag given twice, and the sequence length given by both of its flags, are named
// errors (the second value would otherwise replace the first unseen).
TEST(TbdBench, TbdFlagsGivenTwiceAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"--tbd_batches=1 --tbd_batches=2", "--tbd_batches is given twice"},
      {"--tbd_quick --tbd_quick", "--tbd_quick is given twice"},
      {"--tbd_seq_len=64 --tbd_model_args=len:32", "--tbd_seq_len=64 and --tbd_model_args"},
  };
  for (const auto& [args, message] : cases) {
    Result r = run_bench(std::string("--tbd_backend=cpu --benchmark_list_tests ") + args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace tbd::test
