// layers/cpu/sdpa_cpu.cpp: ScaledDotProductAttention fused on the CPU, tiles of queries against
// tiles of keys (layers/sdpa.h) with the online softmax by own code.
//
// Forward: one task per (n, query head, query tile), dynamically scheduled, the tiles with the
// most keys first (causal tiles grow along the diagonal). A task keeps its tile's running max
// m, sum l and unnormalised output (kRows x d, f32) in the thread's scratch, walks the key
// tiles up to the diagonal, and writes o = acc / l and lse = m + log(l).
// Backward: one task per (n, key/value head): it owns that head's dk and dv (T x d, f32, in
// the thread's scratch) and the dq of each of its query heads in turn, so nothing is shared
// between threads and nothing is atomic; parallelism is N*Hkv tasks.
//
// Products. f32: oneDNN's dnnl_sgemm on the tensors in place (row-major, any row stride;
// inside an OpenMP region it runs on the calling thread). bf16: oneDNN matmul primitives
// planned at build for one thread and one tile shape (kRows x d x W, W = kRows or kCols), which
// oneDNN runs on AMX (brgemm) where the CPU has it, else on its avx512_bf16 kernels. Those
// kernels want dense operands (a column block of the packed qkv, row stride 3C, sends oneDNN 2.6
// to its slower gemm), so a task first copies its q, k, v (and do) rows into dense bf16 blocks
// padded with zero rows to the tile shape; the scores, the softmax and the accumulators stay
// f32, and the probabilities P and dS are rounded to bf16 for the products that read them
// (FlashAttention's bf16 recipe). Measured on one AMX core: 360-850 GFLOP/s for these tiles
// against about 120 for dnnl_sgemm on widened f32 tiles. o, dq, dk and dv are rounded once.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <unordered_map>
#include <vector>

#include "backends/cpu/onednn.h"
#include "layers/cpu/matmul_onednn.h"
#include "layers/cpu/simd.h"
#include "layers/sdpa.h"

namespace tbd::cpu {
namespace {

using dnnl::memory;

constexpr int64_t kRows = 128;  // queries per tile
constexpr int64_t kCols =
    256;  // keys per tile (a multiple of kRows: a causal tile's rows all see a key)

// C (m x n, ldc) = alpha * op(A) op(B) + beta * C, row-major; op = transpose where 'T'.
void gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const dnnl_status_t st = dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  TBD_CHECK(st == dnnl_success, "ScaledDotProductAttention: dnnl_sgemm failed (status ",
            static_cast<int>(st), ") on ", m, "x", n, "x", k);
}

// rows x d of f32 (row stride d) scaled per row by s[r] (or 1) into dst (row stride ld),
// f32 or rounded to bf16.
template <class E>
[[gnu::always_inline]] inline void scaled_rows(E* dst, const float* src, const float* s,
                                               int64_t rows, int64_t d, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    const float f = s ? s[r] : 1.f;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) store_as(dst[r * ld + j], src[r * d + j] * f);
  }
}
TBD_SIMD_CLONES void store_rows(float* dst, const float* src, const float* s, int64_t rows,
                                int64_t d, int64_t ld) {
  scaled_rows(dst, src, s, rows, d, ld);
}
TBD_SIMD_CLONES void store_rows(uint16_t* dst, const float* src, const float* s, int64_t rows,
                                int64_t d, int64_t ld) {
  scaled_rows(dst, src, s, rows, d, ld);
}

// rows x d of bf16 (row stride ld) into the dense block dst (row stride d), rows [rows, to)
// zero: a tile padded to its product's shape.
void pack_rows(uint16_t* dst, const uint16_t* src, int64_t rows, int64_t to, int64_t d,
               int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * d, src + r * ld, static_cast<std::size_t>(d) * sizeof(uint16_t));
  }
  std::fill(dst + rows * d, dst + to * d, uint16_t{0});
}

