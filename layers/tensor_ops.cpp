// layers/tensor_ops.cpp: shape checks, FLOP and byte counts of Add, Concat, Split, Reshape,
// Transpose, Detach and Reverse (shared by all backends).
#include "layers/tensor_ops.h"

#include <algorithm>

namespace tbd {
namespace {

std::string shapes_of(const std::vector<TensorDesc>& x) {
  std::string s;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (i) s += ", ";
    s += x[i].shape.to_string();
  }
  return s;
}

void check_row_major(const char* k, const std::string& name, const char* arg, const TensorDesc& x) {
  TBD_LAYER_CHECK(x.layout == Layout::kRowMajor, k, name, "input ", arg, " must be row-major, got ",
                  x.to_string());
}

void check_input(const char* k, const std::string& name, const char* arg, const TensorDesc& x) {
  TBD_LAYER_CHECK(x.shape.rank() >= 1, k, name, "input ", arg, " must have rank >= 1, got ",
                  x.shape.to_string());
  check_positive(k, name, arg, x.shape);
}

}  // namespace

int normalize_axis(const char* kind, const std::string& name, int axis, int rank) {
  TBD_LAYER_CHECK(axis >= -rank && axis < rank, kind, name, "axis ", axis,
                  " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

TensorDesc add_output_desc(const std::string& name, const std::vector<TensorDesc>& x) {
  const char* k = AddConfig::kKind;
  TBD_LAYER_CHECK(x.size() == 2, k, name, "inputs: expected 2 tensors, got ", x.size());
  check_input(k, name, "x0", x[0]);
  check_input(k, name, "x1", x[1]);
  TBD_LAYER_CHECK(x[0].shape == x[1].shape, k, name, "inputs x0 ", x[0].shape.to_string(),
                  " and x1 ", x[1].shape.to_string(), " must have the same shape");
  TBD_LAYER_CHECK(x[0].layout == x[1].layout, k, name, "inputs x0 ", x[0].to_string(), " and x1 ",
                  x[1].to_string(), " must have the same layout");
  TBD_LAYER_CHECK(is_floating(x[0].dtype) && x[0].dtype == x[1].dtype, k, name,
                  "inputs must be both f32 or both bf16, got x0 ", x[0].to_string(), " and x1 ",
                  x[1].to_string());
  return x[0];
}

Flops add_flops(const Shape& x) { return Flops{static_cast<double>(x.numel()), 0, 0}; }

Bytes add_bytes(const Shape& x, DType t) {
  const double e = static_cast<double>(x.numel());
  return Bytes{bytes_of(3 * e, t), bytes_of(3 * e, t), 0};
}

Bytes copy_bytes(const std::vector<TensorDesc>& x, const std::vector<TensorDesc>& y) {
  double moved = 0;
  bool grads = true;  // gradients flow only through f32 data
  for (const TensorDesc& d : x) {
    moved += static_cast<double>(d.bytes());
    grads = grads && is_floating(d.dtype);
  }
  for (const TensorDesc& d : y) moved += static_cast<double>(d.bytes());
  return Bytes{moved, grads ? moved : 0.0, 0};
}

bool channel_blocks_ok(const std::vector<TensorDesc>& x, int axis) {
  for (const TensorDesc& d : x) {
    if (d.layout != Layout::kNChw16c || d.shape.rank() != 4 || d.shape[1] % 16 != 0) return false;
  }
  return !x.empty() && axis == 1;
}

bool channels_last_ok(const std::vector<TensorDesc>& x, int axis) {
  for (const TensorDesc& d : x) {
    if (d.layout != Layout::kNhwc || d.shape.rank() != 4) return false;
  }
  return !x.empty() && axis == 1;
}

Shape concat_output_shape(const std::string& name, const ConcatConfig& cfg,
                          const std::vector<TensorDesc>& x) {
  const char* k = ConcatConfig::kKind;
  TBD_LAYER_CHECK(!x.empty(), k, name, "needs at least one input");
  const int rank = x[0].shape.rank();
  const int axis = normalize_axis(k, name, cfg.axis, rank);
  const bool blocked = channel_blocks_ok(x, axis) || channels_last_ok(x, axis);
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::string arg = detail::concat("x", i);
    check_input(k, name, arg.c_str(), x[i]);
    if (!blocked) check_row_major(k, name, arg.c_str(), x[i]);
  }
  std::vector<int64_t> dims = x[0].shape.dims();
  dims[axis] = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const Shape& s = x[i].shape;
    bool ok = s.rank() == rank && x[i].dtype == x[0].dtype;
    for (int d = 0; ok && d < rank; ++d) ok = d == axis || s[d] == x[0].shape[d];
    TBD_LAYER_CHECK(ok, k, name, "input x", i, " ", x[i].to_string(), " does not match x0 ",
                    x[0].to_string(), " outside axis ", axis, " (inputs: ", shapes_of(x), ")");
    dims[axis] += s[axis];
  }
  return Shape(dims);
}

