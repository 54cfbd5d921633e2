// layers/embedding.h: embedding lookup.
//
//   ids: (...) i32 in [0, num_embeddings)  w: (num_embeddings, dim)  y: (..., dim)
//   y[i] = scale * w[ids[i]]; dw[ids[i]] += scale * dy[i] (rows of padding_idx get no
//   gradient; their output is still scale * w[padding_idx], which the model keeps at zero if it
//   wants PyTorch's zero padding vector). ids never get a gradient (dx is always null).
//   An out-of-range id makes forward throw (one compare per row, next to the dim-wide copy);
//   it is never clamped. The weight is initialised by cfg.init with fan_in = dim,
//   fan_out = num_embeddings (PyTorch's convention for a (num_embeddings, dim) tensor).
// FLOPs: fprop 0 (M*dim with scale != 1), wgrad M*dim (the scatter-add; 2*M*dim with
//   scale != 1), M = ids.numel().
// Bytes (a lower bound, layers/layer.h; ids i32 and w f32, 4 bytes each):
//   fprop 4*(M + 2*M*dim) (read ids and the M looked-up rows, write y); dgrad 0 (ids take no
//   gradient); wgrad 4*(M + 3*M*dim) (read ids and dy; read and write the M rows of dw).
//   One row per id: a repeated id reads (and updates) its row again, which a cache may absorb;
//   rows of padding_idx are counted like any other. The table's other rows are not touched.
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

// Checks ids and cfg (throws naming the layer, the argument and the dims); returns y's shape.
Shape embedding_output_shape(const std::string& name, const EmbeddingConfig& cfg,
                             const TensorDesc& ids);
Flops embedding_flops(const EmbeddingConfig& cfg, const Shape& ids);
Bytes embedding_bytes(const EmbeddingConfig& cfg, const Shape& ids);

// Contract: one input ids (i32); y (..., dim) f32; weight (num_embeddings, dim) with
// cfg.init, fan_in = dim, fan_out = num_embeddings (PyTorch's convention).
template <>
Contract contract(const std::string& name, const EmbeddingConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const EmbeddingConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
