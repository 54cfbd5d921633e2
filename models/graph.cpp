// models/graph.cpp: building and running the static graph.
#include "models/graph.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>

#include "core/random.h"
#include "layers/tensor_ops.h"

namespace tbd {
namespace {

thread_local ParamOrder t_param_order = ParamOrder::kAligned;
std::atomic<bool> g_plan_memory{true};

// Reorder on any backend, through Backend::reorder.
class ReorderLayer final : public Layer {
 public:
  ReorderLayer(Backend& be, const std::string& name, const ReorderConfig& cfg,
               const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)) {}
  static constexpr bool kTakesBf16 = true;  // converts to and from it (Backend::reorder)
  // Takes its input as it comes (that is its job).
  static std::vector<Layout> input_layouts(const ReorderConfig&,
                                           const std::vector<TensorDesc>& in) {
    return {in.empty() ? Layout::kRowMajor : in[0].layout};
  }
  void fprop(MutTensorRefs y, TensorRefs x) override { be_.reorder(*y[0], *x[0]); }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0]) be_.reorder(*dx[0], *dy[0]);
  }
};

TBD_REGISTER_LAYER(ReorderConfig, DeviceKind::kCpu, ReorderLayer);
TBD_REGISTER_LAYER(ReorderConfig, DeviceKind::kCuda, ReorderLayer);

}  // namespace

template <>
Contract contract(const std::string& name, const ReorderConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(ReorderConfig::kKind, name, in, 1);
  TensorDesc out = in[0];
  out.layout = cfg.layout;
  if (cfg.dtype) {
    TBD_LAYER_CHECK(is_floating(in[0].dtype) && is_floating(*cfg.dtype), ReorderConfig::kKind, name,
                    "converts between f32 and bf16 only, not ", to_string(in[0].dtype), " to ",
                    to_string(*cfg.dtype));
    out.dtype = *cfg.dtype;
  }
  Contract c{{out}, {}, Flops{}, Bytes{}};
  c.bytes = copy_bytes(in, c.outputs);  // a copy (layers/tensor_ops.h)
  saves_nothing(c, in.size());          // backward reorders dy
  return c;
}

std::string describe_problem(const ReorderConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  const bool cast = cfg.dtype && *cfg.dtype != in[0].dtype;
  return detail::concat("x ", in[0].to_string(), " -> ", to_string(cfg.layout),
                        cast ? std::string(" ") + to_string(*cfg.dtype) : "");
}

TensorId Graph::input(const std::string& name, Shape shape, DType dtype) {
  TBD_CHECK(!finalized_, "Graph::input '", name, "' after finalize()");
  check_positive("Graph", name, "input", shape);
  TensorInfo t;
  t.name = name;
  t.desc = TensorDesc{std::move(shape), dtype, Layout::kRowMajor};
  tensors_.push_back(std::move(t));
  return static_cast<TensorId>(tensors_.size() - 1);
}

TensorId Graph::convert(TensorId id, Layout layout, DType dtype) {
  const TensorDesc& d = desc(id);
  if (d.layout == layout && d.dtype == dtype) return id;
  const auto key = std::make_tuple(id, layout, dtype);
  if (auto it = conversions_.find(key); it != conversions_.end()) return it->second;
  ReorderConfig cfg;
  cfg.layout = layout;
  std::string name = tensors_.at(id).name + ".to_";
  if (d.layout != layout) name += to_string(layout);
  if (d.dtype != dtype) {
    cfg.dtype = dtype;
    name += std::string(d.layout != layout ? "_" : "") + to_string(dtype);
  }
  Recipe recipe = [name, cfg](Backend& be, const std::vector<TensorDesc>& in) {
    return make_layer<ReorderConfig>(be, name, cfg, in);
  };
  const TensorId out =
      add_node(construct_layer<ReorderConfig>(be_, name, cfg, {d}), {id}, std::move(recipe))[0];
  conversions_[key] = out;
  return out;
}

