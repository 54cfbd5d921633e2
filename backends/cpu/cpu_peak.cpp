// backends/cpu/cpu_peak.cpp: FMA micro-kernels that measure the CPU's peak FP32 rate.
//
// Each kernel updates kAcc independent accumulators acc = acc * m + c; m < 1 and c > 0 keep the
// values near a fixed point, so no overflow or denormal slows the pipes. kAcc = 16 (AVX-512) and
// 12 (AVX2) cover 4-cycle FMA latency on two pipes with margin while leaving registers for m
// and c. The result is returned and summed so the compiler cannot drop the work.
#include "backends/cpu/cpu_peak.h"

#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>

namespace tbd {
namespace {

using Kernel = float (*)(int64_t iters);

// The sum of every lane of 16 accumulators: what the AVX-512 kernels return, so that the
// compiler cannot drop their work.
__attribute__((target("avx512f"), always_inline)) inline float sum16(
    __m512 a0, __m512 a1, __m512 a2, __m512 a3, __m512 a4, __m512 a5, __m512 a6, __m512 a7,
    __m512 a8, __m512 a9, __m512 a10, __m512 a11, __m512 a12, __m512 a13, __m512 a14, __m512 a15) {
  __m512 s =
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                  _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))),
                    _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)),
                                  _mm512_add_ps(_mm512_add_ps(a12, a13), _mm512_add_ps(a14, a15))));
  alignas(64) float v[16];
  _mm512_store_ps(v, s);
  float sum = 0;
  for (float x : v) sum += x;
  return sum;
}

__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
  __m512 a0 = _mm512_set1_ps(0.1f), a1 = _mm512_set1_ps(0.2f), a2 = _mm512_set1_ps(0.3f),
         a3 = _mm512_set1_ps(0.4f), a4 = _mm512_set1_ps(0.5f), a5 = _mm512_set1_ps(0.6f),
         a6 = _mm512_set1_ps(0.7f), a7 = _mm512_set1_ps(0.8f), a8 = _mm512_set1_ps(0.9f),
         a9 = _mm512_set1_ps(1.0f), a10 = _mm512_set1_ps(1.1f), a11 = _mm512_set1_ps(1.2f),
         a12 = _mm512_set1_ps(1.3f), a13 = _mm512_set1_ps(1.4f), a14 = _mm512_set1_ps(1.5f),
         a15 = _mm512_set1_ps(1.6f);
  for (int64_t i = 0; i < iters; ++i) {
    a0 = _mm512_fmadd_ps(a0, m, c);
    a1 = _mm512_fmadd_ps(a1, m, c);
    a2 = _mm512_fmadd_ps(a2, m, c);
    a3 = _mm512_fmadd_ps(a3, m, c);
    a4 = _mm512_fmadd_ps(a4, m, c);
    a5 = _mm512_fmadd_ps(a5, m, c);
    a6 = _mm512_fmadd_ps(a6, m, c);
    a7 = _mm512_fmadd_ps(a7, m, c);
    a8 = _mm512_fmadd_ps(a8, m, c);
    a9 = _mm512_fmadd_ps(a9, m, c);
    a10 = _mm512_fmadd_ps(a10, m, c);
    a11 = _mm512_fmadd_ps(a11, m, c);
    a12 = _mm512_fmadd_ps(a12, m, c);
    a13 = _mm512_fmadd_ps(a13, m, c);
    a14 = _mm512_fmadd_ps(a14, m, c);
    a15 = _mm512_fmadd_ps(a15, m, c);
  }
  return sum16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15);
}
constexpr double kFlopAvx512 = 16.0 * 16 * 2;  // accumulators x lanes x (mul + add)

