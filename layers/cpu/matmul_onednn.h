// layers/cpu/matmul_onednn.h: oneDNN matmul products planned once at build and run on raw
// pointers, shared by the layers whose products are plain matrices (Linear, Gemm, LinearDgrad,
// the LSTMs under bf16).
//
// A transposed operand is the same buffer seen through a memory descriptor with swapped
// strides, so nothing is copied or transposed. 2-D f32 products without bias or binary post-op
// run on oneDNN's jit sgemm instead (same operands and strides, beta = 1 for +=), which is
// faster than the matmul primitive for these (results/tuning.md). `accumulate` is a sum post-op
// (dst += result): the gradient policy's accumulation without an extra pass. bf16 operands with
// an f32 or bf16 dst run oneDNN's bf16 kernels with f32 accumulation.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>

#include "backends/cpu/onednn.h"
#include "layers/layer.h"

namespace tbd::cpu {

// Logical (rows, cols) view of a row-major matrix, batched: the stored matrix is (rows, cols),
// or (cols, rows) when `transposed` (then the view swaps the strides). Batch stride = rows*cols.
dnnl::memory::desc mat(int64_t batch, int64_t rows, int64_t cols, bool transposed,
                       dnnl::memory::data_type t = dnnl::memory::data_type::f32);
dnnl::memory::desc mat(int64_t rows, int64_t cols, bool transposed,
                       dnnl::memory::data_type t = dnnl::memory::data_type::f32);
// A 2-D matrix with an explicit row stride (a batch of row-major blocks seen as one matrix, or
// a column block of a wider one).
dnnl::memory::desc mat_strided(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
                               dnnl::memory::data_type t = dnnl::memory::data_type::f32);

// A 2-D product oneDNN's jit sgemm can run: dst = alpha * op(A) op(B) + beta * dst, every
// matrix with one unit stride.
struct Sgemm {
  bool ok = false;
  char ta = 'N', tb = 'N';
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  float alpha = 1.f, beta = 0.f;
};

// One matmul primitive: dst (=|+=) scale * (src x weights + bias) (+ add_after_scale).
struct Matmul {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
  std::size_t scratch_bytes = 0;
  dnnl::memory::desc add_md;  // the binary post-op's operand (empty: none)
  int add_index = 0;          // its position in the post-op chain
  Sgemm sgemm;                // when ok, run_matmul() calls dnnl_sgemm instead of the primitive
};

// Plans dst (=|+=) scale * (src x wei + bias) (+ add_after_scale); a failure is the layer's
// error naming `what` and the three shapes.
Matmul make_matmul(CpuBackend& cpu, const char* kind, const std::string& name, const char* what,
                   const dnnl::memory::desc& src, const dnnl::memory::desc& wei,
                   const dnnl::memory::desc& bias, const dnnl::memory::desc& dst, float scale,
                   bool accumulate,
                   const dnnl::memory::desc& add_after_scale = dnnl::memory::desc());

// Runs a matmul on raw pointers (the descriptors fix shapes and strides). `add`: the binary
// post-op's operand, when the primitive has one.
void run_matmul(CpuBackend& cpu, const Matmul& m, const void* src, const void* wei,
                const void* bias, void* dst, const Tensor& scratch, const char* who,
                const void* add = nullptr);

// The largest scratchpad of the planned ones among `ms`.
std::size_t max_scratch_bytes(std::initializer_list<const Matmul*> ms);

// Ones(1, M) of dtype `t`: the left operand of a bias-gradient GEMV (constant, kept as
// workspace).
Tensor ones_vector(Backend& be, int64_t m, DType t);

// dst = bf16(src) over n elements, rounded to nearest even, on all threads (weight copies).
void round_to_bf16(uint16_t* dst, const float* src, int64_t n);
// Layer::param_copy's maker of the "bf16" form: dst = bf16(master), in the master's layout.
inline std::function<void(void*)> bf16_cast_of(const Tensor& master) {
  return [&master](void* dst) {
    round_to_bf16(static_cast<uint16_t*>(dst), master.f32(), master.numel());
  };
}
// dst = f32(src) over n elements (exact), on all threads.
void widen_from_bf16(float* dst, const uint16_t* src, int64_t n);

}  // namespace tbd::cpu