std::vector<TensorId> Graph::add_node(std::unique_ptr<Layer> layer, std::vector<TensorId> inputs,
                                      Recipe recipe) {
  TBD_CHECK(!finalized_, "Graph: adding '", layer->name(), "' after finalize()");
  Node n;
  n.inputs = std::move(inputs);
  n.recipe = std::move(recipe);
  bool req = !layer->params().empty();
  for (std::size_t k = 0; k < n.inputs.size(); ++k) {
    req = req || (tensors_.at(n.inputs[k]).requires_grad && layer->input_grad(k));
  }
  const auto& outs = layer->output_descs();
  for (std::size_t i = 0; i < outs.size(); ++i) {
    TensorInfo t;
    t.name = outs.size() == 1 ? layer->name() : layer->name() + ":" + std::to_string(i);
    t.desc = outs[i];
    t.producer = static_cast<int>(nodes_.size());
    t.requires_grad = req && layer->output_grad(i);
    tensors_.push_back(std::move(t));
    n.outputs.push_back(static_cast<TensorId>(tensors_.size() - 1));
  }
  n.layer = std::move(layer);
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs;
}

void Graph::tie(Param& dst, Param& src) {
  TBD_CHECK(!finalized_, "Graph::tie '", dst.name, "' after finalize()");
  TBD_CHECK(dst.value.shape() == src.value.shape(), "Graph::tie: '", dst.name, "' ",
            dst.value.shape().to_string(), " and '", src.name, "' ", src.value.shape().to_string(),
            " differ in shape");
  TBD_CHECK(!src.tied, "Graph::tie: '", src.name, "' is itself tied");
  TBD_CHECK(!dst.tied, "Graph::tie: '", dst.name, "' is already tied");
  dst.tied = true;
  dst.tied_to = &src;  // bound in finalize(), once src has storage
}

void Graph::share_value(Param& dst, Param& src) {
  TBD_CHECK(!finalized_, "Graph::share_value '", dst.name, "' after finalize()");
  TBD_CHECK(dst.value.shape() == src.value.shape(), "Graph::share_value: '", dst.name, "' ",
            dst.value.shape().to_string(), " and '", src.name, "' ", src.value.shape().to_string(),
            " differ in shape");
  TBD_CHECK(!dst.tied && !dst.value_from, "Graph::share_value: '", dst.name,
            "' is already tied or shared");
  // The gradient is dst's own, applied to src's value element by element (A3C).
  TBD_CHECK(dst.value.desc().same_storage(src.value.desc()), "Graph::share_value: '", dst.name,
            "' is stored as ", dst.value.desc().to_string(), ", '", src.name, "' as ",
            src.value.desc().to_string(), ": their layers chose different layouts");
  dst.value_from = &src;  // bound in finalize(), once src has storage
}

int Graph::set_param_grads(const std::string& prefix, bool on) {
  int n = 0;
  for (auto& node : nodes_) {
    if (node.layer->params().empty() || node.layer->name().rfind(prefix, 0) != 0) continue;
    node.layer->set_param_grads(on);
    ++n;
  }
  TBD_CHECK(n > 0 || prefix.empty(), "Graph::set_param_grads: no layer with parameters is named '",
            prefix, "...'");
  return n;
}

void Graph::set_loss(TensorId id) {
  TBD_CHECK(desc(id).shape.numel() == 1, "Graph::set_loss: '", tensor_name(id),
            "' must be a scalar, got ", desc(id).shape.to_string());
  loss_ = id;
}

void set_memory_planning_default(bool on) { g_plan_memory = on; }
bool memory_planning_default() { return g_plan_memory; }

void Graph::set_memory_planning(bool on) {
  TBD_CHECK(!finalized_, "Graph::set_memory_planning after finalize()");
  plan_memory_ = on;
}

ParamOrderScope::ParamOrderScope(ParamOrder order) : saved_(t_param_order) {
  t_param_order = order;
}
ParamOrderScope::~ParamOrderScope() { t_param_order = saved_; }
ParamOrder ParamOrderScope::current() { return t_param_order; }