__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  __m256 a0 = _mm256_set1_ps(0.1f), a1 = _mm256_set1_ps(0.2f), a2 = _mm256_set1_ps(0.3f),
         a3 = _mm256_set1_ps(0.4f), a4 = _mm256_set1_ps(0.5f), a5 = _mm256_set1_ps(0.6f),
         a6 = _mm256_set1_ps(0.7f), a7 = _mm256_set1_ps(0.8f), a8 = _mm256_set1_ps(0.9f),
         a9 = _mm256_set1_ps(1.0f), a10 = _mm256_set1_ps(1.1f), a11 = _mm256_set1_ps(1.2f);
  for (int64_t i = 0; i < iters; ++i) {
    a0 = _mm256_fmadd_ps(a0, m, c);
    a1 = _mm256_fmadd_ps(a1, m, c);
    a2 = _mm256_fmadd_ps(a2, m, c);
    a3 = _mm256_fmadd_ps(a3, m, c);
    a4 = _mm256_fmadd_ps(a4, m, c);
    a5 = _mm256_fmadd_ps(a5, m, c);
    a6 = _mm256_fmadd_ps(a6, m, c);
    a7 = _mm256_fmadd_ps(a7, m, c);
    a8 = _mm256_fmadd_ps(a8, m, c);
    a9 = _mm256_fmadd_ps(a9, m, c);
    a10 = _mm256_fmadd_ps(a10, m, c);
    a11 = _mm256_fmadd_ps(a11, m, c);
  }
  __m256 s =
      _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                  _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7))),
                    _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  alignas(32) float v[8];
  _mm256_store_ps(v, s);
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}
constexpr double kFlopAvx2 = 12.0 * 8 * 2;

// acc += a . b per pair of bf16 lanes: 16 lanes x 2 products x (mul + add) per instruction.
// a and b are small, so the accumulators grow slowly (about 1e-6 per step) and stay normal.
__attribute__((target("avx512f,avx512bf16"))) float dpbf16_avx512(int64_t iters) {
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(5e-4f), _mm512_set1_ps(5e-4f));
  __m512 a0 = _mm512_set1_ps(0.1f), a1 = _mm512_set1_ps(0.2f), a2 = _mm512_set1_ps(0.3f),
         a3 = _mm512_set1_ps(0.4f), a4 = _mm512_set1_ps(0.5f), a5 = _mm512_set1_ps(0.6f),
         a6 = _mm512_set1_ps(0.7f), a7 = _mm512_set1_ps(0.8f), a8 = _mm512_set1_ps(0.9f),
         a9 = _mm512_set1_ps(1.0f), a10 = _mm512_set1_ps(1.1f), a11 = _mm512_set1_ps(1.2f),
         a12 = _mm512_set1_ps(1.3f), a13 = _mm512_set1_ps(1.4f), a14 = _mm512_set1_ps(1.5f),
         a15 = _mm512_set1_ps(1.6f);
  for (int64_t i = 0; i < iters; ++i) {
    a0 = _mm512_dpbf16_ps(a0, a, b);
    a1 = _mm512_dpbf16_ps(a1, a, b);
    a2 = _mm512_dpbf16_ps(a2, a, b);
    a3 = _mm512_dpbf16_ps(a3, a, b);
    a4 = _mm512_dpbf16_ps(a4, a, b);
    a5 = _mm512_dpbf16_ps(a5, a, b);
    a6 = _mm512_dpbf16_ps(a6, a, b);
    a7 = _mm512_dpbf16_ps(a7, a, b);
    a8 = _mm512_dpbf16_ps(a8, a, b);
    a9 = _mm512_dpbf16_ps(a9, a, b);
    a10 = _mm512_dpbf16_ps(a10, a, b);
    a11 = _mm512_dpbf16_ps(a11, a, b);
    a12 = _mm512_dpbf16_ps(a12, a, b);
    a13 = _mm512_dpbf16_ps(a13, a, b);
    a14 = _mm512_dpbf16_ps(a14, a, b);
    a15 = _mm512_dpbf16_ps(a15, a, b);
  }
  return sum16(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15);
}
constexpr double kFlopDpbf16 = 16.0 * 16 * 2 * 2;  // accumulators x lanes x products x 2

