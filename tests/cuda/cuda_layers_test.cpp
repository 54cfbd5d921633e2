// tests/cuda/cuda_layers_test.cpp: the CUDA backend and every CUDA layer against the CPU backend.
//
// Each layer is built on both backends for the same inputs; parameters, inputs, output
// gradients and starting parameter gradients are copied from one host vector to both; forward
// outputs, input gradients and (accumulated) parameter gradients must agree within kCudaF32 in
// strict FP32 and kCudaTf32 with TF32 tensor cores (tests/support/tolerances.h). The CPU side is
// checked against float64 references in tests/layers, so agreement here carries that over.
// Everything that needs a device skips with the reason cuda_usable() gives; the tests of the
// no-device path (--tbd_backend=cuda must fail with the CUDA error text, auto falls back to the
// CPU) run everywhere. Only the Backend interface is used: this file builds with TBD_CUDA=OFF.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "backends/backends.h"
#include "core/error.h"
#include "core/random.h"
#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/optimizer.h"
#include "layers/pool2d.h"
#include "layers/positional_encoding.h"
#include "layers/tensor_ops.h"
#include "tests/support/check.h"

namespace tbd {
// Readable parameter values in test listings ("GetParam() = tf32").
void PrintTo(MathMode m, std::ostream* os) { *os << to_string(m); }
}  // namespace tbd

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

// Both backends, shared by the tests of a suite (a CUDA context and its library handles take
// a while to create); released before the process exits, while the CUDA runtime is still up.
class CudaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!cuda_usable(&why_)) return;
    cpu_ = make_cpu_backend();
    gpu_ = make_backend(BackendChoice::kCuda);
  }
  static void TearDownTestSuite() {
    gpu_.reset();
    cpu_.reset();
  }
  void SetUp() override {
    if (!gpu_) GTEST_SKIP() << "no usable CUDA device: " << why_;
    gpu_->set_math_mode(MathMode::kFp32);
  }
  static Backend& cpu() { return *cpu_; }
  static Backend& gpu() { return *gpu_; }

  static inline std::unique_ptr<Backend> cpu_, gpu_;
  static inline std::string why_;
};

struct CompareOptions {
  MathMode math = MathMode::kFp32;
  Tol tol = kCudaF32;
  std::vector<bool> x_needs_grad;  // default: every f32 input
  std::map<int, Vec> x_values;     // fixed input values (labels, ids) by input index
  int64_t int_lo = 0, int_hi = 2;  // random i32 inputs in [lo, hi)
  double p_range = 0.5;
  bool training = true;
  uint64_t seed = 7;
};

Vec f32_random(int64_t n, uint64_t seed, double lo, double hi) {
  Vec v = random_vec(n, seed, lo, hi);
  for (auto& e : v) e = static_cast<float>(e);
  return v;
}

