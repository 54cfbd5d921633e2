// tests/cuda/cupti_cuda_test.cpp: the CUPTI counter session (backends/cuda/cupti_session.cu).
//
// Without a device: no session, and the reason says why (this part runs everywhere). With one:
// the FP32 FLOP count of a strict-FP32 GEMM is 2*M*N*K within 1%; a kernel with a known FFMA
// count is counted exactly; the TF32 tensor metric is calibrated against a TF32 GEMM; the
// timeline's busy time and per-tag kernel time are consistent. When the machine denies counter
// access (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) the FLOP tests skip with CUPTI's reason.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backends.h"
#include "core/counters.h"
#include "layers/linear.h"
#include "tests/support/check.h"
#ifdef TBD_WITH_CUDA
#include "backends/cuda/cupti.h"
#include "tests/cuda/known_ffma.h"
#endif

namespace tbd::test {
namespace {

TEST(CuptiSession, AbsentOnTheCpuBackendWithAReason) {
  auto cpu = make_cpu_backend();
  std::string why;
  EXPECT_EQ(make_counter_session(*cpu, &why), nullptr);
  EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
}

Backend& cuda_backend(bool tf32) {
  static std::unique_ptr<Backend> be = make_backend(BackendChoice::kCuda);
#ifdef TBD_WITH_CUDA
  be->set_math_mode(tf32 ? MathMode::kTf32 : MathMode::kFp32);
#else
  (void)tf32;
#endif
  return *be;
}

// A Gemm layer a (M, K) x b (K, N) with random inputs, ready to run forward.
struct GemmRun {
  std::unique_ptr<Layer> layer;
  Tensor a, b, y;
  const Tensor* x[2];
  Tensor* out[1];
  GemmRun(Backend& be, int64_t M, int64_t N, int64_t K) {
    layer =
        make_layer(be, "gemm", GemmConfig{}, {TensorDesc{Shape{M, K}}, TensorDesc{Shape{K, N}}});
    a = be.empty(Shape{M, K}, MemCategory::kDynamic);
    b = be.empty(Shape{K, N}, MemCategory::kDynamic);
    y = be.empty(layer->output_descs()[0], MemCategory::kDynamic);
    from_host(be, a, random_vec(M * K, 1));
    from_host(be, b, random_vec(K * N, 2));
    x[0] = &a, x[1] = &b;
    out[0] = &y;
  }
  void forward() { layer->forward(out, x); }
};

std::unique_ptr<CounterSession> session_or_fail(Backend& be) {
  std::string why;
  auto s = make_counter_session(be, &why);
  EXPECT_NE(s, nullptr) << why;
  return s;
}

TEST(CuptiSession, StrictFp32GemmCountsTwoMNK) {
  TBD_SKIP_WITHOUT_CUDA();
  Backend& be = cuda_backend(false);
  auto session = session_or_fail(be);
  ASSERT_NE(session, nullptr);
  const int64_t M = 512, N = 384, K = 256;
  GemmRun g(be, M, N, K);
  g.forward();  // warm-up outside the profiled passes (handles, heuristics)
  be.synchronize();
  DeviceCounters c = session->measure_flops([&] { g.forward(); });
  if (!c.fp32_flop) GTEST_SKIP() << c.why_missing;
  const double want = 2.0 * M * N * K;
  EXPECT_NEAR(*c.fp32_flop, want, 0.01 * want) << "executed FP32 FLOPs of a strict-FP32 GEMM";
  ASSERT_TRUE(c.tf32_tensor_flop.has_value());
  EXPECT_EQ(*c.tf32_tensor_flop, 0.0) << "strict FP32 must not use TF32 tensor cores";
}

#ifdef TBD_WITH_CUDA
TEST(CuptiSession, KnownFfmaKernelIsCountedExactly) {
  TBD_SKIP_WITHOUT_CUDA();
  Backend& be = cuda_backend(false);
  auto session = session_or_fail(be);
  ASSERT_NE(session, nullptr);
  const int64_t n = 100003;  // not a multiple of the block size: idle threads must not count
  double want = 0;
  DeviceCounters c = session->measure_flops([&] { want = cuda::run_known_ffma_kernel(be, n); });
  if (!c.fp32_flop) GTEST_SKIP() << c.why_missing;
  EXPECT_EQ(*c.fp32_flop, want) << "2 x " << n << " threads x " << cuda::kKnownFfmaPerThread
                                << " FFMA";
}

// Calibrates sm__ops_path_tensor_src_tf32_dst_fp32 against a TF32 GEMM of known FLOPs. Fails,
// printing the factor to put into cupti_session.cu, until the constant there is calibrated.
TEST(CuptiSession, Tf32TensorWorkIsCalibratedAgainstAGemm) {
  TBD_SKIP_WITHOUT_CUDA();
  Backend& be = cuda_backend(true);
  auto session = session_or_fail(be);
  ASSERT_NE(session, nullptr);
  const int64_t M = 1024, N = 1024, K = 1024;
  GemmRun g(be, M, N, K);
  g.forward();
  be.synchronize();
  DeviceCounters c = session->measure_flops([&] { g.forward(); });
  cuda_backend(false);  // back to strict FP32 for the other tests
  if (!c.tf32_tensor_flop) GTEST_SKIP() << c.why_missing;
  const double want = 2.0 * M * N * K;
  const double factor = cuda::cupti_tf32_flop_per_tensor_op();
  ASSERT_GT(*c.tf32_tensor_flop, 0.0) << "a TF32 GEMM must run on the tensor cores";
  const double calibrated = factor * want / *c.tf32_tensor_flop;
  std::printf(
      "CUPTI TF32 calibration: %.6g tensor ops for %.6g FLOPs -> kTf32FlopPerTensorOp = "
      "%.6g (now %.6g); FP32 pipe FLOPs beside it: %.6g\n",
      *c.tf32_tensor_flop / factor, want, calibrated, factor, c.fp32_flop.value_or(-1.0));
  EXPECT_NEAR(*c.tf32_tensor_flop, want, 0.05 * want)
      << "set kTf32FlopPerTensorOp in backends/cuda/cupti_session.cu to " << calibrated;
}
#endif

TEST(CuptiSession, TimelineBusyTimeAndTags) {
  TBD_SKIP_WITHOUT_CUDA();
  Backend& be = cuda_backend(false);
  auto session = session_or_fail(be);
  ASSERT_NE(session, nullptr);
  GemmRun small(be, 256, 256, 256), large(be, 1024, 1024, 512);
  small.forward();
  large.forward();
  be.synchronize();
  DeviceCounters c = session->measure_timeline([&] {
    session->push_tag(1);
    small.forward();
    session->pop_tag();
    session->push_tag(2);
    large.forward();
    large.forward();
    session->pop_tag();
  });
  ASSERT_TRUE(c.kernel_busy_s && c.wall_s) << c.why_missing;
  EXPECT_GT(*c.kernel_busy_s, 0.0);
  EXPECT_LE(*c.kernel_busy_s, *c.wall_s);
  ASSERT_EQ(c.kernel_s_by_tag.count(1), 1u) << "kernels of tag 1 not attributed";
  ASSERT_EQ(c.kernel_s_by_tag.count(2), 1u) << "kernels of tag 2 not attributed";
  EXPECT_GT(c.kernel_s_by_tag.at(2), c.kernel_s_by_tag.at(1));
  // One stream: kernels never overlap, so the tags add up to at most the busy time.
  EXPECT_LE(c.kernel_s_by_tag.at(1) + c.kernel_s_by_tag.at(2), *c.kernel_busy_s * 1.001 + 1e-9);
}

TEST(CudaBackend, PeaksHaveASource) {
  TBD_SKIP_WITHOUT_CUDA();
  Backend& be = cuda_backend(false);
  PeakRate fp32 = be.peak_flops(MathMode::kFp32), tf32 = be.peak_flops(MathMode::kTf32);
  EXPECT_GT(fp32.per_s, 1e12) << fp32.method;
  EXPECT_GE(tf32.per_s, 0.0) << tf32.method;
  EXPECT_NE(tf32.method.find("SMs"), std::string::npos) << tf32.method;
  PeakRate bf16 = be.peak_flops(MathMode::kBf16);  // dense BF16: twice TF32 where known
  EXPECT_EQ(bf16.per_s, 2 * tf32.per_s) << bf16.method;
  auto session = session_or_fail(be);
  ASSERT_NE(session, nullptr);
  EXPECT_NE(session->tf32_tensor_flop_method().find("tf32"), std::string::npos);
  // The measured device-to-device copy bandwidth (read + write counted): H100 and H200 have
  // 3.35 and 4.8 TB/s of HBM; below 100 GB/s or above 10 TB/s would be a measuring error.
  PeakRate bw = be.peak_bandwidth();
  EXPECT_GT(bw.per_s, 1e11) << bw.method;
  EXPECT_LT(bw.per_s, 1e13) << bw.method;
  EXPECT_NE(bw.method.find("cudaMemcpyAsync"), std::string::npos) << bw.method;
}

}  // namespace
}  // namespace tbd::test
