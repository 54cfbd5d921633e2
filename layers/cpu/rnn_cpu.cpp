// layers/cpu/rnn_cpu.cpp: GRU (linear-before-reset) on oneDNN's RNN primitives
// (lbr_gru_forward/backward); LSTM and LSTMCell on sgemm and fused elementwise passes (at the
// end). Under --tbd_math=bf16 the GRU runs oneDNN's bf16 GRU and the LSTMs' products run on
// oneDNN's bf16 matmuls (layers/cpu/matmul_onednn.h), the gates and cell states in f32.
//
// GRU: one forward-training and one backward primitive per layer, all directions in it
// (bidirectional_concat): oneDNN's multi-layer primitives need input width == hidden width,
// per-layer primitives do not. Each layer's oneDNN workspace and the intermediate layer outputs
// are feature maps (kept for backward); the gradients between layers ping-pong through two
// transient buffers.
//
// Parameters stay row-major in PyTorch's layout and gate order (weights = 4 bytes x params,
// optimizers layout-free). The GRU's gate order differs from oneDNN's:
//   oneDNN lbr_gru: u = sigma(W_u x + U_u h + B_u), r = sigma(W_r x + U_r h + B_r),
//     o = tanh(W_o x + B_o + r * (U_o h + B_u')), h' = u * h + (1 - u) * o; gates (u, r, o),
//     bias (u, r, o, u').
//   PyTorch GRU: gates (r, z, n), z = u, n = o; so oneDNN gate g is PyTorch block {1, 0, 2}[g],
//     B_u = b_iz + b_hz, B_r = b_ir + b_hr, B_o = b_in, B_u' = b_hn.
// oneDNN 2.6's f32 RNNs want ldigo weights forward, ldgoi backward and give ldigo weight
// gradients, all plain (strided, unblocked). Every (direction, gate) block of such a tensor is a
// strided (in, H) matrix, and so is each gate block of a parameter; one reorder per block moves
// the parameters into the primitive's tensor (transposing and permuting the gates in one pass,
// once per forward and once per backward, like Conv2d's weights) and adds the primitive's
// gradients into Param::grad (a sum post-op), without staging copies. The bias always goes
// through a staging buffer (it is small). Initial states are explicit zeros (see the oneDNN note
// in RnnLayerPrims). oneDNN's RNN backward ADDS into its diff weights and diff bias (documented:
// "the RNN primitive backward pass accumulates gradients to its weight outputs"); we hand it
// zeroed workspace buffers and add the result into the row-major gradients ourselves, so the
// gradient policy (+=) holds whatever the implementation does.
//
// Costs that are oneDNN 2.6's own (results/tuning.md): its f32 training RNNs are the "ref"
// implementation (sgemm per time step; brgemm is inference or bf16 only), and for GRUs its
// backward adds each step's weights_iter gradient with its own GEMM of depth N (merge_gemm_iter
// is off for GRU cells), reading and writing all of dW_hh every step.
#include <algorithm>
#include <cstring>
#include <memory>

#include "backends/cpu/onednn.h"
#include "layers/cpu/matmul_onednn.h"
#include "layers/cpu/simd.h"
#include "layers/rnn.h"

namespace tbd::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// The lbr GRU's shape in oneDNN's terms.
struct CellInfo {
  int64_t gates;       // G: gate blocks of the weights
  int64_t bias_gates;  // oneDNN bias blocks: G + 1
  int params_per_dir;  // w_ih, w_hh, b_ih, b_hh
  int perm[4];         // oneDNN gate g is PyTorch gate block perm[g]
};
constexpr CellInfo kGruInfo{3, 4, 4, {1, 0, 2, -1}};

struct RnnShape {
  int64_t T, N, I, H, D;  // D: directions
};

Tensor workspace_for(Backend& be, const memory::desc& md,
                     MemCategory cat = MemCategory::kWorkspace) {
  std::size_t bytes = md.get_size();
  return be.empty(Shape{static_cast<int64_t>(std::max<std::size_t>((bytes + 3) / 4, 1))}, cat);
}

