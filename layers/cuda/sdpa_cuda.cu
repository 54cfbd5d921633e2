// layers/cuda/sdpa_cuda.cu: ScaledDotProductAttention fused on CUDA (own kernels).
//
// Semantics and the algorithm of layers/sdpa.h: tiles of keys in shared memory, an online
// softmax, the rows' log-sum-exp saved, probabilities recomputed in backward. Why own kernels:
// cuDNN 9's fused SDPA (its backend graph's SDPA_FWD/BWD operations) takes fp16/bf16/fp8 only,
// and this kind is born in FP32 too; own kernels serve both dtypes with one code (bf16 loads
// widened to f32, f32 arithmetic, bf16 stores). These are correctness-first kernels, one thread
// per query row (forward, dq) or per key row (dk, dv), the head dimension unrolled in
// registers (a template of 16, 32, 64 or 128 columns, d <= 128), no tensor cores; cuDNN's
// SDPA for bf16 is the fast path still to come (notes).
//   forward  grid (query tiles, Hq, N): o, lse
//   dq       grid (query tiles, Hq, N): D = rowsum(do * o) into a workspace, dq
//   dk, dv   grid (key tiles, Hkv, N): each thread loops over its group's query heads and the
//            queries that see its key, so dk and dv sum the group without atomics.
#include <cuda_bf16.h>

#include <cmath>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/sdpa.h"

