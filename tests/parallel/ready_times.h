// tests/parallel/ready_times.h: what every backend's data-parallel profile must say about when
// backward completed each gradient (Backend::mark): after forward, before backward ended (within
// `tol` seconds, the gap between the clocks that measure them), in the arena's order, which is
// the order of completion. Shared by the CPU test and the CUDA one.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>

#include "parallel/data_parallel.h"

namespace tbd::test {

// Returns the last gradient's ready time.
inline double expect_ready_times_in_backward(const DataParallel& dp, double tol) {
  const DistProfile p = dp.profile();
  EXPECT_GT(p.steps, 0);
  double prev = 0;
  for (const PlannedGrad& g : dp.plan().grads) {
    const double t = p.node_done.at(static_cast<std::size_t>(g.ready_node));
    EXPECT_GT(t, p.forward - tol) << g.name;
    EXPECT_LE(t, p.forward + p.backward + tol) << g.name;
    EXPECT_GE(t, prev) << g.name;
    prev = t;
  }
  return prev;
}

}  // namespace tbd::test
