// backends/cuda/cuda_backend.cu: the CUDA backend (device detection, pooled device memory,
// library handles, math mode, copies, fill and accumulate kernels).
//
// Detection follows docs/cuda.md: cudaGetDeviceCount returns 35 (insufficient driver)
// without a driver and 100 without a device; anything but success with a device counts as "no
// device", and its error text is what `--tbd_backend=cuda` reports. The binary never links the
// driver stub, and no library call beyond version queries happens before a device was found.
#include <cstdio>
#include <memory>

#include "backends/backends.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_bf16.h"

namespace tbd {
namespace cuda {
namespace {

__global__ void fill_kernel(float* __restrict__ p, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    p[i] = value;
  }
}

__global__ void accumulate_kernel(float* __restrict__ dst, const float* __restrict__ src,
                                  int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    dst[i] += src[i];
  }
}

std::string cuda_error_text(cudaError_t e) {
  return detail::concat("CUDA error ", static_cast<int>(e), ": ", cudaGetErrorString(e));
}

// "91900" -> "9.19.0" (cuDNN, cuBLAS: major*10000 + minor*100 + patch).
std::string version_mmp(long long v) {
  return detail::concat(v / 10000, ".", (v % 10000) / 100, ".", v % 100);
}
// "13000" -> "13.0" (CUDA runtime and driver: major*1000 + minor*10).
std::string version_cuda(int v) { return detail::concat(v / 1000, ".", (v % 1000) / 10); }

struct Probe {
  bool ok = false;
  std::string why;
};

// Runs once per process: device count, cuDNN runtime version, and whether the device can run
// the kernels this build carries (sm_90 + PTX by default).
Probe run_probe() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear the runtime's sticky last error
    return {false, cuda_error_text(e)};
  }
  if (count == 0) return {false, "cudaGetDeviceCount found no CUDA device"};
  std::size_t cudnn_rt = cudnnGetVersion();
  if (cudnn_rt < CUDNN_VERSION) {
    return {false, detail::concat("cuDNN runtime ", version_mmp(cudnn_rt), " is older than the ",
                                  version_mmp(CUDNN_VERSION),
                                  " this build was compiled against (put libcudnn.so.9 >= ",
                                  version_mmp(CUDNN_VERSION), " on LD_LIBRARY_PATH)")};
  }
  e = cudaSetDevice(0);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return {false, "cudaSetDevice(0) failed: " + cuda_error_text(e)};
  }
  cudaFuncAttributes attr{};
  e = cudaFuncGetAttributes(&attr, fill_kernel);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    cudaDeviceProp prop{};
    (void)cudaGetDeviceProperties(&prop, 0);
    return {false, detail::concat("device 0 (", prop.name, ", sm_", prop.major, prop.minor,
                                  ") cannot run this build's kernels: ", cuda_error_text(e),
                                  " (rebuild with CMAKE_CUDA_ARCHITECTURES=", prop.major,
                                  prop.minor, ")")};
  }
  return {true, ""};
}

const Probe& probe() {
  static const Probe p = run_probe();
  return p;
}

}  // namespace

cublasComputeType_t cublas_compute_type(MathMode m) {
  switch (m) {
    case MathMode::kFp32:
      return CUBLAS_COMPUTE_32F_PEDANTIC;
    case MathMode::kTf32:
      return CUBLAS_COMPUTE_32F_FAST_TF32;
    case MathMode::kBf16:  // f32 products of f32 tensors; bf16 tensors take the tensor cores
      return CUBLAS_COMPUTE_32F;
  }
  return CUBLAS_COMPUTE_32F_PEDANTIC;
}

cudnnMathType_t cudnn_math_type(MathMode m) {
  switch (m) {
    case MathMode::kFp32:
      return CUDNN_FMA_MATH;
    case MathMode::kTf32:
      return CUDNN_DEFAULT_MATH;
    case MathMode::kBf16:
      return CUDNN_TENSOR_OP_MATH;
  }
  return CUDNN_FMA_MATH;
}

