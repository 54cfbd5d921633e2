// layers/cpu/mean_loss_cpu.cpp: MeanLoss, own loops.
//
// The mean is one serial sum in double (the inputs are a critic's N scores: too few to share
// out), so it is bit-identical from run to run; the gradient is one fill.
#include "layers/mean_loss.h"

namespace tbd::cpu {
namespace {

class MeanLossCpu final : public Layer {
 public:
  MeanLossCpu(Backend& be, const std::string& name, const MeanLossConfig& cfg,
              const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    E_ = in[0].shape.numel();
  }

  // y: (1)  x: any shape
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const float* in = x[0]->f32();
    double s = 0;
    for (int64_t i = 0; i < E_; ++i) s += in[i];
    y[0]->f32()[0] = static_cast<float>(cfg_.weight * s / static_cast<double>(E_));
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs, TensorRefs) override {
    if (dx[0] == nullptr) return;
    const float g = static_cast<float>(dy[0]->f32()[0] * cfg_.weight / static_cast<double>(E_));
    float* out = dx[0]->f32();
    for (int64_t i = 0; i < E_; ++i) out[i] = g;
  }

 private:
  MeanLossConfig cfg_;
  int64_t E_ = 0;
};

TBD_REGISTER_LAYER(MeanLossConfig, DeviceKind::kCpu, MeanLossCpu);

}  // namespace
}  // namespace tbd::cpu