// One row of a forward tile: s (scores, scaled) over `valid` keys -> p = exp(s - m_new) into
// p[0..n) (f32, in place when p = s, or rounded to bf16), zeros after `valid`; updates m and l
// (the sum of the unrounded p); returns the factor exp(m_old - m_new) the row's output takes.
template <class E>
[[gnu::always_inline]] inline float softmax_row_step(const float* s, E* p, int64_t n, int64_t valid,
                                                     float& m, float& l) {
  const float mx = max_of(s, valid, m);
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < valid; ++j) {
    const float e = exp_nonpositive(s[j] - mx);
    store_as(p[j], e);
    sum += e;
  }
  for (int64_t j = valid; j < n; ++j) p[j] = E{};
  const float corr = exp_nonpositive(m - mx);  // m = -inf at the first tile: 0 (l, acc are 0)
  l = l * corr + sum;
  m = mx;
  return corr;
}
TBD_SIMD_CLONES float online_softmax_row(const float* s, float* p, int64_t n, int64_t valid,
                                         float& m, float& l) {
  return softmax_row_step(s, p, n, valid, m, l);
}
TBD_SIMD_CLONES float online_softmax_row(const float* s, uint16_t* p, int64_t n, int64_t valid,
                                         float& m, float& l) {
  return softmax_row_step(s, p, n, valid, m, l);
}

TBD_SIMD_CLONES void scale_row(float* x, int64_t n, float f) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) x[j] *= f;
}
// acc[0..n) = acc * f + add.
TBD_SIMD_CLONES void rescale_add_row(float* acc, const float* add, int64_t n, float f) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) acc[j] = acc[j] * f + add[j];
}

// One row of a backward tile: s (scaled scores) -> p = exp(s - lse) over `valid` keys, zeros
// after; dp -> dS = p * (dp - dd) * scale; into pb and dsb (f32: in place, pb = s, dsb = dp;
// bf16: rounded).
template <class E>
[[gnu::always_inline]] inline void backward_row_step(const float* s, const float* dp, E* pb, E* dsb,
                                                     int64_t n, int64_t valid, float lse, float dd,
                                                     float scale) {
#pragma omp simd
  for (int64_t j = 0; j < valid; ++j) {
    const float p = exp_nonpositive(s[j] - lse);
    const float ds = p * (dp[j] - dd) * scale;
    store_as(pb[j], p);
    store_as(dsb[j], ds);
  }
  for (int64_t j = valid; j < n; ++j) pb[j] = dsb[j] = E{};
}
TBD_SIMD_CLONES void backward_row(const float* s, const float* dp, float* pb, float* dsb, int64_t n,
                                  int64_t valid, float lse, float dd, float scale) {
  backward_row_step(s, dp, pb, dsb, n, valid, lse, dd, scale);
}
TBD_SIMD_CLONES void backward_row(const float* s, const float* dp, uint16_t* pb, uint16_t* dsb,
                                  int64_t n, int64_t valid, float lse, float dd, float scale) {
  backward_row_step(s, dp, pb, dsb, n, valid, lse, dd, scale);
}

// sum_j a[j] b[j] over d, f32 or bf16.
template <class E>
[[gnu::always_inline]] inline float dot_of(const E* a, const E* b, int64_t d) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < d; ++j) s += as_f32(a[j]) * as_f32(b[j]);
  return s;
}
TBD_SIMD_CLONES float dot_row(const float* a, const float* b, int64_t d) { return dot_of(a, b, d); }
TBD_SIMD_CLONES float dot_row(const uint16_t* a, const uint16_t* b, int64_t d) {
  return dot_of(a, b, d);
}

// The first exception thrown by an OpenMP loop's tasks, rethrown after the loop (an exception
// must not leave a parallel region).
class TaskErrors {
 public:
  template <class F>
  void run(F&& f) {
    try {
      f();
    } catch (...) {
#pragma omp critical(tbd_sdpa_errors)
      if (!first_) first_ = std::current_exception();
    }
  }
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::exception_ptr first_;
};

