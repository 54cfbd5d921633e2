// layers/cpu/matmul_onednn.cpp: the planned matmul products (layers/cpu/matmul_onednn.h).
#include "layers/cpu/matmul_onednn.h"

#include <algorithm>
#include <vector>

#include "layers/cpu/simd.h"

namespace tbd::cpu {

using dnnl::memory;
using dt = memory::data_type;

namespace {

// Row-major operand (rows, cols): 'N' with leading dimension = row stride, or 'T' when the
// column stride is the long one. Returns false for any other stride pattern.
bool sgemm_operand(const memory::desc& d, char* t, int64_t* ld) {
  if (d.dims().size() != 2 || d.data.format_kind != dnnl_blocked ||
      d.data.format_desc.blocking.inner_nblks != 0 || d.data.offset0 != 0) {
    return false;
  }
  const dnnl_dims_t& s = d.data.format_desc.blocking.strides;
  const int64_t rows = d.dims()[0], cols = d.dims()[1];
  if (s[1] == 1 && s[0] >= std::max<int64_t>(cols, 1)) return *t = 'N', *ld = s[0], true;
  if (s[0] == 1 && s[1] >= std::max<int64_t>(rows, 1)) return *t = 'T', *ld = s[1], true;
  return false;
}

Sgemm plan_sgemm(const memory::desc& src, const memory::desc& wei, const memory::desc& bias,
                 const memory::desc& dst, float scale, bool accumulate, bool has_add) {
  Sgemm g;
  if (bias || has_add) return g;
  for (const memory::desc* d : {&src, &wei, &dst}) {
    if (d->data_type() != dt::f32) return g;  // sgemm is f32 only
  }
  char tc = 'N';
  if (!sgemm_operand(src, &g.ta, &g.lda) || !sgemm_operand(wei, &g.tb, &g.ldb) ||
      !sgemm_operand(dst, &tc, &g.ldc) || tc != 'N') {
    return g;
  }
  g.m = src.dims()[0], g.k = src.dims()[1], g.n = wei.dims()[1];
  g.alpha = scale;
  g.beta = accumulate ? 1.f : 0.f;
  g.ok = true;
  return g;
}

}  // namespace

// Logical (rows, cols) view of a row-major matrix, batched: the stored matrix is (rows, cols),
// or (cols, rows) when `transposed` (then the view swaps the strides). Batch stride = rows*cols.
memory::desc mat(int64_t batch, int64_t rows, int64_t cols, bool transposed, dt t) {
  memory::dims strides =
      transposed ? memory::dims{rows * cols, 1, rows} : memory::dims{rows * cols, cols, 1};
  return memory::desc({batch, rows, cols}, t, strides);
}
memory::desc mat(int64_t rows, int64_t cols, bool transposed, dt t) {
  memory::dims strides = transposed ? memory::dims{1, rows} : memory::dims{cols, 1};
  return memory::desc({rows, cols}, t, strides);
}
// A 2-D matrix with an explicit row stride (a batch of row-major blocks seen as one matrix).
memory::desc mat_strided(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, dt t) {
  return memory::desc({rows, cols}, t, memory::dims{row_stride, col_stride});
}

Matmul make_matmul(CpuBackend& cpu, const char* kind, const std::string& name, const char* what,
                   const memory::desc& src, const memory::desc& wei, const memory::desc& bias,
                   const memory::desc& dst, float scale, bool accumulate,
                   const memory::desc& add_after_scale) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (scale != 1.0f) attr.set_output_scales(0, {scale});
  dnnl::post_ops po;
  if (accumulate) po.append_sum(1.0f);
  if (add_after_scale) po.append_binary(dnnl::algorithm::binary_add, add_after_scale);
  attr.set_post_ops(po);
  Matmul m;
  try {
    m.pd =
        dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, bias, dst), attr, cpu.engine());
  } catch (const dnnl::error& e) {
    auto dims = [](const memory::desc& d) {
      std::string s = "(";
      for (std::size_t i = 0; i < d.dims().size(); ++i) {
        s += (i ? ", " : "") + std::to_string(d.dims()[i]);
      }
      return s + ")";
    };
    throw_layer_error(kind, name,
                      detail::concat("oneDNN has no matmul for ", what, ": src ", dims(src),
                                     " weights ", dims(wei), " dst ", dims(dst), ": ", e.what()));
  }
  m.prim = dnnl::matmul(m.pd);
  m.scratch_bytes = m.pd.scratchpad_desc().get_size();
  m.add_md = add_after_scale;
  m.add_index = accumulate ? 1 : 0;
  m.sgemm = plan_sgemm(src, wei, bias, dst, scale, accumulate, bool(add_after_scale));
  return m;
}

void run_matmul(CpuBackend& cpu, const Matmul& m, const void* src, const void* wei,
                const void* bias, void* dst, const Tensor& scratch, const char* who,
                const void* add) {
  if (m.sgemm.ok) {
    const Sgemm& g = m.sgemm;
    TBD_DNNL_CHECK(dnnl_sgemm(g.ta, g.tb, g.m, g.n, g.k, g.alpha, static_cast<const float*>(src),
                              g.lda, static_cast<const float*>(wei), g.ldb, g.beta,
                              static_cast<float*>(dst), g.ldc));
    return;
  }
  auto& e = cpu.engine();
  std::unordered_map<int, memory> args{
      {DNNL_ARG_SRC, memory(m.pd.src_desc(), e, const_cast<void*>(src))},
      {DNNL_ARG_WEIGHTS, memory(m.pd.weights_desc(), e, const_cast<void*>(wei))},
      {DNNL_ARG_DST, memory(m.pd.dst_desc(), e, dst)}};
  if (bias) args[DNNL_ARG_BIAS] = memory(m.pd.bias_desc(), e, const_cast<void*>(bias));
  if (add) {
    args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(m.add_index) | DNNL_ARG_SRC_1] =
        memory(m.add_md, e, const_cast<void*>(add));
  }
  if (m.scratch_bytes) args[DNNL_ARG_SCRATCHPAD] = memory(m.pd.scratchpad_desc(), e, scratch.raw());
  execute(cpu, m.prim, args, who);
}

std::size_t max_scratch_bytes(std::initializer_list<const Matmul*> ms) {
  std::size_t bytes = 0;
  for (const Matmul* m : ms) {
    if (m->prim) bytes = std::max(bytes, m->scratch_bytes);
  }
  return bytes;
}

Tensor ones_vector(Backend& be, int64_t m, DType t) {
  Tensor v = be.empty(Shape{m}, MemCategory::kWorkspace, Layout::kRowMajor, t);
  if (t == DType::kF32) {
    be.fill(v, 1.f);
  } else {
    const std::vector<uint16_t> one(static_cast<std::size_t>(m), bf16_from_f32(1.f));
    be.copy_from_host(v, one.data());
  }
  return v;
}

void round_to_bf16(uint16_t* dst, const float* src, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_from_f32(src[i]);
}

void widen_from_bf16(float* dst, const uint16_t* src, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_from_bf16(src[i]);
}

}  // namespace tbd::cpu
