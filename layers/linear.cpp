// layers/linear.cpp: shape inference, FLOP and byte counts of Linear and Gemm (shared by all
// backends).
#include "layers/linear.h"

namespace tbd {

Shape linear_output_shape(const std::string& name, const LinearConfig& cfg, const Shape& x) {
  const char* k = LinearConfig::kKind;
  TBD_LAYER_CHECK(x.rank() >= 2, k, name, "input x must have rank >= 2 (..., D_in), got ",
                  x.to_string());
  check_positive(k, name, "x", x);
  TBD_LAYER_CHECK(cfg.out_features > 0, k, name, "invalid config: out_features=", cfg.out_features,
                  " (x ", x.to_string(), ")");
  std::vector<int64_t> dims = x.dims();
  dims.back() = cfg.out_features;
  return Shape(std::move(dims));
}

Flops linear_flops(const LinearConfig& cfg, const Shape& x) {
  double m = static_cast<double>(x.numel() / x[-1]);
  double mac = m * static_cast<double>(x[-1]) * static_cast<double>(cfg.out_features);
  double bias = cfg.bias ? m * static_cast<double>(cfg.out_features) : 0.0;
  return Flops{2 * mac + bias, 2 * mac, 2 * mac + bias};
}

Bytes linear_bytes(const LinearConfig& cfg, const Shape& x, DType t) {
  const double m = static_cast<double>(x.numel() / x[-1]);
  const double din = static_cast<double>(x[-1]), dout = static_cast<double>(cfg.out_features);
  const double xe = m * din, ye = m * dout, we = dout * din, be = cfg.bias ? dout : 0.0;
  return Bytes{bytes_of(xe + we + ye, t) + bytes_of(be), bytes_of(ye + we + xe, t),
               bytes_of(xe + ye, t) + bytes_of(2 * (we + be))};
}

Shape gemm_output_shape(const std::string& name, const GemmConfig& cfg, const Shape& a,
                        const Shape& b, GemmDims* dims) {
  const char* k = GemmConfig::kKind;
  TBD_LAYER_CHECK(a.rank() >= 2, k, name, "input a must have rank >= 2 (B..., ",
                  cfg.trans_a ? "K, M" : "M, K", "), got ", a.to_string());
  TBD_LAYER_CHECK(b.rank() >= 2, k, name, "input b must have rank >= 2 (B..., ",
                  cfg.trans_b ? "N, K" : "K, N", "), got ", b.to_string());
  check_positive(k, name, "a", a);
  check_positive(k, name, "b", b);
  TBD_LAYER_CHECK(b.rank() == 2 || b.rank() == a.rank(), k, name,
                  "input b must have rank 2 (shared) or a's rank ", a.rank(), ", got a ",
                  a.to_string(), " b ", b.to_string());
  GemmDims d;
  d.m = cfg.trans_a ? a[-1] : a[-2];
  int64_t ka = cfg.trans_a ? a[-2] : a[-1];
  int64_t kb = cfg.trans_b ? b[-1] : b[-2];
  d.n = cfg.trans_b ? b[-2] : b[-1];
  d.k = ka;
  TBD_LAYER_CHECK(ka == kb, k, name, "inner dims differ: op(a) is (", d.m, ", ", ka,
                  ") and op(b) is (", kb, ", ", d.n, ") (a ", a.to_string(),
                  cfg.trans_a ? " transposed" : "", ", b ", b.to_string(),
                  cfg.trans_b ? " transposed" : "", ")");
  std::vector<int64_t> y(a.dims().begin(), a.dims().end() - 2);
  for (int i = 0; i + 2 < a.rank(); ++i) {
    d.batch *= a[i];
    TBD_LAYER_CHECK(b.rank() == 2 || b[i] == a[i], k, name, "batch dims differ: a ", a.to_string(),
                    " b ", b.to_string());
  }
  d.b_shared = b.rank() == 2 && a.rank() > 2;
  y.push_back(d.m);
  y.push_back(d.n);
  if (dims) *dims = d;
  return Shape(std::move(y));
}

Flops gemm_flops(const GemmConfig& cfg, const GemmDims& d) {
  double bmn = static_cast<double>(d.batch) * d.m * d.n;
  double mac = bmn * d.k;
  double bias = cfg.bias ? bmn : 0.0;
  return Flops{2 * mac + bias, 4 * mac, bias};
}

Bytes gemm_bytes(const GemmConfig& cfg, const GemmDims& d, DType t) {
  const double batch = static_cast<double>(d.batch);
  const double a = batch * static_cast<double>(d.m * d.k);
  const double b = (d.b_shared ? 1.0 : batch) * static_cast<double>(d.k * d.n);
  const double y = batch * static_cast<double>(d.m * d.n);
  const double bias = cfg.bias ? static_cast<double>(d.n) : 0.0;
  return Bytes{bytes_of(a + b + y, t) + bytes_of(bias), bytes_of(y + 2 * a + 2 * b, t),
               cfg.bias ? bytes_of(y, t) + bytes_of(2 * bias) : 0.0};
}

template <>
Contract contract(const std::string& name, const LinearConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(LinearConfig::kKind, name, in, 1);
  const Shape ys = linear_output_shape(name, cfg, in[0].shape);
  check_floating(LinearConfig::kKind, name, "x", in[0]);
  const int64_t K = in[0].shape[-1], N = cfg.out_features;
  Contract c{{TensorDesc{ys, in[0].dtype}},  // y in x's dtype (bf16: f32 accumulation)
             {{"weight", Shape{N, K}, cfg.init, K, N, true}},
             linear_flops(cfg, in[0].shape),
             linear_bytes(cfg, in[0].shape, in[0].dtype)};
  if (cfg.bias) c.params.push_back({"bias", Shape{N}, Init::kZeros, K, N, false});
  c.saved_inputs = {true};  // x for the weight gradient; y is not read
  c.saved_outputs = {false};
  return c;
}

std::string describe_problem(const LinearConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].shape.to_string(), " out=", cfg.out_features,
                        cfg.bias ? " +bias" : "");
}

template <>
Contract contract(const std::string& name, const GemmConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(GemmConfig::kKind, name, in, 2);
  GemmDims d;
  const Shape ys = gemm_output_shape(name, cfg, in[0].shape, in[1].shape, &d);
  check_floating(GemmConfig::kKind, name, "a", in[0]);
  check_floating(GemmConfig::kKind, name, "b", in[1]);
  TBD_LAYER_CHECK(in[0].dtype == in[1].dtype, GemmConfig::kKind, name, "a ", in[0].to_string(),
                  " and b ", in[1].to_string(), " differ in dtype");
  Contract c{
      {TensorDesc{ys, in[0].dtype}}, {}, gemm_flops(cfg, d), gemm_bytes(cfg, d, in[0].dtype)};
  if (cfg.bias) c.params.push_back({"bias", Shape{d.n}, Init::kZeros, d.k, d.n, false});
  c.saved_inputs = {true, true};  // each operand for the other's gradient; y is not read
  c.saved_outputs = {false};
  return c;
}

std::string describe_problem(const GemmConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("a ", in[0].shape.to_string(), cfg.trans_a ? "^T" : "", " b ",
                        in[1].shape.to_string(), cfg.trans_b ? "^T" : "",
                        cfg.alpha != 1.0 ? detail::concat(" alpha=", cfg.alpha) : "",
                        cfg.bias ? " +bias" : "");
}

}  // namespace tbd
