// layers/cuda/ctc_loss_cuda.cu: CtcLoss on cuDNN's CTC loss (cudnnCTCLoss_v8), with own kernels
// for what cuDNN is not given.
//
// cuDNN: CUDNN_CTC_LOSS_ALGO_DETERMINISTIC, CUDNN_LOSS_NORMALIZATION_SOFTMAX (cuDNN applies the
// softmax to our logits itself, and its gradient is w.r.t. the logits: softmax - occupancy, per
// sample, unscaled), labels and lengths in device memory (the _v8 call), the labels packed
// (concatenated, no padding). Its blank is class 0, and we take its deterministic algorithm to
// accept at most 255 labels per sample (docs/cuda.md, cuDNN CTC loss, says how that number was
// found): both are checked at build.
//
// Not every sample goes to cuDNN. A prepare kernel (one block, every call, into buffers made at
// build) sorts each sample into one of the kinds below and packs the labels of those cuDNN gets:
//   - cuDNN: input length >= label length + adjacent repeats (a path exists), label length >= 1;
//   - impossible or no frames: loss 0, gradient 0, as layers/ctc_loss.h documents (cuDNN's own
//     handling of these is where users have met infinite costs, NaN gradients and illegal
//     memory accesses: docs/cuda.md);
//   - label length 0 (with frames): -log p = -sum over frames of log softmax(z_t)[blank],
//     gradient softmax - onehot(blank), from an own kernel in double;
//   - invalid values (a length out of range, a label outside [1, C)): loss and gradient NaN.
//     A kernel cannot throw, and checking on the host would cost a synchronisation per step; a
//     NaN is impossible to overlook (SoftmaxCrossEntropy's CUDA implementation does the same
//     with bad labels).
// cuDNN still sees every sample of the batch (its tensor is (T, N, C)): the ones it is not given
// stand in as a one-frame sample of label (1), always possible, and their results are replaced.
// Backward has cuDNN write its per-sample gradient into dx, then one kernel over all of dx
// scales it by dy / N where cuDNN's result counts and writes 0 (or NaN) everywhere else,
// including the frames past each sample's length (whatever cuDNN left there). The loss is the
// per-sample costs summed in a fixed order in one block: bit-identical from run to run.
// Buffers: the packed labels, cuDNN's lengths, the kinds, the costs (workspace); cuDNN's own
// scratch is the backend's shared workspace, reserved at build.
#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/ctc_loss.h"
#include "layers/cuda/cuda_layer_util.h"

namespace tbd::cuda {
namespace {

// The most labels per sample cuDNN's deterministic CTC takes (docs/cuda.md).
constexpr int64_t kMaxCudnnLabels = 255;

enum SampleKind : int32_t { kByCudnn = 0, kZero = 1, kBlankOnly = 2, kInvalid = 3 };

// One block. Per sample n: its kind; the label and input lengths cuDNN gets (1 and 1 for a
// stand-in); then the labels packed at the running sum of those label lengths.
__global__ void ctc_prepare_kernel(const int32_t* __restrict__ labels,
                                   const int32_t* __restrict__ in_len,
                                   const int32_t* __restrict__ lab_len, int64_t N, int64_t T,
                                   int64_t S, int64_t C, int32_t* __restrict__ kind,
                                   int32_t* __restrict__ cudnn_lab_len,
                                   int32_t* __restrict__ cudnn_in_len, int32_t* __restrict__ offset,
                                   int32_t* __restrict__ packed) {
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    const int32_t L = in_len[n], U = lab_len[n];
    const int32_t* l = labels + n * S;
    bool valid = L >= 0 && L <= T && U >= 0 && U <= S;
    int32_t repeats = 0;
    for (int32_t s = 0; valid && s < U; ++s) {
      valid = l[s] >= 1 && l[s] < C;  // the blank is 0
      repeats += s > 0 && l[s] == l[s - 1];
    }
    int32_t k = kByCudnn;
    if (!valid) {
      k = kInvalid;
    } else if (L == 0 || L < U + repeats) {
      k = kZero;
    } else if (U == 0) {
      k = kBlankOnly;
    }
    kind[n] = k;
    cudnn_lab_len[n] = k == kByCudnn ? U : 1;
    cudnn_in_len[n] = k == kByCudnn ? L : 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t sum = 0;
    for (int64_t n = 0; n < N; ++n) {
      offset[n] = sum;
      sum += cudnn_lab_len[n];
    }
  }
  __syncthreads();
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    int32_t* dst = packed + offset[n];
    if (kind[n] != kByCudnn) {
      dst[0] = 1;
      continue;
    }
    for (int32_t s = 0; s < cudnn_lab_len[n]; ++s) dst[s] = labels[n * S + s];
  }
}

