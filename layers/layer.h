// layers/layer.h: the Layer interface, parameters, FLOP and byte counts and the per-backend
// registry.
//
// Gradient policy (the one place it is written down):
//   * Parameter gradients ACCUMULATE: backward() adds into Param::grad (+=). The owner zeroes
//     them (Graph::zero_grad) once per step; this lets shared weights and micro-batches work.
//   * Activation gradients ASSIGN: backward() overwrites dx (=). When a tensor feeds several
//     layers the graph sums the contributions itself (Backend::accumulate).
//   * A null dx pointer means "this input needs no gradient" (data, labels): skip the work.
//
// Argument order everywhere: outputs, inputs, weights, problem description. A layer is built
// once for fixed input descriptors (shape, dtype, layout): shapes are checked there (errors name
// the layer, the argument and the dims), parameters and saved state are allocated there, and
// library primitives are created there. forward()/backward() never allocate.
//
// Each layer kind has a Config struct with `static constexpr const char* kKind` and states its
// contract once, for every backend (layers/<kind>.{h,cpp}: contract<Config>, see Contract
// below): input checks, output shapes and dtypes, parameters, FLOPs and bytes. Each backend
// has one implementation file (layers/cpu/<kind>_cpu.cpp, layers/cuda/<kind>_cuda.cu, one suffix
// per backend) whose class hands the contract to Layer's constructor, builds its primitives and
// computes; it registers its factory with TBD_REGISTER_LAYER.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/error.h"
#include "core/splitmix.h"
#include "core/tensor.h"
#include "layers/precision.h"