// dst[i] += src[i]
void add_into(float* dst, const float* src, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

// t = 0, on all threads like add_into (the weight gradients are tens of MB).
void zero(const Tensor& t) {
  float* p = t.f32();
  const int64_t n = t.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = 0.f;
}

// The primitives of one layer (all its directions) and the conversion of its parameters.
// Parameters are read through `params` by index at execution (they may be re-pointed).
class RnnLayerPrims {
 public:
  // `t`: the dtype of the layer's input, output and states (f32 or bf16); the gradients are
  // f32 either way (oneDNN 2.6's bf16 RNN backward takes f32 diff tensors only).
  RnnLayerPrims(CpuBackend& cpu, const char* kind, const std::string& name, RnnShape s,
                std::vector<Param>& params, std::size_t p0, DType t)
      : cpu_(cpu), s_(s), ci_(kGruInfo), params_(params), p0_(p0) {
    const int64_t T = s.T, N = s.N, I = s.I, H = s.H, D = s.D, G = ci_.gates;
    auto& eng = cpu.engine();
    const dt a = dnnl_dtype(t);
    src_md_ = memory::desc({T, N, I}, a, tag::tnc);
    dst_md_ = memory::desc({T, N, H * D}, a, tag::tnc);
    diff_src_md_ = memory::desc({T, N, I}, dt::f32, tag::tnc);
    diff_dst_md_ = memory::desc({T, N, H * D}, dt::f32, tag::tnc);
    // src_iter is always given (zeros). Without it, oneDNN 2.6.3's unidirectional LSTM backward
    // returned wrong weights_iter gradients (when LSTMs ran here: nonzero even for T = 1, where
    // h_{-1} = 0); oneDNN issue #1436 reports results that differ without src_iter and the same
    // workaround, so the GRU takes it too.
    iter_md_ = memory::desc({1, D, N, H}, a, tag::ldnc);
    diff_iter_md_ = memory::desc({1, D, N, H}, dt::f32, tag::ldnc);
    bias_md_ = memory::desc({1, D, ci_.bias_gates, H}, dt::f32, tag::ldgo);
    wl_.which = 0, wl_.in = I;
    wi_.which = 1, wi_.in = H;
    memory::desc wl_any({1, D, I, G, H}, a, tag::any);
    memory::desc wi_any({1, D, H, G, H}, a, tag::any);
    memory::desc dwl_any({1, D, I, G, H}, dt::f32, tag::any);
    memory::desc dwi_any({1, D, H, G, H}, dt::f32, tag::any);
    const memory::desc none;
    const memory::desc& it = iter_md_;  // src_iter
    const memory::desc& ot = none;      // no dst_iter (+ diff): the last states are not outputs
    auto dir = D == 2 ? dnnl::rnn_direction::bidirectional_concat
                      : dnnl::rnn_direction::unidirectional_left2right;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    try {
      dnnl::lbr_gru_forward::primitive_desc fpd(
          dnnl::lbr_gru_forward::desc(dnnl::prop_kind::forward_training, dir, src_md_, it, wl_any,
                                      wi_any, bias_md_, dst_md_, ot),
          attr, eng);
      dnnl::lbr_gru_backward::primitive_desc bpd(
          dnnl::lbr_gru_backward::desc(dnnl::prop_kind::backward, dir, src_md_, it, wl_any, wi_any,
                                       bias_md_, dst_md_, ot, diff_src_md_, diff_iter_md_, dwl_any,
                                       dwi_any, bias_md_, diff_dst_md_, ot),
          attr, eng, fpd);
      fwd_ = dnnl::lbr_gru_forward(fpd);
      bwd_ = dnnl::lbr_gru_backward(bpd);
      fwd_pd_ = fpd;
      bwd_pd_ = bpd;
    } catch (const dnnl::error& e) {
      throw_layer_error(kind, name,
                        detail::concat("oneDNN has no ", to_string(t), " GRU for T=", T, " N=", N,
                                       " I=", I, " H=", H, " dirs=", D, ": ", e.what()));
    }

    Backend& be = cpu;
    // The forward's workspace carries its state to the backward: saved state of the owning layer.
    saved_.push_back({&workspace_, TensorDesc{Shape{static_cast<int64_t>(std::max<std::size_t>(
                                       (fwd_pd_.workspace_desc().get_size() + 3) / 4, 1))}}});
    setup_slot(kind, name, wl_, fwd_pd_.weights_layer_desc(), bwd_pd_.weights_layer_desc(),
               bwd_pd_.diff_weights_layer_desc());
    setup_slot(kind, name, wi_, fwd_pd_.weights_iter_desc(), bwd_pd_.weights_iter_desc(),
               bwd_pd_.diff_weights_iter_desc());
    bias_stage_ = workspace_for(be, bias_md_);  // gathered by the forward, read by the backward
    transient(diff_bias_, bias_md_);
    // Zero initial states, and the unused gradients of the initial states.
    zeros_ = workspace_for(be, iter_md_);
    transient(diff_iter_, diff_iter_md_);
    std::memset(zeros_.raw(), 0, zeros_.bytes());
  }

  // The tensors used only inside one call (the backward's weights where they differ from the
  // forward's, the gradients before they are added, the initial states' gradients), for the
  // owning layer to declare as its transients (Layer::transient); undefined until bound.
  const std::vector<DeclaredTensor>& transients() const { return transients_; }
  // The tensors kept from the forward to the backward (oneDNN's RNN workspace), for the owning
  // layer to declare as its saved state (Layer::saved); undefined until bound.
  const std::vector<DeclaredTensor>& saved_state() const { return saved_; }

  std::string implementation() const {
    return detail::concat("fwd ", fwd_pd_.impl_info_str(), " bwd ", bwd_pd_.impl_info_str());
  }

  std::size_t scratchpad_bytes() const {
    return std::max(fwd_pd_.scratchpad_desc().get_size(), bwd_pd_.scratchpad_desc().get_size());
  }

  // src: (T, N, I), dst: (T, N, H*D), row-major, in the layer's dtype.
  void forward(void* src, void* dst, const Tensor& scratch) {
    auto& e = cpu_.engine();
    gather_bias();
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC_LAYER, memory(src_md_, e, src)},
        {DNNL_ARG_WEIGHTS_LAYER, forward_weights(wl_)},
        {DNNL_ARG_WEIGHTS_ITER, forward_weights(wi_)},
        {DNNL_ARG_BIAS, memory(bias_md_, e, bias_stage_.raw())},
        {DNNL_ARG_DST_LAYER, memory(dst_md_, e, dst)},
        {DNNL_ARG_WORKSPACE, memory(fwd_pd_.workspace_desc(), e, workspace_.raw())}};
    add_states(args, /*backward=*/false);
    add_scratch(args, fwd_pd_.scratchpad_desc(), scratch);
    execute(cpu_, fwd_, args, "GRU forward");
  }

  // The forward's src and dst, diff_dst (T, N, H*D) in, diff_src (T, N, I) out (assigned), the
  // two gradients f32;
  // parameter gradients accumulate unless `param_grads` is off (oneDNN computes them into its
  // own buffers anyway; they are then not added).
  void backward(void* src, void* dst, void* diff_dst, void* diff_src, const Tensor& scratch,
                bool param_grads) {
    auto& e = cpu_.engine();
    std::memset(diff_bias_.raw(), 0, diff_bias_.bytes());
    for (WeightSlot* w : {&wl_, &wi_}) zero(w->diff.buf);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC_LAYER, memory(src_md_, e, src)},
        {DNNL_ARG_WEIGHTS_LAYER, backward_weights(wl_)},
        {DNNL_ARG_WEIGHTS_ITER, backward_weights(wi_)},
        {DNNL_ARG_BIAS, memory(bias_md_, e, bias_stage_.raw())},
        {DNNL_ARG_DST_LAYER, memory(dst_md_, e, dst)},
        {DNNL_ARG_WORKSPACE, memory(fwd_pd_.workspace_desc(), e, workspace_.raw())},
        {DNNL_ARG_DIFF_SRC_LAYER, memory(diff_src_md_, e, diff_src)},
        {DNNL_ARG_DIFF_WEIGHTS_LAYER, memory(wl_.diff.md, e, wl_.diff.buf.raw())},
        {DNNL_ARG_DIFF_WEIGHTS_ITER, memory(wi_.diff.md, e, wi_.diff.buf.raw())},
        {DNNL_ARG_DIFF_BIAS, memory(bias_md_, e, diff_bias_.raw())},
        {DNNL_ARG_DIFF_DST_LAYER, memory(diff_dst_md_, e, diff_dst)}};
    add_states(args, /*backward=*/true);
    add_scratch(args, bwd_pd_.scratchpad_desc(), scratch);
    execute(cpu_, bwd_, args, "GRU backward");
    if (!param_grads) return;
    accumulate_weight_grad(wl_);
    accumulate_weight_grad(wi_);
    accumulate_bias_grad();
  }

 private:
  // Reorders between the parameters' gate blocks and the (in, H) blocks of a plain oneDNN
  // weights tensor (1, D, in, G, H) of any strides: block (d, g) is parameter d's gate block
  // perm[g], rows perm[g]*H.. of w (G*H, in) row-major, seen as (in, H) with strides (1, in).
  // All blocks share the two descriptors, so one primitive serves them at offsets.
  struct BlockReorder {
    dnnl::reorder prim;
    memory::desc param_md, block_md;     // (in, H) each
    int64_t d_stride = 0, g_stride = 0;  // elements of the oneDNN tensor
  };

  // A primitive's weights tensor (forward, backward or gradient) and its reorders.
  struct WeightsLink {
    memory::desc md;      // the primitive's
    Tensor buf;           // its tensor (a transient one is bound after construction)
    BlockReorder blocks;  // parameters <-> buf
  };

  // weights_layer (which = 0, in = I) or weights_iter (which = 1, in = H).
  struct WeightSlot {
    int which = 0;
    int64_t in = 0;
    WeightsLink fwd, bwd, diff;
    bool bwd_is_fwd = false;  // the backward reads the forward's tensor
  };

  Param& param(int64_t d, int k) { return params_[p0_ + d * ci_.params_per_dir + k]; }

  BlockReorder block_reorder(const memory::desc& md, int64_t in, bool into_params) {
    const dnnl_dims_t& st = md.data.format_desc.blocking.strides;  // (l, d, i, g, o)
    BlockReorder b;
    b.param_md = memory::desc({in, s_.H}, dt::f32, memory::dims{1, in});
    // The block in the primitive's dtype: the forward's bf16 weights are cast in this reorder.
    b.block_md = memory::desc({in, s_.H}, md.data_type(), memory::dims{st[2], st[4]});
    b.d_stride = st[1], b.g_stride = st[3];
    auto& eng = cpu_.engine();
    if (into_params) {
      dnnl::primitive_attr sum_attr;
      dnnl::post_ops po;
      po.append_sum(1.0f);
      sum_attr.set_post_ops(po);
      b.prim =
          dnnl::reorder(dnnl::reorder::primitive_desc(eng, b.block_md, eng, b.param_md, sum_attr));
    } else {
      b.prim = dnnl::reorder(dnnl::reorder::primitive_desc(eng, b.param_md, eng, b.block_md));
    }
    return b;
  }

  // The primitive's tensor for `md` (allocated here when `kept`, else declared transient by the
  // caller) and its block reorders from (into_params = false) or into (true) the parameters.
  // oneDNN 2.6's f32 training RNNs only choose plain formats; a blocked one (a later version's
  // brgemm RNNs) would need a staging reorder, so it stops here with the format named rather
  // than run untested.
  WeightsLink make_link(const char* kind, const std::string& name, const char* what,
                        const memory::desc& md, int64_t in, bool into_params, bool kept) {
    const dnnl_memory_desc_t& d = md.data;
    TBD_LAYER_CHECK(
        d.format_kind == dnnl_blocked && d.format_desc.blocking.inner_nblks == 0 && d.offset0 == 0,
        kind, name, "oneDNN chose a blocked or packed format for the ", what, " (format kind ",
        static_cast<int>(d.format_kind), ", ",
        d.format_kind == dnnl_blocked ? d.format_desc.blocking.inner_nblks : 0,
        " inner blocks); this implementation reorders plain (strided) ones only");
    WeightsLink l;
    l.md = md;
    if (kept) l.buf = workspace_for(cpu_, md);
    l.blocks = block_reorder(md, in, into_params);
    return l;
  }

  // Declares `t` as transient, of md's size.
  void transient(Tensor& t, const memory::desc& md) {
    transients_.push_back({&t, TensorDesc{Shape{static_cast<int64_t>(
                                   std::max<std::size_t>((md.get_size() + 3) / 4, 1))}}});
  }

  void setup_slot(const char* kind, const std::string& name, WeightSlot& w,
                  const memory::desc& fwd_md, const memory::desc& bwd_md,
                  const memory::desc& diff_md) {
    const char* which = w.which == 0 ? "weights_layer" : "weights_iter";
    // The forward's copy is kept to the backward when the backward reads it too; the others
    // live inside one call.
    w.bwd_is_fwd = bwd_md == fwd_md;
    w.fwd = make_link(kind, name, which, fwd_md, w.in, /*into_params=*/false,
                      /*kept=*/w.bwd_is_fwd);
    if (!w.bwd_is_fwd) {
      transient(w.fwd.buf, fwd_md);
      w.bwd = make_link(kind, name, which, bwd_md, w.in, /*into_params=*/false, /*kept=*/false);
      transient(w.bwd.buf, bwd_md);
    }
    w.diff = make_link(kind, name, which, diff_md, w.in, /*into_params=*/true, /*kept=*/false);
    transient(w.diff.buf, diff_md);
  }

  // Runs the block reorders between the parameters (values, or gradients when into_params) and
  // the primitive's tensor `t`.
  void run_blocks(const WeightSlot& w, const BlockReorder& b, void* buf, bool into_params) {
    auto& e = cpu_.engine();
    const int64_t block = s_.H * w.in;
    char* t = static_cast<char*>(buf);
    const int64_t elem = static_cast<int64_t>(b.block_md.data_type() == dt::f32 ? 4 : 2);
    for (int64_t d = 0; d < s_.D; ++d) {
      Param& p = param(d, w.which);
      float* base = into_params ? p.grad.f32() : p.value.f32();
      for (int64_t g = 0; g < ci_.gates; ++g) {
        memory pm(b.param_md, e, base + ci_.perm[g] * block);
        memory bm(b.block_md, e, t + (d * b.d_stride + g * b.g_stride) * elem);
        if (into_params) {
          execute(cpu_, b.prim, {{DNNL_ARG_FROM, bm}, {DNNL_ARG_TO, pm}},
                  "RNN weight-gradient accumulate");
        } else {
          execute(cpu_, b.prim, {{DNNL_ARG_FROM, pm}, {DNNL_ARG_TO, bm}}, "RNN weight reorder");
        }
      }
    }
  }

  // The primitive's weights from the parameters.
  memory fill_weights(const WeightSlot& w, const WeightsLink& l) {
    run_blocks(w, l.blocks, l.buf.raw(), /*into_params=*/false);
    auto& e = cpu_.engine();
    return memory(l.md, e, l.buf.raw());
  }

  memory forward_weights(WeightSlot& w) { return fill_weights(w, w.fwd); }

  // Parameters do not change between a forward and its backward: a tensor the backward shares
  // with the forward is still valid.
  memory backward_weights(WeightSlot& w) {
    if (!w.bwd_is_fwd) return fill_weights(w, w.bwd);
    return memory(w.fwd.md, cpu_.engine(), w.fwd.buf.raw());
  }

  void accumulate_weight_grad(WeightSlot& w) {
    run_blocks(w, w.diff.blocks, w.diff.buf.raw(), /*into_params=*/true);
  }

  // bias_stage_ (1, D, 4, H) ldgo from the parameters.
  void gather_bias() {
    const int64_t H = s_.H;
    float* b = bias_stage_.f32();
    for (int64_t d = 0; d < s_.D; ++d) {
      float* bd = b + d * 4 * H;
      const float* bi = param(d, 2).value.f32();
      const float* bh = param(d, 3).value.f32();
      for (int g = 0; g < 2; ++g) {  // u (PyTorch z) and r: the two biases act as one
        const int64_t p = ci_.perm[g] * H;
        for (int64_t j = 0; j < H; ++j) bd[g * H + j] = bi[p + j] + bh[p + j];
      }
      std::memcpy(bd + 2 * H, bi + 2 * H, H * sizeof(float));  // B_o = b_in
      std::memcpy(bd + 3 * H, bh + 2 * H, H * sizeof(float));  // B_u' = b_hn
    }
  }

  void accumulate_bias_grad() {
    const int64_t H = s_.H;
    const float* db = diff_bias_.f32();
    for (int64_t d = 0; d < s_.D; ++d) {
      const float* dbd = db + d * 4 * H;
      float* gi = param(d, 2).grad.f32();
      float* gh = param(d, 3).grad.f32();
      for (int g = 0; g < 2; ++g) {  // a summed bias: the same gradient for both parts
        const int64_t p = ci_.perm[g] * H;
        add_into(gi + p, dbd + g * H, H);
        add_into(gh + p, dbd + g * H, H);
      }
      add_into(gi + 2 * H, dbd + 2 * H, H);
      add_into(gh + 2 * H, dbd + 3 * H, H);
    }
  }

  // The state arguments: zero initial states, and the (unused) gradients of them.
  void add_states(std::unordered_map<int, memory>& args, bool backward) {
    auto& e = cpu_.engine();
    auto bind = [&](int arg, void* p) { args[arg] = memory(iter_md_, e, p); };
    bind(DNNL_ARG_SRC_ITER, zeros_.raw());
    if (!backward) return;
    args[DNNL_ARG_DIFF_SRC_ITER] = memory(diff_iter_md_, e, diff_iter_.raw());
  }

  void add_scratch(std::unordered_map<int, memory>& args, const memory::desc& md,
                   const Tensor& scratch) {
    if (md.get_size()) args[DNNL_ARG_SCRATCHPAD] = memory(md, cpu_.engine(), scratch.raw());
  }

  CpuBackend& cpu_;
  RnnShape s_;
  const CellInfo& ci_;
  std::vector<Param>& params_;
  std::size_t p0_;
  memory::desc src_md_, dst_md_, diff_src_md_, diff_dst_md_, iter_md_, diff_iter_md_, bias_md_;
  dnnl::rnn_primitive_desc_base fwd_pd_, bwd_pd_;
  dnnl::primitive fwd_, bwd_;
  WeightSlot wl_, wi_;
  Tensor workspace_, bias_stage_, diff_bias_;
  Tensor zeros_;      // (1, D, N, H): the initial states
  Tensor diff_iter_;  // gradient of the zero initial state (unused)
  std::vector<DeclaredTensor> transients_;
  std::vector<DeclaredTensor> saved_;
};

