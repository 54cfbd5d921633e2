// models/model.h: a trainable model = graph(s) + optimizer(s) + synthetic data.
//
// A model describes its training step once, as a plan of parts (StepPart, below), which one
// engine runs, times and counts. The default plan is one full step of the main graph: zero the
// gradients, forward (loss included), backward in reverse order, optimizer update (llm.c's
// four calls). A model that trains otherwise sets its own plan: a GAN keeps a critic
// graph and a generator graph (the generator's graph runs the critic's layers with their
// weights tied to the critic's and their parameter gradients off, Graph::set_param_grads) with
// an optimizer each, and runs n_critic critic steps per generator step. Using one set of
// weights several times in a step (a critic applied to real, fake and interpolated images) is
// several nodes whose parameters are tied: each node keeps its own saved state, their gradients
// add up. Synthetic inputs are generated once at build, on the device; with `h2d_per_step` they
// are instead copied from host memory every step, for people who want the input path in the
// number. Models register a builder in the model registry (models/registry.h) so the benchmark
// binary finds them by name.
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
  Graph& graph() { return graph_; }  // the main graph
  const Graph& graph() const { return graph_; }
  Backend& backend() { return be_; }
  Optimizer& optimizer(std::size_t i = 0) { return *optimizers_.at(i); }
  const Optimizer& optimizer(std::size_t i = 0) const { return *optimizers_.at(i); }
  std::size_t num_optimizers() const { return optimizers_.size(); }
  Optimizer& add_optimizer(std::unique_ptr<Optimizer> opt) {
    optimizers_.push_back(std::move(opt));
    return *optimizers_.back();
  }
  // Another graph of the model (built and finalized by the model; the main graph first when
  // one ties to the other's parameters).
  Graph& add_graph() {
    graphs_.push_back(std::make_unique<Graph>(be_, seed_ + graphs_.size() + 1));
    return *graphs_.back();
  }
  Graph& graph(std::size_t i) { return i == 0 ? graph_ : *graphs_.at(i - 1); }
  const Graph& graph(std::size_t i) const { return i == 0 ? graph_ : *graphs_.at(i - 1); }
  std::size_t num_graphs() const { return 1 + graphs_.size(); }

  // Declares an input of the main graph (or of `g`) that holds synthetic data: uniform floats
  // in [lo, hi) or, for i32 and u8 inputs, integers in [lo, hi).
  TensorId data_input(const std::string& name, Shape shape, DType dtype, double lo, double hi);
  TensorId data_input(Graph& g, const std::string& name, Shape shape, DType dtype, double lo,
                      double hi);
  // Synthetic values the model writes itself (per-sample lengths, labels padded past them):
  // called once at fill with the input's host buffer (numel elements of its dtype), then
  // copied to the device. [lo, hi) still states the values' range, for the layer benchmarks.
  using HostFill = std::function<void(void* host, int64_t numel)>;
  TensorId data_input(const std::string& name, Shape shape, DType dtype, double lo, double hi,
                      HostFill fill);
  // The main graph's data inputs, in declaration order.
  std::vector<TensorId> data_input_ids() const;
  // The value range of a data input (layer benchmarks feed a layer what the model feeds it);
  // false for other tensors.
  bool data_range(TensorId id, double* lo, double* hi) const;
  // For a tensor of the main graph whose values a layer benchmark cannot draw uniformly (a
  // detector's RoIs: batch index and ordered corners; sampled class labels; its ground-truth
  // boxes): the range, and optionally a host fill, that its consumers' layer benchmarks are
  // fed. The fill gets the element count of the benchmark's tensor, whose batch may differ from
  // the model's, so it must follow it (a data input's own HostFill need not, and is not used).
  void set_sample_values(TensorId id, double lo, double hi, HostFill fill = {});
  // The host fill set_sample_values gave tensor `id`, or nullptr (uniform values in its range).
  const HostFill* value_fill(TensorId id) const;

  // Finalizes the main graph, creates its optimizer (via make_opt) and fills the data of
  // every finalized graph. Call once (a model with more graphs finalizes those itself, then
  // calls fill_data()).
  void finalize(const std::function<std::unique_ptr<Optimizer>(std::vector<Param*>)>& make_opt);
  // Generates the synthetic inputs of every finalized graph (once; finalize() calls it).
  void fill_data();
  // Which shard of a global batch the synthetic inputs are: shard k is what rank k of a
  // data-parallel run trains on (shard 0 is the model's usual data, so one rank equals the
  // non-distributed run). Regenerates the inputs when they were filled already. Inputs with a
  // model-written HostFill (lengths, detector ground truth) are the same in every shard.
  void set_data_shard(int shard);
  int data_shard() const { return data_shard_; }

  void set_h2d_per_step(bool on) { h2d_per_step_ = on; }
  bool h2d_per_step() const { return h2d_per_step_; }
  // One training step: the step plan's parts in order (step_plan()); copies the inputs from the
  // host first with h2d_per_step. A model whose step the plan cannot run (A3C's concurrent
  // workers) overrides it and keeps a plan that describes the same work.
  virtual void train_step();
  // The loss of the last step (a model with its own step may say which).
  virtual float loss() { return graph_.loss_value(); }

  // Samples (images, sentences) per step, and other item counts per step ("tokens").
  int64_t samples_per_step() const { return samples_per_step_; }
  void set_samples_per_step(int64_t n) { samples_per_step_ = n; }
  const std::map<std::string, double>& extra_items_per_step() const { return extra_items_; }
  void set_extra_items(const std::string& what, double per_step) { extra_items_[what] = per_step; }
  // Model FLOPs per step by the convention the model states (GPT-2: llm.c's 6N + 6LCT per
  // token): the numerator of `mfu`, beside the executed `flop`. 0: the model states none.
  double model_flops_per_step() const { return model_flops_; }
  void set_model_flops_per_step(double f) { model_flops_ = f; }

  // One training step as a plan of parts, the one description of the step that the step
  // engine runs (train_step()), the per-layer breakdown times (models/breakdown.h) and
  // step_flops()/step_bytes() count. A part is `times` passes over graph `graph` per step:
  // before each, prepare(k) (k = 0 .. times-1; optional) loads the pass's inputs; then zero the
  // gradients, forward (loss included), backward and step optimizer `optimizer`, or, for a
  // forward-only part (optimizer kForwardOnly: an A3C rollout), the forward alone. `label`
  // prefixes the part's breakdown rows ("critic_step" in "critic_step:res1.conv1"). The default
  // plan is one unlabelled pass of the main graph with optimizer 0.
  static constexpr int kForwardOnly = -1;
  struct StepPart {
    std::size_t graph = 0;
    int optimizer = 0;
    int times = 1;
    std::string label;
    std::function<void(int)> prepare;
    double prepare_bytes = 0;  // bytes one prepare moves (read and written)
    // Runs k with k % same_params_group != 0 read the parameter values of run k - 1 and reuse
    // its compute copies (Graph::reuse_param_copies); 0: every run makes its own.
    int same_params_group = 0;
    bool reuses_params(int k) const { return same_params_group > 0 && k % same_params_group != 0; }
  };
  // A part with no prepare: `times` passes of graph `graph` with optimizer `optimizer`.
  static StepPart passes(std::size_t graph, int optimizer, int times, std::string label) {
    StepPart p;
    p.graph = graph;
    p.optimizer = optimizer;
    p.times = times;
    p.label = std::move(label);
    return p;
  }
  const std::vector<StepPart>& step_plan() const { return plan_; }
  // Replaces the default plan (before the first step).
  void set_step_plan(std::vector<StepPart> plan);

  // The phases of a pass, in the order the engine runs them. The engine passes the first five
  // to an observer; the breakdown's node-by-node walk (models/breakdown.cpp) times the backward
  // of a split layer (Layer::split_backward) as its two halves, kDgrad and kWgrad.
  enum class Phase { kPrepare, kZeroGrad, kForward, kBackward, kOptimizer, kDgrad, kWgrad };
  // Who runs beside the engine: data parallelism broadcasts buffers before a forward, waits
  // for the gradients' all-reduce before the optimizer and times each phase. around() is
  // called for every phase of every pass and must call run() exactly once.
  class StepObserver {
   public:
    virtual ~StepObserver() = default;
    virtual void around(Phase phase, const StepPart& part, int k,
                        const std::function<void()>& run) = 0;
  };
  // One step as the plan says (what train_step() runs by default), each phase through
  // `observer` where one is given; copies the inputs from the host first with h2d_per_step.
  void run_step(StepObserver* observer = nullptr);
  // One pass of part p (pass k): prepare, then the graph's phases as above.
  void run_pass(const StepPart& p, int k, StepObserver* observer = nullptr);

  // The work node i of part p's graph does in one pass: its forward alone in a forward-only
  // part, else the phases that run (Graph::executed_flops / executed_bytes). The breakdown's
  // rows and step_flops() / step_bytes() count with it.
  Flops pass_flops(const StepPart& p, std::size_t i) const;
  Bytes pass_bytes(const StepPart& p, std::size_t i) const;

  // Analytic FLOPs of one training step, from the plan: per pass, the phases that run
  // (Graph::executed_flops: a layer's dgrad only where an input takes a gradient, its wgrad
  // only where its parameters do; a forward-only part's fprop) and the optimizer step.
  double step_flops() const;
  // Analytic bytes of one training step, a lower bound (layers/layer.h), counted as the FLOPs
  // are, plus zero_grad's writes of every gradient and each prepare's bytes. The
  // --tbd_h2d_per_step input copy is not counted.
  double step_bytes() const;

  // The --tbd_h2d_per_step copy of every data input (train_step and the steps that replace
  // it call it first).
  void copy_inputs_from_host();

 private:
  struct Data {
    Graph* graph;
    TensorId id;
    double lo, hi;
    HostFill fill;           // empty: uniform in [lo, hi)
    std::vector<char> host;  // staged host copy (h2d_per_step)
    bool filled = false;
  };
  std::vector<StepPart> plan_{StepPart{}};
  Backend& be_;
  std::string name_;
  Graph graph_;
  uint64_t seed_;
  std::vector<std::unique_ptr<Optimizer>> optimizers_;
  std::vector<std::unique_ptr<Graph>> graphs_;  // graphs beyond the main one
  std::vector<Data> data_;
  struct Sample {
    double lo, hi;
    HostFill fill;
  };
  std::map<TensorId, Sample> samples_;  // set_sample_values, main graph
  bool h2d_per_step_ = false;
  int data_shard_ = 0;
  int64_t samples_per_step_ = 1;
  std::map<std::string, double> extra_items_;
  double model_flops_ = 0;
};

// The image classifiers' ending (ResNet-50, Inception-v3): samples per step = batch; unless
// build_only, finalize with the ImageNet recipe, SGD momentum 0.9, weight decay 1e-4.
void finish_image_classifier(Model& m, int64_t batch, double lr, bool build_only);

// The decoders' initialisation of a residual projection (GPT-2, Radford et al. 2019, as llm.c
// and torchtitan's Llama apply it): the weight's N(0, 0.02) scaled by 1/sqrt(2L), L the number
// of blocks, so that the residual stream's variance does not grow with depth.
void scale_residual_init(Param& w, int64_t layers);

}  // namespace tbd