static int checked_int(int64_t v, const char* what) {
  TBD_CHECK(v > 0 && v <= INT32_MAX, what, " = ", v, " does not fit cuDNN's int dimensions");
  return static_cast<int>(v);
}

CudnnTensorDesc make_tensor_desc(int64_t n, int64_t c, int64_t h, int64_t w, cudnnDataType_t dt) {
  TBD_CHECK(n * c * h * w <= INT32_MAX, "cuDNN tensor (", n, ", ", c, ", ", h, ", ", w,
            ") has more than 2^31 elements");
  cudnnTensorDescriptor_t d = nullptr;
  TBD_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
  CudnnTensorDesc owned(d);
  TBD_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, dt, checked_int(n, "N"),
                                             checked_int(c, "C"), checked_int(h, "H"),
                                             checked_int(w, "W")));
  return owned;
}

CudnnFilterDesc make_filter_desc(int64_t k, int64_t c, int64_t r, int64_t s, cudnnDataType_t dt) {
  cudnnFilterDescriptor_t d = nullptr;
  TBD_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d));
  CudnnFilterDesc owned(d);
  TBD_CUDNN_CHECK(cudnnSetFilter4dDescriptor(d, dt, CUDNN_TENSOR_NCHW, checked_int(k, "K"),
                                             checked_int(c, "C"), checked_int(r, "R"),
                                             checked_int(s, "S")));
  return owned;
}

// Device memory from a private stream-ordered pool (cudaMallocFromPoolAsync / cudaFreeAsync on
// the backend's stream). The pool keeps freed memory (release threshold = max), so a steady
// state never returns to the driver; owns the stream, which the backend borrows.
class DevicePool final : public RawAllocator {
 public:
  explicit DevicePool(int device) {
    TBD_CUDA_CHECK(cudaSetDevice(device));
    TBD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaError_t e = cudaMemPoolCreate(&pool_, &props);
    if (e != cudaSuccess) {
      (void)cudaStreamDestroy(stream_);
      TBD_CUDA_CHECK(e);
    }
    uint64_t keep_all = UINT64_MAX;
    TBD_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_all));
    std::size_t free_bytes = 0, total_bytes = 0;
    TBD_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    capacity_ = free_bytes;  // what this process can still have, not the board's total
  }
  ~DevicePool() override {
    (void)cudaStreamSynchronize(stream_);
    (void)cudaMemPoolDestroy(pool_);
    (void)cudaStreamDestroy(stream_);
  }
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    cudaError_t e = cudaMallocFromPoolAsync(&p, bytes ? bytes : 1, pool_, stream_);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // out of memory is reported by the tracking allocator
      return nullptr;
    }
    return p;
  }
  // Called from Buffer destructors: must not throw; a failed free shows up at the next check.
  void deallocate(void* ptr, std::size_t) override { (void)cudaFreeAsync(ptr, stream_); }
  std::size_t capacity_bytes() const override { return capacity_; }

  cudaStream_t stream() const { return stream_; }
  uint64_t attribute(cudaMemPoolAttr a) const {
    uint64_t v = 0;
    (void)cudaMemPoolGetAttribute(pool_, a, &v);
    return v;
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  std::size_t capacity_ = 0;
};

CudaBackend::CudaBackend(int device) : CudaBackend(device, new DevicePool(device)) {}