// The contract checked the dtype; the primitives here take plain time-major data.
void check_row_major(const char* kind, const std::string& name, const char* arg,
                     const TensorDesc& d) {
  TBD_LAYER_CHECK(d.layout == Layout::kRowMajor, kind, name, "input ", arg,
                  " must be row-major, got ", d.to_string());
}

// A GRU over a sequence: x (T, N, I) -> y (T, N, H*dirs). Under bf16 x, y and the layers'
// outputs are bf16 (oneDNN's bf16 GRU: bf16 weights cast from the master in the block
// reorders, f32 bias and accumulation); the gradients inside are f32 as its backward wants, so
// dy is widened into an f32 buffer at the top and dx rounded from one at the bottom.
class GruOneDnn final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  GruOneDnn(Backend& be, const std::string& name, const GruConfig& cfg,
            const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cpu_(as_cpu(be)) {
    check_row_major(kind(), name, "x", in[0]);
    const Shape& xs = in[0].shape;
    const int64_t T = xs[0], N = xs[1], I = xs[2], H = cfg.hidden, L = cfg.num_layers;
    const int64_t D = cfg.bidirectional ? 2 : 1;
    const std::size_t per_layer = D * kGruInfo.params_per_dir;
    std::size_t scratch = 0;
    for (int64_t l = 0; l < L; ++l) {
      RnnShape s{T, N, l == 0 ? I : H * D, H, D};
      layers_.push_back(std::make_unique<RnnLayerPrims>(cpu_, kind(), name, s, params_,
                                                        l * per_layer, in[0].dtype));
      scratch = std::max(scratch, layers_.back()->scratchpad_bytes());
      for (const auto& [t, desc] : layers_.back()->transients()) transient(*t, desc);
      for (const auto& [t, desc] : layers_.back()->saved_state()) saved(*t, desc);
    }
    hidden_.resize(static_cast<std::size_t>(
        L - 1));  // complete before its elements are declared (they must not move)
    for (Tensor& h : hidden_) saved(h, TensorDesc{Shape{T, N, H * D}, in[0].dtype});
    // Gradients between layers (transient: backward only); the one layer 0 does not write
    // doubles as dx's stand-in when the caller wants no dx (oneDNN always computes it). Under
    // bf16 both exist: layer l reads dh_[(l + 1) % 2] and writes dh_[l % 2], dy widened into the
    // top layer's, dx rounded from dh_[0].
    bf16_ = in[0].dtype == DType::kBF16;
    if (L > 1 || bf16_) {
      for (auto& t : dh_) transient(t, TensorDesc{Shape{T * N * std::max(I, H * D)}});
    } else {
      transient(dh_[0], TensorDesc{Shape{T * N * I}});
    }
    if (scratch) transient(scratch_, scratch);
  }

  std::string implementation() const override { return layers_.front()->implementation(); }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    const std::size_t L = layers_.size();
    for (std::size_t l = 0; l < L; ++l) {
      void* src = l == 0 ? x[0]->raw() : hidden_[l - 1].raw();
      void* dst = l + 1 == L ? y[0]->raw() : hidden_[l].raw();
      layers_[l]->forward(src, dst, scratch_);
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    const std::size_t L = layers_.size();
    if (bf16_) widen_from_bf16(dh_[L % 2].f32(), dy[0]->data<uint16_t>(), dy[0]->numel());
    for (std::size_t l = L; l-- > 0;) {
      void* src = l == 0 ? x[0]->raw() : hidden_[l - 1].raw();
      void* dst = l + 1 == L ? y[0]->raw() : hidden_[l].raw();
      // bf16: the f32 gradients live in dh_ (dy widened into the top layer's, dx rounded from
      // layer 0's); f32: dy and dx are read and written directly.
      void* diff_dst = l + 1 == L && !bf16_ ? dy[0]->raw() : dh_[(l + 1) % 2].raw();
      void* diff_src = l > 0 || bf16_ || dx[0] == nullptr ? dh_[l % 2].raw() : dx[0]->raw();
      layers_[l]->backward(src, dst, diff_dst, diff_src, scratch_, param_grads());
    }
    if (bf16_ && dx[0] != nullptr) {
      round_to_bf16(dx[0]->data<uint16_t>(), dh_[0].f32(), dx[0]->numel());
    }
  }

 private:
  GruConfig cfg_;
  CpuBackend& cpu_;
  std::vector<std::unique_ptr<RnnLayerPrims>> layers_;
  std::vector<Tensor> hidden_;  // outputs of layers 0..L-2: (T, N, H*D), kept for backward
  bool bf16_ = false;
  Tensor dh_[2];
  Tensor scratch_;
};