// One block per sample, for the label-length-0 samples only: a thread per frame t < L takes the
// frame's log-softmax in double; cost[n] = -sum_t log y_t(blank). With dx, also writes the
// frames' gradient scale * (y_t - onehot(blank)).
__global__ void ctc_blank_only_kernel(const float* __restrict__ z, const int32_t* __restrict__ kind,
                                      const int32_t* __restrict__ in_len, int64_t N, int64_t C,
                                      double* __restrict__ cost, const float* __restrict__ dy,
                                      float* __restrict__ dx) {
  __shared__ double shared[32];
  const int64_t n = blockIdx.x;
  if (kind[n] != kBlankOnly) return;  // the whole block leaves: block_sum below is not reached
  const double scale = dx ? static_cast<double>(dy[0]) / static_cast<double>(N) : 0.0;
  double sum = 0;
  for (int64_t t = threadIdx.x; t < in_len[n]; t += blockDim.x) {
    const float* zt = z + (t * N + n) * C;
    double m = zt[0], e = 0;
    for (int64_t k = 1; k < C; ++k) m = fmax(m, static_cast<double>(zt[k]));
    for (int64_t k = 0; k < C; ++k) e += exp(zt[k] - m);
    const double lse = m + log(e);
    sum += lse - zt[0];
    if (dx) {
      float* g = dx + (t * N + n) * C;
      for (int64_t k = 0; k < C; ++k) {
        g[k] = static_cast<float>(scale * (exp(zt[k] - lse) - (k == 0 ? 1.0 : 0.0)));
      }
    }
  }
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) cost[n] = sum;
}

// One block: y = mean over samples of their cost (cuDNN's, the own one, 0, or NaN).
__global__ void ctc_loss_kernel(const int32_t* __restrict__ kind, const float* __restrict__ costs,
                                const double* __restrict__ blank_only_cost, int64_t N,
                                float* __restrict__ y) {
  __shared__ double shared[32];
  double s = 0;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    switch (kind[n]) {
      case kByCudnn:
        s += costs[n];
        break;
      case kBlankOnly:
        s += blank_only_cost[n];
        break;
      case kInvalid:
        s += NAN;
        break;
      default:
        break;
    }
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) y[0] = static_cast<float>(s / static_cast<double>(N));
}

// dx (T, N, C): cuDNN's gradient times dy / N where it counts (a cuDNN sample, t < L); NaN for
// invalid samples; 0 everywhere else except the label-length-0 samples' frames, which
// ctc_blank_only_kernel writes.
__global__ void ctc_grad_finish_kernel(float* __restrict__ dx, const int32_t* __restrict__ kind,
                                       const int32_t* __restrict__ in_len,
                                       const float* __restrict__ dy, int64_t T, int64_t N,
                                       int64_t C) {
  const double scale = static_cast<double>(dy[0]) / static_cast<double>(N);
  TBD_GRID_STRIDE(i, T * N * C) {
    const int64_t n = (i / C) % N, t = i / (N * C);
    const int32_t k = kind[n];
    if (k == kInvalid) {
      dx[i] = NAN;
    } else if (t >= in_len[n]) {
      dx[i] = 0.f;
    } else if (k == kByCudnn) {
      dx[i] = static_cast<float>(scale * dx[i]);
    } else if (k == kZero) {
      dx[i] = 0.f;
    }
  }
}

class CtcLossCudnn final : public Layer {
 public:
  CtcLossCudnn(Backend& be, const std::string& name, const CtcLossConfig& cfg,
               const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cu_(as_cuda(be)) {
    const char* k = kind();
    const char* args[] = {"logits", "labels", "input_lengths", "label_lengths"};
    for (std::size_t i = 0; i < in.size(); ++i) check_row_major(k, name, args[i], in[i]);
    T_ = in[0].shape[0], N_ = in[0].shape[1], C_ = in[0].shape[2], S_ = in[1].shape[1];
    TBD_LAYER_CHECK(cfg.blank == 0, k, name, "invalid config: blank=", cfg.blank,
                    ": cuDNN's CTC loss has its blank fixed at class 0");
    TBD_LAYER_CHECK(S_ <= kMaxCudnnLabels, k, name, "labels ", in[1].shape.to_string(), ": S=", S_,
                    " exceeds the ", kMaxCudnnLabels,
                    " labels per sample cuDNN's deterministic CTC loss takes");
    TBD_LAYER_CHECK(T_ * N_ * C_ <= INT32_MAX, k, name, "logits ", in[0].shape.to_string(),
                    " has more than 2^31 elements (a cuDNN tensor's limit)");
    // With one class only (the blank) no label exists: every sample has label length 0 (or is
    // invalid), and cuDNN is never called (its stand-in label 1 would not exist).
    use_cudnn_ = C_ >= 2;

    cudnnTensorDescriptor_t d = nullptr;
    TBD_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
    logits_desc_ = CudnnTensorDesc(d);
    const int dims[3] = {static_cast<int>(T_), static_cast<int>(N_), static_cast<int>(C_)};
    const int strides[3] = {static_cast<int>(N_ * C_), static_cast<int>(C_), 1};
    TBD_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d, CUDNN_DATA_FLOAT, 3, dims, strides));
    cudnnCTCLossDescriptor_t c = nullptr;
    TBD_CUDNN_CHECK(cudnnCreateCTCLossDescriptor(&c));
    ctc_desc_ = CudnnCtcLossDesc(c);
    // Zeroed out-of-bounds gradients: never reached (impossible samples are not given to
    // cuDNN), but the finite choice if they were.
    TBD_CUDNN_CHECK(cudnnSetCTCLossDescriptor_v9(c, CUDNN_DATA_FLOAT,
                                                 CUDNN_LOSS_NORMALIZATION_SOFTMAX,
                                                 CUDNN_CTC_ZERO_OOB_GRADIENTS, max_labels()));
    if (use_cudnn_) {
      TBD_CUDNN_CHECK(cudnnGetCTCLossWorkspaceSize_v8(cu_.cudnn(),
                                                      CUDNN_CTC_LOSS_ALGO_DETERMINISTIC, ctc_desc_,
                                                      logits_desc_, logits_desc_, &ws_bytes_));
      cu_.reserve_workspace(ws_bytes_);
    }

