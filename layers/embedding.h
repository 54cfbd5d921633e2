// layers/embedding.h: embedding lookup.
//
//   ids: (...) i32 in [0, num_embeddings)  w: (num_embeddings, dim)  y: (..., dim)
//   y[i] = w[ids[i]]; dw[ids[i]] += dy[i] (rows of padding_idx get no gradient).
//   Out-of-range ids are an error (checked on the host in tests, clamped never).
// FLOPs: fwd 0, bwd_weights M*dim (the scatter-add).
#pragma once

#include "layers/layer.h"

namespace tbd {

struct EmbeddingConfig {
  static constexpr const char* kKind = "Embedding";
  int64_t num_embeddings = 0;
  int64_t dim = 0;
  int64_t padding_idx = -1;  // -1: none
  double scale = 1.0;        // y = scale * w[id] (Transformer multiplies by sqrt(d_model))
  Init init = Init::kNormal002;
};

}  // namespace tbd
