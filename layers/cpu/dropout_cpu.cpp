// layers/cpu/dropout_cpu.cpp: Dropout, own code (oneDNN has no random masks).
//
// Elementwise over memory order, so any layout works as is. Forward hashes four elements per
// splitmix64 call (dropout_keep in layers/dropout.h), writes the byte mask kept for backward
// and y in the same pass; backward is one multiply by the saved mask. OpenMP over blocks of
// four elements; the mask depends only on (key, step, i), never on the thread schedule.
#include <algorithm>
#include <cstring>

#include "layers/dropout.h"

namespace tbd::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 16384;

class DropoutCpu final : public Layer {
 public:
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
    const float* in = x[0]->f32();
    float* out = y[0]->f32();
    if (!training_) {
      if (out != in) std::memcpy(out, in, static_cast<std::size_t>(E_) * sizeof(float));
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
        out[i] = keep ? in[i] * s : 0.f;
      }
    }
  }

  // dx: like x  dy: like y
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    const float* g = dy[0]->f32();
    float* out = dx[0]->f32();
    const int64_t E = E_;
    if (!training_) {
      if (out != g) std::memcpy(out, g, static_cast<std::size_t>(E) * sizeof(float));
      return;
    }
    const uint8_t* mask = mask_.data<uint8_t>();
    const float s = scale_;
#pragma omp parallel for simd schedule(static) if (parallel : E > kParallelMin)
    for (int64_t i = 0; i < E; ++i) out[i] = mask[i] ? g[i] * s : 0.f;
  }

 private:
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
