// layers/cpu/attention_cpu.cpp: MultiHeadAttention on oneDNN matmul plus own softmax code.
//
// Every GEMM is a oneDNN matmul primitive created at build: the four projections as 2-D
// (N*T, D) x (D, D)^T GEMMs with the bias fused, and the attention products as batched
// matmuls over (N, h). Heads are never transposed into separate buffers: the projections'
// (N, T, h, dh) outputs are read and written through strided memory descriptors ((N, h, T, dh)
// with strides (T*D, dh, D, 1)), which oneDNN's brgemm matmul takes directly (measured as fast
// as contiguous heads on AVX-512), and transposed operands (K^T, P^T) are strided views too.
// Scale, masks, softmax, dropout and the softmax backward are own OpenMP code, one fused pass
// per row (oneDNN's softmax knows no masks and would need extra passes).
//
// Saved for backward (feature_maps): Q, K, V, the concatenated head outputs O (for dWo), the
// probabilities P, and with dropout the keep mask (1 byte per score) plus the dropped
// probabilities Pd (the score-sized buffer W that the backward then reuses for dP and dS).
// Gradients: parameter gradients accumulate through matmuls with a sum post-op (and own
// column sums for biases); dq_in/dkv_in are assigned by the first GEMM and the other
// projections' contributions added by sum post-ops.
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/onednn.h"
#include "layers/attention.h"
#include "layers/cpu/simd.h"

namespace tbd::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;

// ---- per-row kernels (vectorized; called from OpenMP loops over rows) ----

// s: one row of scores (Tk). P = softmax(scale * s) over the first `valid` keys, exact zeros
// after them.
TBD_SIMD_CLONES void softmax_row_forward(float* s, int64_t tk, int64_t valid, float scale) {
  float m = max_of(s, valid, -std::numeric_limits<float>::infinity());
  m *= scale;  // scale > 0, so max(scale*s) = scale*max(s)
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < valid; ++j) {
    float e = exp_nonpositive(s[j] * scale - m);
    s[j] = e;
    sum += e;
  }
  const float inv = 1.f / sum;
#pragma omp simd
  for (int64_t j = 0; j < valid; ++j) s[j] *= inv;
  for (int64_t j = valid; j < tk; ++j) s[j] = 0.f;
}

// Pd = P * keep / (1 - p) with keep drawn from the counter-based stream at flat index
// `first + j` (see attention_dropout_keep).
TBD_SIMD_CLONES void dropout_row(const float* p, float* pd, uint8_t* keep, int64_t tk,
                                 uint64_t base_first, uint64_t threshold, float inv_keep) {
#pragma omp simd
  for (int64_t j = 0; j < tk; ++j) {
    bool k = splitmix64(base_first + static_cast<uint64_t>(j)) >= threshold;
    keep[j] = k;
    pd[j] = k ? p[j] * inv_keep : 0.f;
  }
}

// g: dL/dPd on entry, dL/dS' on exit where S' = Q K^T (the scale folded in):
// dP = g * keep / (1 - p); dS' = scale * P * (dP - sum_j P_j dP_j). Masked keys have P = 0,
// so they get 0 without looking at the mask.
TBD_SIMD_CLONES void softmax_row_backward(float* g, const float* p, const uint8_t* keep, int64_t tk,
                                          float inv_keep, float scale) {
  if (keep != nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < tk; ++j) g[j] = keep[j] ? g[j] * inv_keep : 0.f;
  }
  float dot = 0.f;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < tk; ++j) dot += p[j] * g[j];
#pragma omp simd
  for (int64_t j = 0; j < tk; ++j) g[j] = scale * p[j] * (g[j] - dot);
}

