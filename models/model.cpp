// models/model.cpp: the training step and synthetic data.
#include "models/model.h"

#include <cmath>
#include <cstring>

#include "core/random.h"

namespace tbd {

void scale_residual_init(Param& w, int64_t layers) {
  w.init_scale = 1.0 / std::sqrt(2.0 * static_cast<double>(layers));
}

void finish_image_classifier(Model& m, int64_t batch, double lr, bool build_only) {
  m.set_samples_per_step(batch);
  if (build_only) return;
  SgdConfig sgd;
  sgd.lr = lr;
  sgd.momentum = 0.9;
  sgd.weight_decay = 1e-4;
  Backend& be = m.backend();
  m.finalize([&](std::vector<Param*> ps) { return make_optimizer(be, sgd, std::move(ps)); });
}

TensorId Model::data_input(const std::string& name, Shape shape, DType dtype, double lo,
                           double hi) {
  return data_input(graph_, name, std::move(shape), dtype, lo, hi);
}

TensorId Model::data_input(Graph& g, const std::string& name, Shape shape, DType dtype, double lo,
                           double hi) {
  TensorId id = g.input(name, std::move(shape), dtype);
  data_.push_back(Data{&g, id, lo, hi, {}, {}});
  return id;
}

TensorId Model::data_input(const std::string& name, Shape shape, DType dtype, double lo, double hi,
                           HostFill fill) {
  TensorId id = data_input(graph_, name, std::move(shape), dtype, lo, hi);
  data_.back().fill = std::move(fill);
  return id;
}

std::vector<TensorId> Model::data_input_ids() const {
  std::vector<TensorId> ids;
  for (const Data& d : data_) {
    if (d.graph == &graph_) ids.push_back(d.id);
  }
  return ids;
}

bool Model::data_range(TensorId id, double* lo, double* hi) const {
  for (const Data& d : data_) {
    if (d.id != id || d.graph != &graph_) continue;
    *lo = d.lo;
    *hi = d.hi;
    return true;
  }
  if (auto it = samples_.find(id); it != samples_.end()) {
    *lo = it->second.lo;
    *hi = it->second.hi;
    return true;
  }
  return false;
}

void Model::set_sample_values(TensorId id, double lo, double hi, HostFill fill) {
  samples_[id] = Sample{lo, hi, std::move(fill)};
}

const Model::HostFill* Model::value_fill(TensorId id) const {
  auto it = samples_.find(id);
  return it != samples_.end() && it->second.fill ? &it->second.fill : nullptr;
}

void Model::finalize(
    const std::function<std::unique_ptr<Optimizer>(std::vector<Param*>)>& make_opt) {
  graph_.finalize();
  optimizers_.push_back(make_opt(graph_.params()));
  fill_data();
}

void Model::fill_data() {
  for (Data& d : data_) {
    if (d.filled || !d.graph->finalized()) continue;
    const Tensor& t = d.graph->tensor(d.id);
    d.host.resize(t.bytes());
    if (d.fill) {
      d.fill(d.host.data(), t.numel());
      be_.copy_from_host(t, d.host.data());
      d.filled = true;
      continue;
    }
    std::string stream = "data:" + d.graph->tensor_name(d.id);
    if (data_shard_ > 0) stream += "#shard" + std::to_string(data_shard_);
    Rng rng(seed_for(seed_, stream));
    if (t.dtype() == DType::kI32 || t.dtype() == DType::kU8) {
      fill_randint(be_, t, rng, static_cast<int64_t>(d.lo), static_cast<int64_t>(d.hi));
    } else {
      fill_uniform(be_, t, rng, d.lo, d.hi);
    }
    be_.copy_to_host(d.host.data(), t);
    d.filled = true;
  }
}

void Model::set_data_shard(int shard) {
  TBD_CHECK(shard >= 0, "Model::set_data_shard: shard ", shard, " < 0");
  if (shard == data_shard_) return;
  data_shard_ = shard;
  for (Data& d : data_) d.filled = d.filled && d.fill;  // model-written fills stay
  fill_data();
}

void Model::copy_inputs_from_host() {
  if (!h2d_per_step_) return;
  for (Data& d : data_) be_.copy_from_host(d.graph->tensor(d.id), d.host.data());
}

void Model::train_step() { run_step(); }

void Model::run_step(StepObserver* observer) {
  copy_inputs_from_host();
  for (const StepPart& p : plan_) {
    for (int k = 0; k < p.times; ++k) run_pass(p, k, observer);
  }
}

void Model::set_step_plan(std::vector<StepPart> plan) {
  TBD_CHECK(!plan.empty(), name_, ": an empty step plan");
  for (const StepPart& p : plan) {
    TBD_CHECK(p.graph < num_graphs(), name_, ": step part '", p.label, "' names graph ", p.graph,
              " of ", num_graphs());
    TBD_CHECK(p.optimizer == kForwardOnly ||
                  (p.optimizer >= 0 && static_cast<std::size_t>(p.optimizer) < optimizers_.size()),
              name_, ": step part '", p.label, "' names optimizer ", p.optimizer, " of ",
              optimizers_.size());
    TBD_CHECK(p.times >= 1, name_, ": step part '", p.label, "' runs ", p.times, " times");
  }
  plan_ = std::move(plan);
}

void Model::run_pass(const StepPart& p, int k, StepObserver* observer) {
  auto phase = [&](Phase ph, const std::function<void()>& run) {
    if (observer)
      observer->around(ph, p, k, run);
    else
      run();
  };
  if (p.prepare) phase(Phase::kPrepare, [&] { p.prepare(k); });
  Graph& g = graph(p.graph);
  if (p.reuses_params(k)) g.reuse_param_copies();
  if (p.optimizer == kForwardOnly) {
    phase(Phase::kForward, [&] { g.forward(); });
    return;
  }
  phase(Phase::kZeroGrad, [&] { g.zero_grad(); });
  phase(Phase::kForward, [&] { g.forward(); });
  phase(Phase::kBackward, [&] { g.backward(); });
  phase(Phase::kOptimizer, [&] { optimizers_.at(static_cast<std::size_t>(p.optimizer))->step(); });
}

// Per pass: the phases that run (Graph::executed_flops): no data gradient of a layer fed by
// data (the first convolution's), no weight gradient of a frozen one; a forward-only part's
// forward.
Flops Model::pass_flops(const StepPart& p, std::size_t i) const {
  const Graph& g = graph(p.graph);
  if (p.optimizer == kForwardOnly) return Flops{g.nodes()[i].layer->flops().fprop, 0, 0};
  return g.executed_flops(i);
}

Bytes Model::pass_bytes(const StepPart& p, std::size_t i) const {
  const Graph& g = graph(p.graph);
  if (p.optimizer == kForwardOnly) return Bytes{g.nodes()[i].layer->bytes().fprop, 0, 0};
  return g.executed_bytes(i);
}

double Model::step_flops() const {
  double f = 0;
  for (const StepPart& p : plan_) {
    double pass = 0;
    for (std::size_t i = 0; i < graph(p.graph).nodes().size(); ++i)
      pass += pass_flops(p, i).total();
    if (p.optimizer != kForwardOnly && !optimizers_.empty())
      pass += optimizers_.at(p.optimizer)->flops();
    f += p.times * pass;
  }
  return f;
}

double Model::step_bytes() const {
  double b = 0;
  for (const StepPart& p : plan_) {
    double pass = p.prepare_bytes;
    for (std::size_t i = 0; i < graph(p.graph).nodes().size(); ++i)
      pass += pass_bytes(p, i).total();
    if (p.optimizer != kForwardOnly) {
      pass += graph(p.graph).zero_grad_bytes();
      if (!optimizers_.empty()) pass += optimizers_.at(p.optimizer)->bytes();
    }
    b += p.times * pass;
  }
  return b;
}

}  // namespace tbd