std::vector<int64_t> split_sizes(const SplitConfig& cfg, const Shape& x) {
  if (cfg.parts <= 0) return cfg.sizes;
  const int axis = cfg.axis < 0 ? cfg.axis + x.rank() : cfg.axis;
  const int64_t dim = axis >= 0 && axis < x.rank() ? x[axis] : 0;
  return std::vector<int64_t>(cfg.parts, dim / cfg.parts);
}

std::vector<Shape> split_output_shapes(const std::string& name, const SplitConfig& cfg,
                                       const TensorDesc& x) {
  const char* k = SplitConfig::kKind;
  check_input(k, name, "x", x);
  const int axis = normalize_axis(k, name, cfg.axis, x.shape.rank());
  TBD_LAYER_CHECK(
      cfg.parts == 0 || (cfg.sizes.empty() && cfg.parts > 0 && x.shape[axis] % cfg.parts == 0), k,
      name, "invalid config: parts=", cfg.parts, " must be positive, divide x's dim ", axis, " = ",
      x.shape[axis], " and come without sizes (x ", x.shape.to_string(), ")");
  const std::vector<int64_t> cut = split_sizes(cfg, x.shape);
  const bool blocked = channels_last_ok({x}, axis) ||
                       (channel_blocks_ok({x}, axis) &&
                        std::all_of(cut.begin(), cut.end(), [](int64_t s) { return s % 16 == 0; }));
  if (!blocked) check_row_major(k, name, "x", x);
  TBD_LAYER_CHECK(!cut.empty(), k, name, "needs at least one output size");
  int64_t sum = 0;
  std::string sizes;
  for (int64_t s : cut) {
    if (!sizes.empty()) sizes += ", ";
    sizes += std::to_string(s);
    sum += s;
  }
  bool positive = std::all_of(cut.begin(), cut.end(), [](int64_t s) { return s > 0; });
  TBD_LAYER_CHECK(positive && sum == x.shape[axis], k, name, "sizes (", sizes,
                  ") must be positive and sum to x's dim ", axis, " = ", x.shape[axis], ", x ",
                  x.shape.to_string());
  std::vector<Shape> out;
  for (int64_t s : cut) {
    std::vector<int64_t> d = x.shape.dims();
    d[axis] = s;
    out.emplace_back(d);
  }
  return out;
}

Shape reshape_output_shape(const std::string& name, const ReshapeConfig& cfg, const TensorDesc& x) {
  const char* k = ReshapeConfig::kKind;
  check_input(k, name, "x", x);
  check_row_major(k, name, "x", x);
  Shape target(cfg.shape);
  int infer = -1;
  int64_t known = 1;
  bool ok = !cfg.shape.empty();
  for (int i = 0; i < target.rank(); ++i) {
    if (cfg.shape[i] == -1 && infer < 0) {
      infer = i;
    } else if (cfg.shape[i] > 0) {
      known *= cfg.shape[i];
    } else {
      ok = false;
    }
  }
  TBD_LAYER_CHECK(ok, k, name, "target shape ", target.to_string(),
                  " must have positive dims and at most one -1");
  std::vector<int64_t> dims = cfg.shape;
  if (infer >= 0) {
    TBD_LAYER_CHECK(x.shape.numel() % known == 0, k, name, "cannot reshape x ", x.shape.to_string(),
                    " (", x.shape.numel(), " elements) to ", target.to_string());
    dims[infer] = x.shape.numel() / known;
  }
  Shape out(dims);
  TBD_LAYER_CHECK(out.numel() == x.shape.numel(), k, name, "cannot reshape x ", x.shape.to_string(),
                  " (", x.shape.numel(), " elements) to ", target.to_string());
  return out;
}

Shape transpose_output_shape(const std::string& name, const TransposeConfig& cfg,
                             const TensorDesc& x) {
  const char* k = TransposeConfig::kKind;
  check_input(k, name, "x", x);
  check_row_major(k, name, "x", x);
  const int rank = x.shape.rank();
  TBD_LAYER_CHECK(rank <= 12, k, name, "input x must have rank <= 12, got ", x.shape.to_string());
  std::string perm;
  for (int p : cfg.perm) {
    if (!perm.empty()) perm += ", ";
    perm += std::to_string(p);
  }
  std::vector<bool> seen(rank, false);
  bool ok = static_cast<int>(cfg.perm.size()) == rank;
  for (int p : cfg.perm) {
    ok = ok && p >= 0 && p < rank && !seen[p];
    if (ok) seen[p] = true;
  }
  TBD_LAYER_CHECK(ok, k, name, "perm {", perm, "} is not a permutation of the ", rank,
                  " dims of x ", x.shape.to_string());
  std::vector<int64_t> dims(rank);
  for (int i = 0; i < rank; ++i) dims[i] = x.shape[cfg.perm[i]];
  return Shape(dims);
}

