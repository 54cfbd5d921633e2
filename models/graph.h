// models/graph.h: the static training graph.
//
// A model is a Graph built once for fixed input shapes: add() constructs each layer for its
// input descriptors (shape checks, parameters, primitives), and finalize() allocates every
// activation, gradient and scratch buffer and initialises the parameters from the seed. After
// that, forward()/backward()/zero_grad() run the nodes in order / reverse order and never
// allocate. Layouts: each backend implementation says which layout it wants every input in
// (InputLayouts, layers/layer.h) and the graph inserts a Reorder node where an input differs, so
// oneDNN's blocked activations flow through conv-bn-relu-pool-add-concat chains untouched and
// are reordered only where a layer needs row-major data.
#pragma once

#include <any>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "layers/layer.h"
#include "models/memory_plan.h"

namespace tbd {

using TensorId = int;

// How finalize() lays the parameters out in the arena (bind_params, layers/layer.h).
// kAligned: graph order, every tensor whose size is a multiple of 16 floats first (64-byte
// aligned large tensors). kBackward: in the order backward completes their gradients (the last
// layer's first), so a data-parallel bucket of consecutive gradients is one contiguous span of
// the gradient arena, all-reduced in place (PyTorch DDP's gradient_as_bucket_view).
enum class ParamOrder { kAligned, kBackward };

// Sets the order for the graphs constructed on this thread while it lives (a model built by its
// registry builder, which finalizes its graphs itself). Scopes nest.
class ParamOrderScope {
 public:
  explicit ParamOrderScope(ParamOrder order);
  ~ParamOrderScope();
  ParamOrderScope(const ParamOrderScope&) = delete;
  ParamOrderScope& operator=(const ParamOrderScope&) = delete;
  static ParamOrder current();

