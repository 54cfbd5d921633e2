// layers/cpu/cast_scale_cpu.cpp: CastScale on the CPU, own code (a vectorised loop: bytes to
// f32 times the scale; memory-bound).
#include <cstdint>

#include "layers/cast_scale.h"

namespace tbd::cpu {
namespace {

class CastScaleCpu final : public Layer {
 public:
  CastScaleCpu(Backend& be, const std::string& name, const CastScaleConfig& cfg,
               const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), scale_(static_cast<float>(cfg.scale)) {}

  // y: (...) f32, x: (...) u8
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const uint8_t* xs = x[0]->data<uint8_t>();
    float* ys = y[0]->f32();
    const int64_t n = x[0]->numel();
    const float s = scale_;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) ys[i] = s * static_cast<float>(xs[i]);
  }
  // x is u8: nothing flows back, and there are no parameters.
  void bprop(MutTensorRefs, TensorRefs, TensorRefs, TensorRefs) override {}

 private:
  float scale_;
};

TBD_REGISTER_LAYER(CastScaleConfig, DeviceKind::kCpu, CastScaleCpu);

}  // namespace
}  // namespace tbd::cpu
