// reporters/tbd_counters.cpp: RunMeasurement -> Google Benchmark user counters.
#include "reporters/tbd_counters.h"

#include <time.h>

namespace tbd {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void set_tbd_counters(benchmark::State& st, const RunMeasurement& m) {
  using benchmark::Counter;
  if (m.iterations <= 0 || m.work_s <= 0) return;
  const double iters = static_cast<double>(m.iterations);
  const double s_per_iter = m.work_s / iters;
  auto set = [&](const std::string& k, double v) { st.counters[k] = Counter(v); };

  if (m.items_per_iter > 0) set(counter::kItemsPerSecond, m.items_per_iter / s_per_iter);
  for (const auto& [what, n] : m.extra_items_per_iter) {
    if (n > 0) set(what + counter::kPerSecondSuffix, n / s_per_iter);
  }
  if (m.flop_per_iter > 0) {
    set(counter::kFlop, m.flop_per_iter);
    set(counter::kFlops, m.flop_per_iter / s_per_iter);
    // CPU: the executed count is the analytic one. GPU: the count CUPTI measured.
    if (m.cpu_device && m.peak_fp32_flops > 0) {
      set(counter::kFp32Utilization, m.flop_per_iter / s_per_iter / m.peak_fp32_flops);
    }
  }
  if (m.bytes_per_iter > 0) {
    const double bytes_per_s = m.bytes_per_iter / s_per_iter;
    set(counter::kBytes, m.bytes_per_iter);
    set(counter::kBytesPerSecond, bytes_per_s);
    if (m.flop_per_iter > 0) {
      const double intensity = m.flop_per_iter / m.bytes_per_iter;
      set(counter::kArithmeticIntensity, intensity);
      if (m.roofline.known()) {
        const double achieved = m.flop_per_iter / s_per_iter;
        set(counter::kRooflineUtilization, achieved / m.roofline.roof(intensity));
      }
    } else if (m.roofline.peak_bytes_per_s > 0) {
      set(counter::kBandwidthUtilization, bytes_per_s / m.roofline.peak_bytes_per_s);
    }
  }
  if (!m.cpu_device && m.device) {
    const DeviceCounters& d = *m.device;
    if (d.fp32_flop && *d.fp32_flop > 0 && m.peak_fp32_flops > 0) {
      set(counter::kDeviceFp32Flop, *d.fp32_flop);
      set(counter::kFp32Utilization, *d.fp32_flop / s_per_iter / m.peak_fp32_flops);
    }
    if (d.tf32_tensor_flop && *d.tf32_tensor_flop > 0 && m.peak_tf32_flops > 0) {
      set(counter::kTensorUtilization, *d.tf32_tensor_flop / s_per_iter / m.peak_tf32_flops);
    }
    if (d.kernel_busy_s && d.wall_s && *d.wall_s > 0) {
      set(counter::kGpuUtilization, *d.kernel_busy_s / *d.wall_s);
    }
  }

  set(counter::kPeakMemory, static_cast<double>(m.memory.total_peak));
  for (int c = 0; c < kNumMemCategories; ++c) {
    set(counter::mem(static_cast<MemCategory>(c)), static_cast<double>(m.memory.peak[c]));
  }
  if (m.loop_wall_s > 0 && m.threads > 0) {
    set(counter::kCpuUtilization, m.process_cpu_s / (m.loop_wall_s * m.threads));
  }
}

}  // namespace tbd
