// layers/batchnorm2d.h: batch normalization over (N, H, W) per channel, training mode.
//
//   x: (N, C, H, W) any layout  gamma, beta: (C)  y: like x
// Training: batch statistics (biased variance for normalisation); running_mean/var updated
// with `momentum` (unbiased variance, PyTorch convention). Eval: running statistics.
// Running statistics are buffers, not parameters: category dynamic, not weights.
// With `relu`, y = max(0, bn(x)) in one pass (a ReLU fused into the normalisation, as
// Inception's BasicConv2d and ResNet's conv-bn-relu need): no separate ReLU layer reads and
// writes the feature map again, and backward masks dy where y is 0.
// Frozen (`frozen`): an affine with fixed statistics in every mode, as detection backbones
// fine-tuned at one image per step run it (MXNet's use_global_stats, torchvision's
// FrozenBatchNorm2d): y = gamma * (x - running_mean) / sqrt(running_var + eps) + beta, the
// running statistics never updated, no parameter gradients (gamma and beta stay stored
// parameters: they count in the model's size, not in its trained size); dx = dy * gamma * rstd.
//   FLOPs fprop 2E (one multiply-add per element), dgrad E, wgrad 0; relu adds E to each.
//   Bytes fprop 4*(2E + 4C) (read x, gamma, beta, running mean and var; write y), dgrad
//   4*(2E + 2C) (read dy, gamma and running var; write dx), wgrad 0;
//   relu adds 4E to dgrad (y is read to mask dy) and nothing to fprop.
// FLOPs: fprop 8*N*C*H*W (mean, var, normalise, scale+shift), dgrad 10*N*C*H*W,
//        wgrad 4*N*C*H*W (dgamma, dbeta reductions); relu adds E to fprop and to dgrad.
// Bytes (FP32, training mode; a lower bound, layers/layer.h), E = N*C*H*W:
//   fprop         = 4*(2E + 8C)  read x, gamma, beta, running mean and var; write y, the saved
//                              batch mean and variance, running mean and var
//   dgrad    = 4*(3E + 3C)  read dy, x, saved mean and variance, gamma; write dx
//   wgrad = 4*(2E + 6C)  read dy, x, saved mean and variance; read and write dgamma, dbeta
//   relu: + E to fprop and to dgrad (a one-byte mask per element written, then read)
// x is read once per phase; a streaming forward reads it twice (statistics, then normalise),
// so 2E bounds a real kernel's 3E from below. The libraries compute dx, dgamma and dbeta in one
// backward; its usual two passes (reductions, then dx) move the 5E that dgrad + wgrad
// count.
#pragma once

#include "layers/layer.h"

namespace tbd {

struct BatchNorm2dConfig {
  static constexpr const char* kKind = "BatchNorm2d";
  double eps = 1e-5;
  double momentum = 0.1;
  bool relu = false;    // y = max(0, bn(x)), fused
  bool frozen = false;  // running statistics always, no parameter gradients (see above)
};

// Checks x (rank 4 f32, positive dims) and cfg (eps > 0, momentum in [0, 1]); returns y's
// shape (x's). Throws naming the layer, the argument and the dims.
Shape batchnorm2d_output_shape(const std::string& name, const BatchNorm2dConfig& cfg,
                               const TensorDesc& x);
Flops batchnorm2d_flops(const Shape& x, bool relu = false, bool frozen = false);
Bytes batchnorm2d_bytes(const Shape& x, bool relu = false, bool frozen = false,
                        DType t = DType::kF32);

// A batch normalization as every implementation runs it, whatever its kind (BatchNorm2d,
// SequenceBatchNorm): x normalised per channel C over N x H x W, seen as the row-major
// (N, C, H, W) `nchw` (BatchNorm2d's x is its own, in any layout), with its config's eps and
// momentum. Each kind states it once (batchnorm_spec, checking the inputs as its contract
// does); no backend restates it.
struct BatchNormSpec {
  const char* kind = nullptr;
  double eps = 0, momentum = 0;
  Shape nchw;
  bool relu = false;    // a fused ReLU after the normalisation
  bool frozen = false;  // fixed statistics, no parameter gradients (BatchNorm2dConfig::frozen)
};
BatchNormSpec batchnorm_spec(const std::string& name, const BatchNorm2dConfig& cfg,
                             const std::vector<TensorDesc>& in);

// What the kinds share: the config check (eps > 0, momentum in [0, 1]; throws naming the
// layer) and the contract of x normalised as `nchw`: y like x, weight (C) ones and bias (C)
// zeros without decay, BatchNorm2d's FLOPs and bytes over nchw (with a fused ReLU's).
void check_batchnorm_config(const char* kind, const std::string& name, double eps, double momentum);
Contract batchnorm_contract(const TensorDesc& x, const Shape& nchw, bool relu = false,
                            bool frozen = false);

// Contract: one input x; y like x; weight (C) ones and bias (C) zeros, no decay.
template <>
Contract contract(const std::string& name, const BatchNorm2dConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const BatchNorm2dConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// Every backend's batch normalization (BatchNorm2d, SequenceBatchNorm) derives from this, so
// callers (tests, checkpoints, eval runs) reach the running statistics without knowing the
// backend or the kind.
class BatchNormLayer : public Layer {
 public:
  // (C) row-major, category dynamic; start at mean 0, variance 1 (PyTorch).
  const Tensor& running_mean() const { return running_mean_; }
  const Tensor& running_var() const { return running_var_; }
  bool frozen() const { return frozen_; }
  // A frozen layer stays in eval mode whatever the graph's mode.
  void set_training(bool training) override { Layer::set_training(training && !frozen_); }

 protected:
  // Allocates the running statistics, C from the kind's contract (the weight's size).
  BatchNormLayer(Backend& be, std::string name, std::vector<TensorDesc> inputs, const Contract& c);

  // Makes the layer frozen (spec.frozen): eval mode for good, parameter gradients off.
  void freeze() {
    frozen_ = true;
    training_ = false;
    param_grads_ = false;
  }

  Tensor running_mean_, running_var_;
  bool frozen_ = false;
};

}  // namespace tbd
