// models/model.h: a trainable model = graph + optimizer + synthetic data.
//
// train_step() is one full training step: zero the gradients, forward (loss included),
// backward in reverse order, optimizer update. Synthetic inputs are generated once at build,
// on the device; with `h2d_per_step` they are instead copied from host memory every step, for
// people who want the input path in the number. Models register a builder in the model
// registry (models/registry.h) so the benchmark binary finds them by name.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "layers/optimizer.h"
#include "models/graph.h"

namespace tbd {

class Model {
 public:
  Model(Backend& be, std::string name, uint64_t seed = 0)
      : be_(be), name_(std::move(name)), graph_(be, seed), seed_(seed) {}
  virtual ~Model() = default;

  const std::string& name() const { return name_; }
  Graph& graph() { return graph_; }
  Backend& backend() { return be_; }
  Optimizer& optimizer() { return *optimizer_; }
  void set_optimizer(std::unique_ptr<Optimizer> opt) { optimizer_ = std::move(opt); }

  // Declares a graph input that holds synthetic data: uniform floats in [lo, hi) or, for
  // i32 inputs, integers in [lo, hi).
  TensorId data_input(const std::string& name, Shape shape, DType dtype, double lo, double hi);
  // The value range of a data input (layer benchmarks feed a layer what the model feeds it);
  // false for other tensors.
  bool data_range(TensorId id, double* lo, double* hi) const;

  // Finalizes the graph, creates the optimizer (via make_opt) and fills the data. Call once.
  void finalize(const std::function<std::unique_ptr<Optimizer>(std::vector<Param*>)>& make_opt);

  void set_h2d_per_step(bool on) { h2d_per_step_ = on; }
  void train_step();
  float loss() { return graph_.loss_value(); }

  // Samples (images, sentences) per step, and other item counts per step ("tokens").
  int64_t samples_per_step() const { return samples_per_step_; }
  void set_samples_per_step(int64_t n) { samples_per_step_ = n; }
  const std::map<std::string, double>& extra_items_per_step() const { return extra_items_; }
  void set_extra_items(const std::string& what, double per_step) { extra_items_[what] = per_step; }

  // Analytic FLOPs of one training step (layers + optimizer).
  double step_flops() const;
  // Analytic bytes of one training step, a lower bound (layers/layer.h): every layer's
  // fwd + bwd_data + bwd_weights (summed as the FLOPs are), zero_grad's writes of every
  // gradient, and the optimizer step. The --tbd_h2d_per_step input copy is not counted.
  double step_bytes() const;

 private:
  struct Data {
    TensorId id;
    double lo, hi;
    std::vector<char> host;  // staged host copy (h2d_per_step)
  };
  Backend& be_;
  std::string name_;
  Graph graph_;
  uint64_t seed_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<Data> data_;
  bool h2d_per_step_ = false;
  int64_t samples_per_step_ = 1;
  std::map<std::string, double> extra_items_;
};

}  // namespace tbd
