// layers/cpu/batchnorm_nhwc.cpp: batch normalization's training passes over channels-last
// data (M = N H W rows of C contiguous channels), f32 or bf16 with f32 arithmetic.
//
// oneDNN 2.6's bnorm_jit on nhwc bf16 ran 1.2x (forward) and 1.6x (backward) as long as on
// nChw16c for Inception-v3's shapes at batch 8 (2 threads, AMX machine): these loops run
// along the contiguous channels, each thread over its own rows, so one row is one vector pass.
// Sums are kept per block of kBlockRows rows in f32 and added into f64 per thread (f32 alone
// would lose digits over 10^5 rows); the statistics come from values shifted by the first
// row (the shifted one-pass variance, exact enough when the shift is a sample of the data).
#include "layers/cpu/batchnorm_nhwc.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "layers/cpu/simd.h"

namespace tbd::cpu {
namespace {

constexpr int64_t kBlockRows = 256;

[[gnu::always_inline]] inline float load(float v) { return v; }
[[gnu::always_inline]] inline float load(uint16_t v) { return f32_from_bf16(v); }
[[gnu::always_inline]] inline void store(float* p, float v) { *p = v; }
[[gnu::always_inline]] inline void store(uint16_t* p, float v) { *p = bf16_from_f32(v); }

// s1 += x - k, s2 += (x - k)^2 over `rows` rows of C.
template <class T>
[[gnu::always_inline]] inline void stats_rows_impl(const T* x, int64_t rows, int64_t C,
                                                   const float* k, float* s1, float* s2) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) {
      const float v = load(xr[c]) - k[c];
      s1[c] += v;
      s2[c] += v * v;
    }
  }
}
TBD_SIMD_CLONES void stats_rows(const float* x, int64_t rows, int64_t C, const float* k, float* s1,
                                float* s2) {
  stats_rows_impl(x, rows, C, k, s1, s2);
}
TBD_SIMD_CLONES void stats_rows(const uint16_t* x, int64_t rows, int64_t C, const float* k,
                                float* s1, float* s2) {
  stats_rows_impl(x, rows, C, k, s1, s2);
}

// y = a x + b, then max(0, .) under relu.
template <class T>
[[gnu::always_inline]] inline void affine_rows_impl(const T* x, T* y, int64_t rows, int64_t C,
                                                    const float* a, const float* b, bool relu) {
  const float lo = relu ? 0.f : -INFINITY;
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) store(yr + c, std::max(a[c] * load(xr[c]) + b[c], lo));
  }
}
TBD_SIMD_CLONES void affine_rows(const float* x, float* y, int64_t rows, int64_t C, const float* a,
                                 const float* b, bool relu) {
  affine_rows_impl(x, y, rows, C, a, b, relu);
}
TBD_SIMD_CLONES void affine_rows(const uint16_t* x, uint16_t* y, int64_t rows, int64_t C,
                                 const float* a, const float* b, bool relu) {
  affine_rows_impl(x, y, rows, C, a, b, relu);
}

// g = dy (0 where y <= 0, when y is given); sg += g, sgx += g (x - mean).
template <class T>
[[gnu::always_inline]] inline void grad_sums_impl(const T* dy, const T* x, const T* y, int64_t rows,
                                                  int64_t C, const float* mean, float* sg,
                                                  float* sgx) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* dyr = dy + r * C;
    const T* xr = x + r * C;
    if (y) {
      const T* yr = y + r * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const float g = load(yr[c]) > 0.f ? load(dyr[c]) : 0.f;
        sg[c] += g;
        sgx[c] += g * (load(xr[c]) - mean[c]);
      }
    } else {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const float g = load(dyr[c]);
        sg[c] += g;
        sgx[c] += g * (load(xr[c]) - mean[c]);
      }
    }
  }
}
TBD_SIMD_CLONES void grad_sums(const float* dy, const float* x, const float* y, int64_t rows,
                               int64_t C, const float* mean, float* sg, float* sgx) {
  grad_sums_impl(dy, x, y, rows, C, mean, sg, sgx);
}
TBD_SIMD_CLONES void grad_sums(const uint16_t* dy, const uint16_t* x, const uint16_t* y,
                               int64_t rows, int64_t C, const float* mean, float* sg, float* sgx) {
  grad_sums_impl(dy, x, y, rows, C, mean, sg, sgx);
}