// Runs `cfg` on both backends with the same data and compares everything it produces.
template <class Config>
void compare_layer(Backend& cpu, Backend& gpu, const Config& cfg, const std::vector<TensorDesc>& in,
                   const CompareOptions& o = {}) {
  gpu.set_math_mode(o.math);
  std::unique_ptr<Layer> lc = make_layer<Config>(cpu, "layer", cfg, in);
  std::unique_ptr<Layer> lg = make_layer<Config>(gpu, "layer", cfg, in);
  gpu.set_math_mode(MathMode::kFp32);
  lc->set_training(o.training);
  lg->set_training(o.training);
  const std::string what = std::string(Config::kKind) + " " + lg->describe();
  SCOPED_TRACE(what);

  // The shared contract: outputs, parameters and FLOPs agree before any data flows.
  ASSERT_EQ(lc->output_descs().size(), lg->output_descs().size());
  for (std::size_t k = 0; k < lc->output_descs().size(); ++k) {
    ASSERT_EQ(lc->output_descs()[k].shape, lg->output_descs()[k].shape) << "output " << k;
  }
  ASSERT_EQ(lc->params().size(), lg->params().size());
  for (std::size_t k = 0; k < lc->params().size(); ++k) {
    EXPECT_EQ(lc->params()[k].name, lg->params()[k].name);
    ASSERT_EQ(lc->params()[k].value.shape(), lg->params()[k].value.shape());
    EXPECT_EQ(lc->params()[k].init, lg->params()[k].init) << lg->params()[k].name;
    EXPECT_EQ(lc->params()[k].decay, lg->params()[k].decay) << lg->params()[k].name;
  }
  EXPECT_DOUBLE_EQ(lc->flops().fprop, lg->flops().fprop);
  EXPECT_DOUBLE_EQ(lc->flops().dgrad, lg->flops().dgrad);
  EXPECT_DOUBLE_EQ(lc->flops().wgrad, lg->flops().wgrad);
  EXPECT_DOUBLE_EQ(lc->bytes().fprop, lg->bytes().fprop);
  EXPECT_DOUBLE_EQ(lc->bytes().dgrad, lg->bytes().dgrad);
  EXPECT_DOUBLE_EQ(lc->bytes().wgrad, lg->bytes().wgrad);

  struct Side {
    Backend* be;
    Layer* layer;
    std::vector<Tensor> x, y, dx, dy;
  };
  Side sides[2] = {{&cpu, lc.get(), {}, {}, {}, {}}, {&gpu, lg.get(), {}, {}, {}, {}}};
  std::vector<bool> needs(in.size());
  for (std::size_t k = 0; k < in.size(); ++k) {
    needs[k] = k < o.x_needs_grad.size() ? o.x_needs_grad[k] : in[k].dtype == DType::kF32;
    Vec v;
    if (auto it = o.x_values.find(static_cast<int>(k)); it != o.x_values.end()) {
      v = it->second;
    } else if (in[k].dtype == DType::kI32) {
      Rng rng(o.seed * 131 + k);
      v.resize(in[k].shape.numel());
      for (auto& e : v) e = static_cast<double>(rng.randint(o.int_lo, o.int_hi));
    } else {
      v = f32_random(in[k].shape.numel(), o.seed * 31 + k, -1, 1);
    }
    for (Side& s : sides) {
      s.x.push_back(s.be->empty(in[k], MemCategory::kDynamic));
      from_host(*s.be, s.x.back(), v);
      s.dx.push_back(s.be->empty(in[k], MemCategory::kDynamic));
      s.be->fill(s.dx.back(), 0.f);
    }
  }
  const auto& out = lg->output_descs();
  for (std::size_t k = 0; k < out.size(); ++k) {
    Vec v = f32_random(out[k].shape.numel(), o.seed * 77 + k, -1, 1);
    for (Side& s : sides) {
      s.y.push_back(s.be->empty(s.layer->output_descs()[k], MemCategory::kFeatureMaps));
      s.dy.push_back(s.be->empty(s.layer->output_descs()[k], MemCategory::kDynamic));
      from_host(*s.be, s.dy.back(), v);
    }
  }
  for (std::size_t k = 0; k < lg->params().size(); ++k) {
    Vec v = f32_random(lg->params()[k].value.numel(), o.seed * 1000 + k, -o.p_range, o.p_range);
    Vec g0 = f32_random(lg->params()[k].grad.numel(), o.seed * 2000 + k, -0.25, 0.25);
    for (Side& s : sides) {
      from_host(*s.be, s.layer->params()[k].value, v);
      from_host(*s.be, s.layer->params()[k].grad, g0);  // backward must add onto this
    }
  }

  const uint64_t allocs_before = gpu.allocator().stats().num_allocations;
  for (Side& s : sides) {
    std::vector<const Tensor*> xp, yp, dyp;
    std::vector<Tensor*> yw, dxw;
    for (std::size_t k = 0; k < s.x.size(); ++k) {
      xp.push_back(&s.x[k]);
      dxw.push_back(needs[k] ? &s.dx[k] : nullptr);
    }
    for (std::size_t k = 0; k < s.y.size(); ++k) {
      yp.push_back(&s.y[k]);
      yw.push_back(&s.y[k]);
      dyp.push_back(&s.dy[k]);
    }
    s.layer->forward(yw, xp);
    s.layer->backward(dxw, dyp, xp, yp);
    s.be->synchronize();
  }
  EXPECT_EQ(gpu.allocator().stats().num_allocations, allocs_before)
      << "the CUDA layer allocated in forward/backward";

  for (std::size_t k = 0; k < out.size(); ++k) {
    expect_close(what + ": forward y" + std::to_string(k), to_host(gpu, sides[1].y[k]),
                 to_host(cpu, sides[0].y[k]), o.tol);
  }
  for (std::size_t k = 0; k < in.size(); ++k) {
    if (!needs[k]) continue;
    expect_close(what + ": backward dx" + std::to_string(k), to_host(gpu, sides[1].dx[k]),
                 to_host(cpu, sides[0].dx[k]), o.tol);
  }
  for (std::size_t k = 0; k < lg->params().size(); ++k) {
    expect_close(what + ": gradient of " + lg->params()[k].name, to_host(gpu, lg->params()[k].grad),
                 to_host(cpu, lc->params()[k].grad), o.tol);
  }
}

