// backends/cuda/cupti_session.cu: the CUDA backend's CounterSession on CUPTI 13.
//
// Two independent measurements of one run of the benchmarked work (core/counters.h):
//  * measure_flops: the Range Profiler (cupti_range_profiler.h) with one user range and user
//    replay. The work is re-run once per pass until CUPTI reports all passes submitted; the
//    counters are then decoded and evaluated on the host (cupti_profiler_host.h).
//      FP32 FLOPs = 2 * ffma + fadd + fmul  (smsp__sass_thread_inst_executed_op_*_pred_on.sum)
//      TF32 tensor work = sm__ops_path_tensor_src_tf32_dst_fp32.sum x kTf32FlopPerTensorOp.
//    The legacy profiler API is deprecated in CUDA 13 and the event/metric API is gone, so this
//    is the only route to executed-FLOP counts (docs/cuda.md).
//  * measure_timeline: the Activity API. CONCURRENT_KERNEL records (KIND_KERNEL would serialize
//    the kernels) give the kernel intervals; their union over the wall time between two
//    cuptiGetTimestamp() readings is the GPU busy time. push_tag()/pop_tag() bracket launches with
//    a CUSTOM0 external correlation id, and the EXTERNAL_CORRELATION records (emitted for the
//    RUNTIME and DRIVER API records, which are enabled for that purpose) are joined with the
//    kernels on correlationId to attribute kernel time to layers.
// Profiled passes run instrumented code and are never timed by the caller. CUPTI is never called
// without a usable device (it crashes without one, docs/cuda.md). When counters cannot be read
// (no permission, unsupported device or chip) the FLOP counters stay absent, why_missing says
// why, and the reason is logged once per process.
#include <cudaTypedefs.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backends/backends.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cupti.h"
#include "core/counters.h"

namespace tbd {
namespace cuda {

struct CuptiTraits {
  static constexpr const char* kLibrary = "CUPTI";
  static bool ok(CUptiResult s) { return s == CUPTI_SUCCESS; }
  static std::string message(CUptiResult s) {
    const char* str = nullptr;
    if (cuptiGetResultString(s, &str) != CUPTI_SUCCESS || str == nullptr) str = "unknown";
    std::string m = str;
    if (s == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
      m += " (GPU performance counters are restricted to admin users: run as root or load the "
           "driver with NVreg_RestrictProfilingToAdminUsers=0)";
    }
    return m;
  }
};
#define TBD_CUPTI_CHECK(call) TBD_STATUS_CHECK(::tbd::cuda::CuptiTraits, call)

namespace {

// The TF32 tensor metric counts tensor-pipe operations, not FLOPs. This factor converts it to
// FLOPs (FMA = 2). It MUST be calibrated once on a GPU against a cuBLAS TF32 GEMM of known
// 2*M*N*K FLOPs (tests/cuda/cupti_cuda_test.cpp, Tf32Calibration, prints the measured ratio);
// until then it is 1.0 and every output that carries tensor_utilization says so
// (tf32_tensor_flop_method, the run's context).
constexpr double kTf32FlopPerTensorOp = 1.0;
constexpr bool kTf32Calibrated = false;

// Metric order matters: evaluate() reads the values back in this order.
const char* const kMetrics[] = {
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
};
constexpr std::size_t kNumMetrics = sizeof(kMetrics) / sizeof(kMetrics[0]);
// User replay re-runs the work once per pass; GH100 needs 2 for these metrics (docs/cuda.md).
constexpr int kMaxPasses = 16;

// CUPTI parameter structs: zero-initialised with their structSize set (the ABI check).
template <class P>
P cupti_params(std::size_t struct_size) {
  P p{};
  p.structSize = struct_size;
  return p;
}
#define TBD_CUPTI_PARAMS(T) cupti_params<T>(T##_STRUCT_SIZE)

void log_once(std::atomic<bool>& flag, const std::string& msg) {
  if (!flag.exchange(true)) std::fprintf(stderr, "tbd: %s\n", msg.c_str());
}
std::atomic<bool> g_flops_logged{false};
std::atomic<bool> g_timeline_logged{false};

// The CUcontext CUPTI's range profiler needs. The binary must not link the driver stub
// (docs/cuda.md), so cuCtxGetCurrent is reached through the runtime's entry-point query.
CUcontext current_context(int device) {
  TBD_CUDA_CHECK(cudaSetDevice(device));
  TBD_CUDA_CHECK(cudaFree(nullptr));  // makes the primary context current on this thread
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  TBD_CUDA_CHECK(
      cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &q));
  TBD_CHECK(q == cudaDriverEntryPointSuccess && fn != nullptr,
            "CUPTI: the driver has no cuCtxGetCurrent entry point");
  CUcontext ctx = nullptr;
  CUresult r = reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(fn)(&ctx);
  TBD_CHECK(r == CUDA_SUCCESS && ctx != nullptr, "CUPTI: cuCtxGetCurrent failed (", r, ")");
  return ctx;
}

const char* support_text(CUpti_Profiler_Support_Level l) {
  switch (l) {
    case CUPTI_PROFILER_CONFIGURATION_SUPPORTED:
      return "supported";
    case CUPTI_PROFILER_CONFIGURATION_DISABLED:
      return "disabled";
    case CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED:
      return "unsupported";
    default:
      return "unknown";
  }
}

// ---- Activity API buffers: CUPTI hands completed buffers to a process-wide callback. ----

struct KernelInterval {
  uint64_t start, end;
  uint32_t correlation;
};

struct ActivityStore {
  std::mutex mu;
  std::vector<KernelInterval> kernels;
  std::unordered_map<uint32_t, uint64_t> external;  // correlationId -> CUSTOM0 tag
  std::size_t dropped = 0;
};

ActivityStore& activity_store() {
  static ActivityStore s;
  return s;
}

constexpr std::size_t kActivityBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // CUPTI requires 8-byte alignment; aligned_alloc needs a size that is a multiple of it.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kActivityBufferBytes));
  *size = *buffer ? kActivityBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t size,
                               size_t valid) {
  (void)size;
  ActivityStore& s = activity_store();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    CUpti_Activity* rec = nullptr;
    while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
          rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        if (k->end > k->start) s.kernels.push_back({k->start, k->end, k->correlationId});
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
        if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
          s.external[e->correlationId] = e->externalId;
        }
      }
      // RUNTIME and DRIVER records are only enabled so that external correlation records are
      // emitted for the API calls that launch kernels; they carry nothing else we need.
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS) {
      s.dropped += dropped;
    }
  }
  std::free(buffer);
}

