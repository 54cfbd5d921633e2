// backends/cpu/cpu_backend.cpp: the CPU backend on oneDNN (engine, stream, reorders, fills).
#include <omp.h>

#include <cstring>
#include <fstream>

#include "backends/backends.h"
#include "backends/cpu/cpu_bandwidth.h"
#include "backends/cpu/cpu_peak.h"
#include "backends/cpu/onednn.h"
#include "core/bf16.h"

namespace tbd {
namespace cpu {

std::string DnnlTraits::message(dnnl_status_t s) {
  switch (s) {
    case dnnl_out_of_memory:
      return "out of memory";
    case dnnl_invalid_arguments:
      return "invalid arguments";
    case dnnl_unimplemented:
      return "unimplemented (no implementation for these shapes/formats)";
    case dnnl_runtime_error:
      return "runtime error";
    default:
      return "status " + std::to_string(static_cast<int>(s));
  }
}

CpuBackend::CpuBackend()
    : Backend(make_host_raw_allocator()), engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

std::string CpuBackend::device_name() const {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(pos + 2);
    }
  }
  return "cpu";
}

static const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::sse41:
      return "sse41";
    default:
      return "other";
  }
}

std::map<std::string, std::string> CpuBackend::describe() const {
  const dnnl_version_t* v = dnnl_version();
  std::map<std::string, std::string> m;
  m["onednn_version"] =
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  m["onednn_isa"] = isa_name(dnnl::get_effective_cpu_isa());
  m["threads"] = std::to_string(num_threads());
  return m;
}

int CpuBackend::num_threads() const { return omp_get_max_threads(); }

void CpuBackend::set_math_mode(MathMode m) {
  TBD_CHECK(m != MathMode::kTf32, "math mode tf32 is not available on the cpu backend (TF32 is ",
            "a GPU tensor-core format; the CPU computes strict fp32 or bf16)");
  if (m == MathMode::kBf16) {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    TBD_CHECK(isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx,
              "math mode bf16 needs a CPU with AVX512-BF16 or AMX; oneDNN's ISA here is ",
              isa_name(isa), ", where it would emulate bf16 at 0.4-0.65x the speed of fp32 ",
              "(docs/design.md), so bf16 is refused rather than run emulated");
  }
  math_ = m;
}

namespace {

// The stream of the worker scope the calling thread is in (and whose backend it belongs to);
// null outside one.
struct WorkerStream {
  const CpuBackend* backend = nullptr;
  dnnl::stream* stream = nullptr;
};
thread_local WorkerStream tls_worker;

class CpuWorkerScope final : public WorkerScope {
 public:
  CpuWorkerScope(CpuBackend& be, int threads)
      : stream_(be.engine()), saved_threads_(omp_get_max_threads()), saved_(tls_worker) {
    TBD_CHECK(threads >= 1, "enter_worker: threads must be >= 1, got ", threads);
    omp_set_num_threads(threads);
    tls_worker = WorkerStream{&be, &stream_};
  }
  ~CpuWorkerScope() override {
    tls_worker = saved_;
    omp_set_num_threads(saved_threads_);
  }
  CpuWorkerScope(const CpuWorkerScope&) = delete;
  CpuWorkerScope& operator=(const CpuWorkerScope&) = delete;

 private:
  dnnl::stream stream_;
  int saved_threads_;
  WorkerStream saved_;
};

}  // namespace

std::unique_ptr<WorkerScope> CpuBackend::enter_worker(int threads) {
  return std::make_unique<CpuWorkerScope>(*this, threads);
}

dnnl::stream& CpuBackend::stream() {
  return tls_worker.backend == this ? *tls_worker.stream : stream_;
}

PeakRate CpuBackend::peak_flops(MathMode m) {
  if (m == MathMode::kBf16) {
    if (!peak_bf16_) {
      CpuPeak p = measure_cpu_peak_bf16(num_threads());
      peak_bf16_ = PeakRate{p.flops, p.method};
    }
    return *peak_bf16_;
  }
  if (m != MathMode::kFp32) {
    return {0, std::string("not applicable: the CPU backend has no ") + to_string(m) + " math"};
  }
  if (!peak_fp32_) {
    CpuPeak p = measure_cpu_peak_fp32(num_threads());
    peak_fp32_ = PeakRate{p.flops, p.method};
  }
  return *peak_fp32_;
}