CudaBackend::CudaBackend(int device, DevicePool* pool)
    : Backend(std::unique_ptr<RawAllocator>(pool)),
      pool_(pool),
      device_(device),
      stream_(pool->stream()) {
  cudaDeviceProp prop{};
  TBD_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  name_ = prop.name;
  sm_count_ = prop.multiProcessorCount;
  cc_major_ = prop.major;
  cc_minor_ = prop.minor;
  total_mem_ = prop.totalGlobalMem;
  // cudaDeviceProp::clockRate is gone in CUDA 13: the attribute gives the max clock in kHz.
  TBD_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz_, cudaDevAttrClockRate, device));
  TBD_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes_, cudaDevAttrL2CacheSize, device));
  cudaEvent_t ev = nullptr;
  TBD_CUDA_CHECK(cudaEventCreate(&ev));
  timer_start_ = CudaEvent(ev);
  TBD_CUDA_CHECK(cudaEventCreate(&ev));
  timer_stop_ = CudaEvent(ev);
  TBD_CUDA_CHECK(cudaEventCreate(&ev));
  mark_start_ = CudaEvent(ev);

  cudnnHandle_t dnn = nullptr;
  TBD_CUDNN_CHECK(cudnnCreate(&dnn));
  cudnn_ = CudnnHandle(dnn);
  TBD_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
  cublasHandle_t blas = nullptr;
  TBD_CUBLAS_CHECK(cublasCreate(&blas));
  cublas_ = CublasHandle(blas);
  TBD_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  cublasLtHandle_t lt = nullptr;
  TBD_CUBLAS_CHECK(cublasLtCreate(&lt));
  cublaslt_ = CublasLtHandle(lt);

  // cuBLAS's own scratch, counted as workspace: 32 MiB on Hopper and newer, 4 MiB before
  // (the sizes the cuBLAS documentation recommends for cublasSetWorkspace).
  std::size_t ws = (cc_major_ >= 9 ? 32u : 4u) << 20;
  cublas_workspace_ = empty(Shape{static_cast<int64_t>(ws / 4)}, MemCategory::kWorkspace);
  TBD_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_.raw(), ws));
  set_math_mode(MathMode::kFp32);
}

CudaBackend::~CudaBackend() {
  (void)cudaStreamSynchronize(stream_);
  if (flush_buf_) pool_->deallocate(flush_buf_, flush_bytes_);
}

void CudaBackend::start_timer() { TBD_CUDA_CHECK(cudaEventRecord(timer_start_, stream_)); }

double CudaBackend::stop_timer() {
  TBD_CUDA_CHECK(cudaEventRecord(timer_stop_, stream_));
  TBD_CUDA_CHECK(cudaEventSynchronize(timer_stop_));
  float ms = 0;
  TBD_CUDA_CHECK(cudaEventElapsedTime(&ms, timer_start_, timer_stop_));
  return static_cast<double>(ms) * 1e-3;
}

void CudaBackend::mark_start() {
  TBD_CUDA_CHECK(cudaEventRecord(mark_start_, stream_));
  std::fill(marked_.begin(), marked_.end(), char{0});
}

void CudaBackend::mark(std::size_t slot) {
  while (mark_events_.size() <= slot) {
    cudaEvent_t ev = nullptr;
    TBD_CUDA_CHECK(cudaEventCreate(&ev));
    mark_events_.emplace_back(ev);
    marked_.push_back(0);
  }
  TBD_CUDA_CHECK(cudaEventRecord(mark_events_[slot], stream_));
  marked_[slot] = 1;
}

double CudaBackend::marked_s(std::size_t slot) {
  if (slot >= marked_.size() || !marked_[slot]) return -1;
  float ms = 0;
  TBD_CUDA_CHECK(cudaEventElapsedTime(&ms, mark_start_, mark_events_[slot]));
  return static_cast<double>(ms) * 1e-3;
}

void CudaBackend::flush_l2() {
  if (!flush_buf_) {
    flush_bytes_ = std::max<std::size_t>(2 * static_cast<std::size_t>(l2_bytes_), 1 << 20);
    flush_buf_ = pool_->allocate(flush_bytes_);
    TBD_CHECK(flush_buf_ != nullptr, "flush_l2: no device memory for a ", flush_bytes_,
              "-byte L2 flush buffer");
  }
  TBD_CUDA_CHECK(cudaMemsetAsync(flush_buf_, 0, flush_bytes_, stream_));
}