TensorDesc f32(Shape s) { return TensorDesc{std::move(s), DType::kF32, Layout::kRowMajor}; }
TensorDesc i32(Shape s) { return TensorDesc{std::move(s), DType::kI32, Layout::kRowMajor}; }

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

// ---- layers whose arithmetic depends on the math mode ----

class CudaMathTest : public CudaTest, public ::testing::WithParamInterface<MathMode> {
 protected:
  CompareOptions opts() const {
    CompareOptions o;
    o.math = GetParam();
    o.tol = GetParam() == MathMode::kFp32 ? kCudaF32 : kCudaTf32;
    return o;
  }
};

TEST_P(CudaMathTest, Conv2d) {
  Conv2dConfig c3 = Conv2dConfig::square(8, 3, 1, 1);
  compare_layer(cpu(), gpu(), c3, {f32({2, 3, 9, 9})}, opts());
  compare_layer(cpu(), gpu(), Conv2dConfig::square(4, 1, 2, 0, /*bias=*/true), {f32({1, 5, 7, 6})},
                opts());
  Conv2dConfig g = Conv2dConfig::square(8, 3, 2, 2, /*bias=*/true);
  g.dilation_h = g.dilation_w = 2;
  g.groups = 2;
  compare_layer(cpu(), gpu(), g, {f32({3, 8, 10, 11})}, opts());
  compare_layer(cpu(), gpu(), Conv2dConfig::square(32, 3, 1, 1), {f32({2, 16, 14, 14})}, opts());
  CompareOptions no_dx = opts();
  no_dx.x_needs_grad = {false};
  compare_layer(cpu(), gpu(), c3, {f32({1, 3, 6, 5})}, no_dx);
}

TEST_P(CudaMathTest, Linear) {
  LinearConfig c;
  c.out_features = 9;
  compare_layer(cpu(), gpu(), c, {f32({7, 13})}, opts());
  c.out_features = 8;
  c.bias = false;
  compare_layer(cpu(), gpu(), c, {f32({2, 5, 16})}, opts());
  c.out_features = 1;
  c.bias = true;
  compare_layer(cpu(), gpu(), c, {f32({1, 33})}, opts());
  c.out_features = 64;
  compare_layer(cpu(), gpu(), c, {f32({96, 128})}, opts());
}

