// layers/optimizer.h: optimizers over a list of parameters (SGD+momentum, Adam/AdamW, RMSprop).
//
// An optimizer is built once for its parameters: its state (momentum, moments) is allocated
// then, tagged optimizer_state. step() reads Param::grad and updates Param::value in place; it
// does not zero the gradients (Graph::zero_grad does, per the gradient policy in layer.h).
// FLOPs and bytes per step are analytic per element (documented on each config) and computed
// by the shared <kind>_flops / <kind>_bytes functions below, which every backend calls.
// Bytes follow the model of layers/layer.h (a lower bound; FP32, 4 bytes per element): one
// step reads every parameter, its gradient and its state once and writes the parameter and
// its state once.
#pragma once

#include <memory>
#include <vector>

#include "layers/layer.h"

namespace tbd {

// Conventions of all three (PyTorch's torch.optim): weight decay applies only to parameters
// with Param::decay (biases and norm scales have it off); FLOPs are counted per element of
// every parameter, the weight-decay term only for parameters that decay.
//
// Gradient clipping, an option of every optimizer (`clip` on each config), applied inside
// step() to the gradient the update reads; Param::grad itself is left as it is. Weight decay
// is added after clipping (as both references do).
//   * max_norm > 0: global-norm clipping over all of the optimizer's parameters' gradients
//     (PyTorch's clip_grad_norm_): g *= min(1, max_norm / (||g||_2 + 1e-6)), the norm over every
//     element of every gradient. It costs one extra pass that reads every gradient before the
//     update (a reduction in a fixed order, so a step is bit-identical from run to run):
//     3 FLOPs per element (square and add in the norm, the scaling in the update) and 4 bytes
//     per element (the extra read of g).
//   * value > 0: element-wise clipping of every gradient element to [-value, value] (MXNet's
//     clip_gradient): 2 FLOPs per element (max and min), no extra bytes.
//   * both: the norm scaling first, then the element-wise clip. 0 turns either off; a negative
//     value is an error naming the optimizer and the field.
struct GradClip {
  double value = 0;
  double max_norm = 0;
};
// Checks `clip` (both fields >= 0); throws naming the optimizer `kind` and the field.
void check_grad_clip(const char* kind, const GradClip& clip);
// The extra FLOPs and bytes of `clip` over `params`, as documented above (all backends; the
// *_flops and *_bytes functions below include them).
double grad_clip_flops(const GradClip& clip, const std::vector<Param*>& params);
double grad_clip_bytes(const GradClip& clip, const std::vector<Param*>& params);
// The global norm's small constant (PyTorch's clip_grad_norm_).
inline constexpr double kClipNormEps = 1e-6;
//
// v = momentum*v + (g + wd*w); w -= lr*v   (PyTorch convention; no buffer when momentum = 0:
// w -= lr*(g + wd*w)). 4 FLOPs/element with momentum and weight decay (2 each), 2 for the
// update: 6 in all. State: v (numel floats) when momentum != 0.
// Bytes: 4*5 per element with momentum (read w, g, v; write w, v), 4*3 without (read w, g;
// write w); weight decay reads nothing more. Clipping adds its own counts (GradClip).
struct SgdConfig {
  static constexpr const char* kKind = "SGD";
  double lr = 0.1;
  double momentum = 0.9;
  double weight_decay = 0.0;
  GradClip clip;
};

// Adam (weight_decay added to the gradient) or AdamW (decoupled: w -= lr*wd*w first).
// m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2; w -= lr * mhat / (sqrt(vhat) + eps), with
// mhat = m/(1-b1^t), vhat = v/(1-b2^t), t the step number from 1.
// Counted as 12 FLOPs/element (sqrt and divide as 1 each), +2 where weight decay applies
// (either form). State: m and v (2 x numel floats); kind() is "AdamW" when decoupled.
// Bytes: 4*7 per element (read w, g, m, v; write w, m, v). Clipping adds its own counts
// (GradClip).
struct AdamConfig {
  static constexpr const char* kKind = "Adam";
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = false;  // true: AdamW
  GradClip clip;
};

// sq = alpha*sq + (1-alpha)*g^2; buf = momentum*buf + g/(sqrt(sq)+eps); w -= lr*buf
// (buf only with momentum > 0; without it w -= lr*g/(sqrt(sq)+eps)); weight decay g += wd*w.
// Counted as 8 FLOPs/element (+2 with momentum, +2 where weight decay applies).
// State: sq, and buf with momentum (numel floats each).
// Bytes: 4*5 per element (read w, g, sq; write w, sq), 4*7 with momentum (and buf). Clipping
// adds its own counts (GradClip).
struct RmspropConfig {
  static constexpr const char* kKind = "RMSprop";
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double momentum = 0.0;
  double weight_decay = 0.0;
  GradClip clip;
};

// FLOPs and bytes of one step over `params`, as documented on each config, clipping included
// (all backends).
double sgd_flops(const SgdConfig& cfg, const std::vector<Param*>& params);
double sgd_bytes(const SgdConfig& cfg, const std::vector<Param*>& params);
double adam_flops(const AdamConfig& cfg, const std::vector<Param*>& params);
double adam_bytes(const AdamConfig& cfg, const std::vector<Param*>& params);
double rmsprop_flops(const RmspropConfig& cfg, const std::vector<Param*>& params);
double rmsprop_bytes(const RmspropConfig& cfg, const std::vector<Param*>& params);

// One optimizer-state buffer (category optimizer_state, zeroed) carved into a view per
// parameter, in the parameters' order: an optimizer's state arena, beside the parameters' own
// (see ParamArena in layers/layer.h), one after another without gaps; a view is flat (the
// stored elements of its parameter, in the order they are stored).
std::vector<Tensor> state_arena(Backend& be, const std::vector<Param*>& params);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual const char* kind() const = 0;
  virtual void step() = 0;
  // FLOPs and bytes moved of one step over all parameters.
  double flops() const { return flops_; }
  double bytes() const { return bytes_; }
  const std::vector<Param*>& params() const { return params_; }

 protected:
  explicit Optimizer(std::vector<Param*> params) : params_(std::move(params)) {}
  // FLOPs and bytes are set together and only here (see Layer::set_work).
  void set_work(double flops, double bytes) {
    flops_ = flops;
    bytes_ = bytes;
  }
  std::vector<Param*> params_;

 private:
  double flops_ = 0;
  double bytes_ = 0;
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
#define TBD_REGISTER_OPTIMIZER(Config, device, Impl)                                        \
  static const bool TBD_LAYER_CONCAT(tbd_registered_opt_, __LINE__) = [] {                  \
    ::tbd::optimizer_registry<Config>()[device] = [](::tbd::Backend& be, const Config& cfg, \
                                                     std::vector<::tbd::Param*> ps) {       \
      return std::unique_ptr<::tbd::Optimizer>(new Impl(be, cfg, std::move(ps)));           \
    };                                                                                      \
    return true;                                                                            \
  }()

}  // namespace tbd