namespace tbd {

// Analytic work of one layer per phase: forward, data gradient, weight gradient. The tag keeps
// FLOPs and bytes (below) from being added to each other.
template <class Tag>
struct PhaseWork {
  double fprop = 0;
  double dgrad = 0;
  double wgrad = 0;
  double bwd() const { return dgrad + wgrad; }
  double total() const { return fprop + dgrad + wgrad; }
  PhaseWork& operator+=(const PhaseWork& o) {
    fprop += o.fprop;
    dgrad += o.dgrad;
    wgrad += o.wgrad;
    return *this;
  }
};

// Analytic floating-point operations (multiply and add counted separately, so an FMA is 2).
using Flops = PhaseWork<struct FlopTag>;

// Analytic bytes moved, per phase: the minimal DRAM traffic of an ideal implementation,
// a LOWER BOUND used for arithmetic intensity (FLOP/byte) and the roofline. The model, for
// every kind (each kind's header spells out its formula beside the FLOPs):
//   * element sizes from the dtype (4 bytes for f32 and for i32 ids; a dropout mask 1 byte;
//     under bf16 2 bytes for the bf16 activations and for the weights a product reads, as an
//     implementation with a bf16 weight copy kept from step to step reads them, while
//     biases, norm parameters, statistics and every parameter gradient stay 4);
//   * a phase reads each tensor it needs exactly once and writes each tensor it produces
//     exactly once: no re-reads for tiling, no write-allocate, no library scratch
//     (workspaces, blocked weight copies) and no temporaries that an ideal fused kernel keeps
//     on chip;
//   * fprop reads the inputs and parameters and writes the outputs (and whatever the kind saves
//     for backward: batch statistics, a dropout mask, gate activations);
//   * dgrad reads dy and the saved tensors its math needs (weights for conv and linear, x
//     or y for activations, statistics for norms, the mask for dropout) and writes dx;
//   * wgrad reads what the parameter gradients need (x, dy) and reads AND writes each
//     parameter gradient (they accumulate, +=; see the gradient policy above);
//   * the phases are separate passes (as dgrad and wgrad are separate primitives), so a phase
//     sum reads dy twice; a kind whose libraries fuse both gradients (the norms) says so.
using Bytes = PhaseWork<struct ByteTag>;

// Bytes of `elements` elements of dtype `t`: the element size every bytes formula uses.
inline double bytes_of(double elements, DType t = DType::kF32) {
  return elements * static_cast<double>(dtype_size(t));
}

// How a parameter is initialised (deterministically, from the graph's seed).
enum class Init {
  kZeros,
  kOnes,
  kHeNormal,       // N(0, 2/fan_in): conv and linear layers followed by ReLU
  kXavierUniform,  // U(-a, a), a = sqrt(6/(fan_in+fan_out)): attention, LSTM, embeddings
  kNormal002,      // N(0, 0.02): embeddings in the Transformer convention, GPT-2's weights
  kUniformFanIn,   // U(-1/sqrt(fan_in), 1/sqrt(fan_in)): RNN defaults
};

// A parameter as a kind declares it: what Layer's constructor allocates.
struct ParamSpec {
  std::string suffix;  // "weight": the parameter is named "<layer>.weight"
  Shape shape;
  Init init = Init::kZeros;
  int64_t fan_in = 1;
  int64_t fan_out = 1;
  bool decay = true;  // weight decay applies (false for biases and norm scales)
};

// What a layer kind states once for every backend (ATen's META function, written in
// layers/<kind>.cpp as a specialization of contract<Config>): it checks the inputs (errors name
// the layer, the argument and the dims) and returns the outputs' shapes and dtypes, the
// parameters, and the FLOPs and bytes of one call per phase. A backend's implementation (ATen's
// IMPL) passes it to Layer's constructor and only builds primitives and computes; it chooses
// its outputs' layouts (row-major unless it sets otherwise) and never restates the rest.
struct Contract {
  std::vector<TensorDesc> outputs;
  std::vector<ParamSpec> params;
  Flops flops;
  Bytes bytes;
  // Per output: whether a gradient flows back through it (empty: every floating (f32, bf16) output
  // does). False for outputs that are not differentiable functions of the inputs: a detached copy,
  // region proposals after NMS, sampled targets. Integer outputs never carry a gradient.
  std::vector<bool> output_grads = {};
  // Per input: whether the kind's output depends differentiably on it (empty: every floating input
  // does). False for inputs the output is piecewise constant in (ActivationDgrad's x) or only
  // indexes with (RoI boxes): backward gets a null dx for them and the graph sends nothing.
  std::vector<bool> input_grads = {};
  // What backward() reads of the forward's tensors, on every backend (the union of what the
  // implementations read): per input and per output, whether it is saved for backward. Empty:
  // all of them. A tensor not saved is passed to backward() as a null pointer, and a graph may
  // reuse its memory once its last reader has run (the ReLU that reads only its output frees
  // its input, as an in-place ReLU does in PyTorch).
  std::vector<bool> saved_inputs = {};
  std::vector<bool> saved_outputs = {};
  // The problem in the kind's words, the same on every backend: the inputs' shapes and the
  // attributes that set the work ("x (32, 64, 56, 56) K=64 3x3 s1 p1"), from the kind's
  // describe_problem. An implementation adds only its algorithm (Layer::implementation), so CPU and
  // CUDA rows describe one problem alike.
  std::string problem = {};
  // The kind's name (Config::kKind).
  const char* kind = nullptr;
};

// The kind's contract, written once per kind in layers/<kind>.cpp as a specialization, beside
// an overload `std::string describe_problem(const Config&, const std::vector<TensorDesc>& in,
// const Contract&)` that words the problem.
template <class Config>
Contract contract(const std::string& name, const Config& cfg, const std::vector<TensorDesc>& in);

// What an implementation hands Layer's constructor: the kind's contract with its name and its
// problem filled in, so no implementation restates either.
template <class Config>
Contract contract_of(const std::string& name, const Config& cfg,
                     const std::vector<TensorDesc>& in) {
  Contract c = contract(name, cfg, in);
  c.kind = Config::kKind;
  c.problem = describe_problem(cfg, in, c);
  return c;
}

// Marks every input and output of `c` as not saved for backward (kinds whose backward only
// moves dy back: add, copies, reorders); a kind that saves some then sets those.
inline void saves_nothing(Contract& c, std::size_t num_inputs) {
  c.saved_inputs.assign(num_inputs, false);
  c.saved_outputs.assign(c.outputs.size(), false);
}

// A parameter's compute copies: its bf16 cast in each form a product reads ("bf16": the same
// layout), kept from one forward pass to the next (see Layer::param_copy). Shared by the
// parameters tied to it, so a decoder's steps cast their tied weights once a pass.
struct ParamCopies {
  struct Copy {
    std::string form;
    Tensor t;           // category weights, made at its first use
    uint64_t pass = 0;  // the forward pass it was made in (new_forward_pass)
  };
  std::vector<Copy> copies;
};

struct Param {
  std::string name;  // "conv1.weight"
  Tensor value;      // category weights, row-major unless the layer packs it (kPacked)
  Tensor grad;       // category weight_grads, same desc as value
  Init init = Init::kZeros;
  int64_t fan_in = 1;
  int64_t fan_out = 1;
  // The init's draws (or its constant) times this: a model's own scaling of a kind's init
  // (GPT-2's residual projections: N(0, 0.02) times 1/sqrt(2 * layers)). Set before the graph
  // is finalized.
  double init_scale = 1.0;
  bool decay = true;  // weight decay applies (false for biases and norm scales)
  // Set by Graph::tie: value and grad alias another layer's parameter (tied embeddings). A
  // tied parameter is skipped by Graph::params() (the optimizer and the count see it once).
  bool tied = false;
  Param* tied_to = nullptr;  // the parameter it aliases (bound when the graph is finalized)
  // Set by Graph::share_value: the value is another parameter's (A3C's workers read the
  // global weights), the gradient is this parameter's own.
  Param* value_from = nullptr;
  // Set by a Graph at finalize (a tied parameter shares its target's): the compute copies.
  std::shared_ptr<ParamCopies> copies;
};

// Parameters live in arenas: the values and the gradients of a set of parameters are views
// into one buffer per category (weights, weight_grads), so zero_grad is one fill and an
// optimizer or an all-reduce can run over one flat span (llm.c's params_memory and
// grads_memory). A layer's parameters have a shape from construction but no storage until they
// are bound: make_layer binds a standalone layer's own; a Graph binds all of its layers' into one
// arena at finalize(). Implementations therefore read value/grad pointers at execution, never
// in their constructors and never cached.
struct ParamArena {
  Tensor values;  // (total) f32, category weights; undefined for an empty set
  Tensor grads;   // (total) f32, category weight_grads
};
// Binds every parameter of `params` (none bound or tied yet) to views of a new arena, one after
// another without gaps so the accounting stays exact (weights = 4 bytes x stored elements: the
// parameters, plus the block padding of those a layer packs); parameters whose storage is a
// multiple of 16 floats come first, so every large tensor starts 64-byte aligned. Zeroes the
// gradients. A parameter whose value is shared (value_from) gets only a gradient here; its value is
// bound to the source's by its graph. With with_grads false (an inference graph) no gradients are
// allocated (Param::grad stays undefined). With keep_order the parameters are packed in the order
// given (a graph's ParamOrder::kBackward: data-parallel buckets are then contiguous spans).
ParamArena bind_params(Backend& be, const std::vector<Param*>& params, bool with_grads = true,
                       bool keep_order = false);

// A number no forward pass of any graph in this process has had (a graph takes one as each
// pass begins: parameter copies made in another pass, or another graph's, are made again).
uint64_t new_forward_pass();

// Fills p.value by its Init rule from a stream seeded by (seed, p.name): the same parameter
// gets the same values in a model, a layer benchmark and a test, on every backend.
void init_param(Backend& be, Param& p, uint64_t seed);

using TensorRefs = std::span<const Tensor* const>;
using MutTensorRefs = std::span<Tensor* const>;

// A member tensor an implementation declares at construction and whoever runs the layer binds
// later (transient scratch, saved state): the member, undefined until bound, and what it holds.
struct DeclaredTensor {
  Tensor* tensor;
  TensorDesc desc;
};

class Layer {
 public:
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // The kind's name (Config::kKind, from the contract).
  const char* kind() const { return kind_; }
  const std::string& name() const { return name_; }
  const std::vector<TensorDesc>& input_descs() const { return inputs_; }
  const std::vector<TensorDesc>& output_descs() const { return outputs_; }
  // Whether output i carries a gradient back (Contract::output_grads).
  bool output_grad(std::size_t i) const {
    return is_floating(outputs_[i].dtype) && (i >= output_grads_.size() || output_grads_[i]);
  }
  // Whether a gradient flows into input i (Contract::input_grads).
  bool input_grad(std::size_t i) const {
    return is_floating(inputs_[i].dtype) && (i >= input_grads_.size() || input_grads_[i]);
  }
  // Whether backward() reads input i or output i (Contract::saved_inputs, saved_outputs).
  bool saves_input(std::size_t i) const { return i >= saved_inputs_.size() || saved_inputs_[i]; }
  bool saves_output(std::size_t i) const { return i >= saved_outputs_.size() || saved_outputs_[i]; }
  std::vector<Param>& params() { return params_; }
  const std::vector<Param>& params() const { return params_; }
  const Flops& flops() const { return flops_; }
  const Bytes& bytes() const { return bytes_; }
  // A one-line description: the kind's problem (Contract::problem, the same words on every
  // backend), then " | " and the implementation's algorithm where it names one:
  // "x (32, 64, 56, 56) K=64 3x3 s1 p1 | fwd brg:avx512_core ...".
  std::string describe() const;
  // What the implementation runs for this problem (library, algorithm, kernel), or nothing.
  virtual std::string implementation() const { return {}; }