void Graph::set_param_order(ParamOrder order) {
  TBD_CHECK(!bound_, "Graph::set_param_order: the parameters are already bound");
  param_order_ = order;
}

int Graph::grad_ready_node(const Param* p) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Layer& l = *nodes_[i].layer;
    if (!l.param_grads()) continue;
    for (const Param& q : l.params()) {
      if (&q == p || (q.tied && q.tied_to == p)) return static_cast<int>(i);
    }
  }
  return -1;
}

std::vector<Param*> Graph::params_to_bind() {
  return param_order_ == ParamOrder::kAligned ? params() : params_by_grad_ready();
}

std::vector<Param*> Graph::params_by_grad_ready() {
  std::vector<Param*> ps = params();
  std::vector<std::pair<int, Param*>> keyed;
  for (Param* p : ps) keyed.emplace_back(grad_ready_node(p), p);
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t k = 0; k < ps.size(); ++k) ps[k] = keyed[k].second;
  return ps;
}

void Graph::bind_arena() {
  TBD_CHECK(!bound_ && !finalized_, "Graph::bind_arena: the parameters are already bound");
  arena_ = bind_params(be_, params_to_bind(), true, param_order_ == ParamOrder::kBackward);
  bound_ = true;
}

void Graph::finalize() { finalize_impl(false); }

void Graph::finalize_inference() { finalize_impl(true); }

void Graph::finalize_impl(bool inference) {
  TBD_CHECK(!finalized_, "Graph::finalize called twice");
  TBD_CHECK(inference || loss_ >= 0, "Graph::finalize: no loss set (call set_loss)");
  TBD_CHECK(!(inference && bound_),
            "Graph::finalize_inference: the parameters were bound with gradients (bind_arena)");
  inference_ = inference;
  if (!bound_) {
    arena_ = bind_params(be_, params_to_bind(), /*with_grads=*/!inference,
                         /*keep_order=*/param_order_ == ParamOrder::kBackward);
    bound_ = true;
  }
  // Ties and shared values point at parameters of this graph (bound just now) or of a graph
  // finalized before this one (a model's other graph: the critic a generator step runs).
  for (auto& n : nodes_) {
    for (Param& p : n.layer->params()) {
      if (p.tied) {
        TBD_CHECK(p.tied_to->value.defined(), "Graph::finalize: '", p.name, "' is tied to '",
                  p.tied_to->name, "', which has no storage yet (finalize its graph first)");
        p.value = p.tied_to->value;
        p.grad = p.tied_to->grad;
      } else if (p.value_from) {
        TBD_CHECK(p.value_from->value.defined(), "Graph::finalize: '", p.name,
                  "' shares the value of '", p.value_from->name,
                  "', which has no storage yet (finalize its graph first)");
        p.value = p.value_from->value;
      }
    }
  }
  // Compute copies (Layer::param_copy): one set per parameter, shared by those tied to it; a
  // shared value (value_from) gets copies of its own, made in this graph's passes.
  for (auto& n : nodes_) {
    for (Param& p : n.layer->params()) {
      if (!p.tied && !p.copies) p.copies = std::make_shared<ParamCopies>();
    }
  }
  for (auto& n : nodes_) {
    for (Param& p : n.layer->params()) {
      if (!p.tied) continue;
      if (!p.tied_to->copies) p.tied_to->copies = std::make_shared<ParamCopies>();
      p.copies = p.tied_to->copies;
    }
    n.layer->number_passes_with(pass_);
  }
  // Transient scratch: planned, one workspace for every layer (the graph runs one node at a
  // time), as large as the largest layer's need; unplanned, a buffer each.
  std::size_t workspace = 0;
  for (auto& n : nodes_) workspace = std::max(workspace, n.layer->transient_bytes());
  if (plan_memory_ && workspace > 0)
    workspace_ =
        be_.empty(Shape{static_cast<int64_t>((workspace + 3) / 4)}, MemCategory::kWorkspace);
  for (auto& n : nodes_) {
    if (plan_memory_)
      n.layer->bind_transients(workspace_);
    else
      bind_own_transients(be_, *n.layer);
  }
  plans_.assign(nodes_.size(), NodePlan{});
  for (std::size_t ni = 0; ni < nodes_.size(); ++ni)
    plans_[ni].slots.resize(nodes_[ni].inputs.size());
  if (!inference) plan_gradients();
  plan_values();
  // Argument lists, fixed once.
  for (std::size_t ni = 0; ni < nodes_.size(); ++ni) {
    Node& n = nodes_[ni];
    NodePlan& p = plans_[ni];
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      TensorInfo& t = tensors_[n.inputs[k]];
      p.x.push_back(&t.value);
      p.xb.push_back(n.layer->saves_input(k) ? &t.value : nullptr);
      GradSlot& s = p.slots[k];
      const bool wanted = p.run_backward && t.requires_grad && n.layer->input_grad(k);
      if (wanted && s.target == nullptr) s.target = &t.grad;
      p.dx.push_back(wanted ? s.target : nullptr);
      p.any_dx = p.any_dx || p.dx.back() != nullptr;
    }
    for (std::size_t i = 0; i < n.outputs.size(); ++i) {
      const TensorId o = n.outputs[i];
      p.y.push_back(&tensors_[o].value);
      p.yb.push_back(n.layer->saves_output(i) ? &tensors_[o].value : nullptr);
      p.yw.push_back(&tensors_[o].value);
      p.dy.push_back(tensors_[o].grad.defined() ? &tensors_[o].grad : nullptr);
    }
  }
  init_params();
  finalized_ = true;
}

