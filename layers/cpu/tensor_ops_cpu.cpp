// layers/cpu/tensor_ops_cpu.cpp: Add, Concat, Split, Reshape, Transpose, Detach and Reverse
// on the CPU.
//
// Add is a oneDNN binary add over the dense buffers (layout-free: both inputs share one
// layout); its gradient is a copy of dy into both inputs. Transpose is a oneDNN reorder whose
// source descriptor carries x's strides permuted, so any permutation of up to 12 dims runs in
// oneDNN's parallel reorder kernels; backward is the inverse permutation. Concat, Split and
// Reshape are strided row copies (own code: oneDNN's concat covers neither split nor rank > 6
// and would add nothing to a memcpy), parallel over rows and over chunks of long rows. Reverse
// copies each (t, n) row of x from its source step, in parallel over the rows; its lengths are
// checked before anything is written.
#include <algorithm>
#include <cstring>

#include "backends/cpu/onednn.h"
#include "layers/tensor_ops.h"

namespace tbd::cpu {
namespace {

using dnnl::memory;

// Copies `rows` rows of `len` bytes from src (row pitch src_pitch) to dst (row pitch dst_pitch).
void copy_rows(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t rows,
               int64_t len) {
  constexpr int64_t kChunk = int64_t{1} << 16;  // bytes per task: large enough to stream
  const int64_t chunks = (len + kChunk - 1) / kChunk;
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
#pragma omp parallel for collapse(2) schedule(static) if (rows * len > kChunk)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t off = c * kChunk;
      std::memcpy(d + r * dst_pitch + off, s + r * src_pitch + off, std::min(kChunk, len - off));
    }
  }
}

void zero_rows(void* dst, int64_t dst_pitch, int64_t rows, int64_t len) {
  char* d = static_cast<char*>(dst);
#pragma omp parallel for schedule(static) if (rows * len > (int64_t{1} << 16))
  for (int64_t r = 0; r < rows; ++r) std::memset(d + r * dst_pitch, 0, len);
}

void copy_tensor(const Tensor& dst, const Tensor& src) {
  copy_rows(dst.raw(), 0, src.raw(), 0, 1, static_cast<int64_t>(src.bytes()));
}

// Product of dims [from, to).
int64_t prod(const Shape& s, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; ++i) p *= s[i];
  return p;
}

// ---- Add ----

class AddOneDnn final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  AddOneDnn(Backend& be, const std::string& name, const AddConfig& cfg,
            const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cpu_(as_cpu(be)) {
    // Both inputs and y share one layout, so the op is elementwise over the dense buffers.
    md_ = memory::desc({in[0].shape.numel()}, dnnl_dtype(in[0].dtype), memory::format_tag::a);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    try {
      pd_ = dnnl::binary::primitive_desc(
          dnnl::binary::desc(dnnl::algorithm::binary_add, md_, md_, md_), attr, cpu_.engine());
    } catch (const dnnl::error& e) {
      throw_layer_error(
          kind(), name,
          std::string("oneDNN has no binary add for x ") + in[0].to_string() + ": " + e.what());
    }
    add_ = dnnl::binary(pd_);
    if (pd_.scratchpad_desc().get_size()) transient(scratch_, pd_.scratchpad_desc().get_size());
  }

  // Both inputs in one layout (the binary add runs over the dense buffers): as they come when
  // they agree, else both row-major.
  static std::vector<Layout> input_layouts(const AddConfig&, const std::vector<TensorDesc>& in) {
    const bool same = in.size() == 2 && in[0].layout == in[1].layout;
    return same ? layouts_as_given(in) : std::vector<Layout>(in.size(), Layout::kRowMajor);
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC_0, flat(*x[0])}, {DNNL_ARG_SRC_1, flat(*x[1])}, {DNNL_ARG_DST, flat(*y[0])}};
    if (scratch_.defined()) {
      args[DNNL_ARG_SCRATCHPAD] = memory(pd_.scratchpad_desc(), cpu_.engine(), scratch_.raw());
    }
    execute(cpu_, add_, args, "Add forward");
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    for (Tensor* d : dx) {
      if (d != nullptr) copy_tensor(*d, *dy[0]);
    }
  }

 private:
  memory flat(const Tensor& t) { return memory(md_, cpu_.engine(), t.raw()); }

  CpuBackend& cpu_;
  memory::desc md_;
  dnnl::binary::primitive_desc pd_;
  dnnl::primitive add_;
  Tensor scratch_;
};

// ---- Concat and Split: the same strided copies in opposite directions ----