  // Training mode by default; eval mode changes batchnorm (running stats) and dropout (off).
  virtual void set_training(bool training) { training_ = training; }
  bool training() const { return training_; }

  // Whether backward() computes the parameter gradients (the default). Off for frozen layers,
  // and for the other player's layers in one player's step of a GAN: backward then computes
  // only the data gradients dx and leaves Param::grad untouched.
  void set_param_grads(bool on) { param_grads_ = on; }
  bool param_grads() const { return param_grads_; }

  // Layers that draw anew on every training call (the detection samplers, Dropout, attention's
  // dropout, RandomInterpolation) key the draw by the call's index, so a rerun draws the same.
  // Rank r of a data-parallel group of P numbers its calls r, r + P, r + 2P, ..., so that the
  // P ranks together draw what one process running the P shards in turn draws (the default is
  // 0, 1, 2, ...). Set it before the first forward: a captured CUDA graph keeps the numbering
  // it was captured with (the count itself lives in device memory there).
  void set_call_numbering(uint64_t stride, uint64_t offset) { numbering_ = {stride, offset}; }

  // Transient scratch: what the layer needs only inside one call of forward() or backward()
  // (library scratchpads, an argument reordered for a primitive, a gradient computed before it
  // is added). Declared at construction (transient()), bound before the first call to views of
  // a workspace that others use between this layer's calls: a graph gives all of its layers
  // one buffer, as large as the largest layer's need (it runs one node at a time), make_layer
  // gives a layer its own. Category workspace. transient_bytes() is the layer's need, laid out
  // as bind_transients() places them (each at a 64-byte boundary).
  std::size_t transient_bytes() const;
  void bind_transients(const Tensor& workspace);
  // The declared transients (a layer built inside another declares its inner layer's as its
  // own, so that whoever binds the outer binds both).
  const std::vector<DeclaredTensor>& transient_state() const { return transients_; }
  bool transients_bound() const { return transients_bound_; }

