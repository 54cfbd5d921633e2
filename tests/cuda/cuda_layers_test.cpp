// tests/cuda/cuda_layers_test.cpp: what the CUDA backend has beyond the layer comparisons.
//
// Every layer kind is checked on CUDA, in FP32 and TF32, against its float64 reference by its own
// suite in tests/layers (the harness in tests/support/check.h runs each case on every target).
// Here: backend selection without a device (these run everywhere: --tbd_backend=cuda must fail
// with the CUDA error text, auto falls back to the CPU), the math mode in the backend's
// description, the allocator's accounting, copies and fills, the convolution's recorded
// algorithms, the CUDA implementations' own input checks, and one model (a tiny Faster R-CNN,
// the detection kernels' integration) trained on the device against the CPU. Everything that needs
// a device skips with the reason cuda_usable() gives. Only the Backend interface is used: this file
// builds with TBD_CUDA=OFF.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/backends.h"
#include "core/backend.h"
#include "core/error.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/linear.h"
#include "models/faster_rcnn.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

// ---- without a device (these run everywhere) ----

TEST(CudaBackendSelection, ForcedCudaWithoutDeviceThrowsWithCudaErrorText) {
  std::string why;
  if (cuda_usable(&why)) GTEST_SKIP() << "a CUDA device is usable here";
  try {
    make_backend(BackendChoice::kCuda);
    FAIL() << "--tbd_backend=cuda without a device must throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("CUDA"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--tbd_backend=cuda"), std::string::npos) << msg;
    if (cuda_compiled()) {
      EXPECT_NE(msg.find("no usable CUDA device"), std::string::npos) << msg;
      EXPECT_NE(msg.find(why), std::string::npos) << msg << "\nshould contain: " << why;
    }
  }
}

TEST(CudaBackendSelection, UnusableDeviceComesWithAReason) {
  std::string why;
  if (cuda_usable(&why)) GTEST_SKIP() << "a CUDA device is usable here";
  EXPECT_FALSE(why.empty());
  // Without a driver the runtime reports error 35, elsewhere 100 (docs/cuda.md); a
  // build without CUDA says so.
  if (cuda_compiled()) {
    EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
  } else {
    EXPECT_NE(why.find("TBD_CUDA=OFF"), std::string::npos) << why;
  }
}

TEST(CudaBackendSelection, AutoFallsBackToCpuWithANotice) {
  std::string why;
  if (cuda_usable(&why)) GTEST_SKIP() << "a CUDA device is usable here";
  std::string notice;
  auto be = make_backend(BackendChoice::kAuto, &notice);
  EXPECT_EQ(be->kind(), DeviceKind::kCpu);
  EXPECT_NE(notice.find(why), std::string::npos) << notice;
}

TEST(CudaBackendSelection, CpuBackendIsStrictFp32Only) {
  auto cpu = make_cpu_backend();
  EXPECT_EQ(cpu->math_mode(), MathMode::kFp32);
  EXPECT_NO_THROW(cpu->set_math_mode(MathMode::kFp32));
  EXPECT_THROW(cpu->set_math_mode(MathMode::kTf32), Error);
}

// ---- with a device ----

// The process's CUDA backend (tests/support/check.h), in strict FP32 at the start of each test.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override { TBD_USE_TARGET(gpu_, Target::kCudaFp32); }
  Backend& gpu() { return *gpu_; }
  Backend* gpu_ = nullptr;
};

Vec f32_random(int64_t n, uint64_t seed, double lo, double hi) {
  Vec v = random_vec(n, seed, lo, hi);
  for (auto& e : v) e = static_cast<float>(e);
  return v;
}

TensorDesc f32(Shape s) { return TensorDesc{std::move(s), DType::kF32, Layout::kRowMajor}; }

// ---- the backend itself ----

TEST_F(CudaTest, DescribeNamesVersionsDeviceAndPeak) {
  auto d = gpu().describe();
  for (const char* key :
       {"cuda_runtime_version", "cuda_driver_version", "cudnn_version", "cublas_version", "device",
        "sm_count", "clock_mhz", "math_mode", "peak_fp32_flops", "peak_fp32_source"}) {
    EXPECT_TRUE(d.count(key)) << key;
  }
  EXPECT_EQ(d["math_mode"], "fp32");
  EXPECT_GT(std::stod(d["peak_fp32_flops"]), 1e12);
  gpu().set_math_mode(MathMode::kTf32);
  EXPECT_EQ(gpu().describe()["math_mode"], "tf32");
  EXPECT_EQ(gpu().math_mode(), MathMode::kTf32);
}

