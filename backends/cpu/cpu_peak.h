// backends/cpu/cpu_peak.h: the CPU's peak FP32 FLOP/s, measured (not looked up).
//
// fp32_utilization on CPU divides analytic FLOP/s by this peak. Clock speeds under load, SMT,
// AVX-512 frequency licences and virtualisation make spec-sheet peaks unreliable, so the peak
// is measured once per process by a calibrated FMA micro-kernel: every thread in use runs
// chains of independent vector FMAs (enough accumulators to cover FMA latency x the number of
// FMA pipes) and the best of many short timed runs per thread counts (summed over threads). The
// kernels are compiled for AVX-512 and AVX2+FMA with __attribute__((target)) and chosen with
// __builtin_cpu_supports, so the binary runs on any x86-64; the fastest available kernel defines
// the peak.
#pragma once

#include <string>

namespace tbd {

struct CpuPeak {
  double flops = 0;    // FP32 FLOP/s over all threads (an FMA counts 2)
  std::string isa;     // "avx512f", "avx2+fma" or "scalar"
  std::string method;  // one line for the run's context
};

// Measures with `threads` OpenMP threads; takes about 0.3 s.
CpuPeak measure_cpu_peak_fp32(int threads);

// The bf16 peak the same way: chains of AVX512-BF16 dot products (vdpbf16ps: per lane two bf16
// products added into an FP32 accumulator, 4 FLOP), on CPUs that have avx512_bf16; where the CPU
// also has AMX, tile products (tdpbf16ps, 16x16x32 per instruction) too, and the faster defines
// the peak (isa "amx_bf16"; the method names both rates). Elsewhere flops is 0 and method says
// why.
CpuPeak measure_cpu_peak_bf16(int threads);

}  // namespace tbd