// The pieces of a tensor cut along one axis: outer rows, each holding the pieces' runs.
struct AxisCut {
  int64_t outer = 1;              // rows: product of dims before the axis
  int64_t whole = 0;              // bytes of one row of the whole tensor
  std::vector<int64_t> len, off;  // bytes of each piece's run and its offset in the row

  AxisCut() = default;
  AxisCut(const Shape& whole_shape, int axis, const std::vector<int64_t>& sizes, DType dt) {
    const int64_t inner =
        prod(whole_shape, axis + 1, whole_shape.rank()) * static_cast<int64_t>(dtype_size(dt));
    outer = prod(whole_shape, 0, axis);
    whole = whole_shape[axis] * inner;
    int64_t o = 0;
    for (int64_t s : sizes) {
      len.push_back(s * inner);
      off.push_back(o);
      o += s * inner;
    }
  }
  // The cut along channels (axis 1) of channels-last (N, C, H, W): rows of the N H W positions.
  static AxisCut channels_last(const Shape& whole_shape, const std::vector<int64_t>& sizes,
                               DType dt) {
    const Shape& s = whole_shape;
    return AxisCut(Shape{s[0], s[2], s[3], s[1]}, 3, sizes, dt);
  }
  // whole <- pieces (a null piece is zeros).
  void gather(void* whole_data, const std::vector<const void*>& pieces) const {
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      char* dst = static_cast<char*>(whole_data) + off[k];
      if (pieces[k]) {
        copy_rows(dst, whole, pieces[k], len[k], outer, len[k]);
      } else {
        zero_rows(dst, whole, outer, len[k]);
      }
    }
  }
  // pieces <- whole (null pieces are skipped).
  void scatter(const std::vector<void*>& pieces, const void* whole_data) const {
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      if (!pieces[k]) continue;
      copy_rows(pieces[k], len[k], static_cast<const char*>(whole_data) + off[k], whole, outer,
                len[k]);
    }
  }
};

class ConcatCpu final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;  // byte copies

  ConcatCpu(Backend& be, const std::string& name, const ConcatConfig& cfg,
            const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)) {
    const Shape& ys = outputs_[0].shape;
    axis_ = normalize_axis(kind(), name, cfg.axis, ys.rank());
    std::vector<int64_t> sizes;
    for (const auto& t : in) sizes.push_back(t.shape[axis_]);
    if (in[0].layout == Layout::kNhwc) {  // all nhwc, along channels (the contract)
      cut_ = AxisCut::channels_last(ys, sizes, in[0].dtype);
    } else {
      cut_ = AxisCut(ys, axis_, sizes, in[0].dtype);
    }
  }

  // Along channels, channels-last inputs stay channels-last, and with every C % 16 == 0 blocked
  // inputs stay blocked (one reorder fewer per branch and the next convolution keeps its fast
  // kernels); otherwise row-major.
  static std::vector<Layout> input_layouts(const ConcatConfig& cfg,
                                           const std::vector<TensorDesc>& in) {
    bool any_blocked = false, any_nhwc = false, channels_ok = !in.empty(), rank4 = !in.empty();
    for (const TensorDesc& d : in) {
      any_blocked |= d.layout == Layout::kNChw16c;
      any_nhwc |= d.layout == Layout::kNhwc;
      rank4 &= d.shape.rank() == 4;
      channels_ok &= d.shape.rank() == 4 && d.shape[1] % 16 == 0;
    }
    const int axis = in.empty() ? 0 : (cfg.axis < 0 ? cfg.axis + in[0].shape.rank() : cfg.axis);
    const Layout l = any_nhwc && rank4 && axis == 1            ? Layout::kNhwc
                     : any_blocked && channels_ok && axis == 1 ? Layout::kNChw16c
                                                               : Layout::kRowMajor;
    return std::vector<Layout>(in.size(), l);
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    std::vector<const void*> pieces;
    for (const Tensor* t : x) pieces.push_back(t->raw());
    cut_.gather(y[0]->raw(), pieces);
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    std::vector<void*> pieces;
    for (Tensor* t : dx) pieces.push_back(t ? t->raw() : nullptr);
    cut_.scatter(pieces, dy[0]->raw());
  }

 private:
  int axis_ = 0;
  AxisCut cut_;
};