// One bf16 tile product, dst (=|+=) scale * src x wei on dense row-major blocks (make_matmul),
// planned at build for a single thread (it runs inside an OpenMP task) with per-thread memory
// objects, so running it sets three data handles and allocates nothing.
class TileProduct {
 public:
  TileProduct() = default;
  // src (m x k), wei (k x n), dst (m x n) f32; a `_t` operand is stored transposed.
  TileProduct(CpuBackend& cpu, const std::string& layer, const char* what, int64_t m, int64_t n,
              int64_t k, bool src_t, bool wei_t, float scale, bool accumulate, int threads) {
    using dt = memory::data_type;
    // oneDNN sizes a primitive's blocking for the threads it sees at creation: one here.
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    try {
      mm_ = make_matmul(cpu, ScaledDotProductAttentionConfig::kKind, layer, what,
                        mat(m, k, src_t, dt::bf16), mat(k, n, wei_t, dt::bf16), memory::desc(),
                        mat(m, n, false), scale, accumulate);
    } catch (...) {
      omp_set_num_threads(saved);
      throw;
    }
    omp_set_num_threads(saved);
    for (int t = 0; t < threads; ++t) {
      std::unordered_map<int, memory> a{
          {DNNL_ARG_SRC, memory(mm_.pd.src_desc(), cpu.engine(), nullptr)},
          {DNNL_ARG_WEIGHTS, memory(mm_.pd.weights_desc(), cpu.engine(), nullptr)},
          {DNNL_ARG_DST, memory(mm_.pd.dst_desc(), cpu.engine(), nullptr)}};
      args_.push_back(std::move(a));
    }
  }
  std::size_t scratch_bytes() const { return mm_.scratch_bytes; }
  std::string impl() const { return mm_.pd.impl_info_str(); }
  // Thread t's scratchpad (fixed for the layer's life).
  void bind_scratch(CpuBackend& cpu, int t, void* p) {
    if (scratch_bytes() > 0) {
      args_[t][DNNL_ARG_SCRATCHPAD] = memory(mm_.pd.scratchpad_desc(), cpu.engine(), p);
    }
  }
  void run(dnnl::stream& s, int t, const void* src, const void* wei, void* dst) {
    std::unordered_map<int, memory>& a = args_[t];
    a.at(DNNL_ARG_SRC).set_data_handle(const_cast<void*>(src));
    a.at(DNNL_ARG_WEIGHTS).set_data_handle(const_cast<void*>(wei));
    a.at(DNNL_ARG_DST).set_data_handle(dst);
    mm_.prim.execute(s, a);
  }

 private:
  Matmul mm_;
  std::vector<std::unordered_map<int, memory>> args_;
};

// The bf16 products for key tiles of width W: S = scale q k^T and dP = do v^T (kRows x W),
// O' = P v (kRows x d), dq += dS k, and dv += P^T do / dk += dS^T q (W x d, the left operand
// the kRows x W tile read transposed).
struct TileProducts {
  TileProduct scores, dp, pv, dq, dkv;
};

// Carves a thread's scratch into 64-byte aligned arrays; with a null base it only counts.
class Carve {
 public:
  explicit Carve(float* base) : base_(base) {}
  float* f32(int64_t n) {
    float* r = base_ ? base_ + used_ : nullptr;
    used_ += (n + 15) / 16 * 16;
    return r;
  }
  uint16_t* bf16(int64_t n) { return reinterpret_cast<uint16_t*>(f32((n + 1) / 2)); }
  int64_t used() const { return used_; }

 private:
  float* base_;
  int64_t used_ = 0;
};