// dx = a g + b (x - mean) + d, g as in grad_sums.
template <class T>
[[gnu::always_inline]] inline void dx_rows_impl(const T* dy, const T* x, const T* y, T* dx,
                                                int64_t rows, int64_t C, const float* mean,
                                                const float* a, const float* b, const float* d) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* dyr = dy + r * C;
    const T* xr = x + r * C;
    T* dxr = dx + r * C;
    if (y) {
      const T* yr = y + r * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const float g = load(yr[c]) > 0.f ? load(dyr[c]) : 0.f;
        store(dxr + c, a[c] * g + b[c] * (load(xr[c]) - mean[c]) + d[c]);
      }
    } else {
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        store(dxr + c, a[c] * load(dyr[c]) + b[c] * (load(xr[c]) - mean[c]) + d[c]);
      }
    }
  }
}
TBD_SIMD_CLONES void dx_rows(const float* dy, const float* x, const float* y, float* dx,
                             int64_t rows, int64_t C, const float* mean, const float* a,
                             const float* b, const float* d) {
  dx_rows_impl(dy, x, y, dx, rows, C, mean, a, b, d);
}
TBD_SIMD_CLONES void dx_rows(const uint16_t* dy, const uint16_t* x, const uint16_t* y, uint16_t* dx,
                             int64_t rows, int64_t C, const float* mean, const float* a,
                             const float* b, const float* d) {
  dx_rows_impl(dy, x, y, dx, rows, C, mean, a, b, d);
}

std::size_t round_up_64(std::size_t n) { return (n + 63) / 64 * 64; }

// Per-thread layout of the work buffer: two f32 block sums, then two f64 totals, of C each,
// each group starting on a cache line.
struct ThreadSums {
  float* b1;
  float* b2;
  double* t1;
  double* t2;
};
ThreadSums thread_sums(void* work, int64_t C, int t) {
  char* base = static_cast<char*>(work) + static_cast<std::size_t>(t) * bn_nhwc_work_bytes(C, 1);
  float* f = reinterpret_cast<float*>(base);
  double* d = reinterpret_cast<double*>(base + round_up_64(2 * C * sizeof(float)));
  return {f, f + C, d, d + C};
}

// Each of `threads` threads over its rows: block(r, rows, b1, b2) per block of rows, the block
// sums added into the thread's f64 totals; then all totals into thread 0's t1 and t2.
template <class Block>
void reduce_rows(int64_t M, int64_t C, int threads, void* work, const Block& block) {
  int used = 1;
#pragma omp parallel num_threads(threads)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
#pragma omp single
    used = nt;
    const ThreadSums s = thread_sums(work, C, t);
    std::fill(s.t1, s.t1 + C, 0.0);
    std::fill(s.t2, s.t2 + C, 0.0);
    const int64_t begin = M * t / nt, end = M * (t + 1) / nt;
    for (int64_t r = begin; r < end; r += kBlockRows) {
      const int64_t rows = std::min(kBlockRows, end - r);
      std::fill(s.b1, s.b1 + C, 0.f);
      std::fill(s.b2, s.b2 + C, 0.f);
      block(r, rows, s.b1, s.b2);
      for (int64_t c = 0; c < C; ++c) {
        s.t1[c] += s.b1[c];
        s.t2[c] += s.b2[c];
      }
    }
  }
  const ThreadSums s0 = thread_sums(work, C, 0);
  for (int t = 1; t < used; ++t) {
    const ThreadSums s = thread_sums(work, C, t);
    for (int64_t c = 0; c < C; ++c) {
      s0.t1[c] += s.t1[c];
      s0.t2[c] += s.t2[c];
    }
  }
}

template <class T>
void forward_impl(const T* x, T* y, int64_t M, int64_t C, const float* gamma, const float* beta,
                  double eps, bool relu, float* mean, float* var, int threads, void* work) {
  // Shift: the first row. a and b (the affine) reuse thread 0's f32 block sums afterwards.
  float* k = mean;
  for (int64_t c = 0; c < C; ++c) k[c] = load(x[c]);
  reduce_rows(M, C, threads, work, [&](int64_t r, int64_t rows, float* s1, float* s2) {
    stats_rows(x + r * C, rows, C, k, s1, s2);
  });
  const ThreadSums s = thread_sums(work, C, 0);
  float* a = s.b1;
  float* b = s.b2;
  for (int64_t c = 0; c < C; ++c) {
    const double m1 = s.t1[c] / static_cast<double>(M);
    const double v = std::max(s.t2[c] / static_cast<double>(M) - m1 * m1, 0.0);
    const double mu = k[c] + m1;
    const double rstd = 1.0 / std::sqrt(v + eps);
    mean[c] = static_cast<float>(mu);
    var[c] = static_cast<float>(v);
    a[c] = static_cast<float>(gamma[c] * rstd);
    b[c] = static_cast<float>(beta[c] - mu * gamma[c] * rstd);
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < M; r += kBlockRows) {
    affine_rows(x + r * C, y + r * C, std::min(kBlockRows, M - r), C, a, b, relu);
  }
}