void CudaBackend::set_math_mode(MathMode m) {
  TBD_CHECK(m != MathMode::kBf16 || cc_major_ >= 8,
            "math mode bf16 needs bf16 tensor cores (compute capability 8.0 or newer); ", name_,
            " is sm_", cc_major_, cc_minor_);
  math_ = m;
  TBD_CUBLAS_CHECK(cublasSetMathMode(cublas_, m == MathMode::kFp32   ? CUBLAS_PEDANTIC_MATH
                                              : m == MathMode::kTf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                     : CUBLAS_DEFAULT_MATH));
}

std::map<std::string, std::string> CudaBackend::describe() const {
  std::map<std::string, std::string> m;
  int rt = 0, drv = 0, blas = 0;
  (void)cudaRuntimeGetVersion(&rt);
  (void)cudaDriverGetVersion(&drv);
  (void)cublasGetVersion(cublas_, &blas);
  m["cuda_runtime_version"] = version_cuda(rt);
  m["cuda_driver_version"] = version_cuda(drv);
  m["cudnn_version"] = version_mmp(static_cast<long long>(cudnnGetVersion()));
  m["cublas_version"] = version_mmp(blas);
  m["device"] = name_;
  m["compute_capability"] = detail::concat(cc_major_, ".", cc_minor_);
  m["sm_count"] = std::to_string(sm_count_);
  m["clock_mhz"] = std::to_string(clock_khz_ / 1000);
  m["memory_bytes"] = std::to_string(total_mem_);
  m["math_mode"] = to_string(math_);
  char peak[32];
  std::snprintf(peak, sizeof(peak), "%.4g", peak_fp32_flops());
  m["peak_fp32_flops"] = peak;
  m["peak_fp32_source"] = peak_fp32_source();
  m["cublas_workspace_bytes"] = std::to_string(cublas_workspace_bytes());
  m["l2_bytes"] = std::to_string(l2_bytes_);
  m["timer"] = "cuda events";
  m["pool_used_bytes"] = std::to_string(pool_->attribute(cudaMemPoolAttrUsedMemCurrent));
  m["pool_used_high_bytes"] = std::to_string(pool_->attribute(cudaMemPoolAttrUsedMemHigh));
  return m;
}

static int fp32_lanes_per_sm(int major, int minor) {
  // 64 FP32 lanes per SM on Volta/Turing (7.x), A100 (8.0) and P100 (6.0); 128 elsewhere
  // (6.1, 8.6, 8.9, 9.0 and newer).
  if (major == 7 || (major == 8 && minor == 0) || (major == 6 && minor == 0)) return 64;
  return 128;
}

double CudaBackend::peak_fp32_flops() const {
  return 2.0 * fp32_lanes_per_sm(cc_major_, cc_minor_) * sm_count_ * clock_khz_ * 1e3;
}

std::string CudaBackend::peak_fp32_source() const {
  return detail::concat("2 x ", fp32_lanes_per_sm(cc_major_, cc_minor_), " FP32 lanes/SM x ",
                        sm_count_, " SMs x ", clock_khz_ / 1000,
                        " MHz (cudaDevAttrClockRate, max clock)");
}

