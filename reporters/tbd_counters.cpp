// reporters/tbd_counters.cpp: RunMeasurement -> Google Benchmark user counters.
#include "reporters/tbd_counters.h"

#include <time.h>

namespace tbd {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void set_tbd_counters(benchmark::State& st, const RunMeasurement& m, const RunContext& ctx) {
  using benchmark::Counter;
  if (m.iterations <= 0 || m.work_s <= 0) return;
  const double iters = static_cast<double>(m.iterations);
  const double s_per_iter = m.work_s / iters;
  const bool cpu_device = ctx.backend == DeviceKind::kCpu;
  const double peak_fp32 = ctx.peak_fp32.per_s, peak_tf32 = ctx.peak_tf32.per_s;
  const Roofline roofline = ctx.roofline();
  auto set = [&](const std::string& k, double v) { st.counters[k] = Counter(v); };
  // `per_iter` per measured work second (see the header for who divides).
  auto set_rate = [&](const std::string& k, double per_iter) {
    st.counters[k] = ctx.device_timer ? Counter(per_iter * iters, Counter::kIsRate)
                                      : Counter(per_iter / s_per_iter);
  };

  if (m.items_per_iter > 0) set_rate(counter::kItemsPerSecond, m.items_per_iter);
  for (const auto& [what, n] : m.extra_items_per_iter) {
    if (n > 0) set_rate(what + counter::kPerSecondSuffix, n);
  }
  if (m.flop_per_iter > 0) {
    set(counter::kFlop, m.flop_per_iter);
    set_rate(counter::kFlops, m.flop_per_iter);
    // CPU: the executed count is the analytic one. GPU: the count CUPTI measured. Under bf16
    // the analytic count does not say which FLOPs ran in bf16: all are set against the bf16 roof
    // (the math in use) and fp32_utilization is absent.
    if (cpu_device && ctx.bf16_roof()) {
      set(counter::kBf16Utilization, m.flop_per_iter / s_per_iter / ctx.peak_bf16.per_s);
    } else if (cpu_device && peak_fp32 > 0 && ctx.math != MathMode::kBf16) {
      set(counter::kFp32Utilization, m.flop_per_iter / s_per_iter / peak_fp32);
    }
  }
  // MFU: the model's FLOPs (its stated convention, not the executed count) per second over the
  // peak of the math in use; absent where that peak is unknown.
  if (m.model_flop_per_iter > 0) {
    set(counter::kModelFlop, m.model_flop_per_iter);
    if (roofline.peak_flops > 0) {
      set(counter::kMfu, m.model_flop_per_iter / s_per_iter / roofline.peak_flops);
    }
  }
  if (m.bytes_per_iter > 0) {
    const double bytes_per_s = m.bytes_per_iter / s_per_iter;
    set(counter::kBytes, m.bytes_per_iter);
    set_rate(counter::kBytesPerSecond, m.bytes_per_iter);
    if (m.flop_per_iter > 0) {
      const double intensity = m.flop_per_iter / m.bytes_per_iter;
      set(counter::kArithmeticIntensity, intensity);
      if (roofline.known()) {
        const double achieved = m.flop_per_iter / s_per_iter;
        set(counter::kRooflineUtilization, achieved / roofline.roof(intensity));
      }
    } else if (roofline.peak_bytes_per_s > 0) {
      set(counter::kBandwidthUtilization, bytes_per_s / roofline.peak_bytes_per_s);
    }
  }
  if (!cpu_device && m.device) {
    const DeviceCounters& d = *m.device;
    if (d.fp32_flop && *d.fp32_flop > 0 && peak_fp32 > 0) {
      set(counter::kDeviceFp32Flop, *d.fp32_flop);
      set(counter::kFp32Utilization, *d.fp32_flop / s_per_iter / peak_fp32);
    }
    if (d.tf32_tensor_flop && *d.tf32_tensor_flop > 0 && peak_tf32 > 0) {
      set(counter::kTensorUtilization, *d.tf32_tensor_flop / s_per_iter / peak_tf32);
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
