// layers/sdpa.cpp: input checks, FLOP and byte counts of ScaledDotProductAttention (all
// backends).
#include "layers/sdpa.h"

namespace tbd {

double SdpaDims::pairs(bool causal) const {
  const double t = static_cast<double>(T);
  return static_cast<double>(N) * static_cast<double>(Hq) * (causal ? t * (t + 1) / 2 : t * t);
}

SdpaDims sdpa_dims(const std::string& name, const ScaledDotProductAttentionConfig& c,
                   const std::vector<TensorDesc>& in) {
  const char* k = ScaledDotProductAttentionConfig::kKind;
  check_input_count(k, name, in, c.packed ? 1 : 3, c.packed ? "inputs (qkv)" : "inputs (q, k, v)");
  const int64_t hkv = c.num_kv_heads == 0 ? c.num_heads : c.num_kv_heads;
  TBD_LAYER_CHECK(c.num_heads > 0 && hkv > 0 && c.num_heads % hkv == 0, k, name,
                  "invalid config: num_heads=", c.num_heads, " num_kv_heads=", c.num_kv_heads,
                  " (both positive, num_heads a multiple of num_kv_heads)");
  static const char* kNames[] = {"q", "k", "v"};
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char* arg = c.packed ? "qkv" : kNames[i];
    check_rank(k, name, arg, in[i], 3, c.packed ? "(N, T, (Hq + 2 Hkv) d)" : "(N, T, H d)");
    check_positive(k, name, arg, in[i].shape);
    TBD_LAYER_CHECK(
        is_floating(in[i].dtype) && in[i].layout == Layout::kRowMajor && in[i].dtype == in[0].dtype,
        k, name, "input ", arg, " must be row-major f32 or bf16 like the first, got ",
        in[i].to_string());
  }
  SdpaDims d;
  d.N = in[0].shape[0];
  d.T = in[0].shape[1];
  d.Hq = c.num_heads;
  d.Hkv = hkv;
  if (c.packed) {
    const int64_t w = in[0].shape[2], heads = d.Hq + 2 * d.Hkv;
    TBD_LAYER_CHECK(w % heads == 0, k, name, "input qkv ", in[0].shape.to_string(), ": width ", w,
                    " must be divisible by Hq + 2 Hkv = ", heads);
    d.d = w / heads;
    d.ld_q = d.ld_kv = w;
    d.off_k = d.Hq * d.d;
    d.off_v = (d.Hq + d.Hkv) * d.d;
    return d;
  }
  TBD_LAYER_CHECK(in[0].shape[2] % d.Hq == 0, k, name, "input q ", in[0].shape.to_string(),
                  ": width must be divisible by num_heads=", d.Hq);
  d.d = in[0].shape[2] / d.Hq;
  for (int i = 1; i < 3; ++i) {
    TBD_LAYER_CHECK(in[i].shape == (Shape{d.N, d.T, d.Hkv * d.d}), k, name, "input ", kNames[i],
                    " ", in[i].shape.to_string(),
                    " must be (N, T, Hkv d) = ", Shape{d.N, d.T, d.Hkv * d.d}.to_string(),
                    " for q ", in[0].shape.to_string(), " with ", d.Hkv, " key/value heads");
  }
  d.ld_q = d.Hq * d.d;
  d.ld_kv = d.Hkv * d.d;
  return d;
}

Flops sdpa_flops(const ScaledDotProductAttentionConfig& c, const SdpaDims& d) {
  const double pairs = d.pairs(c.causal), dd = static_cast<double>(d.d);
  const double rows_d = static_cast<double>(d.N) * d.Hq * d.T * dd;  // N*Hq*T*d
  Flops f;
  f.fprop = 4 * pairs * dd + 4 * pairs + rows_d;
  f.dgrad = 10 * pairs * dd + 5 * pairs + 2 * rows_d;
  return f;
}

Bytes sdpa_bytes(const SdpaDims& d, DType t) {
  const double eq = static_cast<double>(d.N) * d.T * d.Hq * d.d;
  const double ekv = static_cast<double>(d.N) * d.T * d.Hkv * d.d;
  const double lse = bytes_of(static_cast<double>(d.N) * d.Hq * d.T);
  Bytes b;
  b.fprop = bytes_of(eq + 2 * ekv + eq, t) + lse;
  b.dgrad = bytes_of(eq + 2 * ekv + eq + eq + eq + 2 * ekv, t) + lse;
  return b;
}

template <>
Contract contract(const std::string& name, const ScaledDotProductAttentionConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const SdpaDims d = sdpa_dims(name, cfg, in);
  Contract c;
  c.outputs = {TensorDesc{Shape{d.N, d.T, d.Hq * d.d}, in[0].dtype}};
  c.flops = sdpa_flops(cfg, d);
  c.bytes = sdpa_bytes(d, in[0].dtype);
  c.saved_inputs.assign(in.size(), true);
  c.saved_outputs = {true};  // D = rowsum(do * o)
  return c;
}

std::string describe_problem(const ScaledDotProductAttentionConfig& cfg,
                             const std::vector<TensorDesc>& in, const Contract&) {
  const SdpaDims d = sdpa_dims("", cfg, in);
  return detail::concat(cfg.packed ? "qkv " : "q ", in[0].shape.to_string(), " heads=", d.Hq,
                        d.Hkv != d.Hq ? detail::concat(" kv_heads=", d.Hkv) : "", " d=", d.d,
                        cfg.causal ? " causal" : "");
}

}  // namespace tbd