class SplitCpu final : public Layer {
 public:
  SplitCpu(Backend& be, const std::string& name, const SplitConfig& cfg,
           const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)) {
    axis_ = normalize_axis(kind(), name, cfg.axis, in[0].shape.rank());
    if (in[0].layout == Layout::kNhwc) {  // along channels (the contract)
      cut_ = AxisCut::channels_last(in[0].shape, split_sizes(cfg, in[0].shape), in[0].dtype);
    } else {
      cut_ = AxisCut(in[0].shape, axis_, split_sizes(cfg, in[0].shape), in[0].dtype);
    }
  }

  // Along channels a channels-last input stays channels-last, and with every size a multiple of
  // 16 a blocked input stays blocked.
  static std::vector<Layout> input_layouts(const SplitConfig& cfg,
                                           const std::vector<TensorDesc>& in) {
    if (in.size() != 1) return std::vector<Layout>(in.size(), Layout::kRowMajor);
    const int axis = cfg.axis < 0 ? cfg.axis + in[0].shape.rank() : cfg.axis;
    if (in[0].layout == Layout::kNhwc && in[0].shape.rank() == 4 && axis == 1) {
      return {Layout::kNhwc};
    }
    const std::vector<int64_t> cut = split_sizes(cfg, in[0].shape);
    if (channel_blocks_ok(in, cfg.axis < 0 ? cfg.axis + 4 : cfg.axis) &&
        std::all_of(cut.begin(), cut.end(), [](int64_t s) { return s % 16 == 0; })) {
      return {Layout::kNChw16c};
    }
    return std::vector<Layout>(in.size(), Layout::kRowMajor);
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    std::vector<void*> pieces;
    for (Tensor* t : y) pieces.push_back(t->raw());
    cut_.scatter(pieces, x[0]->raw());
  }
  // A missing output gradient (an unused output) counts as zeros.
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0] == nullptr) return;
    std::vector<const void*> pieces;
    for (const Tensor* t : dy) pieces.push_back(t ? t->raw() : nullptr);
    cut_.gather(dx[0]->raw(), pieces);
  }

 private:
  int axis_ = 0;
  AxisCut cut_;
};

// ---- Detach: a copy, no gradient ----

class DetachCpu final : public Layer {
 public:
  DetachCpu(Backend& be, const std::string& name, const DetachConfig& cfg,
            const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)) {}
  static std::vector<Layout> input_layouts(const DetachConfig&, const std::vector<TensorDesc>& in) {
    return layouts_as_given(in);
  }
  void fprop(MutTensorRefs y, TensorRefs x) override { copy_tensor(*y[0], *x[0]); }
  // y carries no gradient: the graph never asks for one (Contract::output_grads).
  void bprop(MutTensorRefs, TensorRefs, TensorRefs, TensorRefs) override {}
};

// ---- Reshape ----

class ReshapeCpu final : public Layer {
 public:
  ReshapeCpu(Backend& be, const std::string& name, const ReshapeConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)) {}
  void fprop(MutTensorRefs y, TensorRefs x) override { copy_tensor(*y[0], *x[0]); }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0] != nullptr) copy_tensor(*dx[0], *dy[0]);
  }
};

// ---- Transpose ----

