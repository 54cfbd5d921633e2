// tests/layers/layer_steps.h: runs one layer's forward and backward on filled buffers and counts
// the allocations of a repeated step (the engine's rule: forward/backward never allocate).
#pragma once

#include <vector>

#include "core/allocator.h"
#include "layers/layer.h"

namespace tbd::test {

// Allocations made by the second forward+backward of `layer` (the first may warm caches).
inline uint64_t allocations_in_step(Backend& be, Layer& layer) {
  std::vector<Tensor> x, y, dx, dy;
  for (const auto& d : layer.input_descs()) {
    x.push_back(be.empty(d, MemCategory::kDynamic));
    be.fill(x.back(), 0.f);
    dx.push_back(be.empty(d, MemCategory::kDynamic));
  }
  for (const auto& d : layer.output_descs()) {
    y.push_back(be.empty(d, MemCategory::kFeatureMaps));
    dy.push_back(be.empty(d, MemCategory::kDynamic));
    be.fill(dy.back(), 0.f);
  }
  std::vector<const Tensor*> xp, yp, dyp;
  std::vector<Tensor*> yw, dxw;
  for (std::size_t i = 0; i < x.size(); ++i) {
    xp.push_back(&x[i]);
    dxw.push_back(x[i].dtype() == DType::kF32 ? &dx[i] : nullptr);
  }
  for (std::size_t i = 0; i < y.size(); ++i) {
    yp.push_back(&y[i]);
    yw.push_back(&y[i]);
    dyp.push_back(&dy[i]);
  }
  for (auto& p : layer.params()) be.fill(p.value, 1.f);
  layer.forward(yw, xp);
  layer.backward(dxw, dyp, xp, yp);
  const uint64_t before = be.allocator().stats().num_allocations;
  layer.forward(yw, xp);
  layer.backward(dxw, dyp, xp, yp);
  be.synchronize();
  return be.allocator().stats().num_allocations - before;
}

}  // namespace tbd::test
