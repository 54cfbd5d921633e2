// layers/layer.cpp: shared parts of the Layer interface.
#include "layers/layer.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "core/random.h"

namespace tbd {

Layer::Layer(Backend& be, std::string name, std::vector<TensorDesc> inputs, const Contract& c)
    : be_(be),
      kind_(c.kind),
      name_(std::move(name)),
      problem_(c.problem),
      inputs_(std::move(inputs)),
      outputs_(c.outputs),
      output_grads_(c.output_grads),
      input_grads_(c.input_grads),
      saved_inputs_(c.saved_inputs),
      saved_outputs_(c.saved_outputs) {
  TBD_CHECK(kind_ != nullptr, "'", name_, "': a contract without its kind (use contract_of)");
  TBD_CHECK(!problem_.empty(), kind_, " '", name_, "': the contract describes no problem");
  TBD_CHECK(saved_inputs_.empty() || saved_inputs_.size() == inputs_.size(), "'", name_,
            "': the contract says what is saved of ", saved_inputs_.size(), " inputs, not ",
            inputs_.size());
  TBD_CHECK(saved_outputs_.empty() || saved_outputs_.size() == outputs_.size(), "'", name_,
            "': the contract says what is saved of ", saved_outputs_.size(), " outputs, not ",
            outputs_.size());
  params_.reserve(c.params.size());
  for (const ParamSpec& s : c.params) {
    Param p;
    p.name = name_ + "." + s.suffix;
    p.value = Tensor(TensorDesc{s.shape}, be_.kind(), nullptr);  // bound later (ParamArena)
    p.grad = p.value;
    p.init = s.init;
    p.fan_in = s.fan_in;
    p.fan_out = s.fan_out;
    p.decay = s.decay;
    params_.push_back(std::move(p));
  }
  set_work(c.flops, c.bytes);
}

namespace {
constexpr std::size_t kTransientAlign = 64;
std::size_t align_up(std::size_t n) {
  return (n + kTransientAlign - 1) / kTransientAlign * kTransientAlign;
}
}  // namespace

void Layer::transient(Tensor& t, const TensorDesc& desc) {
  TBD_CHECK(!transients_bound_, kind(), " '", name_, "': transient declared after binding");
  transients_.push_back({&t, desc});
}

void Layer::pack_param(std::size_t k, const TensorDesc& desc) {
  Param& p = params_.at(k);
  TBD_CHECK(!p.value.defined(), kind(), " '", name_, "': ", p.name, " packed after binding");
  TBD_CHECK(desc.shape == p.value.shape() && desc.dtype == p.value.dtype(), kind(), " '", name_,
            "': ", p.name, " ", p.value.desc().to_string(), " cannot be stored as ",
            desc.to_string());
  p.value = Tensor(desc, be_.kind(), nullptr);
  p.grad = p.value;
}

void Layer::transient(Tensor& t, std::size_t bytes) {
  transient(t, TensorDesc{Shape{static_cast<int64_t>((bytes + 3) / 4)}});
}

std::size_t Layer::transient_bytes() const {
  std::size_t n = 0;
  for (const DeclaredTensor& t : transients_) n = align_up(n) + t.desc.bytes();
  return n;
}

void Layer::bind_transients(const Tensor& workspace) {
  TBD_CHECK(!transients_bound_, kind(), " '", name_, "': transients bound twice");
  std::size_t off = 0;
  for (const DeclaredTensor& t : transients_) {
    off = align_up(off);
    if (t.desc.bytes() > 0) *t.tensor = workspace.slice(off, t.desc);
    off += t.desc.bytes();
  }
  transients_bound_ = true;
}

void Layer::saved(Tensor& t, const TensorDesc& desc) {
  TBD_CHECK(!saved_bound_, kind(), " '", name_, "': saved state declared after binding");
  saved_.push_back({&t, desc});
}

void Layer::bind_saved_state(std::size_t j, const Tensor& t) {
  TBD_CHECK(j < saved_.size() && t.bytes() >= saved_[j].desc.bytes(), kind(), " '", name_,
            "': saved state ", j, " bound to ", t.defined() ? t.desc().to_string() : "none");
  *saved_[j].tensor = t;
  saved_bound_ = true;
}

uint64_t new_forward_pass() {
  static std::atomic<uint64_t> passes{0};
  return ++passes;
}

const void* Layer::param_copy(std::size_t k, const std::string& form, std::size_t bytes,
                              const Tensor& scratch, const std::function<void(void* dst)>& make) {
  Param& p = params_.at(k);
  if (!pass_ || !p.copies) {
    TBD_CHECK(scratch.defined() && scratch.bytes() >= bytes, kind(), " '", name_,
              "': no scratch for the copy of '", p.name, "' (", form, ", ", bytes, " bytes)");
    make(scratch.raw());
    return scratch.raw();
  }
  auto& copies = p.copies->copies;
  auto c = std::find_if(copies.begin(), copies.end(),
                        [&](const ParamCopies::Copy& x) { return x.form == form; });
  if (c == copies.end()) {
    const auto words = static_cast<int64_t>((bytes + 3) / 4);
    copies.push_back({form, be_.empty(Shape{words}, MemCategory::kWeights)});
    c = copies.end() - 1;
  }
  TBD_CHECK(c->t.bytes() >= bytes, kind(), " '", name_, "': the copy of '", p.name, "' (", form,
            ") has ", c->t.bytes(), " bytes, ", bytes, " wanted");
  if (c->pass != *pass_) {
    make(c->t.raw());
    c->pass = *pass_;
  }
  return c->t.raw();
}

void bind_own_saved_state(Backend& be, Layer& layer) {
  for (std::size_t j = 0; j < layer.saved_state().size(); ++j) {
    const TensorDesc& d = layer.saved_state()[j].desc;
    if (d.bytes() > 0) layer.bind_saved_state(j, be.empty(d, MemCategory::kFeatureMaps));
  }
}

void bind_own_transients(Backend& be, Layer& layer) {
  const std::size_t bytes = layer.transient_bytes();
  layer.bind_transients(
      bytes == 0 ? Tensor()
                 : be.empty(Shape{static_cast<int64_t>((bytes + 3) / 4)}, MemCategory::kWorkspace));
}

std::string Layer::describe() const {
  const std::string alg = implementation();
  return alg.empty() ? problem_ : problem_ + " | " + alg;
}

namespace {
void check_arity(const Layer& l, std::size_t got, std::size_t want, const char* what) {
  TBD_LAYER_CHECK(got == want, l.kind(), l.name(), what, ": expected ", want, " tensors, got ",
                  got);
}
}  // namespace

void Layer::forward(MutTensorRefs y, TensorRefs x) {
  check_arity(*this, x.size(), inputs_.size(), "forward inputs");
  check_arity(*this, y.size(), outputs_.size(), "forward outputs");
  fprop(y, x);
}

void Layer::backward(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) {
  check_arity(*this, dx.size(), inputs_.size(), "backward input gradients");
  check_arity(*this, dy.size(), outputs_.size(), "backward output gradients");
  check_arity(*this, x.size(), inputs_.size(), "backward inputs");
  check_arity(*this, y.size(), outputs_.size(), "backward outputs");
  bprop(dx, dy, x, y);
}

void Layer::backward_data(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) {
  TBD_CHECK(split_backward(), kind(), " '", name_,
            "': its backward is one call (split_backward() is false)");
  check_arity(*this, dx.size(), inputs_.size(), "backward input gradients");
  check_arity(*this, dy.size(), outputs_.size(), "backward output gradients");
  check_arity(*this, x.size(), inputs_.size(), "backward inputs");
  check_arity(*this, y.size(), outputs_.size(), "backward outputs");
  dgrad(dx, dy, x, y);
}

void Layer::backward_weights(TensorRefs dy, TensorRefs x, TensorRefs y) {
  TBD_CHECK(split_backward(), kind(), " '", name_,
            "': its backward is one call (split_backward() is false)");
  check_arity(*this, dy.size(), outputs_.size(), "backward output gradients");
  check_arity(*this, x.size(), inputs_.size(), "backward inputs");
  check_arity(*this, y.size(), outputs_.size(), "backward outputs");
  wgrad(dy, x, y);
}

void Layer::dgrad(MutTensorRefs, TensorRefs, TensorRefs, TensorRefs) {
  TBD_CHECK(false, kind(), " '", name_, "': its backward is one call (split_backward() is false)");
}

void Layer::wgrad(TensorRefs, TensorRefs, TensorRefs) {
  TBD_CHECK(false, kind(), " '", name_, "': its backward is one call (split_backward() is false)");
}

void Layer::backward_in_two(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) {
  const bool any_dx = std::any_of(dx.begin(), dx.end(), [](const Tensor* t) { return t; });
  if (any_dx) dgrad(dx, dy, x, y);
  if (!params_.empty() && param_grads_) wgrad(dy, x, y);
}

void init_param(Backend& be, Param& p, uint64_t seed) {
  Rng rng(seed_for(seed, p.name));
  const double k = p.init_scale;
  switch (p.init) {
    case Init::kZeros:
      be.fill(p.value, 0.f);
      break;
    case Init::kOnes:
      be.fill(p.value, static_cast<float>(k));
      break;
    case Init::kHeNormal:
      fill_normal(be, p.value, rng, 0.0, k * std::sqrt(2.0 / static_cast<double>(p.fan_in)));
      break;
    case Init::kXavierUniform: {
      const double a = k * std::sqrt(6.0 / static_cast<double>(p.fan_in + p.fan_out));
      fill_uniform(be, p.value, rng, -a, a);
      break;
    }
    case Init::kNormal002:
      fill_normal(be, p.value, rng, 0.0, k * 0.02);
      break;
    case Init::kUniformFanIn: {
      const double a = k / std::sqrt(static_cast<double>(p.fan_in));
      fill_uniform(be, p.value, rng, -a, a);
      break;
    }
  }
}

ParamArena bind_params(Backend& be, const std::vector<Param*>& params, bool with_grads,
                       bool keep_order) {
  ParamArena a;
  std::vector<Param*> order;
  for (Param* p : params) {
    TBD_CHECK(!p->tied && !p->value.defined(), "bind_params: '", p->name, "' is ",
              p->tied ? "tied" : "already bound");
    if (keep_order || p->value.stored_numel() % 16 == 0) order.push_back(p);
  }
  for (Param* p : params) {
    if (!keep_order && p->value.stored_numel() % 16 != 0) order.push_back(p);
  }
  int64_t total = 0, values = 0;
  for (const Param* p : order) {
    total += p->value.stored_numel();
    if (!p->value_from) values += p->value.stored_numel();
  }
  if (total == 0) return a;
  if (values > 0) a.values = be.empty(Shape{values}, MemCategory::kWeights);
  if (with_grads) {
    a.grads = be.empty(Shape{total}, MemCategory::kWeightGrads);
    be.fill(a.grads, 0.f);
  }
  std::size_t off = 0, voff = 0;
  for (Param* p : order) {
    const TensorDesc d = p->value.desc();
    if (with_grads) p->grad = a.grads.slice(off, d);
    off += d.bytes();
    if (p->value_from) continue;
    p->value = a.values.slice(voff, d);
    voff += d.bytes();
  }
  return a;
}

void check_input_count(const char* kind, const std::string& name, const std::vector<TensorDesc>& in,
                       std::size_t want, const char* what) {
  TBD_LAYER_CHECK(in.size() == want, kind, name, what, ": expected ", want, " tensors, got ",
                  in.size());
}

void check_f32(const char* kind, const std::string& name, const char* arg, const TensorDesc& d) {
  TBD_LAYER_CHECK(d.dtype == DType::kF32, kind, name, "input ", arg, " must be f32, got ",
                  d.to_string());
}

void check_floating(const char* kind, const std::string& name, const char* arg,
                    const TensorDesc& d) {
  TBD_LAYER_CHECK(is_floating(d.dtype), kind, name, "input ", arg, " must be f32 or bf16, got ",
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
