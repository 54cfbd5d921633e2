// layers/cpu/sdpa_cpu.cpp: ScaledDotProductAttention fused on the CPU, tiles of queries against
// tiles of keys (layers/sdpa.h), each tile's products by oneDNN's dnnl_sgemm (row-major; called
// inside an OpenMP region it runs on the calling thread) and the online softmax by own code.
//
// Forward: one task per (n, query head, query tile), dynamically scheduled, the tiles with the
// most keys first (causal tiles grow along the diagonal). A task keeps its tile's running max
// m, sum l and unnormalised output (kRows x d, f32) in the thread's scratch, walks the key
// tiles up to the diagonal, and writes o = acc / l and lse = m + log(l).
// Backward: one task per (n, key/value head): it owns that head's dk and dv (T x d, f32, in
// the thread's scratch) and the dq of each of its query heads in turn, so nothing is shared
// between threads and nothing is atomic; parallelism is N*Hkv tasks.
// bf16 inputs: each tile of q, k, v, o and do is widened to f32 in the thread's scratch and
// the products run in f32 (oneDNN 2.6 has no bf16 GEMM callable on a tile); o, dq, dk, dv are
// rounded to bf16 once, at the end. Scratch per thread: forward 3 tiles + S + acc; backward
// dq, dk, dv (T x d) + the widened heads (bf16) + S and dP tiles.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/onednn.h"
#include "layers/cpu/simd.h"
#include "layers/sdpa.h"

namespace tbd::cpu {
namespace {

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

// rows x d of a bf16 matrix (row stride ld) widened into dst (row stride d).
TBD_SIMD_CLONES void widen_rows(float* dst, const uint16_t* src, int64_t rows, int64_t d,
                                int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) dst[r * d + j] = f32_from_bf16(src[r * ld + j]);
  }
}
// rows x d of f32 (row stride d) scaled per row by s[r] (or 1) into dst (row stride ld),
// f32 or rounded to bf16.
TBD_SIMD_CLONES void store_rows(float* dst, const float* src, const float* s, int64_t rows,
                                int64_t d, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    const float f = s ? s[r] : 1.f;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) dst[r * ld + j] = src[r * d + j] * f;
  }
}
TBD_SIMD_CLONES void store_rows(uint16_t* dst, const float* src, const float* s, int64_t rows,
                                int64_t d, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    const float f = s ? s[r] : 1.f;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) dst[r * ld + j] = bf16_from_f32(src[r * d + j] * f);
  }
}

// max(m, s[0..n)). Sixteen running maxima, elementwise: GCC 12 leaves a `reduction(max)` loop
// scalar (a chain of vmaxss, measured as 40% of the forward), but vectorizes this.
TBD_SIMD_CLONES float row_max(const float* s, int64_t n, float m) {
  constexpr int64_t kLanes = 16;
  float lane[kLanes];
  std::fill_n(lane, kLanes, m);
  int64_t j0 = 0;
  for (; j0 + kLanes <= n; j0 += kLanes) {
#pragma omp simd
    for (int64_t k = 0; k < kLanes; ++k) lane[k] = lane[k] < s[j0 + k] ? s[j0 + k] : lane[k];
  }
  for (int64_t j = j0; j < n; ++j) m = std::max(m, s[j]);
  for (int64_t k = 0; k < kLanes; ++k) m = std::max(m, lane[k]);
  return m;
}

// One row of a forward tile: s (scores, scaled) over `valid` keys -> p = exp(s - m_new), zeros
// after; updates m and l; returns the factor exp(m_old - m_new) the row's output takes.
TBD_SIMD_CLONES float online_softmax_row(float* s, int64_t n, int64_t valid, float& m, float& l) {
  const float mx = row_max(s, valid, m);
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < valid; ++j) {
    const float e = exp_nonpositive(s[j] - mx);
    s[j] = e;
    sum += e;
  }
  for (int64_t j = valid; j < n; ++j) s[j] = 0.f;
  const float corr = exp_nonpositive(m - mx);  // m = -inf at the first tile: 0 (l, acc are 0)
  l = l * corr + sum;
  m = mx;
  return corr;
}

