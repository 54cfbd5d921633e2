// backends/cuda/cuda_backend.h: the CUDA backend's context, for CUDA layer implementations.
//
// Included only by files under backends/cuda and layers/cuda (CUDA headers stay there). One
// stream; cuDNN and cuBLAS(Lt) handles bound to it; device memory from a private
// cudaMallocAsync pool through the tracking allocator; the math mode (strict FP32 or TF32)
// applied to cuBLAS and cuDNN. Library status checks: TBD_CUDA_CHECK, TBD_CUDNN_CHECK,
// TBD_CUBLAS_CHECK, TBD_CUPTI_CHECK (all from TBD_STATUS_CHECK in core/error.h);
// TBD_CUDA_CHECK_LAST() after every kernel launch.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

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

// Strict FP32 (TF32 off in cuBLAS and cuDNN) or TF32 tensor cores. Leaves room for bf16.
enum class MathMode { kFp32, kTf32 };

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device = 0);
  ~CudaBackend() override;

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string device_name() const override;
  std::map<std::string, std::string> describe() const override;
  int num_threads() const override { return 1; }

  void copy_from_host(const Tensor& dst, const void* src) override;
  void copy_to_host(void* dst, const Tensor& src) override;
  void reorder(const Tensor& dst, const Tensor& src) override;
  void fill(const Tensor& dst, float value) override;
  void accumulate(const Tensor& dst, const Tensor& src) override;
  void synchronize() override;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  MathMode math_mode() const { return math_; }
  void set_math_mode(MathMode m);
  // Peak FP32 FLOP/s = 2 x FP32 lanes/SM x SMs x clock (shared/notes/cuda.md), and its source.
  double peak_fp32_flops() const;
  std::string peak_fp32_source() const;

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  MathMode math_ = MathMode::kFp32;
  Tensor cublas_workspace_;
};

CudaBackend& as_cuda(Backend& be);

}  // namespace tbd::cuda