const CUpti_ActivityKind kTimelineKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

// ---- the session ----

class CuptiSession final : public CounterSession {
 public:
  explicit CuptiSession(CudaBackend& be) : device_(be.device()) {
    try {
      init_range_profiler();
    } catch (const std::exception& e) {
      flops_unavailable_ = std::string("CUPTI FLOP counters unavailable: ") + e.what();
      log_once(g_flops_logged, flops_unavailable_);
    }
  }

  ~CuptiSession() override {
    if (host_ != nullptr) {
      auto p = TBD_CUPTI_PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
      p.pHostObject = host_;
      cuptiProfilerHostDeinitialize(&p);
    }
    if (profiler_initialized_) {
      auto p = TBD_CUPTI_PARAMS(CUpti_Profiler_DeInitialize_Params);
      cuptiProfilerDeInitialize(&p);
    }
  }

  DeviceCounters measure_flops(const std::function<void()>& work) override {
    DeviceCounters out;
    if (!flops_unavailable_.empty()) {
      out.why_missing = flops_unavailable_;
      return out;
    }
    std::vector<double> values;
    std::exception_ptr work_error;
    auto run_work = [&] {
      try {
        work();
      } catch (...) {
        work_error = std::current_exception();
        throw;
      }
    };
    try {
      values = profile_once(run_work);
    } catch (const std::exception& e) {
      if (work_error) std::rethrow_exception(work_error);
      // A failure here is a property of the machine (permission, device, driver): stop trying.
      flops_unavailable_ = std::string("CUPTI FLOP counters unavailable: ") + e.what();
      log_once(g_flops_logged, flops_unavailable_);
      out.why_missing = flops_unavailable_;
      return out;
    }
    out.fp32_flop = 2.0 * values[0] + values[1] + values[2];
    out.tf32_tensor_flop = values[3] * kTf32FlopPerTensorOp;
    return out;
  }

