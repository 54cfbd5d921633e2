// layers/optimizer.h: optimizers over a list of parameters (SGD+momentum, Adam/AdamW, RMSprop).
//
// An optimizer is built once for its parameters: its state (momentum, moments) is allocated
// then, tagged optimizer_state. step() reads Param::grad and updates Param::value in place; it
// does not zero the gradients (Graph::zero_grad does, per the gradient policy in layer.h).
// FLOPs per step are analytic per element (documented on each config).
#pragma once

#include <memory>
#include <vector>

#include "layers/layer.h"

namespace tbd {

// Conventions of all three (PyTorch's torch.optim): weight decay applies only to parameters
// with Param::decay (biases and norm scales have it off); FLOPs are counted per element of
// every parameter, the weight-decay term only for parameters that decay.
//
// v = momentum*v + (g + wd*w); w -= lr*v   (PyTorch convention; no buffer when momentum = 0:
// w -= lr*(g + wd*w)). 4 FLOPs/element with momentum and weight decay (2 each), 2 for the
// update: 6 in all. State: v (numel floats) when momentum != 0.
struct SgdConfig {
  static constexpr const char* kKind = "SGD";
  double lr = 0.1;
  double momentum = 0.9;
  double weight_decay = 0.0;
};

// Adam (weight_decay added to the gradient) or AdamW (decoupled: w -= lr*wd*w first).
// m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; w -= lr * mhat / (sqrt(vhat) + eps), with
// mhat = m/(1-b1^t), vhat = v/(1-b2^t), t the step number from 1.
// Counted as 12 FLOPs/element (sqrt and divide as 1 each), +2 where weight decay applies
// (either form). State: m and v (2 x numel floats); kind() is "AdamW" when decoupled.
struct AdamConfig {
  static constexpr const char* kKind = "Adam";
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = false;  // true: AdamW
};

// sq = alpha*sq + (1-alpha)*g^2; buf = momentum*buf + g/(sqrt(sq)+eps); w -= lr*buf
// (buf only with momentum > 0; without it w -= lr*g/(sqrt(sq)+eps)); weight decay g += wd*w.
// Counted as 8 FLOPs/element (+2 with momentum, +2 where weight decay applies).
// State: sq, and buf with momentum (numel floats each).
struct RmspropConfig {
  static constexpr const char* kKind = "RMSprop";
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double momentum = 0.0;
  double weight_decay = 0.0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual const char* kind() const = 0;
  virtual void step() = 0;
  // FLOPs of one step over all parameters.
  double flops() const { return flops_; }
  const std::vector<Param*>& params() const { return params_; }

 protected:
  explicit Optimizer(std::vector<Param*> params) : params_(std::move(params)) {}
  std::vector<Param*> params_;
  double flops_ = 0;
};

template <class Config>
using OptimizerFactory =
    std::function<std::unique_ptr<Optimizer>(Backend&, const Config&, std::vector<Param*>)>;

template <class Config>
std::map<DeviceKind, OptimizerFactory<Config>>& optimizer_registry() {
  static std::map<DeviceKind, OptimizerFactory<Config>> r;
  return r;
}

template <class Config>
std::unique_ptr<Optimizer> make_optimizer(Backend& be, const Config& cfg,
                                          std::vector<Param*> params) {
  auto& r = optimizer_registry<Config>();
  auto it = r.find(be.kind());
  TBD_CHECK(it != r.end(), Config::kKind, ": no implementation on backend ", to_string(be.kind()));
  return it->second(be, cfg, std::move(params));
}

// TBD_REGISTER_OPTIMIZER(SgdConfig, DeviceKind::kCpu, SgdCpu): Impl(Backend&, const Config&,
// std::vector<Param*>).
#define TBD_REGISTER_OPTIMIZER(Config, device, Impl)                                       \
  static const bool TBD_LAYER_CONCAT(tbd_registered_opt_, __LINE__) = [] {                 \
    ::tbd::optimizer_registry<Config>()[device] =                                          \
        [](::tbd::Backend& be, const Config& cfg, std::vector<::tbd::Param*> ps) {         \
          return std::unique_ptr<::tbd::Optimizer>(new Impl(be, cfg, std::move(ps)));      \
        };                                                                                  \
    return true;                                                                            \
  }()

}  // namespace tbd
