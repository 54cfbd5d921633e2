// layers/embedding.cpp: shape checks, FLOP and byte counts of Embedding (shared by all
// backends).
#include "layers/embedding.h"

namespace tbd {

Shape embedding_output_shape(const std::string& name, const EmbeddingConfig& cfg,
                             const TensorDesc& ids) {
  const char* k = EmbeddingConfig::kKind;
  TBD_LAYER_CHECK(ids.shape.rank() >= 1, k, name, "input ids must have rank >= 1, got ",
                  ids.shape.to_string());
  check_positive(k, name, "ids", ids.shape);
  TBD_LAYER_CHECK(ids.dtype == DType::kI32, k, name, "input ids must be i32, got ",
                  ids.to_string());
  TBD_LAYER_CHECK(cfg.num_embeddings > 0 && cfg.dim > 0, k, name,
                  "invalid config: num_embeddings=", cfg.num_embeddings, " dim=", cfg.dim,
                  " must be positive");
  TBD_LAYER_CHECK(cfg.padding_idx >= -1 && cfg.padding_idx < cfg.num_embeddings, k, name,
                  "invalid config: padding_idx=", cfg.padding_idx, " must be -1 or in [0, ",
                  cfg.num_embeddings, ")");
  std::vector<int64_t> dims = ids.shape.dims();
  dims.push_back(cfg.dim);
  return Shape(std::move(dims));
}

Flops embedding_flops(const EmbeddingConfig& cfg, const Shape& ids) {
  double e = static_cast<double>(ids.numel()) * static_cast<double>(cfg.dim);
  bool scaled = cfg.scale != 1.0;
  return Flops{scaled ? e : 0.0, 0, scaled ? 2 * e : e};
}

Bytes embedding_bytes(const EmbeddingConfig& cfg, const Shape& ids) {
  const double m = static_cast<double>(ids.numel());
  const double rows = m * static_cast<double>(cfg.dim);
  const double id_bytes = bytes_of(m, DType::kI32);
  return Bytes{id_bytes + bytes_of(2 * rows), 0, id_bytes + bytes_of(3 * rows)};
}

template <>
Contract contract(const std::string& name, const EmbeddingConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(EmbeddingConfig::kKind, name, in, 1);
  const Shape ys = embedding_output_shape(name, cfg, in[0]);
  Contract c{
      {TensorDesc{ys}},
      {{"weight", Shape{cfg.num_embeddings, cfg.dim}, cfg.init, cfg.dim, cfg.num_embeddings, true}},
      embedding_flops(cfg, in[0].shape),
      embedding_bytes(cfg, in[0].shape)};
  c.saved_inputs = {true};  // the ids, to scatter dy into the weight gradient
  c.saved_outputs = {false};
  return c;
}

std::string describe_problem(const EmbeddingConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("ids ", in[0].shape.to_string(), " V=", cfg.num_embeddings,
                        " dim=", cfg.dim);
}

}  // namespace tbd
