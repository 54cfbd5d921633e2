// layers/cpu/rnn_cpu.cpp: LSTM, GRU (linear-before-reset, as PyTorch and cuDNN) and LSTMCell on
// GEMMs and fused elementwise passes: f32 on oneDNN's jit sgemm, bf16 (--tbd_math=bf16) on
// oneDNN's bf16 matmuls (layers/cpu/matmul_onednn.h) with the gates, the LSTM's cell states and
// the gradients between the products in f32.
//
// Not oneDNN's RNN primitives: their f32 training RNNs are the "ref" implementation (sgemm per
// time step), the GRU backward adds each step's weights_iter gradient with its own GEMM of depth
// N, reading and writing all of dW_hh every step, their bf16 GRU is the same reference code with
// a backward slower than the f32 one (600-700 ms against 380-430 ms a Deep Speech 2 layer at
// batch 2), and their workspaces are several times the saved state here. Parameters stay
// row-major in PyTorch's layout and gate order (weights = 4 bytes x params, optimizers
// layout-free).
#include <algorithm>
#include <cstring>

#include "backends/cpu/onednn.h"
#include "layers/cpu/matmul_onednn.h"
#include "layers/cpu/simd.h"
#include "layers/rnn.h"

namespace tbd::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// The contract checked the dtype; the primitives here take plain time-major data.
void check_row_major(const char* kind, const std::string& name, const char* arg,
                     const TensorDesc& d) {
  TBD_LAYER_CHECK(d.layout == Layout::kRowMajor, kind, name, "input ", arg,
                  " must be row-major, got ", d.to_string());
}

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