PeakRate CudaBackend::peak_flops(MathMode m) {
  if (m == MathMode::kFp32) return {peak_fp32_flops(), peak_fp32_source()};
  // Dense TF32 tensor FLOPs per SM per clock, from the datasheets: H100 SXM 494.7 TFLOP/s =
  // 132 SMs x 1.83 GHz x 2048; A100 156 TFLOP/s = 108 x 1.41 GHz x 1024; GA10x/AD10x 256.
  // Dense BF16 is twice TF32 on each (H100 SXM 989.4, A100 312 TFLOP/s).
  double per_sm_clk = 0;
  if (cc_major_ == 9)
    per_sm_clk = 2048;
  else if (cc_major_ == 8 && cc_minor_ == 0)
    per_sm_clk = 1024;
  else if (cc_major_ == 8)
    per_sm_clk = 256;
  if (m == MathMode::kBf16) per_sm_clk *= 2;
  if (per_sm_clk == 0) return {0, detail::concat("unknown for sm_", cc_major_, cc_minor_)};
  return {per_sm_clk * sm_count_ * clock_khz_ * 1e3,
          detail::concat(per_sm_clk, " dense FLOP/clk/SM (datasheet, sm_", cc_major_, cc_minor_,
                         ") x ", sm_count_, " SMs x ", clock_khz_ / 1000,
                         " MHz (cudaDevAttrClockRate, max boost)")};
}

PeakRate CudaBackend::peak_bandwidth() {
  if (!bandwidth_) {
    try {
      CopyBandwidth bw = measure_copy_bandwidth();
      bandwidth_ = PeakRate{bw.bytes_per_s, bw.method};
    } catch (const std::exception& e) {
      bandwidth_ =
          PeakRate{0, std::string("unknown: the copy bandwidth measurement failed: ") + e.what()};
    }
  }
  return *bandwidth_;
}

CudaBackend::CopyBandwidth CudaBackend::measure_copy_bandwidth() {
  // 8 x the L2 (at least 256 MiB) per buffer: no copy can be served from the cache.
  const std::size_t bytes =
      std::max<std::size_t>(std::size_t{256} << 20, 8 * static_cast<std::size_t>(l2_bytes_));
  constexpr int kCopies = 10;
  struct DeviceBuffer {  // RAII: freed on every path (a failed check throws)
    void* p = nullptr;
    ~DeviceBuffer() {
      if (p) (void)cudaFree(p);
    }
  } src, dst;
  TBD_CUDA_CHECK(cudaMalloc(&src.p, bytes));
  TBD_CUDA_CHECK(cudaMalloc(&dst.p, bytes));
  TBD_CUDA_CHECK(cudaMemsetAsync(src.p, 0, bytes, stream_));
  TBD_CUDA_CHECK(cudaMemsetAsync(dst.p, 0, bytes, stream_));  // touch both before timing
  cudaEvent_t ev = nullptr;
  TBD_CUDA_CHECK(cudaEventCreate(&ev));
  CudaEvent start(ev);
  TBD_CUDA_CHECK(cudaEventCreate(&ev));
  CudaEvent stop(ev);
  double best = 0;
  for (int i = 0; i < kCopies; ++i) {
    TBD_CUDA_CHECK(cudaEventRecord(start, stream_));
    TBD_CUDA_CHECK(cudaMemcpyAsync(dst.p, src.p, bytes, cudaMemcpyDeviceToDevice, stream_));
    TBD_CUDA_CHECK(cudaEventRecord(stop, stream_));
    TBD_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    TBD_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (ms > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / (ms * 1e-3));
  }
  CopyBandwidth bw;
  bw.bytes_per_s = best;
  bw.method = detail::concat("measured: device-to-device cudaMemcpyAsync of ", bytes >> 20,
                             " MiB (L2 ", l2_bytes_ >> 20, " MiB), CUDA events, best of ", kCopies,
                             " copies, counting 2 x bytes (read + write)");
  return bw;
}

static void check_plain(const Tensor& t, const char* what) {
  TBD_CHECK(t.layout() == Layout::kRowMajor, what, ": only row-major tensors exist on the CUDA ",
            "backend, got ", t.desc().to_string());
}

void CudaBackend::copy_from_host(const Tensor& dst, const void* src) {
  check_plain(dst, "copy_from_host");
  TBD_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src, dst.bytes(), cudaMemcpyHostToDevice, stream_));
  TBD_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `src` may go away when we return
}

