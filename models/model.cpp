// models/model.cpp: the training step and synthetic data.
#include "models/model.h"

#include <cstring>

#include "core/random.h"

namespace tbd {

TensorId Model::data_input(const std::string& name, Shape shape, DType dtype, double lo,
                           double hi) {
  TensorId id = graph_.input(name, std::move(shape), dtype);
  data_.push_back(Data{id, lo, hi, {}});
  return id;
}

bool Model::data_range(TensorId id, double* lo, double* hi) const {
  for (const Data& d : data_) {
    if (d.id != id) continue;
    *lo = d.lo;
    *hi = d.hi;
    return true;
  }
  return false;
}

void Model::finalize(
    const std::function<std::unique_ptr<Optimizer>(std::vector<Param*>)>& make_opt) {
  graph_.finalize();
  optimizer_ = make_opt(graph_.params());
  for (Data& d : data_) {
    const Tensor& t = graph_.tensor(d.id);
    Rng rng(seed_for(seed_, "data:" + graph_.tensor_name(d.id)));
    if (t.dtype() == DType::kI32) {
      fill_randint(be_, t, rng, static_cast<int64_t>(d.lo), static_cast<int64_t>(d.hi));
    } else {
      fill_uniform(be_, t, rng, d.lo, d.hi);
    }
    d.host.resize(t.bytes());
    be_.copy_to_host(d.host.data(), t);
  }
}

void Model::train_step() {
  if (h2d_per_step_) {
    for (Data& d : data_) be_.copy_from_host(graph_.tensor(d.id), d.host.data());
  }
  graph_.zero_grad();
  graph_.forward();
  graph_.backward();
  optimizer_->step();
}

double Model::step_flops() const {
  double f = graph_.flops().total();
  return f + (optimizer_ ? optimizer_->flops() : 0.0);
}

double Model::step_bytes() const {
  double b = graph_.bytes().total() + graph_.zero_grad_bytes();
  return b + (optimizer_ ? optimizer_->bytes() : 0.0);
}

}  // namespace tbd
