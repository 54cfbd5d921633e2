// backends/cpu/cpu_bandwidth.cpp: a STREAM-style triad that measures the CPU's memory bandwidth.
//
// Three arrays of doubles, each at least the last-level cache (64..256 MiB, see
// triad_array_bytes), are first touched in parallel with the same static schedule as the
// timed loop, so each thread's pages sit on its own NUMA node and page faults stay out of the
// timing. The triad then runs a few times with every thread; the best run counts
// 3 x 8 = 24 bytes per element (read b and c, write a), STREAM's convention: the
// write-allocate read of a's lines that ordinary stores cause is NOT counted, so this is the
// bandwidth a streaming kernel sees, somewhat below the bus's raw traffic. The three arrays
// together exceed the cache, and a sweep over more data than the cache holds misses on every
// line under LRU-like replacement, so the loop streams from DRAM.
#include "backends/cpu/cpu_bandwidth.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace tbd {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
// Sizes are multiples of 2 MiB and arrays 2 MiB aligned, so transparent huge pages can back
// them where the system uses them by default. No madvise(MADV_HUGEPAGE): asking for them can
// stall the first touch for a second while the kernel compacts memory.
constexpr std::size_t kAlign = 2 * kMiB;
constexpr int kMaxRuns = 8;
constexpr int kMinRuns = 3;
constexpr double kBudgetS = 0.4;  // stop after this much triad time once kMinRuns are done

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::size_t last_level_cache_bytes() {
  for (int name : {_SC_LEVEL4_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    long v = sysconf(name);
    if (v > 0) return static_cast<std::size_t>(v);
  }
  return 0;
}

std::size_t available_bytes() {
  long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                               : 0;
}

struct FreeDeleter {
  void operator()(double* p) const { std::free(p); }
};
using Array = std::unique_ptr<double, FreeDeleter>;

Array allocate(std::size_t bytes) {
  return Array(static_cast<double*>(std::aligned_alloc(kAlign, bytes)));  // bytes % kAlign == 0
}

volatile double g_sink = 0;

}  // namespace

std::size_t triad_array_bytes(std::size_t llc_bytes, std::size_t avail_bytes) {
  std::size_t bytes = std::clamp(llc_bytes, 64 * kMiB, 256 * kMiB);
  if (avail_bytes > 0) bytes = std::min(bytes, avail_bytes / 12);
  return std::max(kAlign, bytes / kAlign * kAlign);
}

CpuBandwidth measure_cpu_bandwidth(int threads) {
  threads = std::max(threads, 1);
  const std::size_t llc = last_level_cache_bytes();
  const std::size_t bytes = triad_array_bytes(llc, available_bytes());
  const int64_t n = static_cast<int64_t>(bytes / sizeof(double));
  Array a = allocate(bytes), b = allocate(bytes), c = allocate(bytes);
  CpuBandwidth out;
  if (!a || !b || !c) {
    out.method = "unknown: could not allocate the triad's arrays";
    return out;
  }
  double* __restrict pa = a.get();
  double* __restrict pb = b.get();
  double* __restrict pc = c.get();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    pa[i] = 0.0;
    pb[i] = 1.0;
    pc[i] = 2.0;
  }
  const double s = 3.0;
  double best = 0, spent = 0;
  int runs = 0;
  while (runs < kMaxRuns && (runs < kMinRuns || spent < kBudgetS)) {
    const double t0 = now_s();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
    const double t = now_s() - t0;
    spent += t;
    ++runs;
    if (t > 0) best = std::max(best, 3.0 * static_cast<double>(bytes) / t);
  }
  // Read the result back so the stores are observable.
  g_sink = g_sink + pa[0] + pa[n / 2] + pa[n - 1];
  out.bytes_per_s = best;
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "measured: STREAM triad a[i] = b[i] + s*c[i] on doubles, 3 arrays of %zu MiB "
                "(last-level cache %zu MiB), %d thread%s, parallel first touch, best of %d runs, "
                "24 bytes per element (write-allocate traffic not counted)",
                bytes / kMiB, llc / kMiB, threads, threads == 1 ? "" : "s", runs);
  out.method = buf;
  return out;
}

}  // namespace tbd
