// layers/layer.cpp: shared parts of the Layer interface.
#include "layers/layer.h"

namespace tbd {

Param& Layer::add_param(const std::string& suffix, Shape shape, Init init, int64_t fan_in,
                        int64_t fan_out, bool decay) {
  Param p;
  p.name = name_ + "." + suffix;
  p.value = be_.empty(shape, MemCategory::kWeights);
  p.grad = be_.empty(shape, MemCategory::kWeightGrads);
  be_.fill(p.grad, 0.f);
  p.init = init;
  p.fan_in = fan_in;
  p.fan_out = fan_out;
  p.decay = decay;
  params_.push_back(std::move(p));
  return params_.back();
}

void Layer::check_arity(std::size_t got, std::size_t want, const char* what) const {
  TBD_LAYER_CHECK(got == want, kind(), name_, what, ": expected ", want, " tensors, got ", got);
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
