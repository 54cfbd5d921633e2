// tests/models/overfit.h: the models' overfit check: train on one fixed batch, expect the loss
// to fall by 80% (and a rerun to repeat it bit for bit, which the tests compare).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "models/model.h"

namespace tbd {

// The loss after each of `steps` training steps.
inline std::vector<float> losses(Model& m, int steps) {
  std::vector<float> v;
  for (int i = 0; i < steps; ++i) {
    m.train_step();
    v.push_back(m.loss());
  }
  return v;
}

inline void expect_overfits(const std::vector<float>& l) {
  for (float x : l) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LE(l.back(), 0.2f * l.front()) << "loss " << l.front() << " -> " << l.back()
                                        << " (needs an 80% drop within " << l.size() << " steps)";
}

}  // namespace tbd