// Values. Graph inputs are loaded once and keep buffers of their own. Planned, every layer output
// is a view into one arena, live from the forward that writes it to the last step that reads it:
// its consumers' forwards, and the backwards that save it (its producer's, for a saved output;
// a consumer's, for a saved input). Steps: forward of node i is i, its backward 2n - 1 - i.
// What no layer consumes (losses, logits), what keep() names and the loss stay to the end.
void Graph::plan_values() {
  const int n = static_cast<int>(nodes_.size());
  const int end = 2 * n;
  auto bwd = [&](int i) { return 2 * n - 1 - i; };
  std::vector<int> last(tensors_.size(), -1);
  std::vector<bool> consumed(tensors_.size(), false);
  for (int c = 0; c < n; ++c) {
    const Node& node = nodes_[c];
    const Layer& l = *node.layer;
    const bool runs_backward = plans_[c].run_backward;
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      const TensorId id = node.inputs[k];
      consumed[id] = true;
      last[id] = std::max(last[id], c);
      if (runs_backward && l.saves_input(k)) last[id] = std::max(last[id], bwd(c));
    }
    for (std::size_t i = 0; i < node.outputs.size(); ++i) {
      const TensorId id = node.outputs[i];
      last[id] = std::max(last[id], c);
      if (runs_backward && l.saves_output(i)) last[id] = std::max(last[id], bwd(c));
    }
  }
  struct Planned {
    Tensor* tensor;
    TensorDesc desc;
  };
  std::vector<Planned> planned;
  for (std::size_t id = 0; id < tensors_.size(); ++id) {
    TensorInfo& t = tensors_[id];
    if (t.producer < 0) {
      t.value = be_.empty(t.desc, MemCategory::kDynamic);
      be_.fill(t.value, 0.f);
      continue;
    }
    if (!plan_memory_) {
      t.value = be_.empty(t.desc, MemCategory::kFeatureMaps);
      continue;
    }
    const bool to_end = !consumed[id] || t.kept || static_cast<TensorId>(id) == loss_;
    planned.push_back({&t.value, t.desc});
    value_requests_.push_back(PlanRequest{t.desc.bytes(), t.producer, to_end ? end : last[id]});
  }
  // The layers' saved state (Layer::saved_state): live from the node's forward to its backward,
  // or during its forward alone where no backward runs. Unplanned, a buffer each.
  struct SavedState {
    Layer* layer;
    std::size_t index;
    std::size_t request;
  };
  std::vector<SavedState> saved;
  for (int c = 0; c < n; ++c) {
    Layer& l = *nodes_[c].layer;
    for (std::size_t j = 0; j < l.saved_state().size(); ++j) {
      const TensorDesc& d = l.saved_state()[j].desc;
      if (d.bytes() == 0) continue;
      if (!plan_memory_) {
        l.bind_saved_state(j, be_.empty(d, MemCategory::kFeatureMaps));
        continue;
      }
      saved.push_back({&l, j, value_requests_.size()});
      value_requests_.push_back(PlanRequest{d.bytes(), c, plans_[c].run_backward ? bwd(c) : c});
    }
  }
  if (!plan_memory_) return;
  value_plan_ = plan_memory(value_requests_);
  if (value_plan_.arena_bytes == 0) return;
  const Tensor arena = be_.empty(Shape{static_cast<int64_t>((value_plan_.arena_bytes + 3) / 4)},
                                 MemCategory::kFeatureMaps);
  for (std::size_t r = 0; r < planned.size(); ++r)
    *planned[r].tensor = arena.slice(value_plan_.offsets[r], planned[r].desc);
  for (const SavedState& st : saved) {
    st.layer->bind_saved_state(st.index, arena.slice(value_plan_.offsets[st.request],
                                                     st.layer->saved_state()[st.index].desc));
  }
}

