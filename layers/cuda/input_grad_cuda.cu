// layers/cuda/input_grad_cuda.cu: the input-gradient kinds (layers/input_grad.h) on CUDA.
//
// LinearDgrad, Conv2dDgrad, Pool2dDgrad and ActivationDgrad run on the forward kind's own CUDA
// implementation (cuBLAS, cuDNN), built inside for the forward kind's input: that layer's
// data-gradient call is this kind's forward, its forward is this kind's data gradient, and its
// weight-gradient call with v as the input is this kind's wgrad (d(W) += wgrad(v, dy)); the
// inner layer's weight is this layer's (tied) parameter, set before every call. Whatever math
// mode and algorithms the forward kind uses, its input gradient uses too. LayerNormDgrad is
// own kernels (a block per row, statistics in double; d(gamma) a column sum over rows, in
// order, so deterministic).
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/input_grad.h"
#include "layers/linear.h"

namespace tbd::cuda {
namespace {

// ---- the kinds that run on their forward kind's implementation ----

class ViaForwardKind : public Layer {
 public:
  using Layer::Layer;

 protected:
  // The inner layer's parameter 0 is this layer's parameter 0 (bound only at execution).
  void bind_inner() {
    if (params_.empty()) return;
    inner_->params()[0].value = params_[0].value;
    inner_->params()[0].grad = params_[0].grad;
  }
  // out = the inner layer's data gradient of g; `x` and `y` stand for the inner layer's saved
  // tensors where its data gradient reads them (ReLU's sign, pooling's shapes).
  void inner_dgrad(Tensor* out, const Tensor* g, const Tensor* x, const Tensor* y) {
    bind_inner();
    inner_->set_param_grads(false);
    Tensor* dx[] = {out};
    const Tensor* dy[] = {g};
    const Tensor* xs[] = {x};
    const Tensor* ys[] = {y};
    inner_->backward(dx, dy, xs, ys);
  }
  // out = the inner layer's forward of v.
  void inner_fprop(Tensor* out, const Tensor* v) {
    bind_inner();
    Tensor* y[] = {out};
    const Tensor* x[] = {v};
    inner_->forward(y, x);
  }
  // The inner layer's weight gradient with input v and output gradient dy (accumulates).
  void inner_wgrad(const Tensor* v, const Tensor* dy) {
    bind_inner();
    inner_->set_param_grads(true);
    Tensor* dx[] = {nullptr};
    const Tensor* dys[] = {dy};
    const Tensor* xs[] = {v};
    const Tensor* ys[] = {dy};
    inner_->backward(dx, dys, xs, ys);
  }

  // Declares the inner layer's transients as this layer's (Layer::transient_state).
  void adopt_inner_transients() {
    for (const DeclaredTensor& d : inner_->transient_state()) transient(*d.tensor, d.desc);
  }

  std::unique_ptr<Layer> inner_;
};

// Under bf16 the inner Linear and Conv2d take bf16 (their bf16 paths, weights cast per call).
class LinearDgradCuda final : public ViaForwardKind {
 public:
  static constexpr bool kTakesBf16 = true;

  LinearDgradCuda(Backend& be, const std::string& name, const LinearDgradConfig& cfg,
                  const std::vector<TensorDesc>& in)
      : ViaForwardKind(be, name, in, contract_of(name, cfg, in)) {
    LinearConfig fc;
    fc.out_features = in[0].shape[-1];
    fc.bias = false;
    inner_ = construct_layer(be, name + ".fprop", fc, {outputs_[0]});
    adopt_inner_transients();
  }
  void fprop(MutTensorRefs y, TensorRefs x) override {
    inner_dgrad(y[0], x[0], y[0], x[0]);  // Linear's dgrad reads neither x nor y
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] != nullptr) inner_fprop(dx[0], dy[0]);
    if (param_grads()) inner_wgrad(dy[0], x[0]);
  }
};
TBD_REGISTER_LAYER(LinearDgradConfig, DeviceKind::kCuda, LinearDgradCuda);

class Conv2dDgradCuda final : public ViaForwardKind {
 public:
  static constexpr bool kTakesBf16 = true;