// The products of a recurrent layer over a sequence (LSTM, GRU), per layer and direction: one
// GEMM for the input part of every step's gates, then per step the recurrent GEMM and the cell's
// fused elementwise pass; backward per step the gates' gradients and the recurrent data
// gradient, then one GEMM each for dx, dW_ih and dW_hh over all steps. f32 on oneDNN's jit
// sgemm; bf16 on oneDNN's bf16 matmuls (f32 accumulation): x, y and the layers' outputs bf16,
// the gates and all gradients but the products' dgates operands f32. The f32 master weights are
// cast into the products' own (packed) bf16 formats by one reorder each, per layer and
// direction, at the forward and again at the backward (transients).
//
// The cells differ in where the recurrent product goes: the LSTM adds it into the gates (one
// dgates for both products), the GRU keeps it apart (its n gate reads r * (W_hn h + b_hn)) and
// has two dgates, the input's and the recurrent's, the latter added into dh.
class SequenceRnnCpu : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  std::string implementation() const override {
    if (!bf16_) return "sgemm + fused gates";
    return detail::concat("fwd ", bp_[0].in_fwd.pd.impl_info_str(), "/",
                          rec_fwd_.pd.impl_info_str(), " bwd ", bp_[0].in_dx.pd.impl_info_str(),
                          "/", rec_bwd_.pd.impl_info_str(), "/", bp_[0].wg_ih.pd.impl_info_str(),
                          " + fused gates (bf16 weights cast per call)");
  }

  void fprop(MutTensorRefs y, TensorRefs x) final {
    for (int64_t l = 0; l < L_; ++l) {
      const void* src = l == 0 ? x[0]->raw() : hidden_[l - 1].raw();
      void* dst = l + 1 == L_ ? y[0]->raw() : hidden_[l].raw();
      for (int64_t d = 0; d < D_; ++d) forward_dir(l, d, src, dst);
    }
  }

  // Under bf16 the gradients between layers are f32: dy is widened into the top layer's buffer
  // and dx rounded from layer 0's.
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) final {
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

 protected:
  // `gates`: G = gates x hidden columns; `params_per_dir`: LSTM 3, GRU 4; `rec_adds_forward`:
  // the recurrent product adds into the input gates (else it is written apart);
  // `rec_adds_backward`: the recurrent data gradient adds into dh (else it is written).
  SequenceRnnCpu(Backend& be, const std::string& name, const std::vector<TensorDesc>& in,
                 Contract c, int64_t hidden, int64_t layers, bool bidirectional, int64_t gates,
                 int params_per_dir, bool rec_adds_forward, bool rec_adds_backward)
      : Layer(be, name, in, std::move(c)),
        cpu_(as_cpu(be)),
        P_(params_per_dir),
        rec_adds_fwd_(rec_adds_forward),
        rec_adds_bwd_(rec_adds_backward) {
    check_row_major(kind(), name, "x", in[0]);
    const Shape& xs = in[0].shape;
    T_ = xs[0], N_ = xs[1], I_ = xs[2], H_ = hidden, L_ = layers, D_ = bidirectional ? 2 : 1;
    G_ = gates * hidden;
    const int64_t TN = T_ * N_;
    bf16_ = in[0].dtype == DType::kBF16;
    hidden_.resize(static_cast<std::size_t>(L_ - 1));  // complete before its elements are saved
    for (Tensor& t : hidden_) saved(t, TensorDesc{Shape{T_, N_, H_ * D_}, in[0].dtype});
    // Gradients between layers: (T, N, H*D) each; the lower layer's dx is assigned by its
    // first direction and added to by the second. Under bf16 both exist, f32: layer l reads
    // dhl_[(l + 1) % 2] and writes dhl_[l % 2], dy widened into the top layer's, dx rounded from
    // dhl_[0].
    if (bf16_) {
      for (auto& t : dhl_) transient(t, TensorDesc{Shape{TN * std::max(I_, H_ * D_)}});
      plan_bf16(name);
    } else {
      transient(w_hh_t_, TensorDesc{Shape{H_, G_}});
      if (L_ > 1) {
        for (auto& t : dhl_) transient(t, TensorDesc{Shape{TN * H_ * D_}});
      }
    }
  }

  // Layer l, direction d: src (T, N, in) -> dst's columns [d*H, (d+1)*H) of (T, N, H*D), in the
  // layer's dtype.
  virtual void forward_dir(int64_t l, int64_t d, const void* src, void* dst) = 0;
  // Its backward: ddst's columns of direction d in (f32), dsrc (f32: assigned, or added to with
  // `accumulate`; null: not wanted) and the parameter gradients out.
  virtual void backward_dir(int64_t l, int64_t d, const void* src, const void* dst,
                            const float* ddst, float* dsrc, bool accumulate) = 0;

  int64_t in_of(int64_t l) const { return l == 0 ? I_ : H_ * D_; }
  Param& param(int64_t l, int64_t d, int k) { return params_[(l * D_ + d) * P_ + k]; }
  // The step at position s of direction d's order (forward: 0, 1, ...; reverse: T-1, ...).
  int64_t step(int64_t d, int64_t s) const { return d == 0 ? s : T_ - 1 - s; }
  // Offset of direction d's columns at time t in a (T, N, H*D) output.
  int64_t out_offset(int64_t d, int64_t t) const { return t * N_ * H_ * D_ + d * H_; }
  // p + off elements of the layer's dtype.
  const void* element(const void* p, int64_t off) const {
    return bf16_ ? static_cast<const void*>(static_cast<const uint16_t*>(p) + off)
                 : static_cast<const void*>(static_cast<const float*>(p) + off);
  }

  // Before layer l, direction d's steps: the weights' casts (bf16) or W_hh^T (f32), and the input
  // part of every step's gates, gates (TN, G) = src W_ih^T.
  void input_gates(int64_t l, int64_t d, const void* src, float* gates) {
    const float *w_ih = param(l, d, 0).value.f32(), *w_hh = param(l, d, 1).value.f32();
    const int64_t H = H_, G = G_, in = in_of(l);
    if (bf16_) {
      const LayerProducts& p = bp_[l];
      p.ih_fwd.run(cpu_, w_ih, w_ih16_.raw(), "RNN weight cast");
      hh_fwd_.run(cpu_, w_hh, w_hh16_.raw(), "RNN weight cast");
      run_matmul(cpu_, p.in_fwd, src, w_ih16_.raw(), nullptr, gates, scratch_, "RNN input gates");
      return;
    }
    sgemm('N', 'T', T_ * N_, G, in, static_cast<const float*>(src), in, w_ih, in, 0.0f, gates, G);
    // W_hh^T (H, G), once: the steps' GEMMs then read it as it is.
    float* w_hh_t = w_hh_t_.f32();
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < H; ++k) {
      for (int64_t j = 0; j < G; ++j) w_hh_t[k * G + j] = w_hh[j * H + k];
    }
  }

  // out (N, G) (+)= h (N, H; rows H*D apart, at `h` in the layer's dtype) W_hh^T.
  void recurrent_gates(const void* h, float* out) {
    if (bf16_) {
      run_matmul(cpu_, rec_fwd_, h, w_hh16_.raw(), nullptr, out, scratch_, "RNN recurrent gates");
    } else {
      sgemm('N', 'N', N_, G_, H_, static_cast<const float*>(h), H_ * D_, w_hh_t_.f32(), G_,
            rec_adds_fwd_ ? 1.0f : 0.0f, out, G_);
    }
  }

  // Before layer l, direction d's backward steps: the weights' casts (bf16).
  void backward_casts(int64_t l, int64_t d) {
    if (!bf16_) return;
    bp_[l].ih_bwd.run(cpu_, param(l, d, 0).value.f32(), w_ih16_.raw(), "RNN weight cast");
    hh_bwd_.run(cpu_, param(l, d, 1).value.f32(), w_hh16_.raw(), "RNN weight cast");
  }

  // dh (N, H) (+)= dg (N, G) W_hh: `dg` f32, `dg16` its bf16 rounding (bf16 only).
  void recurrent_gradient(int64_t l, int64_t d, const float* dg, const uint16_t* dg16, float* dh) {
    if (bf16_) {
      run_matmul(cpu_, rec_bwd_, dg16, w_hh16_.raw(), nullptr, dh, scratch_,
                 "RNN recurrent gradient");
    } else {
      sgemm('N', 'N', N_, H_, G_, dg, G_, param(l, d, 1).value.f32(), H_,
            rec_adds_bwd_ ? 1.0f : 0.0f, dh, H_);
    }
  }

  // After the steps: dsrc (+)= dg_in W_ih, dW_ih += dg_in^T src, dW_hh += dg_rec^T h over the
  // steps that have an h before them (contiguous in time for either direction: forward
  // t = 1..T-1 against h at 0..T-2; reverse t = 0..T-2 against h at 1..T-1). dg_in and dg_rec
  // (TN, G), with their bf16 roundings dg16_in and dg16_rec under bf16.
  void input_and_weight_gradients(int64_t l, int64_t d, const void* src, const void* dst,
                                  const float* dg_in, const uint16_t* dg16_in, const float* dg_rec,
                                  const uint16_t* dg16_rec, float* dsrc, bool accumulate) {
    const int64_t T = T_, N = N_, H = H_, HD = H_ * D_, G = G_, in = in_of(l);
    if (dsrc != nullptr && bf16_) {
      run_matmul(cpu_, accumulate ? bp_[l].in_dx_acc : bp_[l].in_dx, dg16_in, w_ih16_.raw(),
                 nullptr, dsrc, scratch_, "RNN input gradient");
    } else if (dsrc != nullptr) {
      sgemm('N', 'N', T * N, in, G, dg_in, G, param(l, d, 0).value.f32(), in,
            accumulate ? 1.0f : 0.0f, dsrc, in);
    }
    if (!param_grads()) return;
    const int64_t dg_row0 = d == 0 ? N : 0, h_row0 = (d == 0 ? 0 : N) * HD + d * H;
    if (bf16_) {
      run_matmul(cpu_, bp_[l].wg_ih, dg16_in, src, nullptr, param(l, d, 0).grad.raw(), scratch_,
                 "RNN input weight gradient");
      if (T > 1) {
        run_matmul(cpu_, wg_hh_, dg16_rec + dg_row0 * G, static_cast<const uint16_t*>(dst) + h_row0,
                   nullptr, param(l, d, 1).grad.raw(), scratch_, "RNN recurrent weight gradient");
      }
    } else {
      sgemm('T', 'N', G, in, T * N, dg_in, G, static_cast<const float*>(src), in, 1.0f,
            param(l, d, 0).grad.f32(), in);
      if (T > 1) {
        sgemm('T', 'N', G, H, (T - 1) * N, dg_rec + dg_row0 * G, G,
              static_cast<const float*>(dst) + h_row0, HD, 1.0f, param(l, d, 1).grad.f32(), H);
      }
    }
  }

  CpuBackend& cpu_;
  int64_t T_ = 0, N_ = 0, I_ = 0, H_ = 0, L_ = 0, D_ = 1, G_ = 0;
  int P_ = 0;
  bool bf16_ = false;

 private:
  // The products of one layer (they depend on its input width).
  struct LayerProducts {
    Matmul in_fwd;              // gates (TN, G) = x (TN, in) W_ih^T
    Matmul in_dx, in_dx_acc;    // dx (TN, in) (+)= dgates (TN, G) W_ih, f32
    Matmul wg_ih;               // dW_ih (G, in) += dgates^T x, f32
    WeightCast ih_fwd, ih_bwd;  // the master W_ih (G, in) into in_fwd's and in_dx's weights
  };

  void plan_bf16(const std::string& name) {
    const int64_t T = T_, N = N_, H = H_, HD = H_ * D_, G = G_, TN = T * N;
    const dt b = dt::bf16;
    const memory::desc none;
    auto any = [&](int64_t r, int64_t c) { return memory::desc({r, c}, b, tag::any); };
    std::size_t w_ih = 0;
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
    // gates (N, G) (+)= h (N, H; rows HD apart) W_hh^T; dh (N, H) (+)= dgates (N, G) W_hh;
    // dW_hh (G, H) += dgates^T (G, (T-1)N) h ((T-1)N, H; rows HD apart)
    rec_fwd_ = make_matmul(cpu_, kind(), name, "recurrent gates", mat_strided(N, H, HD, 1, b),
                           any(H, G), none, mat(N, G, false), 1.f, rec_adds_fwd_);
    rec_bwd_ = make_matmul(cpu_, kind(), name, "recurrent gradient", mat(N, G, false, b), any(G, H),
                           none, mat(N, H, false), 1.f, rec_adds_bwd_);
    if (T > 1) {
      wg_hh_ =
          make_matmul(cpu_, kind(), name, "recurrent weight gradient", mat(G, (T - 1) * N, true, b),
                      mat_strided((T - 1) * N, H, HD, 1, b), none, mat(G, H, false), 1.f, true);
    }
    hh_fwd_ = WeightCast(cpu_, mat(H, G, true), rec_fwd_.pd.weights_desc());
    hh_bwd_ = WeightCast(cpu_, mat(G, H, false), rec_bwd_.pd.weights_desc());
    transient(w_ih16_, w_ih);
    transient(w_hh16_, std::max(hh_fwd_.to.get_size(), hh_bwd_.to.get_size()));
    std::size_t scratch = max_scratch_bytes({&rec_fwd_, &rec_bwd_, &wg_hh_});
    for (const LayerProducts& p : bp_) {
      scratch = std::max(scratch, max_scratch_bytes({&p.in_fwd, &p.in_dx, &p.in_dx_acc, &p.wg_ih}));
    }
    if (scratch) transient(scratch_, scratch);
  }

  bool rec_adds_fwd_, rec_adds_bwd_;
  std::vector<Tensor> hidden_;  // outputs of layers 0..L-2, kept for backward
  Tensor dhl_[2], w_hh_t_;
  // bf16 only: the products, the weights' casts and their transients.
  std::vector<LayerProducts> bp_;
  Matmul rec_fwd_, rec_bwd_, wg_hh_;
  WeightCast hh_fwd_, hh_bwd_;
  Tensor w_ih16_, w_hh16_, scratch_;
};

