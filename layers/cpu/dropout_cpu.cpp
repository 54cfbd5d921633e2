// layers/cpu/dropout_cpu.cpp: Dropout, own code (oneDNN has no random masks).
//
// Elementwise over memory order, so any layout works as is. Forward hashes four elements per
// splitmix64 call (dropout_keep in layers/dropout.h), writes the byte mask kept for backward
// and y in the same pass; backward is one multiply by the saved mask. OpenMP over blocks of
// four elements; the mask depends only on (key, step, i), never on the thread schedule.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/bf16.h"
#include "layers/dropout.h"

namespace tbd::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 16384;

// Elements as f32 in registers: f32 as is, bf16 widened and rounded back (exact for the mask's
// zeros and for x * 1/(1 - p) up to one rounding).
inline float load(float v) { return v; }
inline float load(uint16_t v) { return f32_from_bf16(v); }
template <class T>
T store(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return bf16_from_f32(v);
  }
}

class DropoutCpu final : public Layer {
 public:
  static constexpr bool kTakesBf16 = true;  // f32 or bf16, y and dx in x's dtype

  DropoutCpu(Backend& be, const std::string& name, const DropoutConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    E_ = in[0].shape.numel();
    key_ = dropout_key(cfg, name);
    threshold_ = dropout_threshold(cfg.p);
    scale_ = cfg.p < 1 ? static_cast<float>(1.0 / (1.0 - cfg.p)) : 0.f;
    // One byte per element (allocated as floats: the tensor dtypes have no u8).
    saved(mask_, TensorDesc{Shape{(E_ + 3) / 4}});
  }

  // Elementwise over the buffer (or per channel): any layout, as it comes.
  static std::vector<Layout> input_layouts(const DropoutConfig&,
                                           const std::vector<TensorDesc>& in) {
    return layouts_as_given(in);
  }

  // y: like x  x: any shape
  void fprop(MutTensorRefs y, TensorRefs x) override {
    if (x[0]->dtype() == DType::kBF16) {
      forward(x[0]->data<const uint16_t>(), y[0]->data<uint16_t>());
    } else {
      forward(x[0]->f32(), y[0]->f32());
    }
  }

  // dx: like x  dy: like y
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    if (dy[0]->dtype() == DType::kBF16) {
      backward(dy[0]->data<const uint16_t>(), dx[0]->data<uint16_t>());
    } else {
      backward(dy[0]->f32(), dx[0]->f32());
    }
  }

 private:
  template <class T>
  void forward(const T* in, T* out) {
    if (!training_) {
      if (out != in) std::memcpy(out, in, static_cast<std::size_t>(E_) * sizeof(T));
      return;
    }
    uint8_t* mask = mask_.data<uint8_t>();
    const uint64_t base = dropout_step_base(key_, call_numbering().index(step_++));
    const uint32_t thr = threshold_;
    const float s = scale_;
    const int64_t E = E_, groups = (E_ + 3) / 4;
#pragma omp parallel for schedule(static) if (parallel : E > kParallelMin)
    for (int64_t j = 0; j < groups; ++j) {
      const uint64_t h = splitmix64(base + static_cast<uint64_t>(j));
      const int64_t i1 = std::min<int64_t>(E, 4 * j + 4);
      for (int64_t i = 4 * j; i < i1; ++i) {
        const bool keep = ((h >> (16 * (i & 3))) & 0xFFFFu) >= thr;  // = dropout_keep
        mask[i] = keep;
        out[i] = store<T>(keep ? load(in[i]) * s : 0.f);
      }
    }
  }

  template <class T>
  void backward(const T* g, T* out) const {
    const int64_t E = E_;
    if (!training_) {
      if (out != g) std::memcpy(out, g, static_cast<std::size_t>(E) * sizeof(T));
      return;
    }
    const uint8_t* mask = mask_.data<uint8_t>();
    const float s = scale_;
#pragma omp parallel for simd schedule(static) if (parallel : E > kParallelMin)
    for (int64_t i = 0; i < E; ++i) out[i] = store<T>(mask[i] ? load(g[i]) * s : 0.f);
  }

  DropoutConfig cfg_;
  int64_t E_ = 0;
  uint64_t key_ = 0;
  uint32_t threshold_ = 0;
  float scale_ = 1.f;
  uint64_t step_ = 0;
  Tensor mask_;
};

TBD_REGISTER_LAYER(DropoutConfig, DeviceKind::kCpu, DropoutCpu);

}  // namespace
}  // namespace tbd::cpu