TEST_P(CudaMathTest, Gemm) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      GemmConfig c;
      c.trans_a = ta;
      c.trans_b = tb;
      c.alpha = 0.5;
      // M=5, K=7, N=4 with batch 2; then a 2-D b shared by the batch; then plain 2-D.
      Shape a = ta ? Shape{2, 7, 5} : Shape{2, 5, 7};
      Shape b = tb ? Shape{2, 4, 7} : Shape{2, 7, 4};
      Shape b2 = tb ? Shape{4, 7} : Shape{7, 4};
      compare_layer(cpu(), gpu(), c, {f32(a), f32(b)}, opts());
      c.bias = true;
      compare_layer(cpu(), gpu(), c, {f32(a), f32(b2)}, opts());
      compare_layer(cpu(), gpu(), c, {f32(ta ? Shape{7, 5} : Shape{5, 7}), f32(b2)}, opts());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Math, CudaMathTest, ::testing::Values(MathMode::kFp32, MathMode::kTf32),
                         [](const ::testing::TestParamInfo<MathMode>& i) {
                           return std::string(to_string(i.param));
                         });

// ---- the other layers (strict FP32 only: no tensor-core paths) ----

TEST_F(CudaTest, BatchNorm2d) {
  BatchNorm2dConfig c;
  compare_layer(cpu(), gpu(), c, {f32({4, 6, 5, 5})});
  compare_layer(cpu(), gpu(), c, {f32({1, 3, 7, 9})});
  CompareOptions no_dx;  // parameter gradients through the own kernel
  no_dx.x_needs_grad = {false};
  compare_layer(cpu(), gpu(), c, {f32({2, 4, 3, 3})}, no_dx);
  CompareOptions eval;  // running statistics (initial 0 and 1) and the own backward kernel
  eval.training = false;
  compare_layer(cpu(), gpu(), c, {f32({2, 4, 3, 3})}, eval);
}

TEST_F(CudaTest, BatchNorm2dRunningStatistics) {
  // Two training forwards, then the running statistics of both backends; (1, 3, 1, 1) has one
  // value per channel, where the unbiased variance is undefined and the biased one is used.
  for (Shape xs : {Shape{4, 6, 5, 5}, Shape{1, 3, 1, 1}}) {
    BatchNorm2dConfig c;
    c.momentum = 0.3;
    std::unique_ptr<Layer> l[2] = {make_layer<BatchNorm2dConfig>(cpu(), "bn", c, {f32(xs)}),
                                   make_layer<BatchNorm2dConfig>(gpu(), "bn", c, {f32(xs)})};
    Backend* be[2] = {&cpu(), &gpu()};
    for (int step = 0; step < 2; ++step) {
      Vec xv = f32_random(xs.numel(), 100 + step, -2, 3);
      for (int b = 0; b < 2; ++b) {
        Tensor x = be[b]->empty(xs, MemCategory::kDynamic);
        Tensor y = be[b]->empty(xs, MemCategory::kDynamic);
        from_host(*be[b], x, xv);
        const Tensor* xp[] = {&x};
        Tensor* yp[] = {&y};
        l[b]->forward(yp, xp);
        be[b]->synchronize();
      }
    }
    auto* bc = dynamic_cast<BatchNorm2dLayer*>(l[0].get());
    auto* bg = dynamic_cast<BatchNorm2dLayer*>(l[1].get());
    ASSERT_NE(bc, nullptr);
    ASSERT_NE(bg, nullptr) << "the CUDA BatchNorm2d must derive from BatchNorm2dLayer";
    expect_close("running_mean " + xs.to_string(), to_host(gpu(), bg->running_mean()),
                 to_host(cpu(), bc->running_mean()), kCudaF32);
    expect_close("running_var " + xs.to_string(), to_host(gpu(), bg->running_var()),
                 to_host(cpu(), bc->running_var()), kCudaF32);
  }
}

TEST_F(CudaTest, LayerNorm) {
  compare_layer(cpu(), gpu(), LayerNormConfig{}, {f32({4, 7, 32})});
  compare_layer(cpu(), gpu(), LayerNormConfig{}, {f32({3, 100})});
  compare_layer(cpu(), gpu(), LayerNormConfig{}, {f32({300, 5})});
}

TEST_F(CudaTest, Activations) {
  for (ActKind k :
       {ActKind::kRelu, ActKind::kLeakyRelu, ActKind::kTanh, ActKind::kSigmoid, ActKind::kGelu}) {
    ActivationConfig c;
    c.act = k;
    c.alpha = 0.1;
    CompareOptions o;
    o.tol = kF32Transcendental;  // both sides approximate tanh/exp/erf differently
    compare_layer(cpu(), gpu(), c, {f32({3, 17, 5})}, o);
  }
}

