// layers/cuda/conv2d_cuda.cpp: Conv2d on cuDNN's convolution API (fprop, dgrad, wgrad).
//
// Algorithms are chosen at build by measurement (cudnnFind*AlgorithmEx), once per problem: a
// process-wide cache keyed by shapes, convolution parameters, math mode and device holds the
// choice, so the 16 identical bottleneck convs of ResNet-50 are timed once. In strict FP32
// the descriptors carry CUDNN_FMA_MATH and results that would use tensor cores are skipped.
// The chosen algorithms and their workspace sizes are in describe(). The workspace is the
// backend's shared cuDNN scratch (counted as workspace), reserved here for the largest of the
// three choices. wgrad and the bias gradient accumulate with beta = 1 (gradient policy).
// Under bf16 x, y, dx and the descriptors are bf16 with f32 compute (CUDNN_TENSOR_OP_MATH). The
// legacy API has one data type for x, w and y, so the forward and backward-data read a bf16 copy
// of the weights (made once per forward pass in a graph: Layer::param_copy) and the weight
// gradient comes out bf16 into a transient, then is added into the f32 gradient, as autocast's
// cast-back does; the bias is added and its gradient summed by kernels of the backend
// (backends/cuda/cuda_bf16.h), in f32.
// No kernels of our own: a .cpp, compiled by the host compiler.
#include <algorithm>
#include <map>
#include <mutex>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_bf16.h"
#include "layers/conv2d.h"
#include "layers/cuda/cuda_layer_util.h"

namespace tbd::cuda {
namespace {

const char* fwd_algo_name(int a) {
  static const char* const n[] = {
      "implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling",
      "winograd",      "winograd_nonfused"};
  return a >= 0 && a < 8 ? n[a] : "?";
}
const char* bwd_data_algo_name(int a) {
  static const char* const n[] = {"algo0",      "algo1",    "fft",
                                  "fft_tiling", "winograd", "winograd_nonfused"};
  return a >= 0 && a < 6 ? n[a] : "?";
}
const char* bwd_filter_algo_name(int a) {
  static const char* const n[] = {
      "algo0", "algo1", "fft", "algo3", "winograd", "winograd_nonfused", "fft_tiling"};
  return a >= 0 && a < 7 ? n[a] : "?";
}
const char* math_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH:
      return "default";
    case CUDNN_TENSOR_OP_MATH:
      return "tensor_op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION:
      return "tensor_op_conv";
    case CUDNN_FMA_MATH:
      return "fma";
  }
  return "?";
}

struct AlgoChoice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::size_t workspace = 0;
  float ms = 0;  // cudnnFind's measured time
};
struct ConvPlan {
  AlgoChoice fprop, dgrad, wgrad;
};

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, ConvPlan>& plan_cache() {
  static std::map<std::string, ConvPlan> c;
  return c;
}

// The fastest successful result that the math mode allows (cudnnFind sorts by time).
template <class Perf>
bool pick(const Perf* perf, int n, MathMode mode, AlgoChoice* out) {
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    bool tensor_ops = perf[i].mathType == CUDNN_TENSOR_OP_MATH ||
                      perf[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    if (mode == MathMode::kFp32 && tensor_ops) continue;
    *out = {static_cast<int>(perf[i].algo), perf[i].mathType, perf[i].memory, perf[i].time};
    return true;
  }
  return false;
}

