// layers/cpu/embedding_cpu.cpp: Embedding, own code (oneDNN has no gather/scatter-add).
//
// Forward gathers rows in parallel over ids. Backward scatter-adds dy rows into the weight
// gradient; repeated ids would race if threads split the ids, so each thread owns a slice of
// the embedding columns instead and walks all ids in order: no atomics, no sorting, and every
// element sums its contributions in id order, so the gradient is bit-identical across runs and
// thread counts.
#include <omp.h>

#include <algorithm>

#include "layers/embedding.h"

namespace tbd::cpu {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 16384;

class EmbeddingCpu final : public Layer {
 public:
  EmbeddingCpu(Backend& be, const std::string& name, const EmbeddingConfig& cfg,
               const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg) {
    M_ = in[0].shape.numel();
  }

  // y: (..., dim)  x[0] = ids: (...) i32
  void fprop(MutTensorRefs y, TensorRefs x) override {
    const int32_t* ids = x[0]->data<int32_t>();
    const float* w = params_[0].value.f32();
    float* out = y[0]->f32();
    const int64_t M = M_, D = cfg_.dim, V = cfg_.num_embeddings;
    const float s = static_cast<float>(cfg_.scale);
    int64_t bad = -1;
#pragma omp parallel for schedule(static) if (parallel : M * D > kParallelMin)
    for (int64_t i = 0; i < M; ++i) {
      const int64_t id = ids[i];
      float* yr = out + i * D;
      if (id < 0 || id >= V) {
#pragma omp atomic write
        bad = i;
        std::fill(yr, yr + D, 0.f);
        continue;
      }
      const float* wr = w + id * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) yr[d] = s * wr[d];
    }
    if (bad >= 0) {
      throw_layer_error(
          kind(), name_,
          detail::concat("input ids: element ", bad, " is ", ids[bad], ", outside [0, ", V, ")"));
    }
  }

  // dx[0]: always null (ids are integers)  dy: (..., dim)  x[0] = ids
  void bprop(MutTensorRefs /*dx*/, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (!param_grads()) return;  // ids take no gradient: nothing else to do
    const int32_t* ids = x[0]->data<int32_t>();
    const float* g = dy[0]->f32();
    float* dw = params_[0].grad.f32();
    const int64_t M = M_, D = cfg_.dim, V = cfg_.num_embeddings, pad = cfg_.padding_idx;
    const float s = static_cast<float>(cfg_.scale);
#pragma omp parallel if (parallel : M * D > kParallelMin)
    {
      // This thread's columns: contiguous, a multiple of 16 floats (one cache line) wide.
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t chunk = ((D + nt - 1) / nt + 15) / 16 * 16;
      const int64_t c0 = std::min(D, t * chunk), c1 = std::min(D, c0 + chunk);
      for (int64_t i = 0; i < M && c0 < c1; ++i) {
        const int64_t id = ids[i];
        if (id == pad || id < 0 || id >= V) continue;  // forward has rejected bad ids
        float* dr = dw + id * D;
        const float* gr = g + i * D;
#pragma omp simd
        for (int64_t d = c0; d < c1; ++d) dr[d] += s * gr[d];
      }
    }
  }

 private:
  EmbeddingConfig cfg_;
  int64_t M_ = 0;
};

TBD_REGISTER_LAYER(EmbeddingConfig, DeviceKind::kCpu, EmbeddingCpu);

}  // namespace
}  // namespace tbd::cpu