// AMX: tdpbf16ps multiplies a 16x32 bf16 tile by a 32x16 one (stored pairwise, 16 rows of 64
// bytes) into a 16x16 f32 tile: 16 * 16 * 32 * 2 FLOP. The kernel keeps all eight tiles busy as
// oneDNN's brgemm does: two A tiles and two B tiles (loaded once; no memory traffic in the
// loop) into four independent accumulators, 2x2. Each call configures the tiles (palette 1)
// and releases them, on the calling thread.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

__attribute__((target("amx-tile,amx-bf16,avx512f"))) float tdpbf16_amx(int64_t iters) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  _tile_loadconfig(&cfg);
  alignas(64) uint16_t ab[2][16 * 32];  // bf16 1e-3 and 5e-4: the sums stay small and normal
  for (int i = 0; i < 16 * 32; ++i) ab[0][i] = 0x3a83, ab[1][i] = 0x3a03;
  alignas(64) float c[16 * 16] = {};
  _tile_loadd(0, c, 64);
  _tile_loadd(1, c, 64);
  _tile_loadd(2, c, 64);
  _tile_loadd(3, c, 64);
  _tile_loadd(4, ab[0], 64);
  _tile_loadd(5, ab[1], 64);
  _tile_loadd(6, ab[1], 64);
  _tile_loadd(7, ab[0], 64);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  float sum = 0;
  for (int t : {0, 1, 2, 3}) {
    switch (t) {  // _tile_stored takes the tile as a constant
      case 0:
        _tile_stored(0, c, 64);
        break;
      case 1:
        _tile_stored(1, c, 64);
        break;
      case 2:
        _tile_stored(2, c, 64);
        break;
      default:
        _tile_stored(3, c, 64);
        break;
    }
    for (float x : c) sum += x;
  }
  _tile_release();
  return sum;
}
constexpr double kFlopTdpbf16 = 4.0 * 16 * 16 * 32 * 2;  // accumulators x M x N x K x 2

// Linux hands out AMX's tile state only on request (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA, once per process; oneDNN makes the same request). False where the kernel
// refuses or predates it.
bool amx_permitted() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// Portable fallback (whatever the compiler vectorizes for the baseline ISA).
float fma_scalar(int64_t iters) {
  float a[16];
  for (int k = 0; k < 16; ++k) a[k] = 0.1f * (k + 1);
  for (int64_t i = 0; i < iters; ++i) {
    for (int k = 0; k < 16; ++k) a[k] = a[k] * 0.999999f + 1e-6f;
  }
  float s = 0;
  for (float x : a) s += x;
  return s;
}
constexpr double kFlopScalar = 16.0 * 2;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

volatile float g_sink = 0;

// Timed runs per thread and the length of each (the peaks keep each thread's best).
constexpr int kTrials = 100;
constexpr double kTrialS = 0.001;

// Every thread runs `trials` timed runs of kernel(iters) at the same time (so all-core clocks
// apply) and keeps its own best rate; the peak is the sum over threads. Timing each thread on
// its own, with no barrier inside a timed run, keeps one descheduled thread from stalling the
// others, and the best of many short runs discards runs that were preempted on a busy machine.
double measure(Kernel k, double flop_per_iter, int threads, int trials, double trial_s) {
  int64_t iters = 1 << 12;
  for (;;) {  // calibrate on one thread: a run of about trial_s
    double t0 = now_s();
    g_sink = g_sink + k(iters);
    double t = now_s() - t0;
    if (t > trial_s / 4 || iters > (int64_t{1} << 40)) {
      iters = std::max<int64_t>(
          1024, static_cast<int64_t>(static_cast<double>(iters) * trial_s / std::max(t, 1e-9)));
      break;
    }
    iters *= 4;
  }
  double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    double best = 0;
    float sink = 0;
    for (int i = 0; i < trials; ++i) {
      double t0 = now_s();
      sink += k(iters);
      double t = now_s() - t0;
      best = std::max(best, flop_per_iter * static_cast<double>(iters) / t);
    }
    total += best;
    g_sink = g_sink + sink;
  }
  return total;
}

}  // namespace

