// tests/fuzz/flags_target.cpp: the fuzz target for tbd_bench's command-line readers.
//
// The input, split at NUL and newline bytes, is an argument list: parse_tbd_flags reads it (every
// --tbd_* flag, --tbd_model_args' key:N list included), check_benchmark_flags reads what is left
// (Google Benchmark's flags: numbers, formats, the filter's regular expression, booleans,
// repeats), and parse_bench_name reads every argument as a benchmark name. Each must answer,
// with a result or a message, without crashing, throwing or undefined behaviour.
//
// The entry point is libFuzzer's: tests/fuzz/libfuzzer.sh builds it with
// `clang++ -fsanitize=fuzzer,address,undefined` and fuzzes it with coverage (ctest
// fuzz.flags_libfuzzer); tests/fuzz/flags_fuzz_test.cpp drives it in every build (its corpus,
// then seeded mutations for a bounded time), the ASan+UBSan preset included.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "fixtures/names.h"
#include "fixtures/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"tbd_bench"};
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\0' || c == '\n') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) args.push_back(cur);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  try {
    tbd::BenchOptions options;
    if (tbd::parse_tbd_flags(&argc, argv.data(), &options).empty()) {
      (void)tbd::check_benchmark_flags(argc, argv.data());
    }
    for (const std::string& a : args) (void)tbd::parse_bench_name(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flags_target: a reader threw instead of answering: %s\n", e.what());
    std::abort();
  }
  return 0;
}