  // Saved state: what the implementation keeps from a forward to its backward beyond the
  // inputs and outputs (batch statistics, a dropout mask, attention probabilities, a library's
  // workspace such as oneDNN's max-pooling indices or cuDNN's RNN reserve space). Declared at
  // construction (saved()), allocated by whoever runs the layer, category feature_maps: a graph
  // places it in its feature-map arena by liveness, live from the node's forward to its
  // backward (its forward alone where no backward runs), as it places outputs; make_layer gives
  // a layer its own. Bound before the first call.
  // In the order declared; binding goes through bind_saved_state.
  const std::vector<DeclaredTensor>& saved_state() const { return saved_; }
  // Binds saved tensor j (in the order declared) to `t` (of saved_state()[j].desc's size).
  void bind_saved_state(std::size_t j, const Tensor& t);

  // Compute copies of the parameters (param_copy): a graph numbers its forward passes
  // (new_forward_pass) and hands each layer the current number at finalize; a layer without
  // one (standalone) casts at every call.
  void number_passes_with(std::shared_ptr<const uint64_t> pass) { pass_ = std::move(pass); }

  // The calls. Each checks its arity against the layer's inputs and outputs (an error names
  // the layer), then runs the implementation's fprop / bprop / dgrad / wgrad below.
  // y: outputs (allocated by the caller with output_descs()), x: inputs.
  void forward(MutTensorRefs y, TensorRefs x);
  // dx: input gradients (assign; entries may be null), x/y: the forward's inputs and outputs
  // (null where the kind does not save them: saves_input, saves_output), dy: output gradients.
  // Parameter gradients accumulate.
  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y);