// An LSTM over a sequence on SequenceRnnCpu's products and LstmCellCpu's rows. Saved for
// backward per layer and direction: the activated gates and the cell states, (T, N, 4H) and
// (T, N, H), the 5H per position of the contract's bytes (cuDNN's reserve space holds the same).
// oneDNN's LSTM primitive keeps a workspace several times that, and its backward a scratchpad as
// large again (Seq2Seq's encoder at batch 256: 757 MiB kept and 348 MiB of scratch, against
// 156 MiB and 63 MiB here). Under bf16 the cell states stay f32 (as oneDNN's bf16 LSTM keeps
// them).
class LstmSequenceCpu final : public SequenceRnnCpu {
 public:
  LstmSequenceCpu(Backend& be, const std::string& name, const LstmConfig& cfg,
                  const std::vector<TensorDesc>& in)
      : SequenceRnnCpu(be, name, in, contract_of(name, cfg, in), cfg.hidden, cfg.num_layers,
                       cfg.bidirectional, /*gates=*/4, /*params_per_dir=*/3,
                       /*rec_adds_forward=*/true, /*rec_adds_backward=*/false) {
    const int64_t TN = T_ * N_;
    // Complete before their elements are declared as saved state (they must not move).
    gates_.resize(static_cast<std::size_t>(L_ * D_));
    cells_.resize(static_cast<std::size_t>(L_ * D_));
    for (Tensor& t : gates_) saved(t, TensorDesc{Shape{TN, G_}});
    for (Tensor& t : cells_) saved(t, TensorDesc{Shape{TN, H_}});
    zeros_ = be.empty(Shape{H_}, MemCategory::kWorkspace);  // every row's initial c
    std::memset(zeros_.raw(), 0, zeros_.bytes());
    transient(dgates_, TensorDesc{Shape{TN, G_}});
    transient(dh_step_, TensorDesc{Shape{2, N_, H_}});  // the carried dh and this step's sum
    transient(dc_step_, TensorDesc{Shape{2, N_, H_}});
    if (bf16_) {
      transient(dg16_, TensorDesc{Shape{TN, G_}, DType::kBF16});
      transient(h32_, TensorDesc{Shape{N_, H_}});
    }
  }

