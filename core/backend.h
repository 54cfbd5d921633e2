// core/backend.h: the device a model runs on.
//
// A Backend owns the device context (oneDNN engine and stream; CUDA stream and library
// handles), the tracking allocator, and the few data-movement primitives that are not layers:
// host <-> device copies in plain layout, reorders between layouts, fill, accumulate. Layers
// are looked up per backend kind in the layer registry (layers/layer.h), so a new backend slots
// in without touching the layers' callers. A Backend must outlive every tensor it allocated.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"

namespace tbd {

// Arithmetic of matrix products and convolutions: strict FP32 (kFp32: TF32 off in cuBLAS and
// cuDNN), TF32 tensor cores (kTf32, CUDA only) or bf16 mixed precision (kBf16: bf16 products
// with FP32 accumulation and f32 master weights, as each kind's policy in layers/precision.h
// says; the CPU backend where oneDNN has real bf16 kernels, not yet CUDA). A layer uses the
// mode in effect when it is built (so does the graph's dtype plan).
enum class MathMode { kFp32, kTf32, kBf16 };
const char* to_string(MathMode m);  // "fp32", "tf32", "bf16"

// A peak rate of the device (FLOP/s or bytes/s) and how it was obtained, one line for the run's
// context. per_s == 0: unknown (then the utilizations that divide by it are absent).
struct PeakRate {
  double per_s = 0;
  std::string method;
};

// Held by a host thread while it runs layers concurrently with other such threads (A3C's
// actor-learners): see Backend::enter_worker.
class WorkerScope {
 public:
  virtual ~WorkerScope() = default;
};

class Backend {
 public:
  explicit Backend(std::unique_ptr<RawAllocator> raw) : allocator_(std::move(raw)) {}
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual DeviceKind kind() const = 0;
  virtual std::string device_name() const = 0;
  // Facts for the run's context: library versions, threads, clocks ("onednn_version" -> "2.6.3").
  virtual std::map<std::string, std::string> describe() const = 0;
  virtual int num_threads() const = 0;
  // Throws naming the mode and the reason where the backend lacks it (the default: fp32 only).
  virtual void set_math_mode(MathMode m);
  virtual MathMode math_mode() const { return MathMode::kFp32; }

  // Makes the calling thread a worker until the returned scope is destroyed (on this thread):
  // its library calls go to an execution stream of its own and use `threads` threads, so K
  // workers of T/K threads each share the T cores instead of oversubscribing them. Build a
  // worker's layers inside its scope too: oneDNN primitives keep the thread count they were
  // created with. The tracking allocator is thread-safe; everything else a worker touches must
  // be its own (its graphs) or guarded by the caller (shared weights). The default throws
  // naming the backend: it cannot run concurrent workers (CUDA: its layers share one stream
  // and one set of cuDNN/cuBLAS handles).
  virtual std::unique_ptr<WorkerScope> enter_worker(int threads);

  TrackingAllocator& allocator() { return allocator_; }
  Tensor empty(const TensorDesc& desc, MemCategory category);
  Tensor empty(Shape shape, MemCategory category, Layout layout = Layout::kRowMajor,
               DType dtype = DType::kF32) {
    return empty(TensorDesc{std::move(shape), dtype, layout}, category);
  }

  // Host data is always plain row-major of the tensor's logical shape.
  virtual void copy_from_host(const Tensor& dst, const void* src) = 0;
  virtual void copy_to_host(void* dst, const Tensor& src) = 0;
  // dst = src with layout conversion; same shape and dtype.
  virtual void reorder(const Tensor& dst, const Tensor& src) = 0;
  virtual void fill(const Tensor& dst, float value) = 0;
  // dst += src elementwise (same shape and layout); used for gradients of shared tensors.
  virtual void accumulate(const Tensor& dst, const Tensor& src) = 0;
  // Waits for all queued work (a no-op on CPU, where every call is synchronous).
  virtual void synchronize() = 0;

  // ---- hooks for the benchmark binary (generic: fixtures never include device headers) ----
  // Times the work queued between start_timer() and stop_timer(), in seconds. The default waits
  // for the device and reads the host's steady clock; a backend with device timers (CUDA
  // events) overrides all three and says so in device_timer(), and fixtures then report that
  // time through Google Benchmark's manual time.
  virtual bool device_timer() const { return false; }
  virtual void start_timer();
  virtual double stop_timer();
  // Marks on the work queue, for a step's timeline (the data-parallel profile: when backward
  // completed each node's gradients). mark_start() opens a timeline at the work queued so far;
  // mark(slot) notes the point after the work queued so far; once synchronize() has returned,
  // marked_s(slot) is the seconds from the start to that point, or -1 for a slot not marked
  // since mark_start(). The default reads the host's clock at each call, which is right for a
  // backend whose work is done when its calls return (the CPU); CUDA records events.
  virtual void mark_start();
  virtual void mark(std::size_t slot);
  virtual double marked_s(std::size_t slot);
  // Evicts device caches (the GPU's L2) before a cold-cache iteration; no-op by default.
  virtual void flush_l2() {}
  // The peak rates utilizations and the roofline divide by. peak_flops(m): the arithmetic peak
  // of math mode m (0 with a reason for a mode the device lacks); peak_bandwidth(): device
  // memory bandwidth. Measured or derived on the first call and kept (CPU: micro-kernels that
  // take about a second with the threads in use then; CUDA: device properties and a copy), so
  // call them once the thread count is set. Default: unknown.
  virtual PeakRate peak_flops(MathMode m);
  virtual PeakRate peak_bandwidth();

 private:
  TrackingAllocator allocator_;
  int64_t timer_start_ns_ = 0;
  int64_t mark_start_ns_ = 0;
  std::vector<int64_t> mark_ns_;  // per slot; -1: not marked since mark_start()
};

}  // namespace tbd
