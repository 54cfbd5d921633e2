// tests/models/causal.h: the causality check of the decoder-only language models (an unplanned
// model, so that every tensor keeps its value for the host to read).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "models/model.h"
#include "tests/support/check.h"

namespace tbd::test {

// The logits (the output of layer `logits_layer`, (B*T, V)) at positions before t0 do not move
// when the tokens (data input "tokens", (B, T), ids below `vocab`) from t0 on change; those at
// t0 and after do, so the comparison can fail.
inline void expect_causal(Backend& be, Model& m, const std::string& logits_layer, int64_t vocab,
                          int64_t B, int64_t T, int64_t t0) {
  Graph& g = m.graph();
  TensorId logits = -1, tokens = -1;
  for (const Graph::Node& n : g.nodes()) {
    if (n.layer->name() == logits_layer) logits = n.outputs[0];
  }
  for (TensorId id : m.data_input_ids()) {
    if (g.tensor_name(id) == "tokens") tokens = id;
  }
  ASSERT_GE(logits, 0);
  ASSERT_GE(tokens, 0);
  g.forward();
  const Vec before = to_host(be, g.tensor(logits));
  const int64_t V = static_cast<int64_t>(before.size()) / (B * T);
  Vec ids = to_host(be, g.tensor(tokens));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = t0; t < T; ++t) {
      double& id = ids[static_cast<std::size_t>(b * T + t)];
      id = std::fmod(id + 17, static_cast<double>(vocab));
    }
  }
  from_host(be, g.tensor(tokens), ids);
  g.forward();
  const Vec after = to_host(be, g.tensor(logits));
  for (int64_t b = 0; b < B; ++b) {
    double later = 0;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t v = 0; v < V; ++v) {
        const std::size_t i = static_cast<std::size_t>((b * T + t) * V + v);
        if (t < t0) {
          ASSERT_EQ(after[i], before[i])
              << "sequence " << b << ", position " << t << ", logit " << v
              << " moved when only positions >= " << t0 << " changed";
        } else {
          later = std::max(later, std::abs(after[i] - before[i]));
        }
      }
    }
    EXPECT_GT(later, 1e-3) << "sequence " << b << ": the changed positions' logits did not move";
  }
}

}  // namespace tbd::test