 private:
  void forward_dir(int64_t l, int64_t d, const void* src, void* dst) override {
    const int64_t T = T_, N = N_, H = H_, HD = H_ * D_, G = G_;
    float* gates = gates_[l * D_ + d].f32();
    float* cells = cells_[l * D_ + d].f32();
    const float* b = param(l, d, 2).value.f32();
    input_gates(l, d, src, gates);
    float* h32 = bf16_ ? h32_.f32() : nullptr;  // bf16: a step's h before rounding
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = step(d, s);
      float* g = gates + t * N * G;
      const float* c0 = s == 0 ? zeros_.f32() : cells + step(d, s - 1) * N * H;
      const int64_t h1 = out_offset(d, t);
      if (s > 0) recurrent_gates(element(dst, out_offset(d, step(d, s - 1))), g);
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

  void backward_dir(int64_t l, int64_t d, const void* src, const void* dst, const float* ddst,
                    float* dsrc, bool accumulate) override {
    const int64_t T = T_, N = N_, H = H_, HD = H_ * D_, G = G_;
    const float* gates = gates_[l * D_ + d].f32();
    const float* cells = cells_[l * D_ + d].f32();
    backward_casts(l, d);
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
      const float* dh_out = ddst + out_offset(d, t);
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
      if (s > 0) {
        recurrent_gradient(l, d, dg + t * N * G, dg16 ? dg16 + t * N * G : nullptr, dh_carry);
      }
    }
    input_and_weight_gradients(l, d, src, dst, dg, dg16, dg, dg16, dsrc, accumulate);
    if (param_grads()) add_column_sums(param(l, d, 2).grad.f32(), dg, T * N, G);
  }