class SdpaCpu final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  SdpaCpu(Backend& be, const std::string& name, const ScaledDotProductAttentionConfig& cfg,
          const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)),
        cfg_(cfg),
        cpu_(as_cpu(be)),
        d_(sdpa_dims(name, cfg, in)) {
    bf16_ = in[0].dtype == DType::kBF16;
    threads_ = std::max(1, omp_get_max_threads());
    scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d_.d)));
    t_pad_ = (d_.T + kRows - 1) / kRows * kRows;
    saved(lse_, TensorDesc{Shape{d_.N, d_.Hq, d_.T}});
    Carve fwd(nullptr), bwd(nullptr);
    (void)forward_scratch(fwd);
    (void)backward_scratch(bwd);
    per_thread_ = std::max(fwd.used(), bwd.used());
    scratch_ = be.empty(Shape{threads_ * per_thread_}, MemCategory::kWorkspace);
    if (bf16_) plan_bf16(name);
  }

  std::string implementation() const override {
    if (!bf16_) {
      return detail::concat("tiles of ", kRows, " queries x ", kCols,
                            " keys, online softmax, dnnl_sgemm");
    }
    const TileProducts& p = products_.back();
    return detail::concat("tiles of ", kRows, " queries x ", kCols,
                          " keys, online softmax, bf16 matmuls ", p.scores.impl(), "/", p.pv.impl(),
                          " bwd ", p.dkv.impl(), "/", p.dq.impl());
  }

  // y: o; x: q, k, v or qkv.
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const SdpaDims& d = d_;
    const int64_t tiles = (d.T + kRows - 1) / kRows;
    const int64_t tasks = d.N * d.Hq * tiles;
    TaskErrors errors;
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
    for (int64_t t = 0; t < tasks; ++t) {
      // The last tiles (the most keys under a causal mask) first.
      const int64_t qt = tiles - 1 - t / (d.N * d.Hq), nh = t % (d.N * d.Hq);
      errors.run([&] {
        if (bf16_) {
          forward_tile_bf16(*y[0], x, nh / d.Hq, nh % d.Hq, qt * kRows);
        } else {
          forward_tile(*y[0], x, nh / d.Hq, nh % d.Hq, qt * kRows);
        }
      });
    }
    errors.rethrow();
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    const SdpaDims& d = d_;
    bool any = false;
    for (Tensor* t : dx) any = any || t != nullptr;
    if (!any) return;
    TaskErrors errors;
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
    for (int64_t t = 0; t < d.N * d.Hkv; ++t) {
      errors.run([&] {
        if (bf16_) {
          backward_group_bf16(dx, *dy[0], x, *y[0], t / d.Hkv, t % d.Hkv);
        } else {
          backward_group(dx, *dy[0], x, *y[0], t / d.Hkv, t % d.Hkv);
        }
      });
    }
    errors.rethrow();
  }

 private:
  // A thread's forward scratch: S, acc, m, l; bf16 adds the P v product, each row's rescaling
  // factor, P rounded, and the dense q, k, v tiles.
  struct ForwardScratch {
    float *s, *acc, *pv, *m, *l, *corr;
    uint16_t *pb, *qb, *kb, *vb;
  };
  ForwardScratch forward_scratch(Carve& c) const {
    const int64_t tile = kRows * kCols, dd = d_.d, b = bf16_ ? 1 : 0;
    ForwardScratch f{};
    f.s = c.f32(tile);
    f.acc = c.f32(kRows * dd);
    f.m = c.f32(kRows);
    f.l = c.f32(kRows);
    f.pv = c.f32(b * kRows * dd);
    f.corr = c.f32(b * kRows);
    f.pb = c.bf16(b * tile);
    f.qb = c.bf16(b * kRows * dd);
    f.kb = c.bf16(b * kCols * dd);
    f.vb = c.bf16(b * kCols * dd);
    return f;
  }
  // A thread's backward scratch: dq, dk, dv and D over the (padded) sequence, the S and dP
  // tiles; bf16 adds P and dS rounded and the dense k, v of the group and q, do of a head.
  struct BackwardScratch {
    float *dq, *dk, *dv, *D, *s, *dp;
    uint16_t *pb, *dsb, *kb, *vb, *qb, *dob;
  };
  BackwardScratch backward_scratch(Carve& c) const {
    const int64_t tile = kRows * kCols, td = t_pad_ * d_.d, b = bf16_ ? 1 : 0;
    BackwardScratch g{};
    g.dq = c.f32(td);
    g.dk = c.f32(td);
    g.dv = c.f32(td);
    g.D = c.f32(t_pad_);
    g.s = c.f32(tile);
    g.dp = c.f32(tile);
    g.pb = c.bf16(b * tile);
    g.dsb = c.bf16(b * tile);
    g.kb = c.bf16(b * td);
    g.vb = c.bf16(b * td);
    g.qb = c.bf16(b * td);
    g.dob = c.bf16(b * td);
    return g;
  }
  float* thread_base() const { return scratch_.f32() + omp_get_thread_num() * per_thread_; }

  // The bf16 products for key tiles of width kRows and (when T > kRows) kCols, their
  // per-thread oneDNN scratchpads and streams.
  void plan_bf16(const std::string& name) {
    const int64_t dd = d_.d;
    for (int64_t w : {kRows, kCols}) {
      if (w == kCols && d_.T <= kRows) break;
      TileProducts p;
      p.scores =
          TileProduct(cpu_, name, "scores", kRows, w, dd, false, true, scale_, false, threads_);
      p.dp = TileProduct(cpu_, name, "dP", kRows, w, dd, false, true, 1.f, false, threads_);
      p.pv = TileProduct(cpu_, name, "P v", kRows, dd, w, false, false, 1.f, false, threads_);
      p.dq = TileProduct(cpu_, name, "dq", kRows, dd, w, false, false, 1.f, true, threads_);
      p.dkv = TileProduct(cpu_, name, "dk/dv", w, dd, kRows, true, false, 1.f, true, threads_);
      products_.push_back(std::move(p));
    }
    std::size_t bytes = 0;
    for (const TileProducts& p : products_) {
      for (const TileProduct* t : {&p.scores, &p.dp, &p.pv, &p.dq, &p.dkv}) {
        bytes = std::max(bytes, t->scratch_bytes());
      }
    }
    const int64_t per_thread = static_cast<int64_t>((bytes + 63) / 64 * 16);  // floats
    if (per_thread > 0) {
      dnnl_scratch_ = be_.empty(Shape{threads_ * per_thread}, MemCategory::kWorkspace);
    }
    for (int t = 0; t < threads_; ++t) {
      streams_.emplace_back(cpu_.engine());
      for (TileProducts& p : products_) {
        for (TileProduct* tp : {&p.scores, &p.dp, &p.pv, &p.dq, &p.dkv}) {
          tp->bind_scratch(cpu_, t,
                           per_thread > 0 ? dnnl_scratch_.f32() + t * per_thread : nullptr);
        }
      }
    }
  }
  // The products for a key tile of `cols` keys: width kRows or kCols, the tile padded to it.
  TileProducts& products_for(int64_t cols, int64_t* width) {
    const std::size_t i = cols <= kRows ? 0 : 1;
    *width = i == 0 ? kRows : kCols;
    return products_[i];
  }

  const Tensor& q_in(TensorRefs x) const { return *x[0]; }
  const Tensor& k_in(TensorRefs x) const { return cfg_.packed ? *x[0] : *x[1]; }
  const Tensor& v_in(TensorRefs x) const { return cfg_.packed ? *x[0] : *x[2]; }
  // Element (n, t0) of column block `col` of x, row stride ld.
  template <class T>
  static T* at(const Tensor& x, int64_t T_, int64_t ld, int64_t n, int64_t t0, int64_t col) {
    return x.data<T>() + (n * T_ + t0) * ld + col;
  }
  // Keys visible to query row i of a tile whose keys start at j0, of `cols` keys.
  int64_t valid_keys(int64_t i, int64_t j0, int64_t cols) const {
    return cfg_.causal ? std::clamp<int64_t>(i - j0 + 1, 0, cols) : cols;
  }
  // Key tiles a query tile [i0, i0 + rows) reads: [0, end).
  int64_t keys_end(int64_t i0, int64_t rows) const {
    return cfg_.causal ? std::min(d_.T, i0 + rows) : d_.T;
  }
  // A forward tile's running max, sum and output before its first key tile.
  void start_rows(const ForwardScratch& f, int64_t rows) const {
    std::fill_n(f.m, rows, -std::numeric_limits<float>::infinity());
    std::fill_n(f.l, rows, 0.f);
    std::fill_n(f.acc, rows * d_.d, 0.f);
  }
  // lse of the rows [i0, i0 + rows) of head h of sample n from m and l; l becomes 1 / l.
  void finish_rows(int64_t n, int64_t h, int64_t i0, int64_t rows, const float* m, float* l) {
    float* lse = lse_.f32() + (n * d_.Hq + h) * d_.T + i0;
    for (int64_t r = 0; r < rows; ++r) {
      lse[r] = m[r] + std::log(l[r]);
      l[r] = 1.f / l[r];
    }
  }

  void forward_tile(Tensor& o, TensorRefs x, int64_t n, int64_t h, int64_t i0) {
    const SdpaDims& d = d_;
    const int64_t dd = d.d, rows = std::min(kRows, d.T - i0), g = h / d.group();
    Carve c(thread_base());
    const ForwardScratch f = forward_scratch(c);
    const float* q = at<const float>(q_in(x), d.T, d.ld_q, n, i0, d.off_q + h * dd);
    start_rows(f, rows);
    const int64_t end = keys_end(i0, rows);
    for (int64_t j0 = 0; j0 < end; j0 += kCols) {
      const int64_t cols = std::min(kCols, end - j0);
      const float* k = at<const float>(k_in(x), d.T, d.ld_kv, n, j0, d.off_k + g * dd);
      const float* v = at<const float>(v_in(x), d.T, d.ld_kv, n, j0, d.off_v + g * dd);
      gemm('N', 'T', rows, cols, dd, scale_, q, d.ld_q, k, d.ld_kv, 0.f, f.s, kCols);
      for (int64_t r = 0; r < rows; ++r) {
        float* s = f.s + r * kCols;
        const int64_t valid = valid_keys(i0 + r, j0, cols);
        if (valid == 0) {
          std::fill_n(s, cols, 0.f);
          continue;
        }
        scale_row(f.acc + r * dd, dd, online_softmax_row(s, s, cols, valid, f.m[r], f.l[r]));
      }
      gemm('N', 'N', rows, dd, cols, 1.f, f.s, kCols, v, d.ld_kv, 1.f, f.acc, dd);
    }
    finish_rows(n, h, i0, rows, f.m, f.l);
    store_rows(at<float>(o, d.T, d.Hq * dd, n, i0, h * dd), f.acc, f.l, rows, dd, d.Hq * dd);
  }

  void forward_tile_bf16(Tensor& o, TensorRefs x, int64_t n, int64_t h, int64_t i0) {
    const SdpaDims& d = d_;
    const int64_t dd = d.d, rows = std::min(kRows, d.T - i0), g = h / d.group();
    const int t = omp_get_thread_num();
    dnnl::stream& st = streams_[t];
    Carve c(thread_base());
    const ForwardScratch f = forward_scratch(c);
    pack_rows(f.qb, at<const uint16_t>(q_in(x), d.T, d.ld_q, n, i0, d.off_q + h * dd), rows, kRows,
              dd, d.ld_q);
    start_rows(f, rows);
    const int64_t end = keys_end(i0, rows);
    for (int64_t j0 = 0; j0 < end; j0 += kCols) {
      const int64_t cols = std::min(kCols, end - j0);
      int64_t w = 0;
      TileProducts& p = products_for(cols, &w);
      pack_rows(f.kb, at<const uint16_t>(k_in(x), d.T, d.ld_kv, n, j0, d.off_k + g * dd), cols, w,
                dd, d.ld_kv);
      pack_rows(f.vb, at<const uint16_t>(v_in(x), d.T, d.ld_kv, n, j0, d.off_v + g * dd), cols, w,
                dd, d.ld_kv);
      p.scores.run(st, t, f.qb, f.kb, f.s);  // kRows x w
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t valid = valid_keys(i0 + r, j0, cols);
        if (valid == 0) {
          std::fill_n(f.pb + r * w, w, uint16_t{0});
          f.corr[r] = 1.f;
          continue;
        }
        f.corr[r] = online_softmax_row(f.s + r * w, f.pb + r * w, w, valid, f.m[r], f.l[r]);
      }
      std::fill(f.pb + rows * w, f.pb + kRows * w, uint16_t{0});  // padded query rows
      p.pv.run(st, t, f.pb, f.vb, f.pv);
      for (int64_t r = 0; r < rows; ++r) {
        rescale_add_row(f.acc + r * dd, f.pv + r * dd, dd, f.corr[r]);
      }
    }
    finish_rows(n, h, i0, rows, f.m, f.l);
    store_rows(at<uint16_t>(o, d.T, d.Hq * dd, n, i0, h * dd), f.acc, f.l, rows, dd, d.Hq * dd);
  }

  // The gradients of key/value head g of sample n and of its query heads.
  void backward_group(MutTensorRefs dx, const Tensor& dout, TensorRefs x, const Tensor& out,
                      int64_t n, int64_t g) {
    const SdpaDims& d = d_;
    const int64_t dd = d.d, T = d.T, ld_o = d.Hq * dd;
    Carve c(thread_base());
    const BackwardScratch b = backward_scratch(c);
    const float* k = at<const float>(k_in(x), T, d.ld_kv, n, 0, d.off_k + g * dd);
    const float* v = at<const float>(v_in(x), T, d.ld_kv, n, 0, d.off_v + g * dd);
    std::fill_n(b.dk, T * dd, 0.f);
    std::fill_n(b.dv, T * dd, 0.f);
    for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h) {
      const float* q = at<const float>(q_in(x), T, d.ld_q, n, 0, d.off_q + h * dd);
      const float* go = at<const float>(dout, T, ld_o, n, 0, h * dd);
      const float* o = at<const float>(out, T, ld_o, n, 0, h * dd);
      for (int64_t i = 0; i < T; ++i) b.D[i] = dot_row(go + i * ld_o, o + i * ld_o, dd);
      const float* lse = lse_.f32() + (n * d.Hq + h) * T;
      std::fill_n(b.dq, T * dd, 0.f);
      for (int64_t i0 = 0; i0 < T; i0 += kRows) {
        const int64_t rows = std::min(kRows, T - i0), end = keys_end(i0, rows);
        const float* qi = q + i0 * d.ld_q;
        const float* goi = go + i0 * ld_o;
        for (int64_t j0 = 0; j0 < end; j0 += kCols) {
          const int64_t cols = std::min(kCols, end - j0);
          const float* kj = k + j0 * d.ld_kv;
          const float* vj = v + j0 * d.ld_kv;
          gemm('N', 'T', rows, cols, dd, scale_, qi, d.ld_q, kj, d.ld_kv, 0.f, b.s, kCols);
          gemm('N', 'T', rows, cols, dd, 1.f, goi, ld_o, vj, d.ld_kv, 0.f, b.dp, kCols);
          for (int64_t r = 0; r < rows; ++r) {
            float* sr = b.s + r * kCols;
            float* dpr = b.dp + r * kCols;
            backward_row(sr, dpr, sr, dpr, cols, valid_keys(i0 + r, j0, cols), lse[i0 + r],
                         b.D[i0 + r], scale_);
          }
          gemm('T', 'N', cols, dd, rows, 1.f, b.s, kCols, goi, ld_o, 1.f, b.dv + j0 * dd, dd);
          gemm('N', 'N', rows, dd, cols, 1.f, b.dp, kCols, kj, d.ld_kv, 1.f, b.dq + i0 * dd, dd);
          gemm('T', 'N', cols, dd, rows, 1.f, b.dp, kCols, qi, d.ld_q, 1.f, b.dk + j0 * dd, dd);
        }
      }
      if (dx[0] != nullptr) {
        store_rows(at<float>(*dx[0], T, d.ld_q, n, 0, d.off_q + h * dd), b.dq, nullptr, T, dd,
                   d.ld_q);
      }
    }
    store_kv(dx, n, g, b.dk, b.dv, static_cast<float*>(nullptr));
  }

  void backward_group_bf16(MutTensorRefs dx, const Tensor& dout, TensorRefs x, const Tensor& out,
                           int64_t n, int64_t g) {
    const SdpaDims& d = d_;
    const int64_t dd = d.d, T = d.T, Tp = t_pad_, ld_o = d.Hq * dd;
    const int t = omp_get_thread_num();
    dnnl::stream& st = streams_[t];
    Carve c(thread_base());
    const BackwardScratch b = backward_scratch(c);
    pack_rows(b.kb, at<const uint16_t>(k_in(x), T, d.ld_kv, n, 0, d.off_k + g * dd), T, Tp, dd,
              d.ld_kv);
    pack_rows(b.vb, at<const uint16_t>(v_in(x), T, d.ld_kv, n, 0, d.off_v + g * dd), T, Tp, dd,
              d.ld_kv);
    std::fill_n(b.dk, Tp * dd, 0.f);
    std::fill_n(b.dv, Tp * dd, 0.f);
    for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h) {
      const uint16_t* go = at<const uint16_t>(dout, T, ld_o, n, 0, h * dd);
      const uint16_t* o = at<const uint16_t>(out, T, ld_o, n, 0, h * dd);
      pack_rows(b.qb, at<const uint16_t>(q_in(x), T, d.ld_q, n, 0, d.off_q + h * dd), T, Tp, dd,
                d.ld_q);
      pack_rows(b.dob, go, T, Tp, dd, ld_o);
      for (int64_t i = 0; i < T; ++i) b.D[i] = dot_row(go + i * ld_o, o + i * ld_o, dd);
      const float* lse = lse_.f32() + (n * d.Hq + h) * T;
      std::fill_n(b.dq, Tp * dd, 0.f);
      for (int64_t i0 = 0; i0 < T; i0 += kRows) {
        const int64_t rows = std::min(kRows, T - i0), end = keys_end(i0, rows);
        const uint16_t* qi = b.qb + i0 * dd;
        const uint16_t* goi = b.dob + i0 * dd;
        for (int64_t j0 = 0; j0 < end; j0 += kCols) {
          const int64_t cols = std::min(kCols, end - j0);
          int64_t w = 0;
          TileProducts& p = products_for(cols, &w);
          const uint16_t* kj = b.kb + j0 * dd;
          const uint16_t* vj = b.vb + j0 * dd;
          p.scores.run(st, t, qi, kj, b.s);
          p.dp.run(st, t, goi, vj, b.dp);
          for (int64_t r = 0; r < rows; ++r) {
            backward_row(b.s + r * w, b.dp + r * w, b.pb + r * w, b.dsb + r * w, w,
                         valid_keys(i0 + r, j0, cols), lse[i0 + r], b.D[i0 + r], scale_);
          }
          std::fill(b.pb + rows * w, b.pb + kRows * w, uint16_t{0});  // padded query rows
          std::fill(b.dsb + rows * w, b.dsb + kRows * w, uint16_t{0});
          p.dkv.run(st, t, b.pb, goi, b.dv + j0 * dd);  // dv += P^T do
          p.dq.run(st, t, b.dsb, kj, b.dq + i0 * dd);   // dq += dS k
          p.dkv.run(st, t, b.dsb, qi, b.dk + j0 * dd);  // dk += dS^T q
        }
      }
      if (dx[0] != nullptr) {
        store_rows(at<uint16_t>(*dx[0], T, d.ld_q, n, 0, d.off_q + h * dd), b.dq, nullptr, T, dd,
                   d.ld_q);
      }
    }
    store_kv(dx, n, g, b.dk, b.dv, static_cast<uint16_t*>(nullptr));
  }

  // dk and dv of key/value head g of sample n into their inputs' gradients (E: the dtype).
  template <class E>
  void store_kv(MutTensorRefs dx, int64_t n, int64_t g, const float* dk, const float* dv, E*) {
    const SdpaDims& d = d_;
    Tensor* dk_t = cfg_.packed ? dx[0] : dx[1];
    Tensor* dv_t = cfg_.packed ? dx[0] : dx[2];
    if (dk_t != nullptr) {
      store_rows(at<E>(*dk_t, d.T, d.ld_kv, n, 0, d.off_k + g * d.d), dk, nullptr, d.T, d.d,
                 d.ld_kv);
    }
    if (dv_t != nullptr) {
      store_rows(at<E>(*dv_t, d.T, d.ld_kv, n, 0, d.off_v + g * d.d), dv, nullptr, d.T, d.d,
                 d.ld_kv);
    }
  }

  ScaledDotProductAttentionConfig cfg_;
  CpuBackend& cpu_;
  SdpaDims d_;
  bool bf16_ = false;
  int threads_ = 1;
  float scale_ = 1.f;
  int64_t t_pad_ = 0;       // T rounded up to whole query tiles
  int64_t per_thread_ = 0;  // floats of scratch per thread
  Tensor lse_, scratch_, dnnl_scratch_;
  std::vector<TileProducts> products_;  // bf16: key tiles of width kRows, then kCols
  std::vector<dnnl::stream> streams_;   // bf16: one per thread
};

TBD_REGISTER_LAYER(ScaledDotProductAttentionConfig, DeviceKind::kCpu, SdpaCpu);

}  // namespace
}  // namespace tbd::cpu