  Conv2dDgradCuda(Backend& be, const std::string& name, const Conv2dDgradConfig& cfg,
                  const std::vector<TensorDesc>& in)
      : ViaForwardKind(be, name, in, contract_of(name, cfg, in)) {
    Conv2dConfig conv = cfg.conv;
    conv.bias = false;
    inner_ = construct_layer(be, name + ".fprop", conv, {outputs_[0]});
    adopt_inner_transients();
  }
  std::string implementation() const override { return inner_->implementation(); }
  void fprop(MutTensorRefs y, TensorRefs x) override {
    inner_dgrad(y[0], x[0], y[0], x[0]);  // cuDNN's backward data reads neither x nor y
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] != nullptr) inner_fprop(dx[0], dy[0]);
    if (param_grads()) inner_wgrad(dy[0], x[0]);
  }
};
TBD_REGISTER_LAYER(Conv2dDgradConfig, DeviceKind::kCuda, Conv2dDgradCuda);

class Pool2dDgradCuda final : public ViaForwardKind {
 public:
  Pool2dDgradCuda(Backend& be, const std::string& name, const Pool2dDgradConfig& cfg,
                  const std::vector<TensorDesc>& in)
      : ViaForwardKind(be, name, in, contract_of(name, cfg, in)) {
    inner_ = construct_layer(be, name + ".fprop", cfg.pool, {outputs_[0]});
    // cuDNN's pooling backward takes x and y; average pooling reads neither, but they must
    // be valid buffers of their shapes: a zeroed x of its own (dy stands in for y).
    x_stand_in_ = be.empty(outputs_[0], MemCategory::kWorkspace);
    be.fill(x_stand_in_, 0.f);
  }
  void fprop(MutTensorRefs y, TensorRefs x) override {
    inner_dgrad(y[0], x[0], &x_stand_in_, x[0]);
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] != nullptr) inner_fprop(dx[0], dy[0]);
  }

 private:
  Tensor x_stand_in_;
};
TBD_REGISTER_LAYER(Pool2dDgradConfig, DeviceKind::kCuda, Pool2dDgradCuda);

// ReLU and leaky ReLU (alpha >= 0 as well as < 0: the sign of x decides): the activation's
// backward with x standing in for y too, since y > 0 exactly where x > 0 for both.
class ActivationDgradCuda final : public ViaForwardKind {
 public:
  ActivationDgradCuda(Backend& be, const std::string& name, const ActivationDgradConfig& cfg,
                      const std::vector<TensorDesc>& in)
      : ViaForwardKind(be, name, in, contract_of(name, cfg, in)) {
    inner_ = construct_layer(be, name + ".fprop", cfg.act, {in[1]});
  }
  void fprop(MutTensorRefs y, TensorRefs x) override { inner_dgrad(y[0], x[0], x[1], x[1]); }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] != nullptr) inner_dgrad(dx[0], dy[0], x[1], x[1]);
  }
};
TBD_REGISTER_LAYER(ActivationDgradConfig, DeviceKind::kCuda, ActivationDgradCuda);

// ---- LayerNormDgrad ----

// Row m's mean and r = 1/sqrt(var + eps), in double, on every thread of the block.
__device__ void ln_row_stats(const float* __restrict__ x, int64_t D, double eps, double* shared,
                             double* mu, double* r) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) s += x[i];
  const double mean = block_sum(s, shared) / static_cast<double>(D);
  double ss = 0;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) ss += (x[i] - mean) * (x[i] - mean);
  *mu = mean;
  *r = rsqrt(block_sum(ss, shared) / static_cast<double>(D) + eps);
}

// dx = r (g - mean(g) - xh mean(g xh)), g = dy * gamma; a block per row.
__global__ void ln_dgrad_fwd_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                    const float* __restrict__ gamma, float* __restrict__ out,
                                    int64_t D, int64_t G, double eps) {
  __shared__ double shared[32];
  const int64_t off = blockIdx.x * D;
  double mu, r;
  ln_row_stats(x + off, D, eps, shared, &mu, &r);
  double sg = 0, sgx = 0;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const double g = static_cast<double>(dy[off + i]) * gamma[i / G];
    sg += g;
    sgx += g * (x[off + i] - mu) * r;
  }
  const double mg = block_sum(sg, shared) / static_cast<double>(D);
  const double mgx = block_sum(sgx, shared) / static_cast<double>(D);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const double xh = (x[off + i] - mu) * r;
    out[off + i] =
        static_cast<float>(r * (static_cast<double>(dy[off + i]) * gamma[i / G] - mg - xh * mgx));
  }
}