TEST_F(CudaTest, AllocatorPeakEqualsSumOfLiveBuffers) {
  TrackingAllocator& a = gpu().allocator();
  gpu().synchronize();
  a.reset_peak();
  const std::size_t base = a.stats().total_current;
  {
    Tensor t1 = gpu().empty(Shape{1000}, MemCategory::kFeatureMaps);
    Tensor t2 = gpu().empty(Shape{3, 333}, MemCategory::kWorkspace);
    {
      Tensor t3 = gpu().empty(Shape{4096}, MemCategory::kDynamic);
      EXPECT_EQ(a.stats().total_current, base + 4 * (1000 + 999 + 4096));
    }
    Tensor t4 = gpu().empty(Shape{10}, MemCategory::kDynamic);
    EXPECT_EQ(a.stats().total_current, base + 4 * (1000 + 999 + 10));
    EXPECT_EQ(a.stats().total_peak, base + 4 * (1000 + 999 + 4096));
    EXPECT_EQ(
        a.stats().peak_of(MemCategory::kDynamic) - a.stats().current_of(MemCategory::kDynamic),
        4u * (4096 - 10));
    gpu().synchronize();
    // The pool's own count includes its rounding; it can never be below ours.
    auto d = gpu().describe();
    ASSERT_TRUE(d.count("pool_used_bytes"));
    EXPECT_GE(std::stoull(d["pool_used_bytes"]), a.stats().total_current);
  }
  EXPECT_EQ(a.stats().total_current, base);
}

TEST_F(CudaTest, CopiesFillAndAccumulate) {
  Tensor a = gpu().empty(Shape{5, 7}, MemCategory::kDynamic);
  Tensor b = gpu().empty(Shape{5, 7}, MemCategory::kDynamic);
  Vec va = f32_random(35, 1, -1, 1);
  from_host(gpu(), a, va);
  gpu().fill(b, 0.5f);
  gpu().accumulate(b, a);
  Vec want(35);
  for (int i = 0; i < 35; ++i) want[i] = va[i] + 0.5;
  expect_close("fill + accumulate", to_host(gpu(), b), want, Tol{1e-7, 1e-7});
  gpu().reorder(b, a);
  expect_close("reorder (copy)", to_host(gpu(), b), va, Tol{0, 0});
  gpu().fill(b, 0.f);
  expect_close("fill 0", to_host(gpu(), b), Vec(35, 0.0), Tol{0, 0});
}

TEST_F(CudaTest, Conv2dRecordsItsAlgorithms) {
  auto l = make_layer<Conv2dConfig>(gpu(), "conv", Conv2dConfig::square(8, 3, 1, 1),
                                    {f32({2, 4, 8, 8})});
  const std::string d = l->describe();
  EXPECT_NE(d.find("fprop="), std::string::npos) << d;
  EXPECT_NE(d.find("dgrad="), std::string::npos) << d;
  EXPECT_NE(d.find("wgrad="), std::string::npos) << d;
  EXPECT_NE(d.find("ws "), std::string::npos) << d;
}

TEST_F(CudaTest, CudaLayersRejectBadShapes) {
  EXPECT_THROW(make_layer<Conv2dConfig>(gpu(), "c", Conv2dConfig::square(4, 3), {f32({3, 8, 8})}),
               Error);
  LinearConfig lin;
  lin.out_features = 4;
  EXPECT_THROW(make_layer<LinearConfig>(gpu(), "fc", lin, {f32({2, 0})}), Error);
  EXPECT_THROW(make_layer<LinearConfig>(gpu(), "fc", lin, {f32({5})}), Error);  // rank >= 2
  GemmConfig g;
  EXPECT_THROW(make_layer<GemmConfig>(gpu(), "g", g, {f32({2, 3}), f32({4, 5})}), Error);
  try {
    make_layer<BatchNorm2dConfig>(gpu(), "bn1", BatchNorm2dConfig{}, {f32({2, 3, 4})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("BatchNorm2d 'bn1'"), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 3, 4)"), std::string::npos) << m;
  }
}

// ---- a model end to end ----

// A tiny Faster R-CNN trains on the device as on the CPU: the same seeds give the same anchor
// targets (the samplers hash the same counters on both), so the first step's RPN losses agree
// to float rounding; the detector's depend on proposals, whose NMS may decide a near-tie
// differently, so those are only checked finite; 20 steps later every term is finite and the
// RPN objectness loss has fallen.
TEST_F(CudaTest, FasterRcnnTinyTrainsLikeTheCpu) {
  const FasterRcnnOptions o = faster_rcnn_tiny();
  auto cpu_backend = make_cpu_backend();
  auto on_cpu = build_faster_rcnn(*cpu_backend, o);
  auto on_gpu = build_faster_rcnn(gpu(), o);
  on_cpu->train_step();
  on_gpu->train_step();
  auto c = on_cpu->loss_terms(), g = on_gpu->loss_terms();
  ASSERT_EQ(c.size(), g.size());
  for (std::size_t k = 0; k < c.size(); ++k) {
    EXPECT_TRUE(std::isfinite(g[k].second)) << g[k].first;
    if (k < 2) {
      EXPECT_NEAR(g[k].second, c[k].second, 1e-3 * std::abs(c[k].second)) << g[k].first;
    }
  }
  const float first = g[0].second;
  for (int i = 0; i < 20; ++i) on_gpu->train_step();
  for (auto& [name, v] : on_gpu->loss_terms()) EXPECT_TRUE(std::isfinite(v)) << name;
  EXPECT_LT(on_gpu->loss_terms()[0].second, first);
}

}  // namespace
}  // namespace tbd::test