// db[j0..j0+nb) += sum over m rows of z[i, j0..j0+nb); z: (m, d), f32 or bf16 (summed in f32).
// nb <= kColBlock.
constexpr int64_t kColBlock = 64;
TBD_SIMD_CLONES void column_sum_block(float* db, const float* z, int64_t m, int64_t d, int64_t j0,
                                      int64_t nb) {
  float acc[kColBlock] = {};
  for (int64_t i = 0; i < m; ++i) {
    const float* row = z + i * d + j0;
#pragma omp simd
    for (int64_t j = 0; j < nb; ++j) acc[j] += row[j];
  }
  for (int64_t j = 0; j < nb; ++j) db[j0 + j] += acc[j];
}
TBD_SIMD_CLONES void column_sum_block(float* db, const uint16_t* z, int64_t m, int64_t d,
                                      int64_t j0, int64_t nb) {
  float acc[kColBlock] = {};
  for (int64_t i = 0; i < m; ++i) {
    const uint16_t* row = z + i * d + j0;
#pragma omp simd
    for (int64_t j = 0; j < nb; ++j) acc[j] += f32_from_bf16(row[j]);
  }
  for (int64_t j = 0; j < nb; ++j) db[j0 + j] += acc[j];
}

// db: (d) += column sums of z: (m, d).
template <class T>
void accumulate_column_sums(float* db, const T* z, int64_t m, int64_t d) {
  const int64_t blocks = (d + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    column_sum_block(db, z, m, d, b * kColBlock, std::min(kColBlock, d - b * kColBlock));
  }
}

// dst[0..n) = bf16(src[0..n)), rounded to nearest even.
TBD_SIMD_CLONES void round_row(uint16_t* dst, const float* src, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dst[j] = bf16_from_f32(src[j]);
}

// A matmul primitive with its memory objects and argument map, built once; run() only sets
// the data handles, so executing it allocates nothing.
struct Matmul {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  memory src, wei, dst, bias;
  std::unordered_map<int, memory> args;
  const char* who = "";

  void run(CpuBackend& be, const void* s, const void* w, void* d, const void* b = nullptr) {
    src.set_data_handle(const_cast<void*>(s));
    wei.set_data_handle(const_cast<void*>(w));
    dst.set_data_handle(d);
    if (b != nullptr) bias.set_data_handle(const_cast<void*>(b));
    execute(be, prim, args, who);
  }
};

class MultiHeadAttentionOneDnn final : public Layer {
 public:
  // bf16: q_in, kv_in, y and the saved Q, K, V, O bf16; the scores, the softmax and its backward
  // f32 (P kept f32 for the backward, its bf16 rounding for the products); weights cast to a
  // bf16 copy at each forward, which the backward reuses; parameter gradients f32.
  static constexpr bool kTakesBf16 = true;