namespace tbd::cuda {
namespace {

constexpr int kRows = 64;  // query (or key) rows per block: one thread each
constexpr int kTile = 32;  // keys (or queries) per shared-memory tile

// Where q, k, v, o live (layers/sdpa.h's SdpaDims, passed to the kernels by value) and the
// attention's attributes.
struct Geometry : SdpaDims {
  int64_t heads_per_kv;  // group(), which device code cannot call
  bool causal;
  float scale;
};

// Row t of sample n, head column block `col`: element (n*T + t)*ld + col.
__device__ __forceinline__ int64_t at(int64_t n, int64_t t, int64_t T, int64_t ld, int64_t col) {
  return (n * T + t) * ld + col;
}

template <int D, class E>
__device__ void load_row(float (&r)[D], const E* p, int64_t d, bool ok) {
#pragma unroll
  for (int c = 0; c < D; ++c) r[c] = ok && c < d ? widen(p[c]) : 0.f;
}

// Tiles of kTile rows of a (T, ld) matrix's column block into shared memory (zeros outside).
template <int D, class E>
__device__ void load_tile(float (*s)[D], const E* x, int64_t n, int64_t t0, const Geometry& g,
                          int64_t ld, int64_t col) {
  for (int e = threadIdx.x; e < kTile * D; e += blockDim.x) {
    const int r = e / D, c = e % D;
    const int64_t t = t0 + r;
    s[r][c] = t < g.T && c < g.d ? widen(x[at(n, t, g.T, ld, col) + c]) : 0.f;
  }
}

template <int D>
__device__ __forceinline__ float dot(const float (&a)[D], const float* b) {
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < D; ++c) s += a[c] * b[c];
  return s;
}

template <int D, class E>
__global__ void __launch_bounds__(kRows)
    sdpa_fwd_kernel(const E* q, const E* k, const E* v, E* o, float* lse, Geometry g) {
  __shared__ float ks[kTile][D], vs[kTile][D];
  const int64_t n = blockIdx.z, h = blockIdx.y, i0 = int64_t{blockIdx.x} * kRows;
  const int64_t i = i0 + threadIdx.x, kvh = h / g.heads_per_kv;
  const bool row = i < g.T;
  float qr[D], acc[D];
  load_row(qr, q + (row ? at(n, i, g.T, g.ld_q, g.off_q + h * g.d) : 0), g.d, row);
#pragma unroll
  for (int c = 0; c < D; ++c) acc[c] = 0.f;
  float m = -INFINITY, l = 0.f;
  const int64_t end = g.causal ? min(g.T, i0 + kRows) : g.T;
  for (int64_t j0 = 0; j0 < end; j0 += kTile) {
    __syncthreads();  // the previous tile is read
    load_tile(ks, k, n, j0, g, g.ld_kv, g.off_k + kvh * g.d);
    load_tile(vs, v, n, j0, g, g.ld_kv, g.off_v + kvh * g.d);
    __syncthreads();
    if (!row) continue;
    float sc[kTile];
    float mx = m;
#pragma unroll
    for (int jj = 0; jj < kTile; ++jj) {
      const int64_t j = j0 + jj;
      const bool visible = j < g.T && (!g.causal || j <= i);
      sc[jj] = visible ? dot(qr, ks[jj]) * g.scale : -INFINITY;
      mx = fmaxf(mx, sc[jj]);
    }
    if (mx == -INFINITY) continue;    // no key of this tile is visible to row i
    const float corr = expf(m - mx);  // 0 at the first visible tile (m = -inf)
    l *= corr;
#pragma unroll
    for (int c = 0; c < D; ++c) acc[c] *= corr;
#pragma unroll
    for (int jj = 0; jj < kTile; ++jj) {
      const float p = expf(sc[jj] - mx);  // 0 where masked
      l += p;
#pragma unroll
      for (int c = 0; c < D; ++c) acc[c] += p * vs[jj][c];
    }
    m = mx;
  }
  if (!row) return;
  const float inv = 1.f / l;
  E* out = o + at(n, i, g.T, g.Hq * g.d, h * g.d);
#pragma unroll
  for (int c = 0; c < D; ++c) {
    if (c < g.d) store(out + c, acc[c] * inv);
  }
  lse[(n * g.Hq + h) * g.T + i] = m + logf(l);
}

// dq of query rows, and D = rowsum(do * o) for the dk/dv kernel.
template <int D, class E>
__global__ void __launch_bounds__(kRows)
    sdpa_dq_kernel(const E* q, const E* k, const E* v, const E* o, const E* dout, const float* lse,
                   float* drow, E* dq, int64_t ld_dq, Geometry g) {
  __shared__ float ks[kTile][D], vs[kTile][D];
  const int64_t n = blockIdx.z, h = blockIdx.y, i0 = int64_t{blockIdx.x} * kRows;
  const int64_t i = i0 + threadIdx.x, kvh = h / g.heads_per_kv;
  const bool row = i < g.T;
  float qr[D], dor[D], acc[D];
  load_row(qr, q + (row ? at(n, i, g.T, g.ld_q, g.off_q + h * g.d) : 0), g.d, row);
  load_row(dor, dout + (row ? at(n, i, g.T, g.Hq * g.d, h * g.d) : 0), g.d, row);
  load_row(acc, o + (row ? at(n, i, g.T, g.Hq * g.d, h * g.d) : 0), g.d, row);
  float Di = 0.f;
#pragma unroll
  for (int c = 0; c < D; ++c) {
    Di += dor[c] * acc[c];
    acc[c] = 0.f;
  }
  const float li = row ? lse[(n * g.Hq + h) * g.T + i] : 0.f;
  const int64_t end = g.causal ? min(g.T, i0 + kRows) : g.T;
  for (int64_t j0 = 0; j0 < end; j0 += kTile) {
    __syncthreads();
    load_tile(ks, k, n, j0, g, g.ld_kv, g.off_k + kvh * g.d);
    load_tile(vs, v, n, j0, g, g.ld_kv, g.off_v + kvh * g.d);
    __syncthreads();
    if (!row) continue;
#pragma unroll 4
    for (int jj = 0; jj < kTile; ++jj) {
      const int64_t j = j0 + jj;
      if (j >= g.T || (g.causal && j > i)) continue;
      const float p = expf(dot(qr, ks[jj]) * g.scale - li);
      const float ds = p * (dot(dor, vs[jj]) - Di) * g.scale;
#pragma unroll
      for (int c = 0; c < D; ++c) acc[c] += ds * ks[jj][c];
    }
  }
  if (!row) return;
  drow[(n * g.Hq + h) * g.T + i] = Di;
  if (dq == nullptr) return;
  E* out = dq + at(n, i, g.T, ld_dq, g.off_q + h * g.d);
#pragma unroll
  for (int c = 0; c < D; ++c) {
    if (c < g.d) store(out + c, acc[c]);
  }
}

// dk and dv of key rows of key/value head blockIdx.y, summed over its query heads.
template <int D, class E>
__global__ void __launch_bounds__(kRows)
    sdpa_dkdv_kernel(const E* q, const E* k, const E* v, const E* dout, const float* lse,
                     const float* drow, E* dk, E* dv, int64_t ld_dkv, Geometry g) {
  __shared__ float qs[kTile][D], dos[kTile][D];
  __shared__ float ls[kTile], ds_[kTile];
  const int64_t n = blockIdx.z, kvh = blockIdx.y, j0 = int64_t{blockIdx.x} * kRows;
  const int64_t j = j0 + threadIdx.x;
  const bool row = j < g.T;
  float kr[D], vr[D], dkr[D], dvr[D];
  load_row(kr, k + (row ? at(n, j, g.T, g.ld_kv, g.off_k + kvh * g.d) : 0), g.d, row);
  load_row(vr, v + (row ? at(n, j, g.T, g.ld_kv, g.off_v + kvh * g.d) : 0), g.d, row);
#pragma unroll
  for (int c = 0; c < D; ++c) dkr[c] = dvr[c] = 0.f;
  const int64_t first = g.causal ? j0 / kTile * kTile : 0;  // queries before j0 see no key here
  for (int64_t h = kvh * g.heads_per_kv; h < (kvh + 1) * g.heads_per_kv; ++h) {
    for (int64_t i0 = first; i0 < g.T; i0 += kTile) {
      __syncthreads();
      load_tile(qs, q, n, i0, g, g.ld_q, g.off_q + h * g.d);
      load_tile(dos, dout, n, i0, g, g.Hq * g.d, h * g.d);
      if (threadIdx.x < kTile) {
        const int64_t i = i0 + threadIdx.x;
        ls[threadIdx.x] = i < g.T ? lse[(n * g.Hq + h) * g.T + i] : 0.f;
        ds_[threadIdx.x] = i < g.T ? drow[(n * g.Hq + h) * g.T + i] : 0.f;
      }
      __syncthreads();
      if (!row) continue;
#pragma unroll 4
      for (int ii = 0; ii < kTile; ++ii) {
        const int64_t i = i0 + ii;
        if (i >= g.T || (g.causal && j > i)) continue;
        const float p = expf(dot(kr, qs[ii]) * g.scale - ls[ii]);
        const float ds = p * (dot(vr, dos[ii]) - ds_[ii]) * g.scale;
#pragma unroll
        for (int c = 0; c < D; ++c) {
          dvr[c] += p * dos[ii][c];
          dkr[c] += ds * qs[ii][c];
        }
      }
    }
  }
  if (!row) return;
  if (dk != nullptr) {
    E* out = dk + at(n, j, g.T, ld_dkv, g.off_k + kvh * g.d);
#pragma unroll
    for (int c = 0; c < D; ++c) {
      if (c < g.d) store(out + c, dkr[c]);
    }
  }
  if (dv != nullptr) {
    E* out = dv + at(n, j, g.T, ld_dkv, g.off_v + kvh * g.d);
#pragma unroll
    for (int c = 0; c < D; ++c) {
      if (c < g.d) store(out + c, dvr[c]);
    }
  }
}

class SdpaCuda final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;