void Graph::keep(TensorId id) {
  TBD_CHECK(!finalized_, "Graph::keep '", tensor_name(id), "' after finalize()");
  tensors_.at(id).kept = true;
}

// Gradients: the loss seed, then consumers in reverse order decide who writes first.
void Graph::plan_gradients() {
  // Which tensors need a gradient, with the parameter gradients as they are set now: a layer
  // frozen before finalize() (a detector's stem) makes none of its own, so a chain of frozen
  // layers fed by data runs no backward at all.
  for (Node& n : nodes_) {
    bool req = !n.layer->params().empty() && n.layer->param_grads();
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      req = req || (tensors_[n.inputs[k]].requires_grad && n.layer->input_grad(k));
    }
    for (std::size_t i = 0; i < n.outputs.size(); ++i) {
      tensors_[n.outputs[i]].requires_grad = req && n.layer->output_grad(i);
    }
  }
  // Steps of the backward pass: 0 seeds the loss gradient, nodes_.size() - i runs node i.
  const int num_nodes = static_cast<int>(nodes_.size());
  auto step_of = [&](int node) { return num_nodes - node; };
  std::vector<int> first_write(tensors_.size(), -1), last_write(tensors_.size(), -1);
  first_write[loss_] = last_write[loss_] = 0;
  tensors_[loss_].grad_live = true;
  std::map<TensorId, int> writes;  // consumers that already wrote each gradient (reverse order)
  std::vector<std::pair<GradSlot*, TensorId>> fixups;  // scratch slot -> gradient it adds to
  struct Planned {
    Tensor* tensor;
    TensorDesc desc;
  };
  std::vector<Planned> planned;  // the buffers the arena holds, with grad_requests_
  for (int ni = num_nodes - 1; ni >= 0; --ni) {
    Node& n = nodes_[ni];
    NodePlan& p = plans_[ni];
    bool outputs_live = false;
    for (TensorId o : n.outputs) outputs_live = outputs_live || tensors_[o].grad_live;
    bool needs = outputs_live && ((!n.layer->params().empty() && n.layer->param_grads()) ||
                                  std::any_of(n.inputs.begin(), n.inputs.end(), [&](TensorId i) {
                                    return tensors_[i].requires_grad;
                                  }));
    p.run_backward = needs;
    if (!needs) continue;
    std::map<std::string, int> used_here;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      const TensorId id = n.inputs[k];
      TensorInfo& t = tensors_[id];
      if (!t.requires_grad || !n.layer->input_grad(k)) continue;
      t.grad_live = true;
      if (first_write[id] < 0) first_write[id] = step_of(ni);
      last_write[id] = step_of(ni);
      if (writes[id]++ == 0) continue;  // the first writer assigns the gradient itself
      if (plan_memory_) {
        // Its own scratch, live only while this node's backward runs and adds it up.
        Tensor& slot = grad_slots_.emplace_back();
        planned.push_back({&slot, t.desc});
        grad_requests_.push_back(PlanRequest{t.desc.bytes(), step_of(ni), step_of(ni)});
        p.slots[k].target = &slot;
      } else {
        std::string key = t.desc.to_string();
        int idx = used_here[key]++;
        auto& v = grad_scratch_[key];  // by desc, reused across nodes
        while (static_cast<int>(v.size()) <= idx)
          v.push_back(be_.empty(t.desc, MemCategory::kDynamic));
        p.slots[k].target = &v[idx];
      }
      fixups.push_back({&p.slots[k], id});
    }
  }
  for (std::size_t id = 0; id < tensors_.size(); ++id) {
    TensorInfo& t = tensors_[id];
    if (!t.requires_grad && static_cast<TensorId>(id) != loss_) continue;
    if (!t.grad_live || !plan_memory_) {
      t.grad = be_.empty(t.desc, MemCategory::kDynamic);
      // Gradients nobody writes (outputs no consumer uses) must read as zero; the others are
      // assigned in every backward, so they are not touched here (touching GBs of fresh pages
      // costs seconds at large batches).
      if (!t.grad_live) be_.fill(t.grad, 0.f);
      continue;
    }
    // Live from its first write to its producer's backward, which reads it last.
    int last = last_write[id];
    if (t.producer >= 0 && plans_[t.producer].run_backward)
      last = std::max(last, step_of(t.producer));
    planned.push_back({&t.grad, t.desc});
    grad_requests_.push_back(PlanRequest{t.desc.bytes(), first_write[id], last});
  }
  if (plan_memory_) {
    grad_plan_ = plan_memory(grad_requests_);
    if (grad_plan_.arena_bytes > 0) {
      const Tensor arena = be_.empty(Shape{static_cast<int64_t>((grad_plan_.arena_bytes + 3) / 4)},
                                     MemCategory::kDynamic);
      for (std::size_t r = 0; r < planned.size(); ++r)
        *planned[r].tensor = arena.slice(grad_plan_.offsets[r], planned[r].desc);
    }
  }
  for (auto& [slot, id] : fixups) slot->accumulate_into = &tensors_[id].grad;
}