// One LSTM step: x (N, I), h (N, H), c (N, H) -> h' (N, H), c' (N, H), as two GEMMs on the
// row-major parameters and one fused elementwise pass (PyTorch's CPU LSTMCell does the same).
// Not oneDNN's RNN primitive with T = 1: that reorders the weights into its own layout on every
// forward and the weight gradients back on every backward, and a decoder that runs the cell
// once per step (its steps' cells tied to one set of weights) would pay those copies every step
// (12 MB for a 512-unit cell with a 1024-wide input, more than the step's GEMMs move).
// The gates are saved activated (i, f, g, o: the contract's 4H per row); backward recomputes
// tanh(c') from the output c'.
TBD_SIMD_CLONES
void lstm_cell_fwd_row(float* gates, const float* b, const float* c0, float* c1, float* h1,
                       int64_t H) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    const float i = sigmoid_fast(gates[j] + b[j]);
    const float f = sigmoid_fast(gates[H + j] + b[H + j]);
    const float g = tanh_fast(gates[2 * H + j] + b[2 * H + j]);
    const float o = sigmoid_fast(gates[3 * H + j] + b[3 * H + j]);
    const float c = f * c0[j] + i * g;
    c1[j] = c;
    h1[j] = o * tanh_fast(c);
    gates[j] = i, gates[H + j] = f, gates[2 * H + j] = g, gates[3 * H + j] = o;
  }
}

// dgates (pre-activation) from dh', dc' (either may be null: zero) and the saved gates;
// dc0 (may be null) = dc * f.
TBD_SIMD_CLONES
void lstm_cell_bwd_row(const float* gates, const float* c0, const float* c1, const float* dh1,
                       const float* dc1, float* dgates, float* dc0, int64_t H) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    const float i = gates[j], f = gates[H + j], g = gates[2 * H + j], o = gates[3 * H + j];
    const float tc = tanh_fast(c1[j]);
    const float dh = dh1 ? dh1[j] : 0.0f;
    const float dc = (dc1 ? dc1[j] : 0.0f) + dh * o * (1.0f - tc * tc);
    dgates[j] = dc * g * i * (1.0f - i);
    dgates[H + j] = dc * c0[j] * f * (1.0f - f);
    dgates[2 * H + j] = dc * i * (1.0f - g * g);
    dgates[3 * H + j] = dh * tc * o * (1.0f - o);
    if (dc0) dc0[j] = dc * f;
  }
}

// C (m, n) = A (m, k) op B + beta C on oneDNN's jit sgemm (row-major; 'T': B stored (n, k)).
void sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  TBD_DNNL_CHECK(dnnl_sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc));
}

// db (G) += the column sums of dg (rows, G), in row order: deterministic.
void add_column_sums(float* db, const float* dg, int64_t rows, int64_t G) {
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t j = 0; j < G; ++j) db[j] += dg[r * G + j];
  }
}

// dst[0..n) = bf16(src[0..n)), rounded to nearest even, on one thread (inside parallel loops).
TBD_SIMD_CLONES
void round_row(uint16_t* dst, const float* src, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dst[j] = bf16_from_f32(src[j]);
}