  std::vector<Tensor> gates_, cells_;  // per (layer, direction): saved for backward
  Tensor zeros_;                       // one row of the initial cell state (0)
  Tensor dgates_, dh_step_, dc_step_;
  Tensor dg16_, h32_;  // bf16 only
};

// One GRU step's elementwise pass for one row, as PyTorch and cuDNN (linear-before-reset):
// r = sigma(gi_r + b_ir + gh_r + b_hr), z likewise, hn = gh_n + b_hn,
// n = tanh(gi_n + b_in + r * hn), h1 = (1 - z) n + z h0. `gi` holds the input products and
// leaves with the activated r, z, n (saved with hn: the contract's 4H per row); `gh` (the
// recurrent products) and `h0` are null at the first step (h0 = 0). E: the states' dtype.
template <class E>
[[gnu::always_inline]] inline void gru_fwd_of(float* gi, const float* gh, const float* b_ih,
                                              const float* b_hh, const E* h0, float* hn_out, E* h1,
                                              int64_t H) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    const float ghr = gh ? gh[j] : 0.f, ghz = gh ? gh[H + j] : 0.f, ghn = gh ? gh[2 * H + j] : 0.f;
    const float r = sigmoid_fast(gi[j] + b_ih[j] + ghr + b_hh[j]);
    const float z = sigmoid_fast(gi[H + j] + b_ih[H + j] + ghz + b_hh[H + j]);
    const float hn = ghn + b_hh[2 * H + j];
    const float n = tanh_fast(gi[2 * H + j] + b_ih[2 * H + j] + r * hn);
    const float h = h0 ? as_f32(h0[j]) : 0.f;
    store_as(h1[j], (1.f - z) * n + z * h);
    gi[j] = r, gi[H + j] = z, gi[2 * H + j] = n;
    hn_out[j] = hn;
  }
}

