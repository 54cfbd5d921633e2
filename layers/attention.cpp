// layers/attention.cpp: input checks, FLOP and byte counts of MultiHeadAttention (all
// backends).
#include "layers/attention.h"

namespace tbd {

AttentionDims attention_dims(const std::string& name, const MultiHeadAttentionConfig& c,
                             const std::vector<TensorDesc>& in) {
  const char* k = MultiHeadAttentionConfig::kKind;
  const std::size_t want = 1 + (c.cross ? 1 : 0) + (c.padding_mask ? 1 : 0);
  TBD_LAYER_CHECK(in.size() == want, k, name, "expected ", want, " inputs (q_in",
                  c.cross ? ", kv_in" : "", c.padding_mask ? ", kv_lengths" : "", "), got ",
                  in.size());
  TBD_LAYER_CHECK(c.num_heads > 0, k, name, "invalid config: num_heads=", c.num_heads);
  TBD_LAYER_CHECK(c.dropout >= 0.0 && c.dropout < 1.0, k, name,
                  "invalid config: dropout=", c.dropout, " (must be in [0, 1))");
  const TensorDesc& q = in[0];
  check_rank(k, name, "q_in", q, 3, "(N, Tq, D)");
  TBD_LAYER_CHECK(is_floating(q.dtype) && q.layout == Layout::kRowMajor, k, name,
                  "input q_in must be f32 or bf16 row-major, got ", q.to_string());
  AttentionDims d{q.shape[0], q.shape[1], q.shape[1], q.shape[2], c.num_heads, 0};
  TBD_LAYER_CHECK(d.D % d.h == 0, k, name, "input q_in ", q.shape.to_string(), ": D=", d.D,
                  " must be divisible by num_heads=", d.h);
  d.dh = d.D / d.h;
  if (c.cross) {
    const TensorDesc& kv = in[1];
    check_rank(k, name, "kv_in", kv, 3, "(N, Tk, D)");
    TBD_LAYER_CHECK(kv.dtype == q.dtype && kv.layout == Layout::kRowMajor, k, name,
                    "input kv_in must be row-major in q_in's dtype, got ", kv.to_string());
    TBD_LAYER_CHECK(kv.shape[0] == d.N && kv.shape[2] == d.D, k, name, "input kv_in ",
                    kv.shape.to_string(), " must have N=", d.N, " and D=", d.D, " like q_in ",
                    q.shape.to_string());
    d.Tk = kv.shape[1];
  }
  if (c.padding_mask) {
    const TensorDesc& len = in.back();
    check_rank(k, name, "kv_lengths", len, 1, "(N)");
    TBD_LAYER_CHECK(len.dtype == DType::kI32, k, name, "input kv_lengths must be i32, got ",
                    len.to_string());
    TBD_LAYER_CHECK(len.shape[0] == d.N, k, name, "input kv_lengths ", len.shape.to_string(),
                    " must have N=", d.N, " like q_in ", q.shape.to_string());
  }
  return d;
}

Flops attention_flops(const MultiHeadAttentionConfig& c, const AttentionDims& d,
                      bool dropout_active) {
  const double D = static_cast<double>(d.D);
  const double mq = static_cast<double>(d.N) * d.Tq, mk = static_cast<double>(d.N) * d.Tk;
  const double e = static_cast<double>(d.N) * d.h * d.Tq * d.Tk;
  const double e_dh = e * d.dh;
  const double proj = 4 * mq * D * D + 4 * mk * D * D;
  Flops f;
  f.fprop = proj + 4 * e_dh + 6 * e;
  f.dgrad = proj + 8 * e_dh + 5 * e + (c.cross ? mk * D : 2 * mq * D);
  f.wgrad = proj + 4 * D * D;
  if (dropout_active) {
    f.fprop += 2 * e;
    f.dgrad += e;
  }
  if (c.bias) {
    f.fprop += 2 * (mq + mk) * D;
    f.wgrad += 2 * (mq + mk) * D;
  }
  return f;
}

Bytes attention_bytes(const MultiHeadAttentionConfig& c, const AttentionDims& d,
                      bool dropout_active, DType t) {
  const double D = static_cast<double>(d.D);
  const double q = static_cast<double>(d.N) * d.Tq * D;   // one (N, Tq, D) tensor
  const double kv = static_cast<double>(d.N) * d.Tk * D;  // one (N, Tk, D) tensor
  const double e = static_cast<double>(d.N) * d.h * d.Tq * d.Tk;
  const double weights = 4 * D * D, params = weights + (c.bias ? 4 * D : 0.0);
  const double kv_in = c.cross ? kv : 0.0;
  constexpr double kMaskBytesPerScore = 1;
  const double mask = dropout_active ? kMaskBytesPerScore * e : 0.0;
  Bytes b;
  // q_in, kv_in, parameters; y, Q, K, V, P, O.
  // Under bf16 (t) every tensor is 2 bytes but the biases (and the gradients of the parameters).
  const double biases = params - weights;
  b.fprop = bytes_of(q + kv_in + weights + q + q + 2 * kv + e + q, t) + bytes_of(biases) + mask;
  if (c.padding_mask) b.fprop += bytes_of(static_cast<double>(d.N), DType::kI32);
  // dy, weights, Q, K, V, P; dq_in, dkv_in, dQ, dK, dV.
  b.dgrad = bytes_of(q + weights + q + 2 * kv + e + q + kv_in + q + 2 * kv, t) + mask;
  // dy, O, dQ, dK, dV, q_in, kv_in; read and write the parameter gradients.
  b.wgrad = bytes_of(q + q + q + 2 * kv + q + kv_in, t) + bytes_of(2 * params);
  return b;
}

template <>
Contract contract(const std::string& name, const MultiHeadAttentionConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const AttentionDims d = attention_dims(name, cfg, in);
  Contract c;
  c.outputs = {TensorDesc{attention_output_shape(d), in[0].dtype}};
  for (const char* w : {"wq", "wk", "wv", "wo"}) {
    c.params.push_back({w, Shape{d.D, d.D}, cfg.weight_init, d.D, d.D, true});
  }
  if (cfg.bias) {
    for (const char* b : {"bq", "bk", "bv", "bo"}) {
      c.params.push_back({b, Shape{d.D}, Init::kZeros, d.D, d.D, false});
    }
  }
  c.flops = attention_flops(cfg, d, cfg.dropout > 0);
  c.bytes = attention_bytes(cfg, d, cfg.dropout > 0, in[0].dtype);
  // Backward reads the inputs (and the probabilities and projections the layer keeps), not y.
  c.saved_inputs.assign(in.size(), true);
  c.saved_outputs = {false};
  return c;
}

std::string describe_problem(const MultiHeadAttentionConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat(
      "q ", in[0].shape.to_string(), cfg.cross ? " kv " + in[1].shape.to_string() : std::string(),
      " heads=", cfg.num_heads, cfg.causal ? " causal" : "", cfg.padding_mask ? " padded" : "",
      cfg.dropout > 0 ? detail::concat(" dropout=", cfg.dropout) : "");
}

}  // namespace tbd