CpuPeak measure_cpu_peak_fp32(int threads) {
  threads = std::max(threads, 1);
  struct Candidate {
    const char* isa;
    Kernel k;
    double flop;
    int accumulators;
    bool ok;
  };
  __builtin_cpu_init();
  Candidate cands[] = {
      {"avx512f", fma_avx512, kFlopAvx512, 16, __builtin_cpu_supports("avx512f") != 0},
      {"avx2+fma", fma_avx2, kFlopAvx2, 12,
       __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")},
      {"scalar", fma_scalar, kFlopScalar, 16, true},
  };
  CpuPeak best;
  bool vector_ran = false;
  for (const Candidate& c : cands) {
    // Both vector kernels run (AVX2 can match AVX-512 where 512-bit FMAs are split or
    // down-clocked); the scalar one only where neither exists.
    if (!c.ok || (c.k == fma_scalar && vector_ran)) continue;
    vector_ran = vector_ran || c.k != fma_scalar;
    double f = measure(c.k, c.flop, threads, kTrials, kTrialS);
    if (f > best.flops) {
      best.flops = f;
      best.isa = c.isa;
      char buf[256];
      std::snprintf(buf, sizeof(buf),
                    "measured: %s FMA micro-kernel (%d independent accumulators), %d thread%s, "
                    "per thread the best of %d runs of %.0f ms, summed",
                    c.isa, c.accumulators, threads, threads == 1 ? "" : "s", kTrials,
                    kTrialS * 1e3);
      best.method = buf;
    }
  }
  return best;
}

CpuPeak measure_cpu_peak_bf16(int threads) {
  threads = std::max(threads, 1);
  CpuPeak p;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) {
    p.method =
        "not measured: this CPU has no avx512_bf16 (oneDNN would emulate bf16, slower than fp32)";
    return p;
  }
  char buf[384];
  p.flops = measure(dpbf16_avx512, kFlopDpbf16, threads, kTrials, kTrialS);
  p.isa = "avx512_bf16";
  std::snprintf(buf, sizeof(buf),
                "measured: avx512_bf16 vdpbf16ps micro-kernel (16 independent accumulators, 4 "
                "FLOP per lane), %d thread%s, per thread the best of %d runs of %.0f ms, summed",
                threads, threads == 1 ? "" : "s", kTrials, kTrialS * 1e3);
  p.method = buf;
  // Where the CPU has AMX, oneDNN's bf16 kernels run on it (avx512_core_amx): its rate is the
  // roof, the vector one's noted beside it.
  if (__builtin_cpu_supports("amx-bf16") && __builtin_cpu_supports("amx-tile")) {
    if (!amx_permitted()) {
      p.method += "; AMX not measured: Linux refused the tile state (arch_prctl)";
      return p;
    }
    const double vector = p.flops;
    const double amx = measure(tdpbf16_amx, kFlopTdpbf16, threads, kTrials, kTrialS);
    if (amx > vector) {
      p.flops = amx;
      p.isa = "amx_bf16";
      std::snprintf(buf, sizeof(buf),
                    "measured: AMX tdpbf16ps micro-kernel (2x2 tiles, 4 independent 16x16 f32 "
                    "accumulators, K 32), %d thread%s, per thread the best of %d runs of %.0f ms, "
                    "summed (avx512_bf16 vdpbf16ps: %.1f GFLOP/s)",
                    threads, threads == 1 ? "" : "s", kTrials, kTrialS * 1e3, vector / 1e9);
      p.method = buf;
    }
  }
  return p;
}

}  // namespace tbd
