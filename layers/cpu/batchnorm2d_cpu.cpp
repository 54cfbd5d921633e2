// layers/cpu/batchnorm2d_cpu.cpp: BatchNorm2d on oneDNN batch_normalization
// (layers/cpu/batchnorm_cpu.h), x as it comes: (N, C, H, W), plain or nChw16c.
#include "layers/cpu/batchnorm_cpu.h"

namespace tbd::cpu {
namespace {

class BatchNorm2dOneDnn final : public BatchNormOneDnn {
 public:
  // oneDNN's bf16 batch normalization: x, y, dy, dx bf16; statistics, scale and shift f32.
  static constexpr bool kTakesBf16 = true;

  BatchNorm2dOneDnn(Backend& be, const std::string& name, const BatchNorm2dConfig& cfg,
                    const std::vector<TensorDesc>& in)
      : BatchNormOneDnn(be, name, in, contract_of(name, cfg, in), batchnorm_spec(name, cfg, in)) {}

  // Elementwise over the buffer (or per channel): any layout, as it comes.
  static std::vector<Layout> input_layouts(const BatchNorm2dConfig&,
                                           const std::vector<TensorDesc>& in) {
    return layouts_as_given(in);
  }
};

TBD_REGISTER_LAYER(BatchNorm2dConfig, DeviceKind::kCpu, BatchNorm2dOneDnn);

}  // namespace
}  // namespace tbd::cpu