// Its backward from dh1 (this step's output gradient and the later step's, summed): the
// input products' pre-activation gradients dgi (r, z, n), the recurrent products' dgh (r, z, and
// n times r), and dh0 = z dh1 (null at the first step), the part of h0's gradient that does not
// go through W_hh.
template <class E>
[[gnu::always_inline]] inline void gru_bwd_of(const float* g, const float* hn, const E* h0,
                                              const float* dh1, float* dgi, float* dgh, float* dh0,
                                              int64_t H) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    const float r = g[j], z = g[H + j], n = g[2 * H + j], dh = dh1[j];
    const float h = h0 ? as_f32(h0[j]) : 0.f;
    const float dn = dh * (1.f - z) * (1.f - n * n);
    const float dr = dn * hn[j] * r * (1.f - r);
    const float dz = dh * (h - n) * z * (1.f - z);
    dgi[j] = dr, dgi[H + j] = dz, dgi[2 * H + j] = dn;
    dgh[j] = dr, dgh[H + j] = dz, dgh[2 * H + j] = dn * r;
    if (dh0) dh0[j] = dh * z;
  }
}
TBD_SIMD_CLONES void gru_fwd_row(float* gi, const float* gh, const float* b_ih, const float* b_hh,
                                 const float* h0, float* hn, float* h1, int64_t H) {
  gru_fwd_of(gi, gh, b_ih, b_hh, h0, hn, h1, H);
}
TBD_SIMD_CLONES void gru_fwd_row(float* gi, const float* gh, const float* b_ih, const float* b_hh,
                                 const uint16_t* h0, float* hn, uint16_t* h1, int64_t H) {
  gru_fwd_of(gi, gh, b_ih, b_hh, h0, hn, h1, H);
}
TBD_SIMD_CLONES void gru_bwd_row(const float* g, const float* hn, const float* h0, const float* dh1,
                                 float* dgi, float* dgh, float* dh0, int64_t H) {
  gru_bwd_of(g, hn, h0, dh1, dgi, dgh, dh0, H);
}
TBD_SIMD_CLONES void gru_bwd_row(const float* g, const float* hn, const uint16_t* h0,
                                 const float* dh1, float* dgi, float* dgh, float* dh0, int64_t H) {
  gru_bwd_of(g, hn, h0, dh1, dgi, dgh, dh0, H);
}