  // The backward as its two products, where the implementation computes them apart (cuDNN's
  // BackwardData and BackwardFilter, oneDNN's backward_data and backward_weights, a Linear's two
  // GEMMs): backward_data assigns the input gradients (entries of dx may be null) and leaves
  // the parameter gradients as they are; backward_weights adds the parameter gradients and
  // writes nothing else. backward() of such an implementation is the two in turn
  // (backward_in_two). Where one library call computes both (a fused RNN backward, oneDNN's
  // batch normalization), split_backward() is false and backward() is the only call.
  virtual bool split_backward() const { return false; }
  void backward_data(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y);
  void backward_weights(TensorRefs dy, TensorRefs x, TensorRefs y);

 protected:
  // Takes the kind's contract: outputs (an implementation may then choose other layouts for
  // them), parameters (declared here with their shapes; bound to storage later, see
  // ParamArena) and work.
  Layer(Backend& be, std::string name, std::vector<TensorDesc> inputs, const Contract& c);

  // Declares the member `t` (undefined until bound) as transient scratch of `desc`, or of
  // `bytes` (f32 elements, rounded up). Construction only; a layer that branches on whether a
  // tensor exists keeps that fact apart, since `t` stays undefined until bound.
  void transient(Tensor& t, const TensorDesc& desc);
  void transient(Tensor& t, std::size_t bytes);
  // Declares the member `t` (undefined until bound) as saved state of `desc` (see
  // saved_state()). Construction only; `t` must not move (declare a vector's elements once the
  // vector is complete).
  void saved(Tensor& t, const TensorDesc& desc);
  // Stores parameter k (value, gradient and so optimizer state) as `desc`: the layout the
  // implementation's kernels read (a oneDNN blocked weight format; same shape). Construction
  // only, before the parameter is bound.
  void pack_param(std::size_t k, const TensorDesc& desc);

  // What an implementation computes, called with arguments of the right arity: forward,
  // backward (both gradients), and where split_backward() the data and weight gradients apart.
  virtual void fprop(MutTensorRefs y, TensorRefs x) = 0;
  virtual void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) = 0;
  virtual void dgrad(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y);
  virtual void wgrad(TensorRefs dy, TensorRefs x, TensorRefs y);

  // bprop() of a split implementation: dgrad where some input gradient is wanted, then wgrad
  // where the parameter gradients are (param_grads()).
  void backward_in_two(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y);
  // Replaces the analytic work of one call, for a kind whose work depends on the mode (dropout
  // inside attention is off in eval mode). FLOPs and bytes are set together and only from the
  // kind's shared formulas, so no backend can report one without the other.
  void set_work(const Flops& flops, const Bytes& bytes) {
    flops_ = flops;
    bytes_ = bytes;
  }
  // Parameter k's compute copy in `form` (a bf16 cast in the layout a product reads: "bf16"
  // for the parameter's own layout, else a name of the packed format), of `bytes`, which
  // make(dst) writes from the f32 master. In a graph the copy is made once per forward pass,
  // by the first layer that asks for it, kept in memory (category weights) and shared by
  // every layer reading the same parameter in the same form (tied parameters included); the
  // backward reads the forward's. Standalone (no pass count) it is made at every call into
  // `scratch` (a transient of at least `bytes`). Returns where it is.
  const void* param_copy(std::size_t k, const std::string& form, std::size_t bytes,
                         const Tensor& scratch, const std::function<void(void* dst)>& make);
  // param_copy in the "bf16" form: parameter k rounded to bf16 in its own layout (2 bytes a
  // value), written by make(dst).
  const void* bf16_param_copy(std::size_t k, const Tensor& scratch,
                              const std::function<void(void* dst)>& make) {
    return param_copy(k, "bf16", static_cast<std::size_t>(params_.at(k).value.numel()) * 2, scratch,
                      make);
  }
  // Where param_copy keeps its copies: "once a pass" in a graph, "each call" standalone.
  const char* param_copies_made() const { return pass_ ? "once a pass" : "each call"; }
  // This call's index under set_call_numbering, counting the call.
  uint64_t next_call_index() { return numbering_.index(call_count_++); }
  // For layers that keep their own count (a CUDA device counter): index = numbering.index(count).
  const CallNumbering& call_numbering() const { return numbering_; }

  Backend& be_;
  const char* kind_;
  std::string name_;
  std::string problem_;
  std::vector<TensorDesc> inputs_;
  std::vector<TensorDesc> outputs_;
  std::vector<Param> params_;
  std::vector<bool> output_grads_;
  std::vector<bool> input_grads_;
  std::vector<bool> saved_inputs_;
  std::vector<bool> saved_outputs_;
  bool training_ = true;
  bool param_grads_ = true;

 private:
  Flops flops_;
  Bytes bytes_;
  uint64_t call_count_ = 0;
  std::shared_ptr<const uint64_t> pass_;  // the graph's current forward pass (param_copy)
  CallNumbering numbering_;
  std::vector<DeclaredTensor> transients_;
  bool transients_bound_ = false;
  std::vector<DeclaredTensor> saved_;
  bool saved_bound_ = false;
};

