// backends/cuda/cuda_backend.h: the CUDA backend's context, for CUDA layer implementations.
//
// Included only by files under backends/cuda and layers/cuda (CUDA headers stay there). One
// stream; cuDNN and cuBLAS(Lt) handles bound to it; device memory from a private
// cudaMallocAsync pool through the tracking allocator; the math mode (strict FP32 or TF32)
// applied to cuBLAS and cuDNN. Library status checks: TBD_CUDA_CHECK, TBD_CUDNN_CHECK,
// TBD_CUBLAS_CHECK, TBD_CUPTI_CHECK (all from TBD_STATUS_CHECK in core/error.h);
// TBD_CUDA_CHECK_LAST() after every kernel launch.
//
// Library scratch is handed to the libraries explicitly so that it is counted as `workspace`:
// cuBLAS gets a fixed buffer through cublasSetWorkspace (cuBLASLt calls take the same buffer;
// one stream orders them), and cuDNN calls take the shared workspace below, which layers size
// at build with reserve_workspace() and read back at execution with workspace().
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/error.h"

namespace tbd::cuda {

struct CudaTraits {
  static constexpr const char* kLibrary = "CUDA";
  static bool ok(cudaError_t s) { return s == cudaSuccess; }
  static std::string message(cudaError_t s) { return cudaGetErrorString(s); }
};
struct CudnnTraits {
  static constexpr const char* kLibrary = "cuDNN";
  static bool ok(cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS; }
  static std::string message(cudnnStatus_t s) { return cudnnGetErrorString(s); }
};
struct CublasTraits {
  static constexpr const char* kLibrary = "cuBLAS";
  static bool ok(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }
  static std::string message(cublasStatus_t s) { return cublasGetStatusString(s); }
};
#define TBD_CUDA_CHECK(call) TBD_STATUS_CHECK(::tbd::cuda::CudaTraits, call)
#define TBD_CUDNN_CHECK(call) TBD_STATUS_CHECK(::tbd::cuda::CudnnTraits, call)
#define TBD_CUBLAS_CHECK(call) TBD_STATUS_CHECK(::tbd::cuda::CublasTraits, call)
#define TBD_CUDA_CHECK_LAST() TBD_CUDA_CHECK(cudaGetLastError())

// Strict FP32 (TF32 off in cuBLAS and cuDNN) or TF32 tensor cores; declared in core/backend.h
// so that callers without CUDA headers (flags, tests) can set it through Backend.
using MathMode = ::tbd::MathMode;

// The library settings a math mode stands for (one place, so a layer cannot disagree):
//   kFp32: cuBLAS CUBLAS_COMPUTE_32F_PEDANTIC (handle: CUBLAS_PEDANTIC_MATH), cuDNN
//          CUDNN_FMA_MATH (FMA kernels only: CUDNN_DEFAULT_MATH would permit TF32 on sm_80+).
//   kTf32: cuBLAS CUBLAS_COMPUTE_32F_FAST_TF32 (handle: CUBLAS_TF32_TENSOR_OP_MATH), cuDNN
//          CUDNN_DEFAULT_MATH (tensor cores with TF32 permitted for FP32 data, as PyTorch sets it).
//   kBf16: cuBLAS CUBLAS_COMPUTE_32F (handle: CUBLAS_DEFAULT_MATH): bf16 operands on the tensor
//          cores with f32 accumulation, f32 operands in strict FP32; cuDNN CUDNN_TENSOR_OP_MATH
//          with bf16 tensors and f32 compute. Needs compute capability 8.0 or newer.
cublasComputeType_t cublas_compute_type(MathMode m);
cudnnMathType_t cudnn_math_type(MathMode m);

// RAII owner of one library handle or descriptor: destroyed once, copies deleted.
template <class T, auto Destroy>
class Owned {
 public:
  Owned() = default;
  explicit Owned(T h) : h_(h) {}
  ~Owned() { reset(); }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  Owned(Owned&& o) noexcept : h_(std::exchange(o.h_, T{})) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, T{});
    }
    return *this;
  }
  T get() const { return h_; }
  operator T() const { return h_; }  // NOLINT: passes straight into the C APIs
  void reset() {
    if (h_) (void)Destroy(h_);  // destruction status ignored: nothing useful to do with it
    h_ = T{};
  }

 private:
  T h_{};
};

using CudnnHandle = Owned<cudnnHandle_t, cudnnDestroy>;
using CublasHandle = Owned<cublasHandle_t, cublasDestroy_v2>;
using CublasLtHandle = Owned<cublasLtHandle_t, cublasLtDestroy>;
using CudnnTensorDesc = Owned<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using CudnnFilterDesc = Owned<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using CudnnConvDesc = Owned<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using CudnnPoolDesc = Owned<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor>;
using CudnnActDesc = Owned<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;
using CudnnCtcLossDesc = Owned<cudnnCTCLossDescriptor_t, cudnnDestroyCTCLossDescriptor>;
using LtMatmulDesc = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using LtLayout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using LtPreference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;
using CudaEvent = Owned<cudaEvent_t, cudaEventDestroy>;

// Fully packed NCHW tensor descriptor (n, c, h, w) and filter descriptor (k, c, r, s), float
// unless `dt` says otherwise (CUDNN_DATA_BFLOAT16 under bf16).
CudnnTensorDesc make_tensor_desc(int64_t n, int64_t c, int64_t h, int64_t w,
                                 cudnnDataType_t dt = CUDNN_DATA_FLOAT);