// A GRU over a sequence on SequenceRnnCpu's products. Saved for backward per layer and
// direction: the activated gates r, z, n and hn = W_hn h + b_hn, (T, N, 3H) and (T, N, H), the
// contract's 4H per position (cuDNN's reserve space holds the same); the states are the
// outputs, in the layer's dtype (under bf16 the state a step carries is the bf16 output the
// next step's product reads, as in oneDNN's bf16 GRU).
class GruSequenceCpu final : public SequenceRnnCpu {
 public:
  GruSequenceCpu(Backend& be, const std::string& name, const GruConfig& cfg,
                 const std::vector<TensorDesc>& in)
      : SequenceRnnCpu(be, name, in, contract_of(name, cfg, in), cfg.hidden, cfg.num_layers,
                       cfg.bidirectional, /*gates=*/3, /*params_per_dir=*/4,
                       /*rec_adds_forward=*/false, /*rec_adds_backward=*/true) {
    const int64_t TN = T_ * N_;
    gates_.resize(static_cast<std::size_t>(L_ * D_));  // complete before their elements are saved
    hn_.resize(static_cast<std::size_t>(L_ * D_));
    for (Tensor& t : gates_) saved(t, TensorDesc{Shape{TN, G_}});
    for (Tensor& t : hn_) saved(t, TensorDesc{Shape{TN, H_}});
    transient(gh_, TensorDesc{Shape{N_, G_}});
    transient(dgi_, TensorDesc{Shape{TN, G_}});
    transient(dgh_, TensorDesc{Shape{TN, G_}});
    transient(dh_step_, TensorDesc{Shape{2, N_, H_}});  // the carried dh and this step's sum
    if (bf16_) {
      transient(dgi16_, TensorDesc{Shape{TN, G_}, DType::kBF16});
      transient(dgh16_, TensorDesc{Shape{TN, G_}, DType::kBF16});
    }
  }

 private:
  void forward_dir(int64_t l, int64_t d, const void* src, void* dst) override {
    if (bf16_) {
      forward_steps(l, d, src, static_cast<uint16_t*>(dst));
    } else {
      forward_steps(l, d, src, static_cast<float*>(dst));
    }
  }