// Row-major strides of a shape.
memory::dims strides_of(const Shape& s) {
  memory::dims st(s.rank());
  int64_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

// dst = permute(src, perm) as a reorder: the source is read through dst's dims with src's
// strides permuted (dst dim i is src dim perm[i]).
dnnl::reorder::primitive_desc permuting_reorder(CpuBackend& cpu, const Shape& src,
                                                const std::vector<int>& perm, const Shape& dst,
                                                DType dt) {
  memory::dims src_st = strides_of(src), st(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) st[i] = src_st[perm[i]];
  memory::desc src_md(dnnl_dims(dst), dnnl_dtype(dt), st);
  memory::desc dst_md(dnnl_dims(dst), dnnl_dtype(dt), strides_of(dst));
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto& eng = cpu.engine();
  return dnnl::reorder::primitive_desc(eng, src_md, eng, dst_md, attr);
}

class TransposeOneDnn final : public Layer {
 public:
  TransposeOneDnn(Backend& be, const std::string& name, const TransposeConfig& cfg,
                  const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cpu_(as_cpu(be)) {
    const Shape& xs = in[0].shape;
    const Shape& ys = outputs_[0].shape;
    std::vector<int> inv(cfg.perm.size());
    for (std::size_t i = 0; i < cfg.perm.size(); ++i) inv[cfg.perm[i]] = static_cast<int>(i);
    try {
      fwd_pd_ = permuting_reorder(cpu_, xs, cfg.perm, ys, in[0].dtype);
      bwd_pd_ = permuting_reorder(cpu_, ys, inv, xs, in[0].dtype);
    } catch (const dnnl::error& e) {
      throw_layer_error(
          kind(), name,
          std::string("oneDNN has no reorder for x ") + in[0].to_string() + ": " + e.what());
    }
    fwd_ = dnnl::reorder(fwd_pd_);
    bwd_ = dnnl::reorder(bwd_pd_);
    std::size_t scratch =
        std::max(fwd_pd_.scratchpad_desc().get_size(), bwd_pd_.scratchpad_desc().get_size());
    if (scratch) {
      transient(scratch_, scratch);
    }
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    run(fwd_, fwd_pd_, x[0]->raw(), y[0]->raw(), "Transpose forward");
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0] != nullptr) run(bwd_, bwd_pd_, dy[0]->raw(), dx[0]->raw(), "Transpose backward");
  }

 private:
  void run(const dnnl::reorder& r, const dnnl::reorder::primitive_desc& pd, void* src, void* dst,
           const char* who) {
    auto& e = cpu_.engine();
    std::unordered_map<int, memory> args{{DNNL_ARG_FROM, memory(pd.src_desc(), e, src)},
                                         {DNNL_ARG_TO, memory(pd.dst_desc(), e, dst)}};
    if (pd.scratchpad_desc().get_size()) {
      args[DNNL_ARG_SCRATCHPAD] = memory(pd.scratchpad_desc(), e, scratch_.raw());
    }
    execute(cpu_, r, args, who);
  }

  TransposeConfig cfg_;
  CpuBackend& cpu_;
  dnnl::reorder::primitive_desc fwd_pd_, bwd_pd_;
  dnnl::reorder fwd_, bwd_;
  Tensor scratch_;
};

// ---- Reverse ----

class ReverseCpu final : public Layer {
 public:
  ReverseCpu(Backend& be, const std::string& name, const ReverseConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)) {
    const Shape& xs = in[0].shape;
    T_ = xs[0], N_ = xs[1];
    row_ = static_cast<int64_t>(in[0].bytes()) / (T_ * N_);
  }

  // y, x[0]: (T, N, ...)  x[1] = lengths: (N) i32, optional
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const int32_t* len = lengths(x);
    for (int64_t n = 0; len && n < N_; ++n) {
      if (len[n] < 0 || len[n] > T_) {
        throw_layer_error(
            kind(), name_,
            detail::concat("input lengths: sample ", n, " has length ", len[n], ", outside [0, ",
                           T_, "] (T of x ", inputs_[0].shape.to_string(), ")"));
      }
    }
    permute(y[0]->raw(), x[0]->raw(), len);
  }
  // The permutation is its own inverse: dx is dy permuted like x.
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs) override {
    if (dx[0] != nullptr) permute(dx[0]->raw(), dy[0]->raw(), lengths(x));
  }

 private:
  const int32_t* lengths(TensorRefs x) const {
    return x.size() > 1 ? x[1]->data<int32_t>() : nullptr;
  }
  // dst[t, n] = src[s, n], s = T-1-t without lengths, else len-1-t for t < len and t past it.
  // A length outside [0, T] (forward has thrown) leaves its sample in place.
  void permute(void* dst, const void* src, const int32_t* len) const {
    const int64_t T = T_, N = N_, row = row_;
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
#pragma omp parallel for collapse(2) schedule(static) if (T * N * row > (int64_t{1} << 16))
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t n = 0; n < N; ++n) {
        const int64_t l = len ? len[n] : T;
        const int64_t from = l >= 0 && l <= T && t < l ? l - 1 - t : t;
        std::memcpy(d + (t * N + n) * row, s + (from * N + n) * row, row);
      }
    }
  }

  int64_t T_ = 0, N_ = 0, row_ = 0;  // row_: bytes of one (t, n) row of x
};

TBD_REGISTER_LAYER(AddConfig, DeviceKind::kCpu, AddOneDnn);
TBD_REGISTER_LAYER(ConcatConfig, DeviceKind::kCpu, ConcatCpu);
TBD_REGISTER_LAYER(SplitConfig, DeviceKind::kCpu, SplitCpu);
TBD_REGISTER_LAYER(ReshapeConfig, DeviceKind::kCpu, ReshapeCpu);
TBD_REGISTER_LAYER(TransposeConfig, DeviceKind::kCpu, TransposeOneDnn);
TBD_REGISTER_LAYER(DetachConfig, DeviceKind::kCpu, DetachCpu);
TBD_REGISTER_LAYER(ReverseConfig, DeviceKind::kCpu, ReverseCpu);

}  // namespace
}  // namespace tbd::cpu