  SdpaCuda(Backend& be, const std::string& name, const ScaledDotProductAttentionConfig& cfg,
           const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)),
        cfg_(cfg),
        cu_(as_cuda(be)),
        d_(sdpa_dims(name, cfg, in)) {
    TBD_LAYER_CHECK(d_.d <= 128, kind(), name, "head dimension d=", d_.d,
                    " is above the CUDA kernels' 128");
    bf16_ = in[0].dtype == DType::kBF16;
    g_ = Geometry{{d_},
                  d_.group(),
                  cfg.causal,
                  static_cast<float>(1.0 / std::sqrt(static_cast<double>(d_.d)))};
    saved(lse_, TensorDesc{Shape{d_.N, d_.Hq, d_.T}});
    drow_ = be.empty(Shape{d_.N, d_.Hq, d_.T}, MemCategory::kWorkspace);
  }

  std::string implementation() const override {
    return detail::concat("own kernels, a thread per row, d<=", width(),
                          bf16_ ? " (bf16 in f32)" : "");
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    if (bf16_) {
      dispatch<__nv_bfloat16>([&](auto w, auto* e) { forward(w, e, y, x); });
    } else {
      dispatch<float>([&](auto w, auto* e) { forward(w, e, y, x); });
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs y) override {
    if (bf16_) {
      dispatch<__nv_bfloat16>([&](auto w, auto* e) { backward(w, e, dx, dy, x, y); });
    } else {
      dispatch<float>([&](auto w, auto* e) { backward(w, e, dx, dy, x, y); });
    }
  }

 private:
  // The register width the kernels are instantiated with: the smallest of 16, 32, 64, 128
  // that holds d.
  int width() const { return d_.d <= 16 ? 16 : d_.d <= 32 ? 32 : d_.d <= 64 ? 64 : 128; }
  template <class E, class F>
  void dispatch(F&& f) {
    E* tag = nullptr;
    switch (width()) {
      case 16:
        f(std::integral_constant<int, 16>{}, tag);
        break;
      case 32:
        f(std::integral_constant<int, 32>{}, tag);
        break;
      case 64:
        f(std::integral_constant<int, 64>{}, tag);
        break;
      default:
        f(std::integral_constant<int, 128>{}, tag);
        break;
    }
  }
  template <class E>
  static const E* ptr(const Tensor& t) {
    return static_cast<const E*>(t.raw());
  }
  template <class E>
  static E* ptr(Tensor* t) {
    return t ? static_cast<E*>(t->raw()) : nullptr;
  }
  dim3 grid(int64_t heads) const {
    return dim3(static_cast<unsigned>((d_.T + kRows - 1) / kRows), static_cast<unsigned>(heads),
                static_cast<unsigned>(d_.N));
  }

  template <int D, class E>
  void forward(std::integral_constant<int, D>, E*, MutTensorRefs y, TensorRefs x) {
    const E* q = ptr<E>(*x[0]);
    const E* k = cfg_.packed ? q : ptr<E>(*x[1]);
    const E* v = cfg_.packed ? q : ptr<E>(*x[2]);
    sdpa_fwd_kernel<D, E>
        <<<grid(d_.Hq), kRows, 0, cu_.stream()>>>(q, k, v, ptr<E>(y[0]), lse_.f32(), g_);
    TBD_CUDA_CHECK_LAST();
  }

  template <int D, class E>
  void backward(std::integral_constant<int, D>, E*, MutTensorRefs dx, TensorRefs dy, TensorRefs x,
                TensorRefs y) {
    const E* q = ptr<E>(*x[0]);
    const E* k = cfg_.packed ? q : ptr<E>(*x[1]);
    const E* v = cfg_.packed ? q : ptr<E>(*x[2]);
    E* dq = ptr<E>(dx[0]);
    E* dk = cfg_.packed ? dq : ptr<E>(dx[1]);
    E* dv = cfg_.packed ? dq : ptr<E>(dx[2]);
    if (dq == nullptr && dk == nullptr && dv == nullptr) return;
    sdpa_dq_kernel<D, E><<<grid(d_.Hq), kRows, 0, cu_.stream()>>>(
        q, k, v, ptr<E>(*y[0]), ptr<E>(*dy[0]), lse_.f32(), drow_.f32(), dq, d_.ld_q, g_);
    TBD_CUDA_CHECK_LAST();
    sdpa_dkdv_kernel<D, E><<<grid(d_.Hkv), kRows, 0, cu_.stream()>>>(
        q, k, v, ptr<E>(*dy[0]), lse_.f32(), drow_.f32(), dk, dv, d_.ld_kv, g_);
    TBD_CUDA_CHECK_LAST();
  }

  ScaledDotProductAttentionConfig cfg_;
  CudaBackend& cu_;
  SdpaDims d_;
  Geometry g_{};
  bool bf16_ = false;
  Tensor lse_, drow_;
};

TBD_REGISTER_LAYER(ScaledDotProductAttentionConfig, DeviceKind::kCuda, SdpaCuda);

}  // namespace
}  // namespace tbd::cuda
