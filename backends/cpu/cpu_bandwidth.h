// backends/cpu/cpu_bandwidth.h: the CPU's memory bandwidth, measured (the roofline's memory roof).
//
// roofline_utilization and bandwidth_utilization divide by a DRAM bandwidth. Spec-sheet
// numbers (channels x transfer rate) are rarely reached and say nothing about a VM's share of
// a socket, so it is measured once per process, like the FP32 peak (backends/cpu/cpu_peak.h), by a
// STREAM-style triad a[i] = b[i] + s*c[i] over three arrays of doubles well beyond the
// last-level cache, with every thread in use.
#pragma once

#include <cstddef>
#include <string>

namespace tbd {

struct CpuBandwidth {
  double bytes_per_s = 0;  // 0: could not be measured (then the roofline counters are absent)
  std::string method;      // one line for the run's context
};

// Measures with `threads` OpenMP threads; about half a second on a 2-core machine (most of it
// first-touching the arrays).
CpuBandwidth measure_cpu_bandwidth(int threads);

// Bytes per triad array for a last-level cache of `llc_bytes` (0: unknown) and `avail_bytes` of
// available memory (0: unknown): the LLC size, at least 64 MiB and at most 256 MiB (so the
// measurement stays short), and no more than a twelfth of available memory (three arrays take
// at most a quarter); a multiple of 2 MiB. Exposed for tests.
std::size_t triad_array_bytes(std::size_t llc_bytes, std::size_t avail_bytes);

}  // namespace tbd
