// layers/mlp_attention.cpp: input checks, FLOP and byte counts of MlpAttention (all backends).
#include "layers/mlp_attention.h"

namespace tbd {

MlpAttentionDims mlp_attention_dims(const std::string& name, const std::vector<TensorDesc>& in) {
  const char* k = MlpAttentionConfig::kKind;
  check_input_count(k, name, in, 4, "inputs (query, keys, memory, lengths)");
  const char* args[] = {"query", "keys", "memory"};
  const int ranks[] = {2, 3, 3};
  const char* docs[] = {"(N, A)", "(N, S, A)", "(N, S, D)"};
  for (int i = 0; i < 3; ++i) {
    check_rank(k, name, args[i], in[i], ranks[i], docs[i]);
    check_positive(k, name, args[i], in[i].shape);
    check_f32(k, name, args[i], in[i]);
    TBD_LAYER_CHECK(in[i].layout == Layout::kRowMajor, k, name, "input ", args[i],
                    " must be row-major, got ", in[i].to_string());
  }
  const Shape &q = in[0].shape, &keys = in[1].shape, &mem = in[2].shape;
  MlpAttentionDims d{q[0], keys[1], q[1], mem[2]};
  TBD_LAYER_CHECK(keys[0] == d.N && keys[2] == d.A, k, name, "input keys ", keys.to_string(),
                  " must be (N, S, A) with N=", d.N, " and A=", d.A, " like query ", q.to_string());
  TBD_LAYER_CHECK(mem[0] == d.N && mem[1] == d.S, k, name, "input memory ", mem.to_string(),
                  " must be (N, S, D) with N=", d.N, " and S=", d.S, " like keys ",
                  keys.to_string());
  TBD_LAYER_CHECK(in[3].dtype == DType::kI32 && in[3].shape == Shape{d.N}, k, name,
                  "input lengths must be (", d.N, ") i32, got ", in[3].to_string());
  return d;
}

Flops mlp_attention_flops(const MlpAttentionDims& d) {
  const double e = static_cast<double>(d.N * d.S * d.A), p = static_cast<double>(d.N * d.S);
  const double m = static_cast<double>(d.N * d.S * d.D);
  return Flops{7 * e + 5 * p + 2 * m, 3 * m + 4 * p + 5 * e, 2 * e};
}

Bytes mlp_attention_bytes(const MlpAttentionDims& d) {
  const double e = static_cast<double>(d.N * d.S * d.A), p = static_cast<double>(d.N * d.S);
  const double m = static_cast<double>(d.N * d.S * d.D);
  const double na = static_cast<double>(d.N * d.A), nd = static_cast<double>(d.N * d.D);
  const double a = static_cast<double>(d.A), n = static_cast<double>(d.N);
  return Bytes{bytes_of(na + e + m + a + n + nd + e + p),
               bytes_of(nd + m + p + e + a + n + m + e + na), bytes_of(e + p + 2 * a)};
}

template <>
Contract contract(const std::string& name, const MlpAttentionConfig&,
                  const std::vector<TensorDesc>& in) {
  const MlpAttentionDims d = mlp_attention_dims(name, in);
  Contract c{{TensorDesc{Shape{d.N, d.D}}},
             {{"v", Shape{d.A}, Init::kXavierUniform, d.A, 1, true}},
             mlp_attention_flops(d),
             mlp_attention_bytes(d)};
  c.input_grads = {true, true, true, false};
  // Backward reads the memory and the lengths (and the tanh and weights the layer keeps), not
  // the query or the keys, nor y.
  c.saved_inputs = {false, false, true, true};
  c.saved_outputs = {false};
  return c;
}

std::string describe_problem(const MlpAttentionConfig&, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("keys ", in[1].shape.to_string(), " memory ", in[2].shape.to_string());
}

}  // namespace tbd