void CudaBackend::copy_to_host(void* dst, const Tensor& src) {
  check_plain(src, "copy_to_host");
  TBD_CUDA_CHECK(cudaMemcpyAsync(dst, src.raw(), src.bytes(), cudaMemcpyDeviceToHost, stream_));
  TBD_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::reorder(const Tensor& dst, const Tensor& src) {
  TBD_CHECK(dst.shape() == src.shape(), "reorder: dst ", dst.desc().to_string(), " and src ",
            src.desc().to_string(), " differ in shape");
  check_plain(dst, "reorder");
  check_plain(src, "reorder");
  if (dst.dtype() != src.dtype()) {  // the graph's casts between f32 and bf16
    if (dst.dtype() == DType::kBF16 && src.dtype() == DType::kF32) {
      cast_to_bf16(*this, dst.raw(), src.f32(), src.numel());
    } else if (dst.dtype() == DType::kF32 && src.dtype() == DType::kBF16) {
      cast_to_f32(*this, dst.f32(), src.raw(), src.numel());
    } else {
      TBD_CHECK(false, "reorder: no conversion from ", to_string(src.dtype()), " to ",
                to_string(dst.dtype()));
    }
    return;
  }
  if (dst.raw() != src.raw()) {
    TBD_CUDA_CHECK(
        cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToDevice, stream_));
  }
}

void CudaBackend::fill(const Tensor& dst, float value) {
  TBD_CHECK(dst.dtype() == DType::kF32 || value == 0.f, "fill: only f32 tensors take non-zero");
  if (value == 0.f) {
    TBD_CUDA_CHECK(cudaMemsetAsync(dst.raw(), 0, dst.bytes(), stream_));
    return;
  }
  const int64_t n = dst.numel();
  fill_kernel<<<grid_for(n), kBlock, 0, stream_>>>(dst.f32(), n, value);
  TBD_CUDA_CHECK_LAST();
}

void CudaBackend::accumulate(const Tensor& dst, const Tensor& src) {
  TBD_CHECK(dst.desc().shape == src.desc().shape && dst.layout() == src.layout() &&
                dst.dtype() == DType::kF32 && src.dtype() == DType::kF32,
            "accumulate: dst ", dst.desc().to_string(), " and src ", src.desc().to_string(),
            " must match (f32)");
  const int64_t n = dst.numel();
  accumulate_kernel<<<grid_for(n), kBlock, 0, stream_>>>(dst.f32(), src.f32(), n);
  TBD_CUDA_CHECK_LAST();
}

void CudaBackend::synchronize() { TBD_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void CudaBackend::reserve_workspace(std::size_t bytes) {
  if (bytes <= workspace_bytes()) return;
  workspace_ = Tensor();  // stream-ordered free: queued work that used it finishes first
  workspace_ = empty(Shape{static_cast<int64_t>((bytes + 3) / 4)}, MemCategory::kWorkspace);
}

CudaBackend& as_cuda(Backend& be) {
  auto* c = dynamic_cast<CudaBackend*>(&be);
  TBD_CHECK(c != nullptr, "expected the CUDA backend, got ", to_string(be.kind()));
  return *c;
}

}  // namespace cuda

bool cuda_compiled() { return true; }

bool cuda_usable(std::string* why_not) {
  const cuda::Probe& p = cuda::probe();
  if (!p.ok && why_not) *why_not = p.why;
  return p.ok;
}

std::unique_ptr<Backend> make_cuda_backend_or_throw(int device) {
  std::string why;
  if (!cuda_usable(&why)) TBD_FAIL("--tbd_backend=cuda: no usable CUDA device: ", why);
  int count = 0;
  TBD_CUDA_CHECK(cudaGetDeviceCount(&count));
  TBD_CHECK(device >= 0, "CUDA device ", device, " is negative");
  return std::make_unique<cuda::CudaBackend>(device % count);
}

}  // namespace tbd