Shape reverse_output_shape(const std::string& name, const std::vector<TensorDesc>& in) {
  const char* k = ReverseConfig::kKind;
  TBD_LAYER_CHECK(in.size() == 1 || in.size() == 2, k, name,
                  "inputs: expected 1 or 2 tensors (x [, lengths]), got ", in.size());
  const TensorDesc& x = in[0];
  TBD_LAYER_CHECK(x.shape.rank() >= 2, k, name, "input x must have rank >= 2 (T, N, ...), got ",
                  x.shape.to_string());
  check_positive(k, name, "x", x.shape);
  check_row_major(k, name, "x", x);
  if (in.size() == 2) {
    const TensorDesc& len = in[1];
    TBD_LAYER_CHECK(len.shape == Shape{x.shape[1]} && len.dtype == DType::kI32, k, name,
                    "input lengths must be (N) = (", x.shape[1], ") i32 for x ",
                    x.shape.to_string(), ", got ", len.to_string());
    check_row_major(k, name, "lengths", len);
  }
  return x.shape;
}

Bytes reverse_bytes(const std::vector<TensorDesc>& in) {
  Bytes b = copy_bytes({in[0]}, {in[0]});
  if (in.size() == 2) {
    const double len = static_cast<double>(in[1].bytes());
    b.fprop += len;
    if (b.dgrad > 0) b.dgrad += len;  // f32 x: the gradient's permutation reads them too
  }
  return b;
}

template <>
Contract contract(const std::string& name, const AddConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  (void)cfg;
  const TensorDesc y = add_output_desc(name, in);
  Contract c{{y}, {}, add_flops(in[0].shape), add_bytes(in[0].shape, in[0].dtype)};
  saves_nothing(c, in.size());  // dx = dy for each input
  return c;
}

std::string describe_problem(const AddConfig&, const std::vector<TensorDesc>& in, const Contract&) {
  return detail::concat(in.size(), " x ", in[0].to_string());
}

namespace {
// The copy kinds: outputs of the input's dtype, row-major; no FLOPs, copy bytes.
Contract copy_contract(const std::vector<TensorDesc>& in, const std::vector<Shape>& out) {
  Contract c;
  for (const Shape& s : out) c.outputs.push_back(TensorDesc{s, in[0].dtype, Layout::kRowMajor});
  c.bytes = copy_bytes(in, c.outputs);
  saves_nothing(c, in.size());  // backward moves dy back: no forward tensor is read
  return c;
}
}  // namespace

template <>
Contract contract(const std::string& name, const ConcatConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  Contract c = copy_contract(in, {concat_output_shape(name, cfg, in)});
  c.outputs[0].layout = in[0].layout;  // nChw16c only along channels in blocks of 16
  return c;
}

std::string describe_problem(const ConcatConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c) {
  return detail::concat(in.size(), " inputs -> ", c.outputs[0].shape.to_string(), " axis ",
                        cfg.axis);
}

template <>
Contract contract(const std::string& name, const SplitConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(SplitConfig::kKind, name, in, 1);
  Contract c = copy_contract(in, split_output_shapes(name, cfg, in[0]));
  for (TensorDesc& d : c.outputs) d.layout = in[0].layout;
  return c;
}

std::string describe_problem(const SplitConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c) {
  return detail::concat("x ", in[0].shape.to_string(), " -> ", c.outputs.size(), " outputs axis ",
                        cfg.axis);
}

template <>
Contract contract(const std::string& name, const ReshapeConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(ReshapeConfig::kKind, name, in, 1);
  return copy_contract(in, {reshape_output_shape(name, cfg, in[0])});
}

std::string describe_problem(const ReshapeConfig&, const std::vector<TensorDesc>& in,
                             const Contract& c) {
  return detail::concat("x ", in[0].shape.to_string(), " -> ", c.outputs[0].shape.to_string());
}

template <>
Contract contract(const std::string& name, const TransposeConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(TransposeConfig::kKind, name, in, 1);
  return copy_contract(in, {transpose_output_shape(name, cfg, in[0])});
}

std::string describe_problem(const TransposeConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  std::string p;
  for (int v : cfg.perm) {
    if (!p.empty()) p += ",";
    p += std::to_string(v);
  }
  return detail::concat("x ", in[0].shape.to_string(), " perm {", p, "}");
}

template <>
Contract contract(const std::string& name, const DetachConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  (void)cfg;
  check_input_count(DetachConfig::kKind, name, in, 1);
  check_positive(DetachConfig::kKind, name, "x", in[0].shape);
  Contract c{{in[0]}, {}, Flops{}, Bytes{}};
  c.bytes = copy_bytes(in, c.outputs);
  c.bytes.dgrad = 0;  // nothing flows back
  c.output_grads = {false};
  saves_nothing(c, in.size());
  return c;
}

std::string describe_problem(const DetachConfig&, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return "x " + in[0].to_string();
}

template <>
Contract contract(const std::string& name, const ReverseConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  (void)cfg;
  const Shape ys = reverse_output_shape(name, in);
  Contract c{{TensorDesc{ys, in[0].dtype, Layout::kRowMajor}}, {}, Flops{}, reverse_bytes(in)};
  c.input_grads = {true, false};  // lengths only index
  saves_nothing(c, in.size());
  if (in.size() > 1) c.saved_inputs[1] = true;  // backward reverses dy within the lengths
  return c;
}

std::string describe_problem(const ReverseConfig&, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].to_string(),
                        in.size() > 1 ? " within lengths" : " whole sequences");
}

}  // namespace tbd