PeakRate CpuBackend::peak_bandwidth() {
  if (!bandwidth_) {
    CpuBandwidth bw = measure_cpu_bandwidth(num_threads());
    bandwidth_ = PeakRate{bw.bytes_per_s, bw.method};
  }
  return *bandwidth_;
}

void CpuBackend::copy_from_host(const Tensor& dst, const void* src) {
  if (dst.layout() == Layout::kRowMajor) {
    std::memcpy(dst.raw(), src, dst.bytes());
    return;
  }
  // A packed tensor's padding stays zero: optimizers and kernels run over it.
  if (dst.layout() == Layout::kPacked) std::memset(dst.raw(), 0, dst.bytes());
  TensorDesc plain = dst.desc();
  plain.layout = Layout::kRowMajor;
  dnnl::memory s = mem_of(*this, md_of(plain), const_cast<void*>(src));
  dnnl::memory d = mem_of(*this, dst);
  dnnl::reorder(s, d).execute(stream(), s, d);
}

void CpuBackend::copy_to_host(void* dst, const Tensor& src) {
  if (src.layout() == Layout::kRowMajor) {
    std::memcpy(dst, src.raw(), src.bytes());
    return;
  }
  TensorDesc plain = src.desc();
  plain.layout = Layout::kRowMajor;
  dnnl::memory s = mem_of(*this, src);
  dnnl::memory d = mem_of(*this, md_of(plain), dst);
  dnnl::reorder(s, d).execute(stream(), s, d);
}

void CpuBackend::reorder(const Tensor& dst, const Tensor& src) {
  const bool cast = dst.dtype() != src.dtype();
  TBD_CHECK(dst.shape() == src.shape() &&
                (!cast || (is_floating(dst.dtype()) && is_floating(src.dtype()))),
            "reorder: dst ", dst.desc().to_string(), " and src ", src.desc().to_string(),
            " differ in shape or in a dtype other than f32 <-> bf16");
  if (dst.layout() == src.layout() && !cast) {
    if (dst.raw() != src.raw()) std::memcpy(dst.raw(), src.raw(), src.bytes());
    return;
  }
  dnnl::memory s = mem_of(*this, src);
  dnnl::memory d = mem_of(*this, dst);
  dnnl::reorder(s, d).execute(stream(), s, d);
}

void CpuBackend::fill(const Tensor& dst, float value) {
  TBD_CHECK(dst.dtype() == DType::kF32 || value == 0.f, "fill: only f32 tensors take non-zero");
  if (value == 0.f) {
    std::memset(dst.raw(), 0, dst.bytes());
    return;
  }
  if (dst.layout() == Layout::kPacked) {  // the values, not the padding
    std::vector<float> h(static_cast<std::size_t>(dst.numel()), value);
    copy_from_host(dst, h.data());
    return;
  }
  float* p = dst.f32();
  const int64_t n = dst.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = value;
}

void CpuBackend::accumulate(const Tensor& dst, const Tensor& src) {
  TBD_CHECK(dst.desc().same_storage(src.desc()) && is_floating(dst.dtype()), "accumulate: dst ",
            dst.desc().to_string(), " and src ", src.desc().to_string(),
            " must match (f32 or bf16)");
  if (dst.dtype() == DType::kBF16) {  // added in f32, rounded once (to nearest even)
    auto* d = dst.data<uint16_t>();
    const auto* s = src.data<const uint16_t>();
    const int64_t n = dst.stored_numel();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] = bf16_from_f32(f32_from_bf16(d[i]) + f32_from_bf16(s[i]));
    return;
  }
  float* d = dst.f32();
  const float* s = src.f32();
  const int64_t n = dst.stored_numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) d[i] += s[i];
}

CpuBackend& as_cpu(Backend& be) {
  auto* cpu = dynamic_cast<CpuBackend*>(&be);
  TBD_CHECK(cpu != nullptr, "expected the CPU backend, got ", to_string(be.kind()));
  return *cpu;
}