TBD_SIMD_CLONES void scale_row(float* x, int64_t n, float f) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) x[j] *= f;
}

// One row of a backward tile: s (scaled scores) -> p = exp(s - lse) over `valid` keys, zeros
// after; dp -> dS = p * (dp - dd) * scale.
TBD_SIMD_CLONES void backward_row(float* s, float* dp, int64_t n, int64_t valid, float lse,
                                  float dd, float scale) {
#pragma omp simd
  for (int64_t j = 0; j < valid; ++j) {
    const float p = exp_nonpositive(s[j] - lse);
    s[j] = p;
    dp[j] = p * (dp[j] - dd) * scale;
  }
  for (int64_t j = valid; j < n; ++j) s[j] = dp[j] = 0.f;
}

// D[r] = sum_j do[r, j] o[r, j] over rows x d (row strides ld_do, ld_o).
TBD_SIMD_CLONES float dot_row(const float* a, const float* b, int64_t d) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < d; ++j) s += a[j] * b[j];
  return s;
}

class SdpaCpu final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  SdpaCpu(Backend& be, const std::string& name, const ScaledDotProductAttentionConfig& cfg,
          const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), d_(sdpa_dims(name, cfg, in)) {
    bf16_ = in[0].dtype == DType::kBF16;
    threads_ = std::max(1, omp_get_max_threads());
    scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d_.d)));
    saved(lse_, TensorDesc{Shape{d_.N, d_.Hq, d_.T}});
    const int64_t td = d_.T * d_.d, tile = kRows * kCols, td_tile = kCols * d_.d;
    // Forward: S, acc, m, l [+ q, k, v tiles widened].
    fwd_per_thread_ = tile + td_tile + 2 * kRows + (bf16_ ? 3 * td_tile : 0);
    // Backward: dq, dk, dv, D [+ q, do, o of a query head, k, v of the group, widened], S, dP.
    bwd_per_thread_ = 3 * td + d_.T + (bf16_ ? 5 * td : 0) + 2 * tile;
    per_thread_ = std::max(fwd_per_thread_, bwd_per_thread_);
    scratch_ = be.empty(Shape{threads_ * per_thread_}, MemCategory::kWorkspace);
  }

  std::string implementation() const override {
    return detail::concat("tiles of ", kRows, " queries x ", kCols,
                          " keys, online softmax, dnnl_sgemm",
                          bf16_ ? " (bf16 widened to f32)" : "");
  }

  // y: o; x: q, k, v or qkv.
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const SdpaDims& d = d_;
    const int64_t tiles = (d.T + kRows - 1) / kRows;
    const int64_t tasks = d.N * d.Hq * tiles;
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
    for (int64_t t = 0; t < tasks; ++t) {
      // The last tiles (the most keys under a causal mask) first.
      const int64_t qt = tiles - 1 - t / (d.N * d.Hq), nh = t % (d.N * d.Hq);
      forward_tile(y[0], x, nh / d.Hq, nh % d.Hq, qt * kRows);
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    const SdpaDims& d = d_;
    bool any = false;
    for (Tensor* t : dx) any = any || t != nullptr;
    if (!any) return;
#pragma omp parallel for schedule(dynamic) num_threads(threads_)
    for (int64_t t = 0; t < d.N * d.Hkv; ++t)
      backward_group(dx, *dy[0], x, *y[0], t / d.Hkv, t % d.Hkv);
  }

 private:
  // A read-only f32 view of rows [t0, t0 + rows) of column block `col` of input tensor x for
  // sample n: the tensor itself (f32) or a widened copy in `buf` (bf16; row stride d).
  struct View {
    const float* p;
    int64_t ld;
  };
  View view(const Tensor& x, int64_t ld, int64_t n, int64_t t0, int64_t rows, int64_t col,
            float* buf) const {
    const int64_t off = (n * d_.T + t0) * ld + col;
    if (!bf16_) return {x.f32() + off, ld};
    widen_rows(buf, x.data<const uint16_t>() + off, rows, d_.d, ld);
    return {buf, d_.d};
  }
  // Rows of the f32 `src` (row stride d) scaled by s into column block `col` of x for sample n.
  void store(Tensor& x, int64_t ld, int64_t n, int64_t t0, int64_t rows, int64_t col,
             const float* src, const float* s) const {
    const int64_t off = (n * d_.T + t0) * ld + col;
    if (bf16_) {
      store_rows(x.data<uint16_t>() + off, src, s, rows, d_.d, ld);
    } else {
      store_rows(x.f32() + off, src, s, rows, d_.d, ld);
    }
  }
  // The calling thread's part of the scratch (forward or backward layout).
  float* thread_scratch() const { return scratch_.f32() + omp_get_thread_num() * per_thread_; }
  const Tensor& q_in(TensorRefs x) const { return *x[0]; }
  const Tensor& k_in(TensorRefs x) const { return cfg_.packed ? *x[0] : *x[1]; }
  const Tensor& v_in(TensorRefs x) const { return cfg_.packed ? *x[0] : *x[2]; }
  // Keys visible to query row i of a tile whose keys start at j0, of `cols` keys.
  int64_t valid_keys(int64_t i, int64_t j0, int64_t cols) const {
    return cfg_.causal ? std::clamp<int64_t>(i - j0 + 1, 0, cols) : cols;
  }
  // Key tiles a query tile [i0, i0 + rows) reads: [0, end).
  int64_t keys_end(int64_t i0, int64_t rows) const {
    return cfg_.causal ? std::min(d_.T, i0 + rows) : d_.T;
  }

  void forward_tile(Tensor* o, TensorRefs x, int64_t n, int64_t h, int64_t i0) {
    const SdpaDims& d = d_;
    const int64_t dd = d.d, rows = std::min(kRows, d.T - i0), g = h / d.group();
    float* s = thread_scratch();
    float* acc = s + kRows * kCols;
    float* m = acc + kRows * dd;
    float* l = m + kRows;
    float* wide = l + kRows;  // bf16: q, k, v tiles
    const View q = view(q_in(x), d.ld_q, n, i0, rows, d.off_q + h * dd, wide);
    std::fill_n(m, rows, -std::numeric_limits<float>::infinity());
    std::fill_n(l, rows, 0.f);
    std::fill_n(acc, rows * dd, 0.f);
    const int64_t end = keys_end(i0, rows);
    for (int64_t j0 = 0; j0 < end; j0 += kCols) {
      const int64_t cols = std::min(kCols, end - j0);
      const View k = view(k_in(x), d.ld_kv, n, j0, cols, d.off_k + g * dd, wide + kCols * dd);
      const View v = view(v_in(x), d.ld_kv, n, j0, cols, d.off_v + g * dd, wide + 2 * kCols * dd);
      gemm('N', 'T', rows, cols, dd, scale_, q.p, q.ld, k.p, k.ld, 0.f, s, kCols);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t valid = valid_keys(i0 + r, j0, cols);
        if (valid == 0) {
          std::fill_n(s + r * kCols, cols, 0.f);
          continue;
        }
        const float corr = online_softmax_row(s + r * kCols, cols, valid, m[r], l[r]);
        scale_row(acc + r * dd, dd, corr);
      }
      gemm('N', 'N', rows, dd, cols, 1.f, s, kCols, v.p, v.ld, 1.f, acc, dd);
    }
    float* lse = lse_.f32() + (n * d.Hq + h) * d.T + i0;
    for (int64_t r = 0; r < rows; ++r) {
      lse[r] = m[r] + std::log(l[r]);
      l[r] = 1.f / l[r];
    }
    store(*o, d.Hq * dd, n, i0, rows, h * dd, acc, l);
  }

  // The gradients of key/value head g of sample n and of its query heads.
  void backward_group(MutTensorRefs dx, const Tensor& dout, TensorRefs x, const Tensor& out,
                      int64_t n, int64_t g) {
    const SdpaDims& d = d_;
    const int64_t dd = d.d, T = d.T, td = T * dd, ld_o = d.Hq * dd;
    float* dq = thread_scratch();
    float* dk = dq + td;
    float* dv = dk + td;
    float* D = dv + td;
    float* s = D + T;
    float* dp = s + kRows * kCols;
    float* wide = dp + kRows * kCols;  // bf16: q, do, o of the head; k, v of the group
    const View k = view(k_in(x), d.ld_kv, n, 0, T, d.off_k + g * dd, wide);
    const View v = view(v_in(x), d.ld_kv, n, 0, T, d.off_v + g * dd, wide + td);
    std::fill_n(dk, 2 * td, 0.f);  // dk, dv
    for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h) {
      const View q = view(q_in(x), d.ld_q, n, 0, T, d.off_q + h * dd, wide + 2 * td);
      const View go = view(dout, ld_o, n, 0, T, h * dd, wide + 3 * td);
      const View o = view(out, ld_o, n, 0, T, h * dd, wide + 4 * td);
      for (int64_t i = 0; i < T; ++i) D[i] = dot_row(go.p + i * go.ld, o.p + i * o.ld, dd);
      const float* lse = lse_.f32() + (n * d.Hq + h) * T;
      std::fill_n(dq, td, 0.f);
      for (int64_t i0 = 0; i0 < T; i0 += kRows) {
        const int64_t rows = std::min(kRows, T - i0), end = keys_end(i0, rows);
        const float* qi = q.p + i0 * q.ld;
        const float* goi = go.p + i0 * go.ld;
        for (int64_t j0 = 0; j0 < end; j0 += kCols) {
          const int64_t cols = std::min(kCols, end - j0);
          const float* kj = k.p + j0 * k.ld;
          const float* vj = v.p + j0 * v.ld;
          gemm('N', 'T', rows, cols, dd, scale_, qi, q.ld, kj, k.ld, 0.f, s, kCols);
          gemm('N', 'T', rows, cols, dd, 1.f, goi, go.ld, vj, v.ld, 0.f, dp, kCols);
          for (int64_t r = 0; r < rows; ++r) {
            backward_row(s + r * kCols, dp + r * kCols, cols, valid_keys(i0 + r, j0, cols),
                         lse[i0 + r], D[i0 + r], scale_);
          }
          gemm('T', 'N', cols, dd, rows, 1.f, s, kCols, goi, go.ld, 1.f, dv + j0 * dd, dd);
          gemm('N', 'N', rows, dd, cols, 1.f, dp, kCols, kj, k.ld, 1.f, dq + i0 * dd, dd);
          gemm('T', 'N', cols, dd, rows, 1.f, dp, kCols, qi, q.ld, 1.f, dk + j0 * dd, dd);
        }
      }
      if (dx[0] != nullptr) store(*dx[0], d.ld_q, n, 0, T, d.off_q + h * dd, dq, nullptr);
    }
    Tensor* dk_t = cfg_.packed ? dx[0] : dx[1];
    Tensor* dv_t = cfg_.packed ? dx[0] : dx[2];
    if (dk_t != nullptr) store(*dk_t, d.ld_kv, n, 0, T, d.off_k + g * dd, dk, nullptr);
    if (dv_t != nullptr) store(*dv_t, d.ld_kv, n, 0, T, d.off_v + g * dd, dv, nullptr);
  }

  ScaledDotProductAttentionConfig cfg_;
  SdpaDims d_;
  bool bf16_ = false;
  int threads_ = 1;
  float scale_ = 1.f;
  int64_t fwd_per_thread_ = 0, bwd_per_thread_ = 0, per_thread_ = 0;
  Tensor lse_, scratch_;
};

TBD_REGISTER_LAYER(ScaledDotProductAttentionConfig, DeviceKind::kCpu, SdpaCpu);

}  // namespace
}  // namespace tbd::cpu