void Graph::init_params() {
  for (Param* p : params()) init_param(be_, *p, seed_);
}

void Graph::set_training(bool training) {
  for (auto& n : nodes_) n.layer->set_training(training);
}

void Graph::forward_node(std::size_t i) {
  if (i == 0) {
    if (!reuse_copies_ || *pass_ == 0) *pass_ = new_forward_pass();
    reuse_copies_ = false;
  }
  NodePlan& p = plans_[i];
  nodes_[i].layer->forward(p.yw, p.x);
}

void Graph::accumulate_input_grads(NodePlan& p) {
  for (GradSlot& s : p.slots) {
    if (s.accumulate_into) be_.accumulate(*s.accumulate_into, *s.target);
  }
}

void Graph::backward_node(std::size_t i) {
  NodePlan& p = plans_[i];
  if (!p.run_backward) return;
  // Nothing to compute: no input gradient wanted and the parameters frozen for this backward.
  const Layer& l = *nodes_[i].layer;
  if (!p.any_dx && (l.params().empty() || !l.param_grads())) return;
  nodes_[i].layer->backward(p.dx, p.dy, p.xb, p.yb);
  accumulate_input_grads(p);
}

void Graph::backward_node_data(std::size_t i) {
  NodePlan& p = plans_[i];
  Layer& l = *nodes_[i].layer;
  TBD_CHECK(l.split_backward(), l.kind(), " '", l.name(), "': its backward is one call");
  if (!runs_dgrad(i)) return;
  l.backward_data(p.dx, p.dy, p.xb, p.yb);
  accumulate_input_grads(p);
}