dnnl::memory::data_type dnnl_dtype(DType t) {
  switch (t) {
    case DType::kF32:
      return dnnl::memory::data_type::f32;
    case DType::kBF16:
      return dnnl::memory::data_type::bf16;
    case DType::kF16:
      return dnnl::memory::data_type::f16;
    case DType::kI32:
      return dnnl::memory::data_type::s32;
    case DType::kU8:
      return dnnl::memory::data_type::u8;
  }
  return dnnl::memory::data_type::undef;
}

dnnl::memory::dims dnnl_dims(const Shape& s) { return dnnl::memory::dims(s.dims()); }

std::string format_name(const dnnl::memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked) return "opaque";
  const auto& b = d.format_desc.blocking;
  std::vector<int> order(static_cast<std::size_t>(d.ndims));
  for (int i = 0; i < d.ndims; ++i) order[static_cast<std::size_t>(i)] = i;
  // Outer dims by decreasing stride (ties: the logical order).
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int c) { return b.strides[a] > b.strides[c]; });
  std::string s;
  for (int i : order) {
    bool blocked = false;
    for (int k = 0; k < b.inner_nblks; ++k) blocked |= b.inner_idxs[k] == i;
    s += static_cast<char>((blocked ? 'A' : 'a') + i);
  }
  for (int k = 0; k < b.inner_nblks; ++k) {
    s += std::to_string(b.inner_blks[k]) + static_cast<char>('a' + b.inner_idxs[k]);
  }
  return s;
}

OneDnnPacking::OneDnnPacking(const dnnl::memory::desc& m) : md(m) {
  bytes = m.get_size();
  format = format_name(m);
}

bool OneDnnPacking::same(const Packing& other) const {
  const auto* o = dynamic_cast<const OneDnnPacking*>(&other);
  return o != nullptr && o->md == md;
}

TensorDesc packed_desc(const Shape& shape, const dnnl::memory::desc& md) {
  TensorDesc plain{shape};
  if (md == md_of(plain)) return plain;
  TBD_CHECK(md.data_type() == dnnl::memory::data_type::f32 && md.dims() == dnnl_dims(shape),
            "packed_desc: the format's dims or type do not match ", plain.to_string());
  return TensorDesc{shape, DType::kF32, Layout::kPacked, std::make_shared<OneDnnPacking>(md)};
}

dnnl::memory::desc md_of(const TensorDesc& d) {
  using tag = dnnl::memory::format_tag;
  if (d.layout == Layout::kPacked) {
    const auto* p = dynamic_cast<const OneDnnPacking*>(d.packing.get());
    TBD_CHECK(p != nullptr, "md_of: ", d.to_string(), " is not packed by oneDNN");
    return p->md;
  }
  if (d.layout == Layout::kNChw16c) return {dnnl_dims(d.shape), dnnl_dtype(d.dtype), tag::nChw16c};
  if (d.layout == Layout::kNhwc) return {dnnl_dims(d.shape), dnnl_dtype(d.dtype), tag::nhwc};
  static const tag plain[] = {tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde, tag::abcdef};
  TBD_CHECK(d.shape.rank() >= 1 && d.shape.rank() <= 6, "oneDNN tensors have rank 1..6, got ",
            d.shape.to_string());
  return {dnnl_dims(d.shape), dnnl_dtype(d.dtype), plain[d.shape.rank() - 1]};
}

dnnl::memory mem_of(CpuBackend& be, const Tensor& t) {
  return dnnl::memory(md_of(t.desc()), be.engine(), t.raw());
}

dnnl::memory mem_of(CpuBackend& be, const dnnl::memory::desc& md, void* data) {
  return dnnl::memory(md, be.engine(), data);
}

void execute(CpuBackend& be, const dnnl::primitive& p,
             const std::unordered_map<int, dnnl::memory>& args, const char* who) {
  try {
    p.execute(be.stream(), args);
  } catch (const dnnl::error& e) {
    TBD_FAIL(who, ": oneDNN execution failed: ", e.what());
  }
}

Tensor scratchpad_for(CpuBackend& be, const dnnl::memory::desc& scratch_md) {
  std::size_t bytes = scratch_md.get_size();
  if (bytes == 0) return Tensor();
  return be.empty(Shape{static_cast<int64_t>((bytes + 3) / 4)}, MemCategory::kWorkspace);
}

}  // namespace cpu

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<cpu::CpuBackend>(); }

}  // namespace tbd
