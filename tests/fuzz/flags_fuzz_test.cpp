// tests/fuzz/flags_fuzz_test.cpp: drives the command-line fuzz target (tests/fuzz/flags_target.cpp)
// in every build: each file of tests/fuzz/corpus/flags, then seeded mutations of them for a
// bounded time (TBD_FUZZ_SECONDS, default 10; TBD_FUZZ_SEED, default 1). A crash, a throw or (in
// the ASan+UBSan preset) undefined behaviour fails the test; the input being run is in
// <build>/test_output/fuzz/flags_input, to add to the corpus as a regression case once fixed.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace tbd::test {
namespace {

using Input = std::vector<uint8_t>;

std::vector<Input> corpus() {
  std::vector<Input> v;
  for (const auto& e : std::filesystem::directory_iterator(TBD_FUZZ_CORPUS "/flags")) {
    std::ifstream f(e.path(), std::ios::binary);
    v.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  return v;
}

// Pieces a mutation splices in: the readers' own vocabulary and the values that break readers.
const char* const kTokens[] = {"--tbd_",
                               "--benchmark_",
                               "=",
                               ",",
                               ":",
                               "\n",
                               "-",
                               "-1",
                               "0",
                               "1e309",
                               "nan",
                               "inf",
                               "99999999999999999999",
                               "9223372036854775808",
                               "0x10",
                               " ",
                               "(",
                               ")",
                               "[",
                               "]",
                               "*",
                               "+",
                               "\\",
                               "{",
                               "}",
                               "|",
                               "^",
                               "$",
                               "?",
                               "batches=",
                               "model_args=",
                               "len:",
                               "frames:",
                               "seq_len=",
                               "filter=",
                               "repetitions=",
                               "min_time=",
                               "out=",
                               "format=",
                               "true",
                               "false",
                               "/batch:",
                               "/len:",
                               "/ranks:",
                               "/train/",
                               "/fwd/",
                               "/manual_time",
                               "ResNet50",
                               "Conv2d/"};

Input mutate(const Input& base, const std::vector<Input>& all, std::mt19937_64& rng) {
  Input x = base;
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    const std::size_t at = x.empty() ? 0 : rng() % (x.size() + 1);
    switch (rng() % 6) {
      case 0:  // flip a byte
        if (!x.empty()) x[rng() % x.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // a random byte
        x.insert(x.begin() + static_cast<std::ptrdiff_t>(at), static_cast<uint8_t>(rng()));
        break;
      case 2: {  // drop a range
        if (x.empty()) break;
        const std::size_t from = rng() % x.size();
        const std::size_t n = 1 + rng() % std::min<std::size_t>(16, x.size() - from);
        x.erase(x.begin() + static_cast<std::ptrdiff_t>(from),
                x.begin() + static_cast<std::ptrdiff_t>(from + n));
        break;
      }
      case 3: {  // a token
        const std::string t = kTokens[rng() % std::size(kTokens)];
        x.insert(x.begin() + static_cast<std::ptrdiff_t>(at), t.begin(), t.end());
        break;
      }
      case 4: {  // splice another input's tail
        const Input& o = all[rng() % all.size()];
        if (o.empty()) break;
        const std::size_t from = rng() % o.size();
        x.insert(x.begin() + static_cast<std::ptrdiff_t>(at),
                 o.begin() + static_cast<std::ptrdiff_t>(from), o.end());
        break;
      }
      default: {  // repeat a range (long values, nested groups)
        if (x.empty()) break;
        const std::size_t from = rng() % x.size();
        const Input piece(x.begin() + static_cast<std::ptrdiff_t>(from), x.end());
        const int times = 1 + static_cast<int>(rng() % 8);
        for (int k = 0; k < times && x.size() < 4096; ++k)
          x.insert(x.end(), piece.begin(), piece.end());
        break;
      }
    }
  }
  if (x.size() > 8192) x.resize(8192);
  return x;
}

double env_or(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atof(v) : fallback;
}

TEST(FlagsFuzz, CorpusAndSeededMutationsNeverCrash) {
  const std::vector<Input> seeds = corpus();
  ASSERT_FALSE(seeds.empty()) << "no corpus under " TBD_FUZZ_CORPUS "/flags";
  const std::filesystem::path out = TBD_FUZZ_OUTPUT;
  std::filesystem::create_directories(out);
  auto run = [&](const Input& x) {
    {
      std::ofstream f(out / "flags_input", std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(x.data()), static_cast<std::streamsize>(x.size()));
    }
    LLVMFuzzerTestOneInput(x.data(), x.size());
  };
  for (const Input& x : seeds) run(x);
  const double seconds = env_or("TBD_FUZZ_SECONDS", 10);
  const uint64_t seed = static_cast<uint64_t>(env_or("TBD_FUZZ_SEED", 1));
  std::mt19937_64 rng(seed);
  std::vector<Input> pool = seeds;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  long runs = 0;
  while (std::chrono::steady_clock::now() < end) {
    Input x = mutate(pool[rng() % pool.size()], pool, rng);
    run(x);
    ++runs;
    if (pool.size() < 512 && rng() % 16 == 0) pool.push_back(std::move(x));
  }
  std::printf("flags fuzz: %zu corpus inputs, %ld mutations in %.0f s (seed %llu)\n", seeds.size(),
              runs, seconds, static_cast<unsigned long long>(seed));
  EXPECT_GT(runs, 0);
}

}  // namespace
}  // namespace tbd::test
