// layers/cpu/sequence_last_cpu.cpp: SequenceLast on the CPU (row copies; own code).
#include <algorithm>
#include <cstring>

#include "layers/sequence_last.h"

namespace tbd::cpu {
namespace {

class SequenceLastCpu final : public Layer {
 public:
  SequenceLastCpu(Backend& be, const std::string& name, const SequenceLastConfig& cfg,
                  const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)) {
    T_ = in[0].shape[0], N_ = in[0].shape[1], R_ = in[0].shape.numel() / (T_ * N_);
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    const int32_t* len = x[1]->data<int32_t>();
    for (int64_t n = 0; n < N_; ++n) {
      TBD_LAYER_CHECK(len[n] >= 1 && len[n] <= T_, kind(), name_, "input lengths: sample ", n,
                      " has length ", len[n], ", outside [1, T=", T_, "]");
    }
    const float* xs = x[0]->f32();
    float* ys = y[0]->f32();
    for (int64_t n = 0; n < N_; ++n) {
      std::memcpy(ys + n * R_, xs + ((len[n] - 1) * N_ + n) * R_, R_ * sizeof(float));
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs) override {
    if (!dx[0]) return;
    const int32_t* len = x[1]->data<int32_t>();
    float* d = dx[0]->f32();
    std::fill(d, d + T_ * N_ * R_, 0.0f);
    for (int64_t n = 0; n < N_; ++n) {
      std::memcpy(d + ((len[n] - 1) * N_ + n) * R_, dy[0]->f32() + n * R_, R_ * sizeof(float));
    }
  }

 private:
  int64_t T_ = 0, N_ = 0, R_ = 0;  // R: elements per (t, n)
};

}  // namespace

TBD_REGISTER_LAYER(SequenceLastConfig, DeviceKind::kCpu, SequenceLastCpu);

}  // namespace tbd::cpu