// d(dy) and d(x) of layers/input_grad.h (either may be null); saves mu, r, mean(v), mean(v xh)
// per row for the d(gamma) pass.
__global__ void ln_dgrad_bwd_kernel(const float* __restrict__ v, const float* __restrict__ dy,
                                    const float* __restrict__ x, const float* __restrict__ gamma,
                                    float* __restrict__ ddy, float* __restrict__ dxx,
                                    double* __restrict__ rows, int64_t D, int64_t G, double eps) {
  __shared__ double shared[32];
  const int64_t off = blockIdx.x * D;
  double mu, r;
  ln_row_stats(x + off, D, eps, shared, &mu, &r);
  double s[5] = {0, 0, 0, 0, 0};  // g, g xh, v, v xh, v g
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const double xh = (x[off + i] - mu) * r, g = static_cast<double>(dy[off + i]) * gamma[i / G];
    const double vi = v[off + i];
    s[0] += g, s[1] += g * xh, s[2] += vi, s[3] += vi * xh, s[4] += vi * g;
  }
  for (double& e : s) e = block_sum(e, shared) / static_cast<double>(D);
  const double mg = s[0], mgx = s[1], mv = s[2], mvx = s[3], mvg = s[4];
  if (threadIdx.x == 0) {
    rows[4 * blockIdx.x] = mu, rows[4 * blockIdx.x + 1] = r;
    rows[4 * blockIdx.x + 2] = mv, rows[4 * blockIdx.x + 3] = mvx;
  }
  const double c_xh = mgx * mvx - mvg + mg * mv;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const double xh = (x[off + i] - mu) * r, g = static_cast<double>(dy[off + i]) * gamma[i / G];
    const double pv = v[off + i] - mv - xh * mvx;
    if (ddy) ddy[off + i] = static_cast<float>(r * pv * gamma[i / G]);
    if (dxx)
      dxx[off + i] = static_cast<float>(r * r * (xh * c_xh - (g - mg - xh * mgx) * mvx - pv * mgx));
  }
}

// d(gamma)[p] += sum over rows, and over the p-th run of G values, of r P(v) dy, rows in
// order; a thread per gamma entry.
__global__ void ln_dgrad_gamma_kernel(const float* __restrict__ v, const float* __restrict__ dy,
                                      const float* __restrict__ x, const double* __restrict__ rows,
                                      float* __restrict__ dgamma, int64_t M, int64_t D, int64_t P,
                                      int64_t G) {
  TBD_GRID_STRIDE(p, P) {
    double s = 0;
    for (int64_t m = 0; m < M; ++m) {
      const double mu = rows[4 * m], r = rows[4 * m + 1];
      for (int64_t i = m * D + p * G; i < m * D + (p + 1) * G; ++i) {
        const double xh = (x[i] - mu) * r;
        s += r * (v[i] - rows[4 * m + 2] - xh * rows[4 * m + 3]) * dy[i];
      }
    }
    dgamma[p] += static_cast<float>(s);
  }
}

class LayerNormDgradCuda final : public Layer {
 public:
  LayerNormDgradCuda(Backend& be, const std::string& name, const LayerNormDgradConfig& cfg,
                     const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    lr_ = layer_norm_rows(cfg.ln, in[1].shape);
    D_ = lr_.D;
    M_ = lr_.M;
    rows_ = be.empty(Shape{2 * 4 * M_}, MemCategory::kWorkspace);  // 4 doubles per row
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    ln_dgrad_fwd_kernel<<<static_cast<unsigned>(M_), kBlock, 0, cu_.stream()>>>(
        x[0]->f32(), x[1]->f32(), params_[0].value.f32(), y[0]->f32(), D_, lr_.G, cfg_.ln.eps);
    TBD_CUDA_CHECK_LAST();
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    auto* rows = static_cast<double*>(rows_.raw());
    ln_dgrad_bwd_kernel<<<static_cast<unsigned>(M_), kBlock, 0, cu_.stream()>>>(
        dy[0]->f32(), x[0]->f32(), x[1]->f32(), params_[0].value.f32(),
        dx[0] ? dx[0]->f32() : nullptr, dx[1] ? dx[1]->f32() : nullptr, rows, D_, lr_.G,
        cfg_.ln.eps);
    TBD_CUDA_CHECK_LAST();
    if (!param_grads()) return;
    ln_dgrad_gamma_kernel<<<grid_for(lr_.P), kBlock, 0, cu_.stream()>>>(
        dy[0]->f32(), x[0]->f32(), x[1]->f32(), rows, params_[0].grad.f32(), M_, D_, lr_.P, lr_.G);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  LayerNormDgradConfig cfg_;
  CudaBackend& cu_;
  LayerNormRows lr_;
  int64_t M_ = 0, D_ = 0;
  Tensor rows_;
};
TBD_REGISTER_LAYER(LayerNormDgradConfig, DeviceKind::kCuda, LayerNormDgradCuda);

}  // namespace
}  // namespace tbd::cuda