// A cast of f32 master weights into the bf16 form a product reads (a plain transpose or
// oneDNN's packed format): one reorder, made at build.
struct WeightCast {
  dnnl::reorder prim;
  memory::desc from, to;
  WeightCast() = default;
  WeightCast(CpuBackend& cpu, const memory::desc& f, const memory::desc& t) : from(f), to(t) {
    prim = dnnl::reorder(dnnl::reorder::primitive_desc(cpu.engine(), f, cpu.engine(), t));
  }
  void run(CpuBackend& cpu, const void* master, void* copy, const char* who) const {
    execute(cpu, prim,
            {{DNNL_ARG_FROM, memory(from, cpu.engine(), const_cast<void*>(master))},
             {DNNL_ARG_TO, memory(to, cpu.engine(), copy)}},
            who);
  }
};

// Under bf16 x, h, c and both outputs are bf16 (as autocast's lstm_cell returns them); the
// gates and the elementwise pass are f32 (the states widened into staging rows and rounded
// back), and the products run on oneDNN's bf16 matmuls reading a bf16 cast of the weights,
// made once per forward pass and shared by a decoder's steps, whose weights are tied
// (Layer::param_copy).
class LstmCellCpu final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  LstmCellCpu(Backend& be, const std::string& name, const LstmCellConfig& cfg,
              const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cpu_(as_cpu(be)) {
    check_row_major(kind(), name, "x", in[0]);
    check_row_major(kind(), name, "h", in[1]);
    check_row_major(kind(), name, "c", in[2]);
    N_ = in[0].shape[0], I_ = in[0].shape[1], H_ = cfg.hidden;
    saved(gates_, TensorDesc{Shape{N_, 4 * H_}});
    transient(dgates_, TensorDesc{Shape{N_, 4 * H_}});  // backward only
    bf16_ = in[0].dtype == DType::kBF16;
    if (bf16_) plan_bf16(name);
  }

  std::string implementation() const override {
    if (!bf16_) return "sgemm + fused gates";
    return detail::concat("fwd ", f_ih_.pd.impl_info_str(), " bwd ", b_x_.pd.impl_info_str(), "/",
                          wg_ih_.pd.impl_info_str(), " + fused gates (bf16 weight copies made ",
                          param_copies_made(), ")");
  }

  // y = {h', c'}, x = {x, h, c}
  void fprop(MutTensorRefs y, TensorRefs x) override {
    if (bf16_) {
      fprop_bf16(y, x);
      return;
    }
    const int64_t N = N_, I = I_, H = H_, G = 4 * H;
    float* gates = gates_.f32();
    sgemm('N', 'T', N, G, I, x[0]->f32(), I, params_[0].value.f32(), I, 0.0f, gates, G);
    sgemm('N', 'T', N, G, H, x[1]->f32(), H, params_[1].value.f32(), H, 1.0f, gates, G);
    const float *b = params_[2].value.f32(), *c0 = x[2]->f32();
    float *h1 = y[0]->f32(), *c1 = y[1]->f32();
#pragma omp parallel for schedule(static) if (N * H > 16384)
    for (int64_t n = 0; n < N; ++n) {
      lstm_cell_fwd_row(gates + n * G, b, c0 + n * H, c1 + n * H, h1 + n * H, H);
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    if (bf16_) {
      bprop_bf16(dx, dy, x, y);
      return;
    }
    const int64_t N = N_, I = I_, H = H_, G = 4 * H;
    const float *gates = gates_.f32(), *c0 = x[2]->f32(), *c1 = y[1]->f32();
    const float* dh1 = dy[0] ? dy[0]->f32() : nullptr;
    const float* dc1 = dy[1] ? dy[1]->f32() : nullptr;
    float* dc0 = dx[2] ? dx[2]->f32() : nullptr;
    float* dg = dgates_.f32();
#pragma omp parallel for schedule(static) if (N * H > 16384)
    for (int64_t n = 0; n < N; ++n) {
      lstm_cell_bwd_row(gates + n * G, c0 + n * H, c1 + n * H, dh1 ? dh1 + n * H : nullptr,
                        dc1 ? dc1 + n * H : nullptr, dg + n * G, dc0 ? dc0 + n * H : nullptr, H);
    }
    const float *w_ih = params_[0].value.f32(), *w_hh = params_[1].value.f32();
    if (dx[0]) sgemm('N', 'N', N, I, G, dg, G, w_ih, I, 0.0f, dx[0]->f32(), I);
    if (dx[1]) sgemm('N', 'N', N, H, G, dg, G, w_hh, H, 0.0f, dx[1]->f32(), H);
    if (!param_grads()) return;
    sgemm('T', 'N', G, I, N, dg, G, x[0]->f32(), I, 1.0f, params_[0].grad.f32(), I);
    sgemm('T', 'N', G, H, N, dg, G, x[1]->f32(), H, 1.0f, params_[1].grad.f32(), H);
    bias_grad(dg);
  }

 private:
  void bias_grad(const float* dg) { add_column_sums(params_[2].grad.f32(), dg, N_, 4 * H_); }

  void plan_bf16(const std::string& name) {
    const int64_t N = N_, I = I_, H = H_, G = 4 * H;
    const dt b = dt::bf16;
    const memory::desc none;
    // gates (N, G) = x W_ih^T + h W_hh^T; dx = dgates W_ih, dh = dgates W_hh (bf16 out);
    // dW_ih += dgates^T x, dW_hh += dgates^T h (f32).
    f_ih_ = make_matmul(cpu_, kind(), name, "input gates", mat(N, I, false, b), mat(I, G, true, b),
                        none, mat(N, G, false), 1.f, false);
    f_hh_ = make_matmul(cpu_, kind(), name, "recurrent gates", mat(N, H, false, b),
                        mat(H, G, true, b), none, mat(N, G, false), 1.f, true);
    b_x_ = make_matmul(cpu_, kind(), name, "input gradient", mat(N, G, false, b),
                       mat(G, I, false, b), none, mat(N, I, false, b), 1.f, false);
    b_h_ = make_matmul(cpu_, kind(), name, "recurrent gradient", mat(N, G, false, b),
                       mat(G, H, false, b), none, mat(N, H, false, b), 1.f, false);
    wg_ih_ = make_matmul(cpu_, kind(), name, "input weight gradient", mat(G, N, true, b),
                         mat(N, I, false, b), none, mat(G, I, false), 1.f, true);
    wg_hh_ = make_matmul(cpu_, kind(), name, "recurrent weight gradient", mat(G, N, true, b),
                         mat(N, H, false, b), none, mat(G, H, false), 1.f, true);
    transient(w16_[0], TensorDesc{Shape{G, I}, DType::kBF16});
    transient(w16_[1], TensorDesc{Shape{G, H}, DType::kBF16});
    transient(dg16_, TensorDesc{Shape{N, G}, DType::kBF16});
    transient(rows_, TensorDesc{Shape{5, N, H}});  // f32 staging of the states and gradients
    if (const std::size_t s = max_scratch_bytes({&f_ih_, &f_hh_, &b_x_, &b_h_, &wg_ih_, &wg_hh_}))
      transient(scratch_, s);
  }

  // W_ih's and W_hh's bf16 casts: in a graph made once per forward pass and shared by the
  // decoder's steps (their weights are tied), standalone at each call.
  void cast_weights() {
    for (std::size_t k = 0; k < 2; ++k) {
      w16p_[k] = bf16_param_copy(k, w16_[k], bf16_cast_of(params_[k].value));
    }
  }
  const void* w_ih16() const { return w16p_[0]; }
  const void* w_hh16() const { return w16p_[1]; }

  void fprop_bf16(MutTensorRefs y, TensorRefs x) {
    const int64_t N = N_, H = H_, G = 4 * H, NH = N * H;
    cast_weights();
    float* gates = gates_.f32();
    run_matmul(cpu_, f_ih_, x[0]->raw(), w_ih16(), nullptr, gates, scratch_,
               "LSTMCell input gates");
    run_matmul(cpu_, f_hh_, x[1]->raw(), w_hh16(), nullptr, gates, scratch_,
               "LSTMCell recurrent gates");
    float* c0 = rows_.f32();
    float* c1 = c0 + NH;
    float* h1 = c1 + NH;
    widen_from_bf16(c0, x[2]->data<uint16_t>(), NH);
    const float* b = params_[2].value.f32();
#pragma omp parallel for schedule(static) if (N * H > 16384)
    for (int64_t n = 0; n < N; ++n) {
      lstm_cell_fwd_row(gates + n * G, b, c0 + n * H, c1 + n * H, h1 + n * H, H);
    }
    round_to_bf16(y[0]->data<uint16_t>(), h1, NH);
    round_to_bf16(y[1]->data<uint16_t>(), c1, NH);
  }

  void bprop_bf16(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) {
    const int64_t N = N_, H = H_, G = 4 * H, NH = N * H;
    float* c0 = rows_.f32();
    float* c1 = c0 + NH;
    float* dh1 = dy[0] ? c1 + NH : nullptr;
    float* dc1 = dy[1] ? c1 + 2 * NH : nullptr;
    float* dc0 = dx[2] ? c1 + 3 * NH : nullptr;
    widen_from_bf16(c0, x[2]->data<uint16_t>(), NH);
    widen_from_bf16(c1, y[1]->data<uint16_t>(), NH);
    if (dh1) widen_from_bf16(dh1, dy[0]->data<uint16_t>(), NH);
    if (dc1) widen_from_bf16(dc1, dy[1]->data<uint16_t>(), NH);
    const float* gates = gates_.f32();
    float* dg = dgates_.f32();
#pragma omp parallel for schedule(static) if (N * H > 16384)
    for (int64_t n = 0; n < N; ++n) {
      lstm_cell_bwd_row(gates + n * G, c0 + n * H, c1 + n * H, dh1 ? dh1 + n * H : nullptr,
                        dc1 ? dc1 + n * H : nullptr, dg + n * G, dc0 ? dc0 + n * H : nullptr, H);
    }
    if (dc0) round_to_bf16(dx[2]->data<uint16_t>(), dc0, NH);
    round_to_bf16(dg16_.data<uint16_t>(), dg, N * G);
    cast_weights();
    const void* dg16 = dg16_.raw();
    if (dx[0]) {
      run_matmul(cpu_, b_x_, dg16, w_ih16(), nullptr, dx[0]->raw(), scratch_,
                 "LSTMCell input gradient");
    }
    if (dx[1]) {
      run_matmul(cpu_, b_h_, dg16, w_hh16(), nullptr, dx[1]->raw(), scratch_,
                 "LSTMCell recurrent gradient");
    }
    if (!param_grads()) return;
    run_matmul(cpu_, wg_ih_, dg16, x[0]->raw(), nullptr, params_[0].grad.raw(), scratch_,
               "LSTMCell input weight gradient");
    run_matmul(cpu_, wg_hh_, dg16, x[1]->raw(), nullptr, params_[1].grad.raw(), scratch_,
               "LSTMCell recurrent weight gradient");
    bias_grad(dg);
  }

  LstmCellConfig cfg_;
  CpuBackend& cpu_;
  int64_t N_ = 0, I_ = 0, H_ = 0;
  bool bf16_ = false;
  Tensor gates_, dgates_;
  // bf16 only
  Matmul f_ih_, f_hh_, b_x_, b_h_, wg_ih_, wg_hh_;
  Tensor w16_[2], dg16_, rows_, scratch_;
  const void* w16p_[2] = {nullptr, nullptr};  // where cast_weights() left the two casts
};

// An LSTM over a sequence on the same pieces as LstmCellCpu: per layer and direction, one GEMM
// for the input part of every step's gates, then per step the recurrent GEMM and the fused
// elementwise pass; backward per step the gates' gradients and the recurrent data gradient, then
// one GEMM each for dx, dW_ih and dW_hh over all steps. Saved for backward per layer and
// direction: the activated gates and the cell states, (T, N, 4H) and (T, N, H), the 5H per
// position of the contract's bytes (cuDNN's reserve space holds the same). oneDNN's LSTM
// primitive (the GRU's above) keeps a workspace several times that, and its backward a
// scratchpad as large again (Seq2Seq's encoder at batch 256: 757 MiB kept and 348 MiB of
// scratch, against 156 MiB and 63 MiB here).
class LstmSequenceCpu final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  LstmSequenceCpu(Backend& be, const std::string& name, const LstmConfig& cfg,
                  const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cpu_(as_cpu(be)) {
    check_row_major(kind(), name, "x", in[0]);
    const Shape& xs = in[0].shape;
    T_ = xs[0], N_ = xs[1], I_ = xs[2], H_ = cfg.hidden, L_ = cfg.num_layers;
    D_ = cfg.bidirectional ? 2 : 1;
    const int64_t TN = T_ * N_, G = 4 * H_;
    // Complete before their elements are declared as saved state (they must not move).
    gates_.resize(static_cast<std::size_t>(L_ * D_));
    cells_.resize(static_cast<std::size_t>(L_ * D_));
    hidden_.resize(static_cast<std::size_t>(L_ - 1));
    for (Tensor& t : gates_) saved(t, TensorDesc{Shape{TN, G}});
    for (Tensor& t : cells_) saved(t, TensorDesc{Shape{TN, H_}});
    for (Tensor& t : hidden_) saved(t, TensorDesc{Shape{T_, N_, H_ * D_}, in[0].dtype});
    bf16_ = in[0].dtype == DType::kBF16;
    zeros_ = be.empty(Shape{H_}, MemCategory::kWorkspace);  // every row's initial c
    std::memset(zeros_.raw(), 0, zeros_.bytes());
    transient(dgates_, TensorDesc{Shape{TN, G}});
    if (!bf16_) transient(w_hh_t_, TensorDesc{Shape{H_, G}});
    transient(dh_step_, TensorDesc{Shape{2, N_, H_}});  // the carried dh and this step's sum
    transient(dc_step_, TensorDesc{Shape{2, N_, H_}});
    // Gradients between layers: (T, N, H*D) each; the lower layer's dx is assigned by its
    // first direction and added to by the second. Under bf16 both exist, f32: layer l reads
    // dhl_[(l + 1) % 2] and writes dhl_[l % 2], dy widened into the top layer's, dx rounded from
    // dhl_[0].
    if (bf16_) {
      for (auto& t : dhl_) transient(t, TensorDesc{Shape{TN * std::max(I_, H_ * D_)}});
      plan_bf16(name);
    } else if (L_ > 1) {
      for (auto& t : dhl_) transient(t, TensorDesc{Shape{TN * H_ * D_}});
    }
  }

  std::string implementation() const override {
    if (!bf16_) return "sgemm + fused gates";
    return detail::concat("fwd ", bp_[0].in_fwd.pd.impl_info_str(), "/",
                          rec_fwd_.pd.impl_info_str(), " bwd ", bp_[0].in_dx.pd.impl_info_str(),
                          "/", rec_bwd_.pd.impl_info_str(), "/", bp_[0].wg_ih.pd.impl_info_str(),
                          " + fused gates (bf16 weights cast per call)");
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    for (int64_t l = 0; l < L_; ++l) {
      const void* src = l == 0 ? x[0]->raw() : hidden_[l - 1].raw();
      void* dst = l + 1 == L_ ? y[0]->raw() : hidden_[l].raw();
      for (int64_t d = 0; d < D_; ++d) forward_dir(l, d, src, dst);
    }
  }

  // Under bf16 the gradients between layers are f32: dy is widened into the top layer's buffer
  // and dx rounded from layer 0's.
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    if (bf16_) widen_from_bf16(dhl_[L_ % 2].f32(), dy[0]->data<uint16_t>(), dy[0]->numel());
    for (int64_t l = L_; l-- > 0;) {
      const void* src = l == 0 ? x[0]->raw() : hidden_[l - 1].raw();
      const void* dst = l + 1 == L_ ? y[0]->raw() : hidden_[l].raw();
      const float* ddst = l + 1 == L_ && !bf16_ ? dy[0]->f32() : dhl_[(l + 1) % 2].f32();
      float* dsrc = l > 0 || (bf16_ && dx[0] != nullptr) ? dhl_[l % 2].f32()
                    : dx[0] != nullptr                   ? dx[0]->f32()
                                                         : nullptr;
      for (int64_t d = 0; d < D_; ++d) backward_dir(l, d, src, dst, ddst, dsrc, d > 0);
    }
    if (bf16_ && dx[0] != nullptr) {
      round_to_bf16(dx[0]->data<uint16_t>(), dhl_[0].f32(), dx[0]->numel());
    }
  }

 private:
  int64_t in_of(int64_t l) const { return l == 0 ? I_ : H_ * D_; }
  Param& param(int64_t l, int64_t d, int k) { return params_[(l * D_ + d) * 3 + k]; }
  // The step at position s of direction d's order (forward: 0, 1, ...; reverse: T-1, ...).
  int64_t step(int64_t d, int64_t s) const { return d == 0 ? s : T_ - 1 - s; }

  // Layer l, direction d: src (T, N, in) -> dst's columns [d*H, (d+1)*H) of (T, N, H*D), in the
  // layer's dtype.
  void forward_dir(int64_t l, int64_t d, const void* src, void* dst) {
    const int64_t T = T_, N = N_, H = H_, HD = H_ * D_, G = 4 * H, in = in_of(l);
    float* gates = gates_[l * D_ + d].f32();
    float* cells = cells_[l * D_ + d].f32();
    const float *w_ih = param(l, d, 0).value.f32(), *w_hh = param(l, d, 1).value.f32();
    const float* b = param(l, d, 2).value.f32();
    if (bf16_) {
      const LayerProducts& p = bp_[l];
      p.ih_fwd.run(cpu_, w_ih, w_ih16_.raw(), "LSTM weight cast");
      hh_fwd_.run(cpu_, w_hh, w_hh16_.raw(), "LSTM weight cast");
      run_matmul(cpu_, p.in_fwd, src, w_ih16_.raw(), nullptr, gates, scratch_, "LSTM input gates");
    } else {
      sgemm('N', 'T', T * N, G, in, static_cast<const float*>(src), in, w_ih, in, 0.0f, gates, G);
      // W_hh^T (H, 4H), once: the steps' GEMMs then read it as it is.
      float* w_hh_t = w_hh_t_.f32();
#pragma omp parallel for schedule(static)
      for (int64_t k = 0; k < H; ++k) {
        for (int64_t j = 0; j < G; ++j) w_hh_t[k * G + j] = w_hh[j * H + k];
      }
    }
    float* h32 = bf16_ ? h32_.f32() : nullptr;  // bf16: a step's h before rounding
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = step(d, s);
      float* g = gates + t * N * G;
      const float* c0 = s == 0 ? zeros_.f32() : cells + step(d, s - 1) * N * H;
      const int64_t h0 = step(d, s - 1) * N * HD + d * H, h1 = t * N * HD + d * H;  // offsets
      if (s > 0 && bf16_) {
        run_matmul(cpu_, rec_fwd_, static_cast<const uint16_t*>(dst) + h0, w_hh16_.raw(), nullptr,
                   g, scratch_, "LSTM recurrent gates");
      } else if (s > 0) {
        sgemm('N', 'N', N, G, H, static_cast<const float*>(dst) + h0, HD, w_hh_t_.f32(), G, 1.0f, g,
              G);
      }
      float* c1 = cells + t * N * H;
#pragma omp parallel for schedule(static) if (N * H > 2048)
      for (int64_t n = 0; n < N; ++n) {
        const float* c = c0 + (s == 0 ? 0 : n * H);
        if (bf16_) {
          lstm_cell_fwd_row(g + n * G, b, c, c1 + n * H, h32 + n * H, H);
          round_row(static_cast<uint16_t*>(dst) + h1 + n * HD, h32 + n * H, H);
        } else {
          lstm_cell_fwd_row(g + n * G, b, c, c1 + n * H, static_cast<float*>(dst) + h1 + n * HD, H);
        }
      }
    }
  }

  // The backward of forward_dir: ddst's columns of direction d in (f32), dsrc (f32: assigned, or
  // added to with `accumulate`; null: not wanted) and the parameter gradients out.
  void backward_dir(int64_t l, int64_t d, const void* src, const void* dst, const float* ddst,
                    float* dsrc, bool accumulate) {
    const int64_t T = T_, N = N_, H = H_, HD = H_ * D_, G = 4 * H, in = in_of(l);
    const float* gates = gates_[l * D_ + d].f32();
    const float* cells = cells_[l * D_ + d].f32();
    const float *w_ih = param(l, d, 0).value.f32(), *w_hh = param(l, d, 1).value.f32();
    if (bf16_) {
      bp_[l].ih_bwd.run(cpu_, w_ih, w_ih16_.raw(), "LSTM weight cast");
      hh_bwd_.run(cpu_, w_hh, w_hh16_.raw(), "LSTM weight cast");
    }
    float* dg = dgates_.f32();
    uint16_t* dg16 = bf16_ ? dg16_.data<uint16_t>() : nullptr;  // bf16: the products' operand
    float* dh_carry = dh_step_.f32();  // d loss / d h of the step, from the step after it
    float* dh_sum = dh_carry + N * H;
    float* dc_a = dc_step_.f32();
    float* dc_b = dc_a + N * H;
    for (int64_t s = T; s-- > 0;) {
      const int64_t t = step(d, s);
      const float* c0 = s == 0 ? zeros_.f32() : cells + step(d, s - 1) * N * H;
      const float* c1 = cells + t * N * H;
      const float* dh_out = ddst + t * N * HD + d * H;
      const bool last = s + 1 == T;                // nothing flows back from a later step yet
      float* dc_in = (s % 2 == 0) ? dc_a : dc_b;   // dc of this step's c1 (from the later step)
      float* dc_out = (s % 2 == 0) ? dc_b : dc_a;  // dc of this step's c0
#pragma omp parallel for schedule(static) if (N * H > 2048)
      for (int64_t n = 0; n < N; ++n) {
        float* sum = dh_sum + n * H;
        const float* a = dh_out + n * HD;
        const float* c = dh_carry + n * H;
#pragma omp simd
        for (int64_t j = 0; j < H; ++j) sum[j] = last ? a[j] : a[j] + c[j];
        const int64_t r = (t * N + n) * G;
        lstm_cell_bwd_row(gates + r, c0 + (s == 0 ? 0 : n * H), c1 + n * H, sum,
                          last ? nullptr : dc_in + n * H, dg + r, s == 0 ? nullptr : dc_out + n * H,
                          H);
        if (dg16) round_row(dg16 + r, dg + r, G);
      }
      if (s > 0 && bf16_) {
        run_matmul(cpu_, rec_bwd_, dg16 + t * N * G, w_hh16_.raw(), nullptr, dh_carry, scratch_,
                   "LSTM recurrent gradient");
      } else if (s > 0) {
        sgemm('N', 'N', N, H, G, dg + t * N * G, G, w_hh, H, 0.0f, dh_carry, H);
      }
    }
    if (dsrc != nullptr && bf16_) {
      run_matmul(cpu_, accumulate ? bp_[l].in_dx_acc : bp_[l].in_dx, dg16, w_ih16_.raw(), nullptr,
                 dsrc, scratch_, "LSTM input gradient");
    } else if (dsrc != nullptr) {
      sgemm('N', 'N', T * N, in, G, dg, G, w_ih, in, accumulate ? 1.0f : 0.0f, dsrc, in);
    }
    if (!param_grads()) return;
    // dW_hh: each step's gates' gradients against the hidden state before it. The steps that
    // have one are contiguous in time for either direction: forward t = 1..T-1 against h at
    // 0..T-2; reverse t = 0..T-2 against h at 1..T-1.
    const int64_t dg_row0 = d == 0 ? N : 0, h_row0 = (d == 0 ? 0 : N) * HD + d * H;
    if (bf16_) {
      run_matmul(cpu_, bp_[l].wg_ih, dg16, src, nullptr, param(l, d, 0).grad.raw(), scratch_,
                 "LSTM input weight gradient");
      if (T > 1) {
        run_matmul(cpu_, wg_hh_, dg16 + dg_row0 * G, static_cast<const uint16_t*>(dst) + h_row0,
                   nullptr, param(l, d, 1).grad.raw(), scratch_, "LSTM recurrent weight gradient");
      }
    } else {
      sgemm('T', 'N', G, in, T * N, dg, G, static_cast<const float*>(src), in, 1.0f,
            param(l, d, 0).grad.f32(), in);
      if (T > 1) {
        sgemm('T', 'N', G, H, (T - 1) * N, dg + dg_row0 * G, G,
              static_cast<const float*>(dst) + h_row0, HD, 1.0f, param(l, d, 1).grad.f32(), H);
      }
    }
    add_column_sums(param(l, d, 2).grad.f32(), dg, T * N, G);
  }

  // ---- bf16: the products' plans ----
  // The same steps with every product on oneDNN's bf16 matmuls (f32 accumulation): x, y and the
  // layers' outputs bf16; the gates, the cell states and all gradients but the products' dgates
  // operand f32 (oneDNN's bf16 LSTM keeps its cell state f32 the same way). The f32 master
  // weights are cast into the products' own (packed) bf16 formats by one reorder each, per layer
  // and direction, at the forward and again at the backward (transients).

  // The products of one layer (they depend on its input width).
  struct LayerProducts {
    Matmul in_fwd;              // gates (TN, G) = x (TN, in) W_ih^T
    Matmul in_dx, in_dx_acc;    // dx (TN, in) (+)= dgates (TN, G) W_ih, f32
    Matmul wg_ih;               // dW_ih (G, in) += dgates^T x, f32
    WeightCast ih_fwd, ih_bwd;  // the master W_ih (G, in) into in_fwd's and in_dx's weights
  };

  void plan_bf16(const std::string& name) {
    const int64_t T = T_, N = N_, H = H_, HD = H_ * D_, G = 4 * H, TN = T * N;
    const dt b = dt::bf16;
    const memory::desc none;
    auto any = [&](int64_t r, int64_t c) { return memory::desc({r, c}, b, tag::any); };
    std::size_t w_ih = 0;
    std::vector<const Matmul*> all;
    for (int64_t l = 0; l < L_; ++l) {
      const int64_t in = in_of(l);
      LayerProducts p;
      p.in_fwd = make_matmul(cpu_, kind(), name, "input gates", mat(TN, in, false, b), any(in, G),
                             none, mat(TN, G, false), 1.f, false);
      p.in_dx = make_matmul(cpu_, kind(), name, "input gradient", mat(TN, G, false, b), any(G, in),
                            none, mat(TN, in, false), 1.f, false);
      p.in_dx_acc = make_matmul(cpu_, kind(), name, "input gradient", mat(TN, G, false, b),
                                p.in_dx.pd.weights_desc(), none, mat(TN, in, false), 1.f, true);
      p.wg_ih = make_matmul(cpu_, kind(), name, "input weight gradient", mat(G, TN, true, b),
                            mat(TN, in, false, b), none, mat(G, in, false), 1.f, true);
      p.ih_fwd = WeightCast(cpu_, mat(in, G, true), p.in_fwd.pd.weights_desc());
      p.ih_bwd = WeightCast(cpu_, mat(G, in, false), p.in_dx.pd.weights_desc());
      w_ih = std::max({w_ih, p.ih_fwd.to.get_size(), p.ih_bwd.to.get_size()});
      bp_.push_back(std::move(p));
    }
    // gates (N, G) += h (N, H; rows HD apart) W_hh^T; dh (N, H) = dgates (N, G) W_hh;
    // dW_hh (G, H) += dgates^T (G, (T-1)N) h ((T-1)N, H; rows HD apart)
    rec_fwd_ = make_matmul(cpu_, kind(), name, "recurrent gates", mat_strided(N, H, HD, 1, b),
                           any(H, G), none, mat(N, G, false), 1.f, true);
    rec_bwd_ = make_matmul(cpu_, kind(), name, "recurrent gradient", mat(N, G, false, b), any(G, H),
                           none, mat(N, H, false), 1.f, false);
    if (T > 1) {
      wg_hh_ =
          make_matmul(cpu_, kind(), name, "recurrent weight gradient", mat(G, (T - 1) * N, true, b),
                      mat_strided((T - 1) * N, H, HD, 1, b), none, mat(G, H, false), 1.f, true);
    }
    hh_fwd_ = WeightCast(cpu_, mat(H, G, true), rec_fwd_.pd.weights_desc());
    hh_bwd_ = WeightCast(cpu_, mat(G, H, false), rec_bwd_.pd.weights_desc());
    transient(w_ih16_, w_ih);
    transient(w_hh16_, std::max(hh_fwd_.to.get_size(), hh_bwd_.to.get_size()));
    transient(dg16_, TensorDesc{Shape{TN, G}, DType::kBF16});
    transient(h32_, TensorDesc{Shape{N, H}});
    std::size_t scratch = max_scratch_bytes({&rec_fwd_, &rec_bwd_, &wg_hh_});
    for (const LayerProducts& p : bp_) {
      scratch = std::max(scratch, max_scratch_bytes({&p.in_fwd, &p.in_dx, &p.in_dx_acc, &p.wg_ih}));
    }
    if (scratch) transient(scratch_, scratch);
  }

  LstmConfig cfg_;
  CpuBackend& cpu_;
  int64_t T_ = 0, N_ = 0, I_ = 0, H_ = 0, L_ = 0, D_ = 1;
  bool bf16_ = false;
  std::vector<Tensor> gates_, cells_;  // per (layer, direction): saved for backward
  std::vector<Tensor> hidden_;         // outputs of layers 0..L-2, kept for backward
  Tensor zeros_;                       // one row of the initial cell state (0)
  Tensor dgates_, dh_step_, dc_step_, dhl_[2], w_hh_t_;
  // bf16 only: the products, the weights' casts and their transients.
  std::vector<LayerProducts> bp_;
  Matmul rec_fwd_, rec_bwd_, wg_hh_;
  WeightCast hh_fwd_, hh_bwd_;
  Tensor w_ih16_, w_hh16_, dg16_, h32_, scratch_;
};

TBD_REGISTER_LAYER(LstmConfig, DeviceKind::kCpu, LstmSequenceCpu);
TBD_REGISTER_LAYER(GruConfig, DeviceKind::kCpu, GruOneDnn);
TBD_REGISTER_LAYER(LstmCellConfig, DeviceKind::kCpu, LstmCellCpu);

}  // namespace
}  // namespace tbd::cpu