 private:
  ParamOrder saved_;
};

// Whether graphs constructed from now on plan their activation gradients' memory by liveness
// (the default; --tbd_memory_plan=off turns it off for debugging): process-wide.
void set_memory_planning_default(bool on);
bool memory_planning_default();

// Layout and dtype conversion (a node the graph inserts; also usable directly): f32 <-> bf16
// casts round to nearest even. No FLOPs; its bytes are a copy's (copy_bytes,
// layers/tensor_ops.h).
struct ReorderConfig {
  static constexpr const char* kKind = "Reorder";
  Layout layout = Layout::kRowMajor;
  std::optional<DType> dtype;  // none: the input's
};
// Contract: one input; the output is the input in cfg.layout and cfg.dtype; a copy.
template <>
Contract contract(const std::string& name, const ReorderConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const ReorderConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

class Graph {
 public:
  // Builds the node's layer again, standalone (parameters bound to their own arena), for
  // input descriptors of the same kind: a layer benchmark of a model's layer at another batch.
  using Recipe = std::function<std::unique_ptr<Layer>(Backend&, const std::vector<TensorDesc>&)>;

  struct Node {
    std::unique_ptr<Layer> layer;
    std::vector<TensorId> inputs;
    std::vector<TensorId> outputs;
    Recipe recipe;
    std::any config;  // the kind's Config (empty for the graph's own Reorder nodes)
  };

  explicit Graph(Backend& be, uint64_t seed = 0)
      : be_(be),
        seed_(seed),
        param_order_(ParamOrderScope::current()),
        plan_memory_(memory_planning_default()) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Backend& backend() { return be_; }

  // A graph input (data or labels): no gradient, category dynamic.
  TensorId input(const std::string& name, Shape shape, DType dtype = DType::kF32);

  // Adds a layer of Config's kind fed by `inputs`; returns its outputs.
  template <class Config>
  std::vector<TensorId> add(const std::string& name, const Config& cfg,
                            std::vector<TensorId> inputs) {
    std::vector<TensorDesc> descs;
    for (TensorId id : inputs) descs.push_back(desc(id));
    // Each input in the dtype the kind's precision policy gives it under the math mode in
    // effect (layers/precision.h) and in the layout the backend's implementation wants: one
    // Reorder where either differs.
    const std::vector<DType> want_dt =
        wanted_dtypes<Config>(be_.kind(), name, be_.math_mode(), descs);
    std::vector<TensorDesc> cast = descs;
    for (std::size_t k = 0; k < cast.size(); ++k) cast[k].dtype = want_dt[k];
    const std::vector<Layout> want = wanted_layouts<Config>(be_.kind(), name, cfg, cast);
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      const Layout layout = k < want.size() ? want[k] : descs[k].layout;
      if (layout != descs[k].layout || want_dt[k] != descs[k].dtype) {
        inputs[k] = convert(inputs[k], layout, want_dt[k]);
        descs[k] = desc(inputs[k]);
      }
    }
    Recipe recipe = [name, cfg](Backend& be, const std::vector<TensorDesc>& in) {
      return make_layer<Config>(be, name, cfg, in);
    };
    auto out = add_node(construct_layer<Config>(be_, name, cfg, descs), std::move(inputs),
                        std::move(recipe));
    nodes_.back().config = cfg;
    return out;
  }
  // The common single-output case.
  template <class Config>
  TensorId add1(const std::string& name, const Config& cfg, std::vector<TensorId> inputs) {
    auto out = add(name, cfg, std::move(inputs));
    TBD_CHECK(out.size() == 1, Config::kKind, " '", name, "' has ", out.size(), " outputs");
    return out[0];
  }
  // Returns `id` in `layout`, inserting a Reorder node when it differs.
  TensorId to_layout(TensorId id, Layout layout) { return convert(id, layout, desc(id).dtype); }
  // Returns `id` in `layout` and `dtype`, inserting a Reorder node when either differs; one
  // conversion of a tensor is made once and shared by all the consumers that want it.
  TensorId convert(TensorId id, Layout layout, DType dtype);

  // Makes `dst` share `src`'s value and gradient (same shape); gradients of both uses add up.
  // Bound at finalize(): dst is a view of src's storage in the arena. src may belong to a
  // graph finalized before this one (a generator step that runs the critic's weights).
  void tie(Param& dst, Param& src);
  // Makes `dst` read `src`'s value but keep a gradient of its own (A3C: a worker's copy of the
  // global weights, whose gradients the worker applies to the global ones). dst is in params()
  // (it has a gradient) but not in num_params() (its value is src's).
  void share_value(Param& dst, Param& src);
  // Turns the parameter gradients of the layers whose name starts with `prefix` off (or on):
  // backward then computes only their data gradients (frozen layers; the other player's layers
  // in a GAN step), and skips layers with nothing left to compute. Returns how many layers.
  // Set before finalize(), it also prunes the plan: tensors that only frozen layers and data
  // feed take no gradient and their layers run no backward (a detector's frozen stem); such a
  // layer cannot be turned back on later. Set after, the plan stays as it was.
  int set_param_grads(const std::string& prefix, bool on);

  // The scalar the backward pass starts from (dloss = 1).
  void set_loss(TensorId id);
  // Binds the graph's own parameters into its arena (values and gradients get storage), ahead
  // of finalize(), which otherwise does it. Two graphs that tie to each other's parameters (a
  // GAN: the critic's step runs the generator, the generator's step runs the critic) bind
  // both, then finalize both. Call at most once, before finalize().
  void bind_arena();
  // Binds every parameter into the graph's arena (one buffer of values, one of gradients),
  // allocates activations, gradients and scratch, initialises parameters. Call once.
  void finalize();
  // finalize() for a graph that only runs forward (A3C's rollout, whose actions come from the
  // policy's forward): no loss needed, no gradients allocated; backward() is an error. Its
  // parameters are usually tied to a training graph's (finalized before it).
  void finalize_inference();
  bool finalized() const { return finalized_; }
  bool inference_only() const { return inference_; }

  // Memory planning (before finalize; default: memory_planning_default()). Planned, the
  // layers' outputs are views into one arena (feature maps) and the activation gradients (with
  // the scratch where several consumers' gradients are summed) into another (dynamic), at
  // offsets chosen by liveness (models/memory_plan.h): an output is live from its forward to its
  // last reader (its consumers' forwards; the backwards that save it, Contract::saved_inputs),
  // a gradient from the backward of the first consumer that writes it to the backward of its
  // producer; so tensor(id) and grad(id) hold their values only then (see keep()). The layers'
  // transient scratch is one workspace they share (Layer::transient_bytes). Unplanned, each has
  // a buffer of its own.
  void set_memory_planning(bool on);
  bool memory_planning() const { return plan_memory_; }
  // The planned gradients' requests (steps: 0 the loss seed, nodes().size() - i node i's
  // backward) and their plan; empty unplanned or before finalize.
  const std::vector<PlanRequest>& gradient_requests() const { return grad_requests_; }
  const MemoryPlan& gradient_plan() const { return grad_plan_; }
  // The same for the layers' outputs (steps: i node i's forward, 2 n - 1 - i its backward, 2 n
  // the end of the step).
  const std::vector<PlanRequest>& value_requests() const { return value_requests_; }
  const MemoryPlan& value_plan() const { return value_plan_; }
  // Keeps `id`'s value to the end of the step (before finalize), for the host to read after a
  // forward or a step: planned, a value lives only to its last reader otherwise (tensor(id)).
  // What no layer consumes (the loss, logits nobody reads further) is kept anyway.
  void keep(TensorId id);
  // Planned, the one workspace every layer's transient scratch is a view of (undefined when no
  // layer needs any, and unplanned, where each layer has its own).
  const Tensor& workspace() const { return workspace_; }

  // The arena layout (before the parameters are bound; default: the ParamOrderScope's).
  void set_param_order(ParamOrder order);
  ParamOrder param_order() const { return param_order_; }
  // The node after whose backward parameter p's gradient is complete: the lowest-index node
  // that computes a gradient into it (p's own layer or one tied to it); -1 when none does
  // (frozen). Backward runs nodes in reverse order, so a gradient is final once that node ran.
  int grad_ready_node(const Param* p) const;
  // params() by descending grad_ready_node (the gradient backward completes first, first;
  // frozen ones last), ties in params() order: the kBackward arena order.
  std::vector<Param*> params_by_grad_ready();
  // Called with each node's index after backward_node() ran it in backward() (a data-parallel
  // step starts a bucket's all-reduce there). Empty: none.
  void set_backward_hook(std::function<void(std::size_t node)> hook) {
    backward_hook_ = std::move(hook);
  }

  void set_training(bool training);
  void forward();
  // The next forward pass reads the same parameter values as this graph's last one (nothing
  // wrote them in between: the caller's promise), so the compute copies that pass made
  // (Layer::param_copy) are read again instead of made again. A3C's rollout: t_max + 1
  // batch-1 forwards on weights pulled once.
  void reuse_param_copies() { reuse_copies_ = true; }
  void backward();        // needs forward() first; parameter gradients accumulate
  void seed_loss_grad();  // d loss / d loss = 1: what backward() starts from
  void zero_grad();       // one fill of the gradient arena
  // The parameter arena (after finalize): every unique parameter's value and gradient.
  const ParamArena& arena() const { return arena_; }

  // A tensor's value; planned, it holds the value only while it is live (see keep()).
  const Tensor& tensor(TensorId id) const { return tensors_.at(id).value; }
  // A tensor's gradient; planned, it holds the gradient only while it is live (see
  // set_memory_planning).
  const Tensor& grad(TensorId id) const { return tensors_.at(id).grad; }
  const TensorDesc& desc(TensorId id) const { return tensors_.at(id).desc; }
  const std::string& tensor_name(TensorId id) const { return tensors_.at(id).name; }
  // Whether backward computes this tensor's gradient (false for data, labels and what only
  // depends on them or on frozen layers; final at finalize()).
  bool requires_grad(TensorId id) const { return tensors_.at(id).requires_grad; }
  TensorId loss() const { return loss_; }
  float loss_value();  // copies the loss to the host

  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Param*> params();  // unique parameters (tied ones once)
  int64_t num_params();
  Flops flops() const;  // sum over nodes
  Bytes bytes() const;  // sum over nodes
  // The work node i does in one forward and backward as finalize() planned them: fprop always,
  // dgrad when its backward computes some input gradient, wgrad when it computes parameter
  // gradients (not with set_param_grads off, nor where nothing downstream needs a gradient).
  // flops()/bytes() count every phase of every node; these count what runs.
  Flops executed_flops(std::size_t i) const;
  Bytes executed_bytes(std::size_t i) const;
  Flops executed_flops() const;  // sums over nodes
  Bytes executed_bytes() const;
  // Whether node i's backward computes some input gradient (its dgrad phase runs), and some
  // parameter gradient (its wgrad phase runs).
  bool runs_dgrad(std::size_t i) const;
  bool runs_wgrad(std::size_t i) const;
  // Bytes zero_grad() writes: every unique parameter gradient once.
  double zero_grad_bytes() const;

  // Runs one node's forward or backward alone (per-layer breakdowns).
  void forward_node(std::size_t i);
  void backward_node(std::size_t i);
  // backward_node(i) as its two calls, for a layer that splits its backward
  // (Layer::split_backward): the data gradient (with the sums of a forked input's gradient),
  // then the weight gradients; each does nothing where backward_node would not run it.
  void backward_node_data(std::size_t i);
  void backward_node_weights(std::size_t i);

 private:
  struct TensorInfo {
    std::string name;
    TensorDesc desc;
    Tensor value;
    Tensor grad;
    int producer = -1;  // node index, -1 for graph inputs
    bool requires_grad = false;
    bool grad_live = false;  // some consumer (or the loss seed) writes the gradient
    bool kept = false;       // keep(): live to the end of the step
  };
  // Per node: where each input's gradient goes in backward.
  struct GradSlot {
    Tensor* target = nullptr;           // nullptr: no gradient needed
    Tensor* accumulate_into = nullptr;  // non-null: target is scratch, add it here afterwards
  };
  struct NodePlan {
    bool run_backward = false;
    bool any_dx = false;  // some input gradient is wanted
    std::vector<const Tensor*> x, y, dy;
    std::vector<const Tensor*> xb, yb;  // x and y as backward gets them: null where not saved
    std::vector<Tensor*> yw, dx;
    std::vector<GradSlot> slots;
  };

  std::vector<TensorId> add_node(std::unique_ptr<Layer> layer, std::vector<TensorId> inputs,
                                 Recipe recipe);
  void init_params();
  void accumulate_input_grads(NodePlan& p);  // after a node's backward: scratch into targets
  std::vector<Param*> params_to_bind();      // params() in the arena order (param_order_)
  void finalize_impl(bool inference);
  void plan_gradients();  // finalize(): who writes which gradient, gradient buffers
  void plan_values();     // finalize(): inputs' and outputs' buffers

  Backend& be_;
  uint64_t seed_;
  ParamOrder param_order_;
  std::function<void(std::size_t)> backward_hook_;
  std::vector<TensorInfo> tensors_;
  // Conversions made so far: (tensor, layout, dtype) -> the converted tensor (convert()).
  std::map<std::tuple<TensorId, Layout, DType>, TensorId> conversions_;
  std::vector<Node> nodes_;
  std::vector<NodePlan> plans_;
  // Gradient scratch for tensors with several consumers: unplanned, by desc, shared across
  // nodes; planned, one per slot, each live during its node's backward (deque: stable addresses).
  std::map<std::string, std::deque<Tensor>> grad_scratch_;
  std::deque<Tensor> grad_slots_;
  bool plan_memory_;
  std::vector<PlanRequest> grad_requests_, value_requests_;
  MemoryPlan grad_plan_, value_plan_;
  Tensor workspace_;  // the layers' transient scratch, planned (Layer::bind_transients)
  // The current forward pass (new_forward_pass at node 0): the layers' parameter copies are
  // made once per pass (Layer::param_copy).
  std::shared_ptr<uint64_t> pass_ = std::make_shared<uint64_t>(0);
  bool reuse_copies_ = false;  // reuse_param_copies: node 0 keeps the pass number once
  TensorId loss_ = -1;
  bool bound_ = false;
  bool finalized_ = false;
  bool inference_ = false;
  ParamArena arena_;
};

}  // namespace tbd