TEST_F(CudaTest, Pool2d) {
  compare_layer(cpu(), gpu(), Pool2dConfig::square(PoolKind::kMax, 2, 2), {f32({2, 3, 8, 9})});
  compare_layer(cpu(), gpu(), Pool2dConfig::square(PoolKind::kMax, 3, 2, 1), {f32({2, 4, 11, 11})});
  Pool2dConfig avg = Pool2dConfig::square(PoolKind::kAvg, 3, 2, 1);
  compare_layer(cpu(), gpu(), avg, {f32({2, 4, 11, 10})});
  avg.count_include_pad = false;
  compare_layer(cpu(), gpu(), avg, {f32({2, 4, 11, 10})});
}

TEST_F(CudaTest, GlobalAvgPool2d) {
  compare_layer(cpu(), gpu(), GlobalAvgPool2dConfig{}, {f32({2, 5, 7, 7})});
  compare_layer(cpu(), gpu(), GlobalAvgPool2dConfig{}, {f32({1, 3, 1, 1})});
}

TEST_F(CudaTest, SoftmaxCrossEntropy) {
  SoftmaxCrossEntropyConfig c;
  CompareOptions o;
  o.x_values[1] = {3, 0, 10, -100, 7, 7, 1, -100, 5};  // two ignored rows
  compare_layer(cpu(), gpu(), c, {f32({9, 11}), i32({9})}, o);
  c.label_smoothing = 0.1;
  compare_layer(cpu(), gpu(), c, {f32({9, 11}), i32({9})}, o);
  CompareOptions all_ignored;  // loss and gradient 0
  all_ignored.x_values[1] = Vec(4, -100.0);
  compare_layer(cpu(), gpu(), c, {f32({4, 11}), i32({4})}, all_ignored);
  compare_layer(cpu(), gpu(), c, {f32({2, 3, 11}), i32({2, 3})});  // (..., V) logits
  CompareOptions wide;
  wide.int_hi = 1000;
  compare_layer(cpu(), gpu(), c, {f32({4, 1000}), i32({4})}, wide);
}

TEST_F(CudaTest, MseLoss) {
  compare_layer(cpu(), gpu(), MseLossConfig{}, {f32({4, 6}), f32({4, 6})});
  compare_layer(cpu(), gpu(), MseLossConfig{}, {f32({100000}), f32({100000})});
}

TEST_F(CudaTest, Embedding) {
  EmbeddingConfig c;
  c.num_embeddings = 10;
  c.dim = 6;
  c.padding_idx = 2;
  c.scale = 2.0;
  CompareOptions o;
  o.int_hi = 10;
  compare_layer(cpu(), gpu(), c, {i32({3, 5})}, o);
}

TEST_F(CudaTest, DropoutMasksMatchTheCpuBitForBit) {
  DropoutConfig c;
  c.p = 0.3;
  c.seed = 42;
  CompareOptions o;
  o.tol = Tol{1e-6, 1e-6};  // same mask, one multiply per element
  compare_layer(cpu(), gpu(), c, {f32({7, 37})}, o);
  CompareOptions eval = o;
  eval.training = false;
  compare_layer(cpu(), gpu(), c, {f32({7, 37})}, eval);
}

TEST_F(CudaTest, TensorOps) {
  compare_layer(cpu(), gpu(), AddConfig{}, {f32({3, 4, 5}), f32({3, 4, 5})});
  ConcatConfig cat;
  cat.axis = 1;
  compare_layer(cpu(), gpu(), cat, {f32({2, 3, 4}), f32({2, 5, 4})});
  SplitConfig split;
  split.axis = -1;
  split.sizes = {2, 3};
  compare_layer(cpu(), gpu(), split, {f32({3, 5})});
  ReshapeConfig reshape;
  reshape.shape = {4, -1};
  compare_layer(cpu(), gpu(), reshape, {f32({2, 3, 4})});
  TransposeConfig tr;
  tr.perm = {1, 0, 2};
  compare_layer(cpu(), gpu(), tr, {f32({3, 4, 5})});
  tr.perm = {2, 0, 1};
  compare_layer(cpu(), gpu(), tr, {f32({3, 4, 5})});
}