  DeviceCounters measure_timeline(const std::function<void()>& work) override {
    DeviceCounters out;
    std::exception_ptr work_error;
    try {
      static std::once_flag registered;
      std::call_once(registered, [] {
        TBD_CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
      });
      ActivityStore& s = activity_store();
      {
        std::lock_guard<std::mutex> lock(s.mu);
        s.kernels.clear();
        s.external.clear();
        s.dropped = 0;
      }
      TBD_CUDA_CHECK(cudaDeviceSynchronize());
      for (CUpti_ActivityKind k : kTimelineKinds) TBD_CUPTI_CHECK(cuptiActivityEnable(k));
      uint64_t t0 = 0, t1 = 0;
      TBD_CUPTI_CHECK(cuptiGetTimestamp(&t0));
      try {
        work();
        TBD_CUDA_CHECK(cudaDeviceSynchronize());
      } catch (...) {
        work_error = std::current_exception();
      }
      TBD_CUPTI_CHECK(cuptiGetTimestamp(&t1));
      TBD_CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
      for (CUpti_ActivityKind k : kTimelineKinds) cuptiActivityDisable(k);
      if (work_error) std::rethrow_exception(work_error);
      summarize(t0, t1, out);
    } catch (const std::exception& e) {
      for (CUpti_ActivityKind k : kTimelineKinds) cuptiActivityDisable(k);
      if (work_error) std::rethrow_exception(work_error);
      std::string msg = std::string("CUPTI kernel timeline unavailable: ") + e.what();
      log_once(g_timeline_logged, msg);
      out.why_missing = msg;
    }
    return out;
  }