void Graph::backward_node_weights(std::size_t i) {
  NodePlan& p = plans_[i];
  Layer& l = *nodes_[i].layer;
  TBD_CHECK(l.split_backward(), l.kind(), " '", l.name(), "': its backward is one call");
  if (!runs_wgrad(i)) return;
  l.backward_weights(p.dy, p.xb, p.yb);
}

void Graph::forward() {
  TBD_CHECK(finalized_, "Graph::forward before finalize()");
  for (std::size_t i = 0; i < nodes_.size(); ++i) forward_node(i);
}

void Graph::backward() {
  TBD_CHECK(finalized_, "Graph::backward before finalize()");
  TBD_CHECK(!inference_, "Graph::backward on an inference graph (finalize_inference)");
  seed_loss_grad();
  for (std::size_t i = nodes_.size(); i-- > 0;) {
    backward_node(i);
    if (backward_hook_) backward_hook_(i);
  }
}

void Graph::seed_loss_grad() { be_.fill(tensors_.at(loss_).grad, 1.f); }

void Graph::zero_grad() {
  if (arena_.grads.defined()) be_.fill(arena_.grads, 0.f);
}

float Graph::loss_value() {
  TBD_CHECK(loss_ >= 0, "Graph::loss_value: no loss set");
  float v = 0;
  be_.synchronize();
  be_.copy_to_host(&v, tensors_.at(loss_).value);
  return v;
}

std::vector<Param*> Graph::params() {
  std::vector<Param*> out;
  for (auto& n : nodes_) {
    for (Param& p : n.layer->params()) {
      if (!p.tied) out.push_back(&p);
    }
  }
  return out;
}

int64_t Graph::num_params() {
  int64_t n = 0;
  for (Param* p : params()) {
    if (!p->value_from) n += p->value.numel();  // a shared value is counted by its owner
  }
  return n;
}

Flops Graph::flops() const {
  Flops f;
  for (const auto& n : nodes_) f += n.layer->flops();
  return f;
}

Bytes Graph::bytes() const {
  Bytes b;
  for (const auto& n : nodes_) b += n.layer->bytes();
  return b;
}

namespace {

// The phases node i runs: fprop always, dgrad and wgrad as backward_node() decides.
template <class Work>
Work executed(const Work& w, bool dgrad, bool wgrad) {
  Work out;
  out.fprop = w.fprop;
  if (dgrad) out.dgrad = w.dgrad;
  if (wgrad) out.wgrad = w.wgrad;
  return out;
}

}  // namespace

bool Graph::runs_dgrad(std::size_t i) const {
  TBD_CHECK(finalized_, "Graph::runs_dgrad before finalize()");
  return plans_.at(i).run_backward && plans_[i].any_dx;
}

bool Graph::runs_wgrad(std::size_t i) const {
  TBD_CHECK(finalized_, "Graph::runs_wgrad before finalize()");
  const Layer& l = *nodes_.at(i).layer;
  return plans_[i].run_backward && !l.params().empty() && l.param_grads();
}

Flops Graph::executed_flops(std::size_t i) const {
  TBD_CHECK(finalized_, "Graph::executed_flops before finalize()");
  return executed(nodes_.at(i).layer->flops(), runs_dgrad(i), runs_wgrad(i));
}

Bytes Graph::executed_bytes(std::size_t i) const {
  TBD_CHECK(finalized_, "Graph::executed_bytes before finalize()");
  return executed(nodes_.at(i).layer->bytes(), runs_dgrad(i), runs_wgrad(i));
}

Flops Graph::executed_flops() const {
  Flops f;
  for (std::size_t i = 0; i < nodes_.size(); ++i) f += executed_flops(i);
  return f;
}

Bytes Graph::executed_bytes() const {
  Bytes b;
  for (std::size_t i = 0; i < nodes_.size(); ++i) b += executed_bytes(i);
  return b;
}

double Graph::zero_grad_bytes() const {
  if (inference_) return 0;  // no gradients
  double b = 0;
  for (const auto& n : nodes_) {
    for (const Param& p : n.layer->params()) {
      if (!p.tied) b += static_cast<double>(p.grad.bytes());
    }
  }
  return b;
}

}  // namespace tbd