// Binds `layer`'s transients to a workspace of its own (nothing when it needs none).
void bind_own_transients(Backend& be, Layer& layer);
// Gives each of `layer`'s saved state tensors a buffer of its own (category feature_maps).
void bind_own_saved_state(Backend& be, Layer& layer);

// Helpers for the shape checks every layer makes at build. They throw tbd::Error with messages
// like "Conv2d 'layer1.0.conv1': input x must have rank 4 (N, C, H, W), got (3, 224, 224)".
[[noreturn]] void throw_layer_error(const char* kind, const std::string& name,
                                    const std::string& msg);
#define TBD_LAYER_CHECK(cond, kind, name, ...)                                             \
  do {                                                                                     \
    if (!(cond)) ::tbd::throw_layer_error(kind, name, ::tbd::detail::concat(__VA_ARGS__)); \
  } while (0)
void check_rank(const char* kind, const std::string& name, const char* arg, const TensorDesc& d,
                int rank, const char* dims_doc);
void check_positive(const char* kind, const std::string& name, const char* arg, const Shape& s);
// "Conv2d 'c': inputs: expected 1 tensors, got 2" (contracts check their arity with this).
void check_input_count(const char* kind, const std::string& name, const std::vector<TensorDesc>& in,
                       std::size_t want, const char* what = "inputs");
// "Linear 'fc': input x must be f32, got (2, 3) i32 row_major".
void check_f32(const char* kind, const std::string& name, const char* arg, const TensorDesc& d);
// The same for kinds that also take bf16 (layers/precision.h): "... must be f32 or bf16, ...".
void check_floating(const char* kind, const std::string& name, const char* arg,
                    const TensorDesc& d);

// ---- registry: one implementation per (layer kind, backend kind) ----

template <class Config>
using LayerFactory = std::function<std::unique_ptr<Layer>(
    Backend&, const std::string& name, const Config&, const std::vector<TensorDesc>& inputs)>;

// Which layout an implementation wants each input in, given the inputs as they arrive: a fact
// of the implementation, not of the kind (oneDNN's convolutions want nChw16c, cuDNN's here take
// row-major). The graph inserts a Reorder wherever an input differs. An implementation states
// it as `static std::vector<Layout> input_layouts(const Config&, const std::vector<TensorDesc>&)`;
// without one, every input is wanted row-major.
template <class Config>
using InputLayouts =
    std::function<std::vector<Layout>(const Config&, const std::vector<TensorDesc>& inputs)>;

template <class Config>
struct LayerEntry {
  LayerFactory<Config> make;
  InputLayouts<Config> input_layouts;
  bool takes_bf16 = false;  // the implementation computes in bf16 (layers/precision.h)
};

template <class Config>
std::map<DeviceKind, LayerEntry<Config>>& layer_registry() {
  static std::map<DeviceKind, LayerEntry<Config>> r;
  return r;
}

template <class Config>
bool register_layer(DeviceKind device, LayerFactory<Config> f, InputLayouts<Config> layouts,
                    bool takes_bf16) {
  layer_registry<Config>()[device] =
      LayerEntry<Config>{std::move(f), std::move(layouts), takes_bf16};
  return true;
}

template <class Config>
const LayerEntry<Config>& layer_entry(DeviceKind device, const std::string& name) {
  auto& r = layer_registry<Config>();
  auto it = r.find(device);
  TBD_CHECK(it != r.end(), Config::kKind, " '", name, "': no implementation on backend ",
            to_string(device));
  return it->second;
}

