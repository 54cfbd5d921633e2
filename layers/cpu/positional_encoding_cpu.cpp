// layers/cpu/positional_encoding_cpu.cpp: PositionalEncoding on the CPU (own code: oneDNN has
// no such op; a broadcast add is memory-bound and trivially vectorised).
#include <cstring>
#include <vector>

#include "backends/cpu/onednn.h"
#include "layers/positional_encoding.h"

namespace tbd::cpu {
namespace {

class PositionalEncodingCpu final : public Layer {
 public:
  PositionalEncodingCpu(Backend& be, const std::string& name, const PositionalEncodingConfig& cfg,
                        const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)) {
    const Shape& s = in[0].shape;
    table_ = be.empty(Shape{s[1], s[2]}, MemCategory::kDynamic);
    std::vector<float> h(s[1] * s[2]);
    for (int64_t t = 0; t < s[1]; ++t)
      for (int64_t d = 0; d < s[2]; ++d) h[t * s[2] + d] = static_cast<float>(sinusoid(t, d, s[2]));
    be.copy_from_host(table_, h.data());
  }

  // y: (N, T, D), x: (N, T, D)
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const int64_t n = inputs_[0].shape[0], td = table_.numel();
    const float* xs = x[0]->f32();
    const float* pe = table_.f32();
    float* ys = y[0]->f32();
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < td; ++i) ys[b * td + i] = xs[b * td + i] + pe[i];
  }
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0]) std::memcpy(dx[0]->raw(), dy[0]->raw(), dy[0]->bytes());
  }

 private:
  Tensor table_;  // (T, D)
};

TBD_REGISTER_LAYER(PositionalEncodingConfig, DeviceKind::kCpu, PositionalEncodingCpu);

}  // namespace
}  // namespace tbd::cpu
