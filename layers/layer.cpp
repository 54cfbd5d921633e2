// layers/layer.cpp: shared parts of the Layer interface.
#include "layers/layer.h"

#include <cmath>

#include "core/random.h"

namespace tbd {

Layer::Layer(Backend& be, std::string name, std::vector<TensorDesc> inputs, const Contract& c)
    : be_(be), name_(std::move(name)), inputs_(std::move(inputs)), outputs_(c.outputs) {
  params_.reserve(c.params.size());
  for (const ParamSpec& s : c.params) {
    Param p;
    p.name = name_ + "." + s.suffix;
    p.value = be_.empty(s.shape, MemCategory::kWeights);
    p.grad = be_.empty(s.shape, MemCategory::kWeightGrads);
    be_.fill(p.grad, 0.f);
    p.init = s.init;
    p.fan_in = s.fan_in;
    p.fan_out = s.fan_out;
    p.decay = s.decay;
    params_.push_back(std::move(p));
  }
  set_work(c.flops, c.bytes);
}

void init_param(Backend& be, Param& p, uint64_t seed) {
  Rng rng(seed_for(seed, p.name));
  switch (p.init) {
    case Init::kZeros: be.fill(p.value, 0.f); break;
    case Init::kOnes: be.fill(p.value, 1.f); break;
    case Init::kHeNormal:
      fill_normal(be, p.value, rng, 0.0, std::sqrt(2.0 / static_cast<double>(p.fan_in)));
      break;
    case Init::kXavierUniform: {
      const double a = std::sqrt(6.0 / static_cast<double>(p.fan_in + p.fan_out));
      fill_uniform(be, p.value, rng, -a, a);
      break;
    }
    case Init::kNormal002: fill_normal(be, p.value, rng, 0.0, 0.02); break;
    case Init::kUniformFanIn: {
      const double a = 1.0 / std::sqrt(static_cast<double>(p.fan_in));
      fill_uniform(be, p.value, rng, -a, a);
      break;
    }
  }
}

void Layer::check_arity(std::size_t got, std::size_t want, const char* what) const {
  TBD_LAYER_CHECK(got == want, kind(), name_, what, ": expected ", want, " tensors, got ", got);
}

void check_input_count(const char* kind, const std::string& name,
                       const std::vector<TensorDesc>& in, std::size_t want, const char* what) {
  TBD_LAYER_CHECK(in.size() == want, kind, name, what, ": expected ", want, " tensors, got ",
                  in.size());
}

void check_f32(const char* kind, const std::string& name, const char* arg, const TensorDesc& d) {
  TBD_LAYER_CHECK(d.dtype == DType::kF32, kind, name, "input ", arg, " must be f32, got ",
                  d.to_string());
}

void throw_layer_error(const char* kind, const std::string& name, const std::string& msg) {
  throw Error(std::string(kind) + " '" + name + "': " + msg);
}

void check_rank(const char* kind, const std::string& name, const char* arg, const TensorDesc& d,
                int rank, const char* dims_doc) {
  if (d.shape.rank() != rank) {
    throw_layer_error(kind, name,
                      detail::concat("input ", arg, " must have rank ", rank, " ", dims_doc,
                                     ", got ", d.shape.to_string()));
  }
  check_positive(kind, name, arg, d.shape);
}

void check_positive(const char* kind, const std::string& name, const char* arg, const Shape& s) {
  for (int64_t v : s.dims()) {
    if (v <= 0) {
      throw_layer_error(kind, name,
                        detail::concat("input ", arg, " has a non-positive dim: ", s.to_string()));
    }
  }
}

}  // namespace tbd