  void push_tag(int tag) override {
    TBD_CUPTI_CHECK(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                                           static_cast<uint64_t>(tag)));
  }
  void pop_tag() override {
    uint64_t last = 0;
    TBD_CUPTI_CHECK(
        cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last));
  }

  std::string tf32_tensor_flop_method() const override {
    return detail::concat("sm__ops_path_tensor_src_tf32_dst_fp32.sum x ", kTf32FlopPerTensorOp,
                          kTf32Calibrated
                              ? " (calibrated against a cuBLAS TF32 GEMM)"
                              : " (UNCALIBRATED: calibrate on a GPU against a cuBLAS TF32 GEMM)");
  }

 private:
  void init_range_profiler() {
    CUcontext ctx = current_context(device_);
    auto init = TBD_CUPTI_PARAMS(CUpti_Profiler_Initialize_Params);
    TBD_CUPTI_CHECK(cuptiProfilerInitialize(&init));
    profiler_initialized_ = true;

    auto sup = TBD_CUPTI_PARAMS(CUpti_Profiler_DeviceSupported_Params);
    sup.cuDevice = device_;
    sup.api = CUPTI_PROFILER_RANGE_PROFILING;
    TBD_CUPTI_CHECK(cuptiProfilerDeviceSupported(&sup));
    if (sup.isSupported != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) {
      TBD_FAIL("device ", device_, " does not support range profiling: architecture ",
               support_text(sup.architecture), ", SLI ", support_text(sup.sli), ", vGPU ",
               support_text(sup.vGpu), ", confidential compute ",
               support_text(sup.confidentialCompute), ", CMP ", support_text(sup.cmp), ", WSL ",
               support_text(sup.wsl));
    }

    auto chip = TBD_CUPTI_PARAMS(CUpti_Device_GetChipName_Params);
    chip.deviceIndex = static_cast<size_t>(device_);
    TBD_CUPTI_CHECK(cuptiDeviceGetChipName(&chip));
    chip_ = chip.pChipName ? chip.pChipName : "";

    // Counter availability: first call sizes the image, the second fills it.
    auto avail = TBD_CUPTI_PARAMS(CUpti_Profiler_GetCounterAvailability_Params);
    avail.ctx = ctx;
    TBD_CUPTI_CHECK(cuptiProfilerGetCounterAvailability(&avail));
    counter_availability_.assign(avail.counterAvailabilityImageSize, 0);
    avail.pCounterAvailabilityImage = counter_availability_.data();
    TBD_CUPTI_CHECK(cuptiProfilerGetCounterAvailability(&avail));

    auto host = TBD_CUPTI_PARAMS(CUpti_Profiler_Host_Initialize_Params);
    host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    host.pChipName = chip_.c_str();
    host.pCounterAvailabilityImage = counter_availability_.data();
    TBD_CUPTI_CHECK(cuptiProfilerHostInitialize(&host));
    host_ = host.pHostObject;

    auto add = TBD_CUPTI_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
    add.pHostObject = host_;
    add.ppMetricNames = const_cast<const char**>(kMetrics);
    add.numMetrics = kNumMetrics;
    TBD_CUPTI_CHECK(cuptiProfilerHostConfigAddMetrics(&add));

    auto size = TBD_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
    size.pHostObject = host_;
    TBD_CUPTI_CHECK(cuptiProfilerHostGetConfigImageSize(&size));
    config_image_.assign(size.configImageSize, 0);
    auto img = TBD_CUPTI_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
    img.pHostObject = host_;
    img.configImageSize = config_image_.size();
    img.pConfigImage = config_image_.data();
    TBD_CUPTI_CHECK(cuptiProfilerHostGetConfigImage(&img));

    auto passes = TBD_CUPTI_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params);
    passes.configImageSize = config_image_.size();
    passes.pConfigImage = config_image_.data();
    TBD_CUPTI_CHECK(cuptiProfilerHostGetNumOfPasses(&passes));
    num_passes_ = passes.numOfPasses;
  }

  // Enables the range profiler on the context, replays `work` once per pass inside one user
  // range, decodes and evaluates kMetrics for that range, and disables the profiler again.
  std::vector<double> profile_once(const std::function<void()>& work) {
    CUcontext ctx = current_context(device_);
    auto en = TBD_CUPTI_PARAMS(CUpti_RangeProfiler_Enable_Params);
    en.ctx = ctx;
    TBD_CUPTI_CHECK(cuptiRangeProfilerEnable(&en));
    CUpti_RangeProfiler_Object* obj = en.pRangeProfilerObject;
    struct Disable {
      CUpti_RangeProfiler_Object* obj;
      ~Disable() {
        auto p = TBD_CUPTI_PARAMS(CUpti_RangeProfiler_Disable_Params);
        p.pRangeProfilerObject = obj;
        cuptiRangeProfilerDisable(&p);
      }
    } disable{obj};

    auto ds = TBD_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params);
    ds.pRangeProfilerObject = obj;
    ds.pMetricNames = const_cast<const char**>(kMetrics);
    ds.numMetrics = kNumMetrics;
    ds.maxNumOfRanges = 1;
    ds.maxNumRangeTreeNodes = 1;
    TBD_CUPTI_CHECK(cuptiRangeProfilerGetCounterDataSize(&ds));
    std::vector<uint8_t> counter_data(ds.counterDataSize, 0);
    auto ci = TBD_CUPTI_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
    ci.pRangeProfilerObject = obj;
    ci.counterDataSize = counter_data.size();
    ci.pCounterData = counter_data.data();
    TBD_CUPTI_CHECK(cuptiRangeProfilerCounterDataImageInitialize(&ci));

    auto sc = TBD_CUPTI_PARAMS(CUpti_RangeProfiler_SetConfig_Params);
    sc.pRangeProfilerObject = obj;
    sc.configSize = config_image_.size();
    sc.pConfig = config_image_.data();
    sc.counterDataImageSize = counter_data.size();
    sc.pCounterDataImage = counter_data.data();
    sc.range = CUPTI_UserRange;
    sc.replayMode = CUPTI_UserReplay;
    sc.maxRangesPerPass = 1;
    sc.numNestingLevels = 1;
    sc.minNestingLevel = 1;
    sc.passIndex = 0;
    sc.targetNestingLevel = 1;
    TBD_CUPTI_CHECK(cuptiRangeProfilerSetConfig(&sc));

    bool all_submitted = false;
    int pass = 0;
    while (!all_submitted) {
      TBD_CHECK(pass < kMaxPasses, "CUPTI: still not all passes submitted after ", pass,
                " replays (the config needs ", num_passes_, ")");
      TBD_CUDA_CHECK(cudaDeviceSynchronize());  // nothing else in the range
      auto st = TBD_CUPTI_PARAMS(CUpti_RangeProfiler_Start_Params);
      st.pRangeProfilerObject = obj;
      TBD_CUPTI_CHECK(cuptiRangeProfilerStart(&st));
      auto push = TBD_CUPTI_PARAMS(CUpti_RangeProfiler_PushRange_Params);
      push.pRangeProfilerObject = obj;
      push.pRangeName = "tbd_work";
      TBD_CUPTI_CHECK(cuptiRangeProfilerPushRange(&push));
      work();
      TBD_CUDA_CHECK(cudaDeviceSynchronize());
      auto pop = TBD_CUPTI_PARAMS(CUpti_RangeProfiler_PopRange_Params);
      pop.pRangeProfilerObject = obj;
      TBD_CUPTI_CHECK(cuptiRangeProfilerPopRange(&pop));
      auto stop = TBD_CUPTI_PARAMS(CUpti_RangeProfiler_Stop_Params);
      stop.pRangeProfilerObject = obj;
      TBD_CUPTI_CHECK(cuptiRangeProfilerStop(&stop));
      all_submitted = stop.isAllPassSubmitted != 0;
      ++pass;
    }

    auto dec = TBD_CUPTI_PARAMS(CUpti_RangeProfiler_DecodeData_Params);
    dec.pRangeProfilerObject = obj;
    TBD_CUPTI_CHECK(cuptiRangeProfilerDecodeData(&dec));
    TBD_CHECK(dec.numOfRangeDropped == 0, "CUPTI dropped ", dec.numOfRangeDropped, " ranges");

    auto info = TBD_CUPTI_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params);
    info.pCounterDataImage = counter_data.data();
    info.counterDataImageSize = counter_data.size();
    TBD_CUPTI_CHECK(cuptiRangeProfilerGetCounterDataInfo(&info));
    TBD_CHECK(info.numTotalRanges >= 1, "CUPTI: the counter data holds no range");

    std::vector<double> values(kNumMetrics, 0.0);
    auto ev = TBD_CUPTI_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
    ev.pHostObject = host_;
    ev.pCounterDataImage = counter_data.data();
    ev.counterDataImageSize = counter_data.size();
    ev.rangeIndex = 0;
    ev.ppMetricNames = const_cast<const char**>(kMetrics);
    ev.numMetrics = kNumMetrics;
    ev.pMetricValues = values.data();
    TBD_CUPTI_CHECK(cuptiProfilerHostEvaluateToGpuValues(&ev));
    return values;
  }

  // Busy time = union of kernel intervals clipped to [t0, t1]; per-tag time = sum of the
  // durations of the kernels whose launch carried that tag.
  static void summarize(uint64_t t0, uint64_t t1, DeviceCounters& out) {
    ActivityStore& s = activity_store();
    std::lock_guard<std::mutex> lock(s.mu);
    std::vector<KernelInterval> ks = s.kernels;
    std::sort(ks.begin(), ks.end(),
              [](const KernelInterval& a, const KernelInterval& b) { return a.start < b.start; });
    uint64_t busy = 0, cur_start = 0, cur_end = 0;
    bool open = false;
    for (const KernelInterval& k : ks) {
      uint64_t a = std::max(k.start, t0), b = std::min(k.end, t1);
      if (b <= a) continue;
      if (open && a <= cur_end) {
        cur_end = std::max(cur_end, b);
      } else {
        if (open) busy += cur_end - cur_start;
        cur_start = a;
        cur_end = b;
        open = true;
      }
      auto it = s.external.find(k.correlation);
      if (it != s.external.end()) {
        out.kernel_s_by_tag[static_cast<int>(it->second)] += (k.end - k.start) * 1e-9;
      }
    }
    if (open) busy += cur_end - cur_start;
    out.kernel_busy_s = busy * 1e-9;
    out.wall_s = (t1 > t0 ? t1 - t0 : 0) * 1e-9;
    if (s.dropped > 0) {
      out.why_missing = detail::concat("CUPTI dropped ", s.dropped,
                                       " activity records: the busy time is a lower bound");
    }
  }

  int device_;
  std::string chip_;
  std::vector<uint8_t> counter_availability_;
  std::vector<uint8_t> config_image_;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  bool profiler_initialized_ = false;
  std::size_t num_passes_ = 0;
  std::string flops_unavailable_;
};

}  // namespace

double cupti_tf32_flop_per_tensor_op() { return kTf32FlopPerTensorOp; }

}  // namespace cuda

std::unique_ptr<CounterSession> make_cupti_session(Backend& be, std::string* why) {
  std::string why_not;
  if (!cuda_usable(&why_not)) {
    if (why) *why = "no CUPTI counters: no usable CUDA device (" + why_not + ")";
    return nullptr;
  }
  if (be.kind() != DeviceKind::kCuda) {
    if (why) *why = "hardware counters exist only on the CUDA backend (CUPTI)";
    return nullptr;
  }
  return std::make_unique<cuda::CuptiSession>(cuda::as_cuda(be));
}

}  // namespace tbd