// The layouts the implementation on `device` wants for these inputs.
template <class Config>
std::vector<Layout> wanted_layouts(DeviceKind device, const std::string& name, const Config& cfg,
                                   const std::vector<TensorDesc>& inputs) {
  return layer_entry<Config>(device, name).input_layouts(cfg, inputs);
}

// The dtypes the implementation on `device` wants these inputs in under math mode `m`: the
// kind's bf16 policy (layers/precision.h) applied to what the implementation takes.
template <class Config>
std::vector<DType> wanted_dtypes(DeviceKind device, const std::string& name, MathMode m,
                                 const std::vector<TensorDesc>& inputs) {
  return wanted_dtypes(Config::kKind, name, layer_entry<Config>(device, name).takes_bf16, device, m,
                       inputs);
}

// Builds a layer of Config's kind on `be` with its parameters unbound (a Graph binds them into
// its arena). Throws if the backend has no implementation.
// Under bf16 a kind that computes in bf16 (layers/precision.h) without a bf16 implementation on
// the backend throws naming the layer, before anything is built.
template <class Config>
std::unique_ptr<Layer> construct_layer(Backend& be, const std::string& name, const Config& cfg,
                                       const std::vector<TensorDesc>& inputs) {
  if (be.math_mode() == MathMode::kBf16)
    wanted_dtypes<Config>(be.kind(), name, be.math_mode(), inputs);
  return layer_entry<Config>(be.kind(), name).make(be, name, cfg, inputs);
}

// A standalone layer: constructed, with its parameters bound to an arena of its own
// (gradients zero, values uninitialised: see init_param), its transients to a workspace of
// its own and its saved state to buffers of its own.
template <class Config>
std::unique_ptr<Layer> make_layer(Backend& be, const std::string& name, const Config& cfg,
                                  const std::vector<TensorDesc>& inputs) {
  std::unique_ptr<Layer> layer = construct_layer(be, name, cfg, inputs);
  std::vector<Param*> ps;
  for (Param& p : layer->params()) ps.push_back(&p);
  bind_params(be, ps);
  bind_own_transients(be, *layer);
  bind_own_saved_state(be, *layer);
  return layer;
}

#define TBD_LAYER_CONCAT_(a, b) a##b
#define TBD_LAYER_CONCAT(a, b) TBD_LAYER_CONCAT_(a, b)
// For implementations that take their inputs in whatever layout they come (elementwise ops).
inline std::vector<Layout> layouts_as_given(const std::vector<TensorDesc>& in) {
  std::vector<Layout> v;
  for (const TensorDesc& d : in) v.push_back(d.layout);
  return v;
}

template <class Impl, class Config>
std::vector<Layout> impl_input_layouts(const Config& cfg, const std::vector<TensorDesc>& in) {
  if constexpr (requires { Impl::input_layouts(cfg, in); }) {
    return Impl::input_layouts(cfg, in);
  } else {
    return std::vector<Layout>(in.size(), Layout::kRowMajor);
  }
}

// Whether an implementation computes in bf16: its `static constexpr bool kTakesBf16 = true`
// (layers/precision.h says what a kind does with it).
template <class Impl>
constexpr bool impl_takes_bf16() {
  if constexpr (requires { Impl::kTakesBf16; }) {
    return Impl::kTakesBf16;
  } else {
    return false;
  }
}

// TBD_REGISTER_LAYER(Conv2dConfig, DeviceKind::kCpu, Conv2dOneDnn): the class must have a
// constructor (Backend&, const std::string&, const Config&, const std::vector<TensorDesc>&),
// and may have a static input_layouts (see InputLayouts) and a kTakesBf16 (impl_takes_bf16).
#define TBD_REGISTER_LAYER(Config, device, Impl)                                                 \
  static const bool TBD_LAYER_CONCAT(tbd_registered_, __LINE__) = ::tbd::register_layer<Config>( \
      device,                                                                                    \
      [](::tbd::Backend& be, const std::string& name, const Config& cfg,                         \
         const std::vector<::tbd::TensorDesc>& in) {                                             \
        return std::unique_ptr<::tbd::Layer>(new Impl(be, name, cfg, in));                       \
      },                                                                                         \
      &::tbd::impl_input_layouts<Impl, Config>, ::tbd::impl_takes_bf16<Impl>())

}  // namespace tbd