CudnnFilterDesc make_filter_desc(int64_t k, int64_t c, int64_t r, int64_t s,
                                 cudnnDataType_t dt = CUDNN_DATA_FLOAT);

// 1-D launch geometry for grid-stride loops: enough blocks to fill the device, never more
// than the work needs.
constexpr int kBlock = 256;
inline unsigned grid_for(int64_t n, int block = kBlock) {
  int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65535));
}

class DevicePool;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device = 0);
  ~CudaBackend() override;

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string device_name() const override { return name_; }
  // CUDA runtime/driver, cuDNN and cuBLAS versions, device, SMs, clock, math mode, peak FP32;
  // plus pool_used_bytes / pool_used_high_bytes (the pool's own view, to cross-check the
  // tracking allocator).
  std::map<std::string, std::string> describe() const override;
  int num_threads() const override { return 1; }
  void set_math_mode(MathMode m) override;
  MathMode math_mode() const override { return math_; }

  // Only row-major tensors exist on CUDA; reorder between equal layouts is a copy.
  void copy_from_host(const Tensor& dst, const void* src) override;
  void copy_to_host(void* dst, const Tensor& src) override;
  void reorder(const Tensor& dst, const Tensor& src) override;
  void fill(const Tensor& dst, float value) override;
  void accumulate(const Tensor& dst, const Tensor& src) override;
  void synchronize() override;

  // Hooks of the benchmark binary (virtual in Backend once the fixtures' hooks are in
  // core/backend.h; declared without `override` so that this header builds either way):
  // device timers are CUDA events on the stream, in seconds; flush_l2() overwrites a buffer of
  // twice the L2 size on the stream (queued before the start event, so never timed).
  bool device_timer() const override { return true; }
  void start_timer() override;
  double stop_timer() override;
  void flush_l2() override;
  // Timeline marks are events on the stream (one per slot, created on first use).
  void mark_start() override;
  void mark(std::size_t slot) override;
  double marked_s(std::size_t slot) override;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  int sm_count() const { return sm_count_; }

  // cuBLAS's workspace (also handed to cuBLASLt matmuls).
  void* cublas_workspace() const { return cublas_workspace_.raw(); }
  std::size_t cublas_workspace_bytes() const { return cublas_workspace_.bytes(); }
  // Shared library scratch (cuDNN): grows to the largest size reserved at build; read the
  // pointer at execution, since a later reservation may move it.
  void reserve_workspace(std::size_t bytes);
  void* workspace() const { return workspace_.raw(); }
  std::size_t workspace_bytes() const { return workspace_.defined() ? workspace_.bytes() : 0; }

  // kFp32: 2 x FP32 lanes/SM x SMs x clock (docs/cuda.md); kTf32: dense TF32
  // tensor-core FLOPs per SM per clock from the datasheets x SMs x clock (0 for an unknown
  // architecture). peak_bandwidth(): measure_copy_bandwidth(), once (a failure leaves the
  // memory roof unknown, with the reason, rather than failing the run).
  PeakRate peak_flops(MathMode m) override;
  PeakRate peak_bandwidth() override;
  // Peak FP32 FLOP/s and its source (peak_flops(kFp32)).
  double peak_fp32_flops() const;
  std::string peak_fp32_source() const;
  // Device memory bandwidth, measured (the roofline's memory roof): a device-to-device
  // cudaMemcpyAsync of one buffer into another, both far beyond the L2, timed with CUDA events,
  // best of several copies, counting 2 x bytes per copy (each byte read once and written
  // once). The buffers come straight from cudaMalloc (harness memory, not the model's) and
  // are freed before returning. Takes well under a second; peak_bandwidth() calls it once.
  struct CopyBandwidth {
    double bytes_per_s = 0;
    std::string method;
  };
  CopyBandwidth measure_copy_bandwidth();

 private:
  // Takes ownership of `pool` (handed to the tracking allocator) and keeps a pointer to it.
  CudaBackend(int device, DevicePool* pool);

  DevicePool* pool_ = nullptr;  // owned by the tracking allocator; outlives every member here
  int device_ = 0;
  cudaStream_t stream_ = nullptr;  // owned by pool_
  CudnnHandle cudnn_;
  CublasHandle cublas_;
  CublasLtHandle cublaslt_;
  MathMode math_ = MathMode::kFp32;
  Tensor cublas_workspace_;
  Tensor workspace_;
  CudaEvent timer_start_, timer_stop_;
  CudaEvent mark_start_;
  std::vector<CudaEvent> mark_events_;
  std::vector<char> marked_;  // per slot: recorded since mark_start()
  // L2 flush buffer: straight from the pool, not the tracking allocator, since it is the
  // harness's memory, not the model's (allocated on the first flush_l2()).
  void* flush_buf_ = nullptr;
  std::size_t flush_bytes_ = 0;
  std::string name_;
  int sm_count_ = 0;
  int clock_khz_ = 0;
  int l2_bytes_ = 0;
  std::optional<PeakRate> bandwidth_;  // measured on the first peak_bandwidth()
  int cc_major_ = 0, cc_minor_ = 0;
  std::size_t total_mem_ = 0;
};

CudaBackend& as_cuda(Backend& be);

}  // namespace tbd::cuda