  template <class E>
  void forward_steps(int64_t l, int64_t d, const void* src, E* dst) {
    const int64_t T = T_, N = N_, H = H_, HD = H_ * D_, G = G_;
    float* gates = gates_[l * D_ + d].f32();
    float* hn = hn_[l * D_ + d].f32();
    const float *b_ih = param(l, d, 2).value.f32(), *b_hh = param(l, d, 3).value.f32();
    input_gates(l, d, src, gates);
    float* gh = gh_.f32();
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = step(d, s);
      const E* h0 = s == 0 ? nullptr : dst + out_offset(d, step(d, s - 1));
      if (h0) recurrent_gates(h0, gh);
      E* h1 = dst + out_offset(d, t);
#pragma omp parallel for schedule(static) if (N * H > 2048)
      for (int64_t n = 0; n < N; ++n) {
        gru_fwd_row(gates + (t * N + n) * G, h0 ? gh + n * G : nullptr, b_ih, b_hh,
                    h0 ? h0 + n * HD : nullptr, hn + (t * N + n) * H, h1 + n * HD, H);
      }
    }
  }

  void backward_dir(int64_t l, int64_t d, const void* src, const void* dst, const float* ddst,
                    float* dsrc, bool accumulate) override {
    if (bf16_) {
      backward_steps(l, d, static_cast<const uint16_t*>(dst), ddst);
    } else {
      backward_steps(l, d, static_cast<const float*>(dst), ddst);
    }
    const float *dgi = dgi_.f32(), *dgh = dgh_.f32();
    const uint16_t* dgi16 = bf16_ ? dgi16_.data<uint16_t>() : nullptr;
    const uint16_t* dgh16 = bf16_ ? dgh16_.data<uint16_t>() : nullptr;
    input_and_weight_gradients(l, d, src, dst, dgi, dgi16, dgh, dgh16, dsrc, accumulate);
    if (!param_grads()) return;
    add_column_sums(param(l, d, 2).grad.f32(), dgi, T_ * N_, G_);
    add_column_sums(param(l, d, 3).grad.f32(), dgh, T_ * N_, G_);
  }

  // The steps backward: dgi_ and dgh_ (and their bf16 roundings) for every position.
  template <class E>
  void backward_steps(int64_t l, int64_t d, const E* dst, const float* ddst) {
    const int64_t T = T_, N = N_, H = H_, HD = H_ * D_, G = G_;
    const float* gates = gates_[l * D_ + d].f32();
    const float* hn = hn_[l * D_ + d].f32();
    backward_casts(l, d);
    float *dgi = dgi_.f32(), *dgh = dgh_.f32();
    uint16_t* dgi16 = bf16_ ? dgi16_.data<uint16_t>() : nullptr;
    uint16_t* dgh16 = bf16_ ? dgh16_.data<uint16_t>() : nullptr;
    float* dh_carry = dh_step_.f32();  // d loss / d h of the step, from the step after it
    float* dh_sum = dh_carry + N * H;
    for (int64_t s = T; s-- > 0;) {
      const int64_t t = step(d, s);
      const E* h0 = s == 0 ? nullptr : dst + out_offset(d, step(d, s - 1));
      const float* dh_out = ddst + out_offset(d, t);
      const bool last = s + 1 == T;  // nothing flows back from a later step yet
#pragma omp parallel for schedule(static) if (N * H > 2048)
      for (int64_t n = 0; n < N; ++n) {
        float* sum = dh_sum + n * H;
        const float* a = dh_out + n * HD;
        float* c = dh_carry + n * H;
#pragma omp simd
        for (int64_t j = 0; j < H; ++j) sum[j] = last ? a[j] : a[j] + c[j];
        const int64_t r = (t * N + n) * G;
        gru_bwd_row(gates + r, hn + (t * N + n) * H, h0 ? h0 + n * HD : nullptr, sum, dgi + r,
                    dgh + r, h0 ? c : nullptr, H);
        if (dgi16) {
          round_row(dgi16 + r, dgi + r, G);
          round_row(dgh16 + r, dgh + r, G);
        }
      }
      if (s > 0) {
        recurrent_gradient(l, d, dgh + t * N * G, dgh16 ? dgh16 + t * N * G : nullptr, dh_carry);
      }
    }
  }

  std::vector<Tensor> gates_, hn_;  // per (layer, direction): saved for backward
  Tensor gh_, dgi_, dgh_, dh_step_;
  Tensor dgi16_, dgh16_;  // bf16 only
};

TBD_REGISTER_LAYER(LstmConfig, DeviceKind::kCpu, LstmSequenceCpu);
TBD_REGISTER_LAYER(GruConfig, DeviceKind::kCpu, GruSequenceCpu);
TBD_REGISTER_LAYER(LstmCellConfig, DeviceKind::kCpu, LstmCellCpu);

}  // namespace
}  // namespace tbd::cpu