  MultiHeadAttentionOneDnn(Backend& be, const std::string& name,
                           const MultiHeadAttentionConfig& cfg, const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)),
        cfg_(cfg),
        cpu_(as_cpu(be)),
        d_(attention_dims(name, cfg, in)) {
    const int64_t N = d_.N, Tq = d_.Tq, Tk = d_.Tk, D = d_.D, h = d_.h, dh = d_.dh;
    scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)));

    bf16_ = in[0].dtype == DType::kBF16;
    const DType adt = in[0].dtype;                 // activations and their gradients
    const memory::data_type at = dnnl_dtype(adt);  // and the weights as products read them

    // Saved for backward, and the backward's own buffers.
    const int64_t mq = N * Tq, mk = N * Tk, scores = N * h * Tq * Tk;
    saved(q_, TensorDesc{Shape{mq, D}, adt});
    saved(k_, TensorDesc{Shape{mk, D}, adt});
    saved(v_, TensorDesc{Shape{mk, D}, adt});
    saved(o_, TensorDesc{Shape{mq, D}, adt});
    saved(p_, TensorDesc{Shape{N, h, Tq, Tk}});
    if (bf16_) {
      // P16: the (dropped) probabilities rounded for P V and Pd^T dO, then dS rounded for dS K
      // and dS^T Q. W: f32 scratch (Pd before rounding; dPd and dS in backward).
      saved(p16_, TensorDesc{Shape{N, h, Tq, Tk}, DType::kBF16});
      w_ = be.empty(Shape{N, h, Tq, Tk}, MemCategory::kDynamic);
      w16_ = be.empty(Shape{4 * D * D}, MemCategory::kWorkspace, Layout::kRowMajor, DType::kBF16);
    } else if (cfg.dropout > 0) {
      // W holds Pd from forward to backward when dropout is on; otherwise backward scratch.
      saved(w_, TensorDesc{Shape{N, h, Tq, Tk}});
    } else {
      w_ = be.empty(Shape{N, h, Tq, Tk}, MemCategory::kDynamic);
    }
    if (cfg.dropout > 0) saved(keep_, TensorDesc{Shape{(scores + 3) / 4}});
    d_o_ = be.empty(Shape{mq, D}, MemCategory::kDynamic, Layout::kRowMajor, adt);  // dO, then dQ
    d_k_ = be.empty(Shape{mk, D}, MemCategory::kDynamic, Layout::kRowMajor, adt);
    d_v_ = be.empty(Shape{mk, D}, MemCategory::kDynamic, Layout::kRowMajor, adt);

    // Memory descriptors. 2-D: activations (M, D) row-major; W^T is W (D_out, D_in) read as
    // (D_in, D_out) with strides (1, D) ("ba"); dZ^T likewise.
    auto act = [&](int64_t m) { return memory::desc({m, D}, at, tag::ab); };
    auto act_t = [&](int64_t m) { return memory::desc({D, m}, at, tag::ba); };
    memory::desc w_md({D, D}, at, tag::ab), w_t_md({D, D}, at, tag::ba);
    memory::desc dw_md({D, D}, kF32, tag::ab);  // the gradients: f32
    memory::desc b_md = cfg.bias ? memory::desc({1, D}, kF32, tag::ab) : memory::desc();
    // 4-D head views of an (N, T, h, dh) buffer as (N, h, T, dh), and its transpose.
    auto heads = [&](int64_t t) { return memory::desc({N, h, t, dh}, at, {t * D, dh, D, 1}); };
    auto heads_t = [&](int64_t t) { return memory::desc({N, h, dh, t}, at, {t * D, dh, 1, D}); };
    // Scores: f32 out of Q K^T (the softmax's input), in the activations' dtype into products.
    memory::desc s_out_md({N, h, Tq, Tk}, kF32, tag::abcd);
    memory::desc s_md({N, h, Tq, Tk}, at, tag::abcd);
    memory::desc s_t_md({N, h, Tk, Tq}, at, {h * Tq * Tk, Tq * Tk, 1, Tk});

    try {
      make(mm_proj_q_, act(mq), w_t_md, act(mq), b_md, false, "attention q/out projection");
      make(mm_proj_kv_, act(mk), w_t_md, act(mk), b_md, false, "attention k/v projection");
      make(mm_qk_, heads(Tq), heads_t(Tk), s_out_md, {}, false, "attention Q K^T");
      make(mm_pv_, s_md, heads(Tk), heads(Tq), {}, false, "attention P V");
      make(mm_pt_x_, s_t_md, heads(Tq), heads(Tk), {}, false, "attention P^T dO");
      make(mm_dx_q_, act(mq), w_md, act(mq), {}, false, "attention dZ W (q)");
      if (cfg.cross) make(mm_dx_kv_, act(mk), w_md, act(mk), {}, false, "attention dZ W (kv)");
      make(mm_dx_kv_sum_, act(mk), w_md, act(mk), {}, true, "attention dZ W (+=)");
      make(mm_dw_q_, act_t(mq), act(mq), dw_md, {}, true, "attention dW (q/out)");
      make(mm_dw_kv_, act_t(mk), act(mk), dw_md, {}, true, "attention dW (k/v)");
    } catch (const dnnl::error& e) {
      throw_layer_error(
          kind(), name,
          std::string("oneDNN has no matmul for q_in ") + in[0].to_string() + ": " + e.what());
    }
    // One scratchpad shared by all primitives (they run one at a time).
    std::size_t scratch = 0;
    for (Matmul* m : all_matmuls()) scratch = std::max(scratch, m->pd.scratchpad_desc().get_size());
    if (scratch) {
      scratch_ = be.empty(Shape{static_cast<int64_t>((scratch + 3) / 4)}, MemCategory::kWorkspace);
    }
    for (Matmul* m : all_matmuls()) {
      if (m->pd.scratchpad_desc().get_size()) {
        m->args[DNNL_ARG_SCRATCHPAD] =
            memory(m->pd.scratchpad_desc(), cpu_.engine(), scratch_.raw());
      }
    }
  }

  // oneDNN's implementations of the products: the projections, Q K^T, P V, the transposed
  // products of the backward, backward-data and the weight gradients.
  std::string implementation() const override {
    return detail::concat("proj ", mm_proj_q_.pd.impl_info_str(), " qk ", mm_qk_.pd.impl_info_str(),
                          " pv ", mm_pv_.pd.impl_info_str(), " bwd ", mm_pt_x_.pd.impl_info_str(),
                          "/", mm_dx_q_.pd.impl_info_str(), "/", mm_dw_q_.pd.impl_info_str());
  }

  void set_training(bool training) override {
    Layer::set_training(training);
    const bool dropout = training && cfg_.dropout > 0;
    set_work(attention_flops(cfg_, d_, dropout),
             attention_bytes(cfg_, d_, dropout, inputs_[0].dtype));
  }

  // y: (N, Tq, D); x: q_in (N, Tq, D) [, kv_in (N, Tk, D)] [, kv_lengths (N) i32]
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const Tensor& q_in = *x[0];
    const Tensor& kv_in = cfg_.cross ? *x[1] : *x[0];
    const int32_t* lengths = cfg_.padding_mask ? x.back()->data<int32_t>() : nullptr;
    if (lengths != nullptr) {
      for (int64_t n = 0; n < d_.N; ++n) {
        TBD_LAYER_CHECK(lengths[n] >= 1 && lengths[n] <= d_.Tk, kind(), name_, "input kv_lengths[",
                        n, "] = ", lengths[n], " is outside [1, Tk=", d_.Tk, "]");
      }
    }
    const bool bias = cfg_.bias;
    if (bf16_) cast_weights();
    mm_proj_q_.run(cpu_, q_in.raw(), weight(0), q_.raw(), bias ? param(4) : nullptr);
    mm_proj_kv_.run(cpu_, kv_in.raw(), weight(1), k_.raw(), bias ? param(5) : nullptr);
    mm_proj_kv_.run(cpu_, kv_in.raw(), weight(2), v_.raw(), bias ? param(6) : nullptr);
    mm_qk_.run(cpu_, q_.raw(), k_.raw(), p_.raw());
    dropout_used_ = training_ && cfg_.dropout > 0;
    softmax_forward(lengths);
    const void* pd = bf16_ ? p16_.raw() : dropout_used_ ? w_.raw() : p_.raw();
    mm_pv_.run(cpu_, pd, v_.raw(), o_.raw());
    mm_proj_q_.run(cpu_, o_.raw(), weight(3), y[0]->raw(), bias ? param(7) : nullptr);
    if (dropout_used_) ++step_;
  }

  // dx: dq_in [, dkv_in] [, null for kv_lengths] (assign); dy: (N, Tq, D).
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    const Tensor& q_in = *x[0];
    const Tensor& kv_in = cfg_.cross ? *x[1] : *x[0];
    const void* g = dy[0]->raw();
    const int64_t mq = d_.N * d_.Tq, mk = d_.N * d_.Tk, D = d_.D;
    const bool bias = cfg_.bias;
    const void* pd = bf16_ ? p16_.raw() : dropout_used_ ? w_.raw() : p_.raw();

    const bool pg = param_grads();
    // Output projection: dWo += dy^T O, dbo += colsum(dy), dO = dy Wo.
    if (pg) mm_dw_q_.run(cpu_, g, o_.raw(), grad(3));
    if (pg && bias) column_sums(grad(7), *dy[0], mq, D);
    mm_dx_q_.run(cpu_, g, weight(3), d_o_.raw());
    // Attention: dV = Pd^T dO; dPd = dO V^T (into W, Pd no longer needed); dS; dQ = dS K
    // (into dO's buffer, dO no longer needed); dK = dS^T Q. bf16: dS rounded into P16.
    mm_pt_x_.run(cpu_, pd, d_o_.raw(), d_v_.raw());
    mm_qk_.run(cpu_, d_o_.raw(), v_.raw(), w_.raw());
    softmax_backward();
    const void* ds = bf16_ ? p16_.raw() : w_.raw();
    mm_pv_.run(cpu_, ds, k_.raw(), d_o_.raw());
    mm_pt_x_.run(cpu_, ds, q_.raw(), d_k_.raw());
    const void* d_q = d_o_.raw();
    // Input projections' weight gradients.
    if (pg) {
      mm_dw_q_.run(cpu_, d_q, q_in.raw(), grad(0));
      mm_dw_kv_.run(cpu_, d_k_.raw(), kv_in.raw(), grad(1));
      mm_dw_kv_.run(cpu_, d_v_.raw(), kv_in.raw(), grad(2));
    }
    if (pg && bias) {
      column_sums(grad(4), d_o_, mq, D);
      column_sums(grad(5), d_k_, mk, D);
      column_sums(grad(6), d_v_, mk, D);
    }
    // Input gradients (assign, then add the other projections).
    if (!cfg_.cross) {
      if (dx[0] != nullptr) {
        mm_dx_q_.run(cpu_, d_q, weight(0), dx[0]->raw());
        mm_dx_kv_sum_.run(cpu_, d_k_.raw(), weight(1), dx[0]->raw());
        mm_dx_kv_sum_.run(cpu_, d_v_.raw(), weight(2), dx[0]->raw());
      }
    } else {
      if (dx[0] != nullptr) mm_dx_q_.run(cpu_, d_q, weight(0), dx[0]->raw());
      if (dx[1] != nullptr) {
        mm_dx_kv_.run(cpu_, d_k_.raw(), weight(1), dx[1]->raw());
        mm_dx_kv_sum_.run(cpu_, d_v_.raw(), weight(2), dx[1]->raw());
      }
    }
  }

 private:
  // Parameter pointers are read at every call (Graph::tie may re-point them).
  void* param(int i) const { return params_[i].value.raw(); }
  float* grad(int i) const { return params_[i].grad.f32(); }
  // Weight i (0..3: q, k, v, out) as the products read it: the f32 master, or its bf16 copy.
  const void* weight(int i) const {
    if (!bf16_) return param(i);
    const int64_t dd = d_.D * d_.D;
    return w16_.data<uint16_t>() + i * dd;
  }
  // The four weights rounded into their bf16 copy (each forward; the backward reads them).
  void cast_weights() {
    const int64_t dd = d_.D * d_.D;
    uint16_t* w = w16_.data<uint16_t>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < 4 * d_.D; ++r) {
      const float* src =
          params_[static_cast<std::size_t>(r / d_.D)].value.f32() + (r % d_.D) * d_.D;
      round_row(w + (r / d_.D) * dd + (r % d_.D) * d_.D, src, d_.D);
    }
  }
  // db += column sums of z (m, d), f32 or bf16.
  static void column_sums(float* db, const Tensor& z, int64_t m, int64_t d) {
    if (z.dtype() == DType::kBF16) {
      accumulate_column_sums(db, z.data<const uint16_t>(), m, d);
    } else {
      accumulate_column_sums(db, z.f32(), m, d);
    }
  }

  // The primitives this layer built (mm_dx_kv_ exists for cross attention only).
  std::vector<Matmul*> all_matmuls() {
    std::vector<Matmul*> all{&mm_proj_q_, &mm_proj_kv_,   &mm_qk_,   &mm_pv_,   &mm_pt_x_,
                             &mm_dx_q_,   &mm_dx_kv_sum_, &mm_dw_q_, &mm_dw_kv_};
    if (cfg_.cross) all.push_back(&mm_dx_kv_);
    return all;
  }

  void make(Matmul& m, const memory::desc& src, const memory::desc& wei, const memory::desc& dst,
            const memory::desc& bias, bool accumulate, const char* who) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (accumulate) {
      dnnl::post_ops po;
      po.append_sum(1.0f);
      attr.set_post_ops(po);
    }
    auto& eng = cpu_.engine();
    m.pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, bias, dst), attr, eng);
    m.prim = dnnl::matmul(m.pd);
    m.src = memory(src, eng, nullptr);
    m.wei = memory(wei, eng, nullptr);
    m.dst = memory(dst, eng, nullptr);
    m.args = {{DNNL_ARG_SRC, m.src}, {DNNL_ARG_WEIGHTS, m.wei}, {DNNL_ARG_DST, m.dst}};
    if (bias.get_size() != 0) {
      m.bias = memory(bias, eng, nullptr);
      m.args[DNNL_ARG_BIAS] = m.bias;
    }
    m.who = who;
  }

  // Scores in p_ -> probabilities in p_ (and dropped ones in w_, keep mask in keep_).
  void softmax_forward(const int32_t* lengths) {
    const int64_t tq = d_.Tq, tk = d_.Tk, rows = d_.N * d_.h * d_.Tq, per_n = d_.h * d_.Tq;
    const bool causal = cfg_.causal, drop = dropout_used_;
    const float scale = scale_;
    const float inv_keep = static_cast<float>(1.0 / (1.0 - cfg_.dropout));
    const uint64_t base = attention_dropout_base(cfg_.seed, call_numbering().index(step_));
    const uint64_t threshold = attention_dropout_threshold(cfg_.dropout);
    float* p = p_.f32();
    float* w = w_.f32();
    uint16_t* p16 = bf16_ ? p16_.data<uint16_t>() : nullptr;
    uint8_t* keep = keep_.defined() ? keep_.data<uint8_t>() : nullptr;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t valid = tk;
      if (causal) valid = std::min(valid, r % tq + 1);
      if (lengths != nullptr) valid = std::min<int64_t>(valid, lengths[r / per_n]);
      float* row = p + r * tk;
      softmax_row_forward(row, tk, valid, scale);
      if (drop) {
        dropout_row(row, w + r * tk, keep + r * tk, tk, base + static_cast<uint64_t>(r * tk),
                    threshold, inv_keep);
      }
      if (p16 != nullptr) round_row(p16 + r * tk, drop ? w + r * tk : row, tk);
    }
  }

  // dPd in w_ -> dS' (scale folded in) in w_.
  void softmax_backward() {
    const int64_t tk = d_.Tk, rows = d_.N * d_.h * d_.Tq;
    const float scale = scale_;
    const float inv_keep = static_cast<float>(1.0 / (1.0 - cfg_.dropout));
    const uint8_t* keep = dropout_used_ ? keep_.data<uint8_t>() : nullptr;
    const float* p = p_.f32();
    float* w = w_.f32();
    uint16_t* ds16 = bf16_ ? p16_.data<uint16_t>() : nullptr;  // Pd16 is no longer needed
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      softmax_row_backward(w + r * tk, p + r * tk, keep ? keep + r * tk : nullptr, tk, inv_keep,
                           scale);
      if (ds16 != nullptr) round_row(ds16 + r * tk, w + r * tk, tk);
    }
  }

  MultiHeadAttentionConfig cfg_;
  CpuBackend& cpu_;
  AttentionDims d_;
  float scale_ = 1.f;
  uint64_t step_ = 0;          // training forwards so far (the dropout counter)
  bool dropout_used_ = false;  // whether the last forward applied dropout
  bool bf16_ = false;          // bf16 activations (P16 and the weights' copy W16 exist)
  Tensor q_, k_, v_, o_, p_, w_, keep_, d_o_, d_k_, d_v_, scratch_;
  Tensor p16_, w16_;
  Matmul mm_proj_q_, mm_proj_kv_, mm_qk_, mm_pv_, mm_pt_x_, mm_dx_q_, mm_dx_kv_, mm_dx_kv_sum_,
      mm_dw_q_, mm_dw_kv_;
};

TBD_REGISTER_LAYER(MultiHeadAttentionConfig, DeviceKind::kCpu, MultiHeadAttentionOneDnn);

}  // namespace
}  // namespace tbd::cpu