template <class T>
void backward_impl(const T* dy, const T* x, const T* y, T* dx, int64_t M, int64_t C,
                   const float* gamma, const float* mean, const float* var, double eps,
                   float* dgamma, float* dbeta, int threads, void* work) {
  reduce_rows(M, C, threads, work, [&](int64_t r, int64_t rows, float* sg, float* sgx) {
    grad_sums(dy + r * C, x + r * C, y ? y + r * C : nullptr, rows, C, mean, sg, sgx);
  });
  const ThreadSums s = thread_sums(work, C, 0);
  // a and b in thread 0's f32 block sums, d after its f64 totals.
  float* a = s.b1;
  float* b = s.b2;
  float* d = reinterpret_cast<float*>(s.t2 + C);  // room reserved by bn_nhwc_work_bytes
  const double inv_m = 1.0 / static_cast<double>(M);
  for (int64_t c = 0; c < C; ++c) {
    const double rstd = 1.0 / std::sqrt(static_cast<double>(var[c]) + eps);
    const double sg = s.t1[c], sgx = s.t2[c];
    const double scale = gamma[c] * rstd;
    a[c] = static_cast<float>(scale);
    b[c] = static_cast<float>(-scale * rstd * rstd * sgx * inv_m);
    d[c] = static_cast<float>(-scale * sg * inv_m);
    if (dgamma) {
      dgamma[c] += static_cast<float>(sgx * rstd);
      dbeta[c] += static_cast<float>(sg);
    }
  }
  if (!dx) return;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < M; r += kBlockRows) {
    dx_rows(dy + r * C, x + r * C, y ? y + r * C : nullptr, dx + r * C, std::min(kBlockRows, M - r),
            C, mean, a, b, d);
  }
}

}  // namespace

std::size_t bn_nhwc_work_bytes(int64_t C, int threads) {
  // Per thread, a whole number of cache lines: 2 C floats (from a line), 2 C doubles and
  // C floats (the backward's d).
  const auto c = static_cast<std::size_t>(C);
  const std::size_t per =
      round_up_64(round_up_64(2 * c * sizeof(float)) + 2 * c * sizeof(double) + c * sizeof(float));
  return per * static_cast<std::size_t>(std::max(threads, 1));
}

void bn_nhwc_forward(const float* x, float* y, int64_t M, int64_t C, const float* gamma,
                     const float* beta, double eps, bool relu, float* mean, float* var, int threads,
                     void* work) {
  forward_impl(x, y, M, C, gamma, beta, eps, relu, mean, var, threads, work);
}
void bn_nhwc_forward(const uint16_t* x, uint16_t* y, int64_t M, int64_t C, const float* gamma,
                     const float* beta, double eps, bool relu, float* mean, float* var, int threads,
                     void* work) {
  forward_impl(x, y, M, C, gamma, beta, eps, relu, mean, var, threads, work);
}
void bn_nhwc_backward(const float* dy, const float* x, const float* y, float* dx, int64_t M,
                      int64_t C, const float* gamma, const float* mean, const float* var,
                      double eps, float* dgamma, float* dbeta, int threads, void* work) {
  backward_impl(dy, x, y, dx, M, C, gamma, mean, var, eps, dgamma, dbeta, threads, work);
}
void bn_nhwc_backward(const uint16_t* dy, const uint16_t* x, const uint16_t* y, uint16_t* dx,
                      int64_t M, int64_t C, const float* gamma, const float* mean, const float* var,
                      double eps, float* dgamma, float* dbeta, int threads, void* work) {
  backward_impl(dy, x, y, dx, M, C, gamma, mean, var, eps, dgamma, dbeta, threads, work);
}

}  // namespace tbd::cpu
