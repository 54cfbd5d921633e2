// backends/cpu/onednn.h: the CPU backend's oneDNN context and helpers for layer implementations.
//
// Only files under backends/cpu and layers/cpu include this (dnnl.hpp is heavy). Primitives are
// created once at build with scratchpad_mode::user, so their scratch comes from the tracking
// allocator as `workspace` and a step performs no hidden allocations.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/backend.h"
#include "core/error.h"

namespace tbd::cpu {

struct DnnlTraits {
  static constexpr const char* kLibrary = "oneDNN";
  static bool ok(dnnl_status_t s) { return s == dnnl_success; }
  static std::string message(dnnl_status_t s);
};
#define TBD_DNNL_CHECK(call) TBD_STATUS_CHECK(::tbd::cpu::DnnlTraits, call)

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::string device_name() const override;
  std::map<std::string, std::string> describe() const override;
  int num_threads() const override;

  void copy_from_host(const Tensor& dst, const void* src) override;
  void copy_to_host(void* dst, const Tensor& src) override;
  void reorder(const Tensor& dst, const Tensor& src) override;
  void fill(const Tensor& dst, float value) override;
  void accumulate(const Tensor& dst, const Tensor& src) override;
  void synchronize() override {}
  // fp32, or bf16 where oneDNN runs real bf16 kernels (avx512_core_bf16 or AMX); tf32 throws.
  void set_math_mode(MathMode m) override;
  MathMode math_mode() const override { return math_; }
  // Measured, not looked up (spec-sheet rates say nothing about clocks under load or a VM's
  // share of a socket): FP32 by an FMA micro-kernel (cpu_peak.h), bandwidth by a STREAM triad
  // (cpu_bandwidth.h), bf16 by a vdpbf16ps micro-kernel where the CPU has avx512_bf16, each
  // once per process with the threads in use at the first call. No TF32 on the CPU:
  // peak_flops(kTf32) is 0 with the reason.
  PeakRate peak_flops(MathMode m) override;
  PeakRate peak_bandwidth() override;
  // A worker thread (see Backend::enter_worker): OpenMP's thread count of this thread set to
  // `threads` (an ICV per thread: oneDNN reads omp_get_max_threads() when it creates and when
  // it runs a primitive) and a oneDNN stream of its own; both restored at the scope's end.
  std::unique_ptr<WorkerScope> enter_worker(int threads) override;

  dnnl::engine& engine() { return engine_; }
  // The calling thread's stream: its worker scope's, else the backend's own.
  dnnl::stream& stream();

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::optional<PeakRate> peak_fp32_, peak_bf16_, bandwidth_;
  MathMode math_ = MathMode::kFp32;
};

// The CPU backend behind a Backend& (throws if it is another kind).
CpuBackend& as_cpu(Backend& be);

dnnl::memory::data_type dnnl_dtype(DType t);
dnnl::memory::dims dnnl_dims(const Shape& s);
// oneDNN's name of a format from its blocking description: the dims in memory order, upper-case
// where blocked, then the inner blocks ("ABcd16b16a", which oneDNN's weights tags call
// OIhw16i16o); "opaque" for a non-blocked descriptor.
std::string format_name(const dnnl::memory::desc& md);

// A parameter stored in the format a oneDNN primitive chose for it (Layout::kPacked).
struct OneDnnPacking final : Packing {
  explicit OneDnnPacking(const dnnl::memory::desc& m);
  bool same(const Packing& other) const override;
  dnnl::memory::desc md;
};
// The desc of a tensor of `shape` stored as `md` (f32): row-major where md is the plain format
// of the shape, else kPacked.
TensorDesc packed_desc(const Shape& shape, const dnnl::memory::desc& md);
// Memory descriptor of a tensor: plain (a, ab, abc, abcd, ...), nChw16c or its packing's.
dnnl::memory::desc md_of(const TensorDesc& d);
// Wraps a tensor's buffer (no copy).
dnnl::memory mem_of(CpuBackend& be, const Tensor& t);
dnnl::memory mem_of(CpuBackend& be, const dnnl::memory::desc& md, void* data);

// Runs a primitive with its arguments, and the scratchpad if it has one. Throws tbd::Error
// naming `who` on a oneDNN failure.
void execute(CpuBackend& be, const dnnl::primitive& p,
             const std::unordered_map<int, dnnl::memory>& args, const char* who);

// A primitive's user scratchpad, allocated once at build as workspace.
Tensor scratchpad_for(CpuBackend& be, const dnnl::memory::desc& scratch_md);

}  // namespace tbd::cpu