TEST_F(CudaTest, TensorOpsMoveIntegers) {
  CompareOptions o;
  o.int_hi = 1000;
  ConcatConfig cat;
  cat.axis = 0;
  compare_layer(cpu(), gpu(), cat, {i32({2, 3}), i32({4, 3})}, o);
  TransposeConfig tr;
  tr.perm = {1, 0};
  compare_layer(cpu(), gpu(), tr, {i32({5, 3})}, o);
  SplitConfig split;
  split.axis = 1;
  split.sizes = {1, 2};
  compare_layer(cpu(), gpu(), split, {i32({4, 3})}, o);
}

TEST_F(CudaTest, PositionalEncoding) {
  compare_layer(cpu(), gpu(), PositionalEncodingConfig{}, {f32({2, 7, 12})});
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

// ---- optimizers ----

struct ParamSet {
  std::vector<Param> params;
  std::vector<Param*> ptrs() {
    std::vector<Param*> p;
    for (Param& q : params) p.push_back(&q);
    return p;
  }
};

// Three parameters (one without weight decay), same values and gradients on the backend.
ParamSet make_params(Backend& be) {
  ParamSet s;
  const Shape shapes[] = {Shape{17, 5}, Shape{5}, Shape{1000}};
  for (int k = 0; k < 3; ++k) {
    Param p;
    p.name = detail::concat("p", k);
    p.value = be.empty(shapes[k], MemCategory::kWeights);
    p.grad = be.empty(shapes[k], MemCategory::kWeightGrads);
    p.decay = k != 1;
    from_host(be, p.value, f32_random(shapes[k].numel(), 10 + k, -1, 1));
    from_host(be, p.grad, f32_random(shapes[k].numel(), 20 + k, -1, 1));
    s.params.push_back(std::move(p));
  }
  return s;
}

template <class Config>
void compare_optimizer(Backend& cpu, Backend& gpu, const Config& cfg) {
  ParamSet pc = make_params(cpu), pg = make_params(gpu);
  auto oc = make_optimizer<Config>(cpu, cfg, pc.ptrs());
  auto og = make_optimizer<Config>(gpu, cfg, pg.ptrs());
  EXPECT_STREQ(oc->kind(), og->kind());
  EXPECT_DOUBLE_EQ(oc->flops(), og->flops());
  EXPECT_DOUBLE_EQ(oc->bytes(), og->bytes());
  for (int step = 0; step < 3; ++step) {
    oc->step();
    og->step();
  }
  gpu.synchronize();
  for (std::size_t k = 0; k < pc.params.size(); ++k) {
    expect_close(std::string(og->kind()) + " after 3 steps: " + pc.params[k].name,
                 to_host(gpu, pg.params[k].value), to_host(cpu, pc.params[k].value),
                 kF32Transcendental);  // sqrt and division, ordered differently
  }
}

TEST_F(CudaTest, Optimizers) {
  SgdConfig sgd;
  sgd.weight_decay = 1e-2;
  compare_optimizer(cpu(), gpu(), sgd);
  sgd.momentum = 0;
  compare_optimizer(cpu(), gpu(), sgd);
  AdamConfig adam;
  adam.weight_decay = 1e-2;
  compare_optimizer(cpu(), gpu(), adam);
  adam.decoupled = true;
  compare_optimizer(cpu(), gpu(), adam);
  RmspropConfig rms;
  rms.weight_decay = 1e-2;
  compare_optimizer(cpu(), gpu(), rms);
  rms.momentum = 0.9;
  compare_optimizer(cpu(), gpu(), rms);
}

}  // namespace
}  // namespace tbd::test