class Conv2dCudnn final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  Conv2dCudnn(Backend& be, const std::string& name, const Conv2dConfig& cfg,
              const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    check_row_major(kind(), name, "x", in[0]);
    const Shape& xs = in[0].shape;
    const Shape ys = outputs_[0].shape;
    const int64_t C = xs[1], K = cfg.out_channels, G = cfg.groups;
    bf16_ = in[0].dtype == DType::kBF16;
    const cudnnDataType_t dt = bf16_ ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;

    x_desc_ = make_tensor_desc(xs[0], xs[1], xs[2], xs[3], dt);
    y_desc_ = make_tensor_desc(ys[0], ys[1], ys[2], ys[3], dt);
    w_desc_ = make_filter_desc(K, C / G, cfg.kernel_h, cfg.kernel_w, dt);
    if (bf16_) {
      const TensorDesc w16{params_[0].value.shape(), DType::kBF16};
      transient(w16_, w16);  // the weights' copy when run alone
      transient(dw16_, w16);
    }
    if (cfg.bias) b_desc_ = make_tensor_desc(1, K, 1, 1);
    conv_fwd_ = make_conv_desc();
    conv_bwd_data_ = make_conv_desc();
    conv_bwd_filter_ = make_conv_desc();

    int n = 0, k = 0, p = 0, q = 0;
    TBD_CUDNN_CHECK(
        cudnnGetConvolution2dForwardOutputDim(conv_fwd_, x_desc_, w_desc_, &n, &k, &p, &q));
    TBD_LAYER_CHECK(n == ys[0] && k == ys[1] && p == ys[2] && q == ys[3], kind(), name,
                    "cuDNN's output shape (", n, ", ", k, ", ", p, ", ", q,
                    ") differs from the expected ", ys.to_string());

    math_ = cu_.math_mode();
    plan_ = find_plan(xs, ys);
    TBD_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_fwd_, plan_.fprop.math));
    TBD_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_bwd_data_, plan_.dgrad.math));
    TBD_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_bwd_filter_, plan_.wgrad.math));
    cu_.reserve_workspace(
        std::max({plan_.fprop.workspace, plan_.dgrad.workspace, plan_.wgrad.workspace}));
  }

  std::string implementation() const override {
    return detail::concat("cudnn ", to_string(math_), bf16_ ? " (bf16 tensors, f32 compute)" : "",
                          ": fprop=", fwd_algo_name(plan_.fprop.algo), "/",
                          math_name(plan_.fprop.math), " ws ", plan_.fprop.workspace,
                          " B; dgrad=", bwd_data_algo_name(plan_.dgrad.algo), "/",
                          math_name(plan_.dgrad.math), " ws ", plan_.dgrad.workspace,
                          " B; wgrad=", bwd_filter_algo_name(plan_.wgrad.algo), "/",
                          math_name(plan_.wgrad.math), " ws ", plan_.wgrad.workspace, " B");
  }

  // y: (N, K, P, Q)  x: (N, C, H, W)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    cudnnHandle_t h = cu_.cudnn();
    TBD_CUDNN_CHECK(cudnnConvolutionForward(
        h, &kOne, x_desc_, x[0]->raw(), w_desc_, weights(), conv_fwd_,
        static_cast<cudnnConvolutionFwdAlgo_t>(plan_.fprop.algo), cu_.workspace(),
        plan_.fprop.workspace, &kZero, y_desc_, y[0]->raw()));
    if (cfg_.bias && bf16_) {
      const Shape& ys = outputs_[0].shape;
      add_channel_bias_bf16(cu_, y[0]->raw(), params_[1].value.f32(), ys[0], ys[1], ys[2] * ys[3]);
    } else if (cfg_.bias) {
      TBD_CUDNN_CHECK(
          cudnnAddTensor(h, &kOne, b_desc_, params_[1].value.raw(), &kOne, y_desc_, y[0]->raw()));
    }
  }

  // dx: (N, C, H, W) or null  dy: (N, K, P, Q)
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    backward_in_two(dx, dy, x, y);
  }
  bool split_backward() const override { return true; }

  void dgrad(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0] == nullptr) return;
    TBD_CUDNN_CHECK(cudnnConvolutionBackwardData(  // assigns (beta = 0)
        cu_.cudnn(), &kOne, w_desc_, weights(), y_desc_, dy[0]->raw(), conv_bwd_data_,
        static_cast<cudnnConvolutionBwdDataAlgo_t>(plan_.dgrad.algo), cu_.workspace(),
        plan_.dgrad.workspace, &kZero, x_desc_, dx[0]->raw()));
  }

  // wgrad and the bias gradient accumulate (beta = 1)
  void wgrad(TensorRefs dy, TensorRefs x, TensorRefs) override {
    cudnnHandle_t h = cu_.cudnn();
    if (bf16_) {  // dw (bf16) into the transient, then += into the f32 gradient
      TBD_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
          h, &kOne, x_desc_, x[0]->raw(), y_desc_, dy[0]->raw(), conv_bwd_filter_,
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan_.wgrad.algo), cu_.workspace(),
          plan_.wgrad.workspace, &kZero, w_desc_, dw16_.raw()));
      add_bf16_into_f32(cu_, params_[0].grad.f32(), dw16_.raw(), params_[0].grad.numel());
      if (cfg_.bias) {
        const Shape& ys = outputs_[0].shape;
        channel_sums_bf16(cu_, params_[1].grad.f32(), dy[0]->raw(), ys[0], ys[1], ys[2] * ys[3]);
      }
      return;
    }
    TBD_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        h, &kOne, x_desc_, x[0]->raw(), y_desc_, dy[0]->raw(), conv_bwd_filter_,
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan_.wgrad.algo), cu_.workspace(),
        plan_.wgrad.workspace, &kOne, w_desc_, params_[0].grad.raw()));
    if (cfg_.bias) {
      TBD_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, &kOne, y_desc_, dy[0]->raw(), &kOne, b_desc_,
                                                   params_[1].grad.raw()));
    }
  }

 private:
  CudnnConvDesc make_conv_desc() {
    cudnnConvolutionDescriptor_t d = nullptr;
    TBD_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d));
    CudnnConvDesc owned(d);
    TBD_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        d, static_cast<int>(cfg_.pad_h), static_cast<int>(cfg_.pad_w),
        static_cast<int>(cfg_.stride_h), static_cast<int>(cfg_.stride_w),
        static_cast<int>(cfg_.dilation_h), static_cast<int>(cfg_.dilation_w),
        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    TBD_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d, static_cast<int>(cfg_.groups)));
    TBD_CUDNN_CHECK(cudnnSetConvolutionMathType(d, cudnn_math_type(cu_.math_mode())));
    return owned;
  }

  std::string cache_key(const Shape& xs) const {
    return detail::concat(cu_.device(), "|", xs.to_string(), "|", cfg_.out_channels, "|",
                          cfg_.kernel_h, "x", cfg_.kernel_w, "|s", cfg_.stride_h, ",",
                          cfg_.stride_w, "|p", cfg_.pad_h, ",", cfg_.pad_w, "|d", cfg_.dilation_h,
                          ",", cfg_.dilation_w, "|g", cfg_.groups, "|", to_string(math_));
  }

  // Largest workspace any algorithm asks for, capped by what the device can spare.
  std::size_t find_workspace_cap() {
    const MemoryStats st = be_.allocator().stats();
    std::size_t limit = be_.allocator().limit_bytes();
    std::size_t spare = limit > st.total_current ? limit - st.total_current : 0;
    std::size_t cap = std::min<std::size_t>(spare / 2, std::size_t{4} << 30);
    std::size_t want = 0;
    cudnnHandle_t h = cu_.cudnn();
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
      std::size_t s = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(h, x_desc_, w_desc_, conv_fwd_, y_desc_,
                                                  static_cast<cudnnConvolutionFwdAlgo_t>(a),
                                                  &s) == CUDNN_STATUS_SUCCESS &&
          s <= cap) {
        want = std::max(want, s);
      }
    }
    for (int a = 0; a < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT; ++a) {
      std::size_t s = 0;
      if (cudnnGetConvolutionBackwardDataWorkspaceSize(
              h, w_desc_, y_desc_, conv_bwd_data_, x_desc_,
              static_cast<cudnnConvolutionBwdDataAlgo_t>(a), &s) == CUDNN_STATUS_SUCCESS &&
          s <= cap) {
        want = std::max(want, s);
      }
    }
    for (int a = 0; a < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT; ++a) {
      std::size_t s = 0;
      if (cudnnGetConvolutionBackwardFilterWorkspaceSize(
              h, x_desc_, y_desc_, conv_bwd_filter_, w_desc_,
              static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), &s) == CUDNN_STATUS_SUCCESS &&
          s <= cap) {
        want = std::max(want, s);
      }
    }
    return want;
  }

  // Times every algorithm on scratch tensors (allocated here, released on return) unless the
  // problem is in the cache.
  ConvPlan find_plan(const Shape& xs, const Shape& ys) {
    std::string key = cache_key(xs);
    {
      std::lock_guard<std::mutex> lock(cache_mutex());
      auto it = plan_cache().find(key);
      if (it != plan_cache().end()) return it->second;
    }
    const Shape& ws = params_[0].value.shape();
    const DType t = bf16_ ? DType::kBF16 : DType::kF32;
    Tensor tx = be_.empty(xs, MemCategory::kDynamic, Layout::kRowMajor, t);
    Tensor tw = be_.empty(ws, MemCategory::kDynamic, Layout::kRowMajor, t);
    Tensor ty = be_.empty(ys, MemCategory::kDynamic, Layout::kRowMajor, t);
    be_.fill(tx, 0.f);
    be_.fill(tw, 0.f);
    be_.fill(ty, 0.f);
    std::size_t ws_bytes = find_workspace_cap();
    Tensor scratch;
    if (ws_bytes) {
      scratch = be_.empty(Shape{static_cast<int64_t>((ws_bytes + 3) / 4)}, MemCategory::kWorkspace);
    }
    cudnnHandle_t h = cu_.cudnn();
    ConvPlan plan;
    int got = 0;

    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    TBD_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
        h, x_desc_, tx.raw(), w_desc_, tw.raw(), conv_fwd_, y_desc_, ty.raw(),
        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fwd, scratch.raw(), ws_bytes));
    TBD_LAYER_CHECK(pick(fwd, got, math_, &plan.fprop), kind(), name_,
                    "cuDNN has no forward algorithm for x ", xs.to_string(), " in ",
                    to_string(math_), " mode");

    cudnnConvolutionBwdDataAlgoPerf_t dgrad[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    TBD_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, w_desc_, tw.raw(), y_desc_, ty.raw(), conv_bwd_data_, x_desc_, tx.raw(),
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, dgrad, scratch.raw(), ws_bytes));
    TBD_LAYER_CHECK(pick(dgrad, got, math_, &plan.dgrad), kind(), name_,
                    "cuDNN has no backward-data algorithm for x ", xs.to_string(), " in ",
                    to_string(math_), " mode");

    cudnnConvolutionBwdFilterAlgoPerf_t bwd_filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    TBD_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        h, x_desc_, tx.raw(), y_desc_, ty.raw(), conv_bwd_filter_, w_desc_, tw.raw(),
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, bwd_filter, scratch.raw(), ws_bytes));
    TBD_LAYER_CHECK(pick(bwd_filter, got, math_, &plan.wgrad), kind(), name_,
                    "cuDNN has no backward-filter algorithm for x ", xs.to_string(), " in ",
                    to_string(math_), " mode");
    be_.synchronize();  // the scratch tensors are released on return

    std::lock_guard<std::mutex> lock(cache_mutex());
    plan_cache()[key] = plan;
    return plan;
  }

  // The weights as the products read them: the f32 master, or its bf16 copy.
  const void* weights() {
    const Tensor& w = params_[0].value;
    if (!bf16_) return w.raw();
    return bf16_param_copy(0, w16_, [&](void* dst) { cast_to_bf16(cu_, dst, w.f32(), w.numel()); });
  }

  Conv2dConfig cfg_;
  CudaBackend& cu_;
  bool bf16_ = false;
  Tensor w16_, dw16_;  // bf16: the weights' copy when run alone, the weight gradient (transients)
  MathMode math_ = MathMode::kFp32;
  ConvPlan plan_;
  CudnnTensorDesc x_desc_, y_desc_, b_desc_;
  CudnnFilterDesc w_desc_;
  CudnnConvDesc conv_fwd_, conv_bwd_data_, conv_bwd_filter_;
};

TBD_REGISTER_LAYER(Conv2dConfig, DeviceKind::kCuda, Conv2dCudnn);

}  // namespace
}  // namespace tbd::cuda