    auto i32 = [&](int64_t n) {
      return be.empty(Shape{n}, MemCategory::kWorkspace, Layout::kRowMajor, DType::kI32);
    };
    packed_ = i32(N_ * max_labels());
    cudnn_lab_len_ = i32(N_);
    cudnn_in_len_ = i32(N_);
    offset_ = i32(N_);
    kind_ = i32(N_);
    costs_ = be.empty(Shape{N_}, MemCategory::kWorkspace);
    blank_only_cost_ = be.empty(Shape{2 * N_}, MemCategory::kWorkspace);  // N doubles
  }

  std::string implementation() const override {
    return detail::concat("cudnn deterministic, workspace ", ws_bytes_, " B");
  }

  // y: (1)  logits: (T, N, C)  labels: (N, S) i32  input_lengths, label_lengths: (N) i32
  void fprop(MutTensorRefs y, TensorRefs x) override {
    prepare(x);
    run_cudnn(x, nullptr);
    blank_only(x, nullptr, nullptr);
    ctc_loss_kernel<<<1, kBlock, 0, cu_.stream()>>>(kind_.data<int32_t>(), costs_.f32(),
                                                    blank_only_cost(), N_, y[0]->f32());
    TBD_CUDA_CHECK_LAST();
  }

  // dx[0]: dlogits (T, N, C); the other inputs take no gradient.  dy: (1)
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    prepare(x);
    run_cudnn(x, dx[0]->f32());
    ctc_grad_finish_kernel<<<grid_for(T_ * N_ * C_), kBlock, 0, cu_.stream()>>>(
        dx[0]->f32(), kind_.data<int32_t>(), x[2]->data<int32_t>(), dy[0]->f32(), T_, N_, C_);
    TBD_CUDA_CHECK_LAST();
    blank_only(x, dy[0]->f32(), dx[0]->f32());
  }

 private:
  // cuDNN's maxLabelLength; at least 1 for the stand-in label.
  int max_labels() const { return static_cast<int>(std::max<int64_t>(S_, 1)); }
  double* blank_only_cost() const { return static_cast<double*>(blank_only_cost_.raw()); }

  void prepare(TensorRefs x) {
    ctc_prepare_kernel<<<1, kBlock, 0, cu_.stream()>>>(
        x[1]->data<int32_t>(), x[2]->data<int32_t>(), x[3]->data<int32_t>(), N_, T_, S_, C_,
        kind_.data<int32_t>(), cudnn_lab_len_.data<int32_t>(), cudnn_in_len_.data<int32_t>(),
        offset_.data<int32_t>(), packed_.data<int32_t>());
    TBD_CUDA_CHECK_LAST();
  }

  // Costs into costs_; with grad, cuDNN's unscaled per-sample gradient into it.
  void run_cudnn(TensorRefs x, float* grad) {
    if (!use_cudnn_) return;
    TBD_CUDNN_CHECK(cudnnCTCLoss_v8(cu_.cudnn(), CUDNN_CTC_LOSS_ALGO_DETERMINISTIC, ctc_desc_,
                                    logits_desc_, x[0]->raw(), packed_.data<int32_t>(),
                                    cudnn_lab_len_.data<int32_t>(), cudnn_in_len_.data<int32_t>(),
                                    costs_.raw(), logits_desc_, grad, ws_bytes_, cu_.workspace()));
  }

  void blank_only(TensorRefs x, const float* dy, float* dx) {
    ctc_blank_only_kernel<<<static_cast<unsigned>(N_), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), kind_.data<int32_t>(), x[2]->data<int32_t>(), N_, C_, blank_only_cost(), dy,
        dx);
    TBD_CUDA_CHECK_LAST();
  }

  CudaBackend& cu_;
  int64_t T_ = 0, N_ = 0, C_ = 0, S_ = 0;
  bool use_cudnn_ = true;
  std::size_t ws_bytes_ = 0;
  CudnnTensorDesc logits_desc_;
  CudnnCtcLossDesc ctc_desc_;
  Tensor packed_, cudnn_lab_len_, cudnn_in_len_, offset_, kind_, costs_, blank_only_cost_;
};

TBD_REGISTER_LAYER(CtcLossConfig, DeviceKind::kCuda, CtcLossCudnn);

}  // namespace
}  // namespace tbd::cuda
