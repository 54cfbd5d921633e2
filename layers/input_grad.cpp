// layers/input_grad.cpp: contracts of the input-gradient kinds (shared by all backends).
#include "layers/input_grad.h"

namespace tbd {
namespace {

void check_row_major_f32(const char* kind, const std::string& name, const char* arg,
                         const TensorDesc& d) {
  check_f32(kind, name, arg, d);
  TBD_LAYER_CHECK(d.layout == Layout::kRowMajor, kind, name, "input ", arg,
                  " must be row-major, got ", d.to_string());
}

// The products' kinds also take bf16 (layers/precision.h): their output is in dy's dtype.
void check_row_major_floating(const char* kind, const std::string& name, const char* arg,
                              const TensorDesc& d) {
  check_floating(kind, name, arg, d);
  TBD_LAYER_CHECK(d.layout == Layout::kRowMajor, kind, name, "input ", arg,
                  " must be row-major, got ", d.to_string());
}

}  // namespace

// LinearDgrad, M = rows of dy, O = out, I = in:
//   FLOPs fprop 2*M*O*I (dx = dy W), dgrad 2*M*O*I (v W^T), wgrad 2*M*O*I (dy^T v).
//   Bytes fprop 4*(M*O + O*I + M*I); dgrad 4*(M*I + O*I + M*O); wgrad
//   4*(M*O + M*I + 2*O*I).
template <>
Contract contract(const std::string& name, const LinearDgradConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = LinearDgradConfig::kKind;
  check_input_count(k, name, in, 1);
  check_row_major_floating(k, name, "dy", in[0]);
  const Shape& dy = in[0].shape;
  TBD_LAYER_CHECK(dy.rank() >= 1, k, name, "input dy must have rank >= 1, got ", dy.to_string());
  check_positive(k, name, "dy", dy);
  TBD_LAYER_CHECK(cfg.in_features > 0, k, name, "invalid config: in_features=", cfg.in_features);
  const int64_t O = dy[-1], I = cfg.in_features;
  std::vector<int64_t> xs(dy.dims().begin(), dy.dims().end());
  xs.back() = I;
  const double m = static_cast<double>(dy.numel() / O), o = static_cast<double>(O),
               i = static_cast<double>(I);
  const double mac = m * o * i;
  const DType t = in[0].dtype;  // under bf16 dy, dx, v and the weights' copy are 2 bytes
  return Contract{{TensorDesc{Shape(std::move(xs)), in[0].dtype}},
                  {{"weight", Shape{O, I}, Init::kXavierUniform, I, O, true}},
                  Flops{2 * mac, 2 * mac, 2 * mac},
                  Bytes{bytes_of(m * o + o * i + m * i, t), bytes_of(m * i + o * i + m * o, t),
                        bytes_of(m * o + m * i, t) + bytes_of(2 * o * i)}};
}

std::string describe_problem(const LinearDgradConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("dy ", in[0].shape.to_string(), " W (", in[0].shape[-1], ", ",
                        cfg.in_features, ")");
}

// Conv2dDgrad: the forward conv's figures with x = dx (N, C, H, W), y = dy, no bias: its dgrad
// becomes fprop, its fprop dgrad, its wgrad stays.
template <>
Contract contract(const std::string& name, const Conv2dDgradConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = Conv2dDgradConfig::kKind;
  check_input_count(k, name, in, 1);
  check_row_major_floating(k, name, "dy", in[0]);
  const Shape& dy = in[0].shape;
  TBD_LAYER_CHECK(dy.rank() == 4, k, name, "input dy must have rank 4 (N, K, P, Q), got ",
                  dy.to_string());
  Conv2dConfig conv = cfg.conv;
  conv.bias = false;  // the bias does not enter the input gradient
  const Shape xs{dy[0], cfg.in_channels, cfg.in_h, cfg.in_w};
  const Shape ys = conv2d_output_shape(name, conv, xs);
  TBD_LAYER_CHECK(ys == dy, k, name, "input dy ", dy.to_string(), " is not the output of the ",
                  conv.kernel_h, "x", conv.kernel_w, " convolution of x ", xs.to_string(),
                  " (that is ", ys.to_string(), ")");
  const Flops f = conv2d_flops(conv, xs, ys);
  const Bytes b = conv2d_bytes(conv, xs, ys, in[0].dtype);
  const int64_t C = xs[1], K = conv.out_channels, G = conv.groups;
  return Contract{
      {TensorDesc{xs, in[0].dtype}},
      {{"weight", Shape{K, C / G, conv.kernel_h, conv.kernel_w}, Init::kHeNormal,
        (C / G) * conv.kernel_h * conv.kernel_w, (K / G) * conv.kernel_h * conv.kernel_w, true}},
      Flops{f.dgrad, f.fprop, f.wgrad},
      Bytes{b.dgrad, b.fprop, b.wgrad}};
}

std::string describe_problem(const Conv2dDgradConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c) {
  return detail::concat("dy ", in[0].shape.to_string(), " -> dx ", c.outputs[0].shape.to_string(),
                        " ", cfg.conv.kernel_h, "x", cfg.conv.kernel_w, " s", cfg.conv.stride_h,
                        " p", cfg.conv.pad_h);
}

// ActivationDgrad, E elements: FLOPs fprop and dgrad E (ReLU: a select) or 2E (leaky: a
// compare and a multiply); bytes fprop 4*3E (read dy, x; write dx), dgrad 4*3E (read v, x;
// write d(dy)).
template <>
Contract contract(const std::string& name, const ActivationDgradConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = ActivationDgradConfig::kKind;
  check_input_count(k, name, in, 2);
  check_row_major_f32(k, name, "dy", in[0]);
  check_row_major_f32(k, name, "x", in[1]);
  TBD_LAYER_CHECK(in[0].shape == in[1].shape, k, name, "dy ", in[0].shape.to_string(), " and x ",
                  in[1].shape.to_string(), " must have the same shape");
  TBD_LAYER_CHECK(cfg.act.act == ActKind::kRelu || cfg.act.act == ActKind::kLeakyRelu, k, name,
                  "double backward of ", to_string(cfg.act.act),
                  " is not supported: only relu and leaky_relu, whose derivative is piecewise "
                  "constant");
  const double e = static_cast<double>(in[0].shape.numel());
  const double per = cfg.act.act == ActKind::kRelu ? 1.0 : 2.0;
  Contract c{{TensorDesc{in[0].shape}},
             {},
             Flops{per * e, per * e, 0},
             Bytes{bytes_of(3 * e), bytes_of(3 * e), 0}};
  c.input_grads = {true, false};
  return c;
}

std::string describe_problem(const ActivationDgradConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat(to_string(cfg.act.act), "' x ", in[1].shape.to_string());
}

Shape pool2d_dgrad_input_shape(const Pool2dDgradConfig& cfg, const Shape& dy) {
  return Shape{dy[0], dy[1], cfg.in_h, cfg.in_w};
}

// Pool2dDgrad (average): the forward pooling's figures with fprop and dgrad swapped.
template <>
Contract contract(const std::string& name, const Pool2dDgradConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = Pool2dDgradConfig::kKind;
  check_input_count(k, name, in, 1);
  check_row_major_f32(k, name, "dy", in[0]);
  const Shape& dy = in[0].shape;
  TBD_LAYER_CHECK(dy.rank() == 4, k, name, "input dy must have rank 4 (N, C, P, Q), got ",
                  dy.to_string());
  TBD_LAYER_CHECK(cfg.pool.pool == PoolKind::kAvg, k, name,
                  "double backward of max pooling is not supported (average pooling only)");
  const Shape xs = pool2d_dgrad_input_shape(cfg, dy);
  const Shape ys = pool2d_output_shape(name, cfg.pool, TensorDesc{xs});
  TBD_LAYER_CHECK(ys == dy, k, name, "input dy ", dy.to_string(),
                  " is not the output of the pooling of x ", xs.to_string(), " (that is ",
                  ys.to_string(), ")");
  const Flops f = pool2d_flops(cfg.pool, xs, ys);
  const Bytes b = pool2d_bytes(cfg.pool, xs, ys, in[0].dtype);
  return Contract{{TensorDesc{xs}}, {}, Flops{f.dgrad, f.fprop, 0}, Bytes{b.dgrad, b.fprop, 0}};
}

std::string describe_problem(const Pool2dDgradConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat(to_string(cfg.pool.pool), " ", cfg.pool.kernel_h, "x", cfg.pool.kernel_w,
                        " s", cfg.pool.stride_h, " dy ", in[0].shape.to_string());
}

// LayerNormDgrad, E = M*D, P gamma entries (D, or C over (C, H, W)): FLOPs fprop 10E (g, xh,
// two row means, dx), dgrad 30E (P(v), the row means of v*g, v*xh, and the five-term d(x)),
// wgrad 2E (dg * dy summed per gamma entry). Bytes fprop 4*(3E + P) (read dy, x, gamma; write
// dx), dgrad 4*(5E + P) (read v, dy, x, gamma; write d(dy) and d(x)), wgrad 4*(3E + 2P) (read
// v, dy, x; read and write d(gamma)). The row statistics are recomputed from x (2 more passes
// over E floats in cache).
template <>
Contract contract(const std::string& name, const LayerNormDgradConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = LayerNormDgradConfig::kKind;
  check_input_count(k, name, in, 2);
  check_row_major_f32(k, name, "dy", in[0]);
  check_row_major_f32(k, name, "x", in[1]);
  TBD_LAYER_CHECK(in[0].shape == in[1].shape, k, name, "dy ", in[0].shape.to_string(), " and x ",
                  in[1].shape.to_string(), " must have the same shape");
  const Shape xs = layer_norm_output_shape(name, cfg.ln, in[1].shape);
  const int64_t P = layer_norm_rows(cfg.ln, xs).P;
  const double e = static_cast<double>(xs.numel()), p = static_cast<double>(P);
  return Contract{{TensorDesc{xs}},
                  {{"gamma", Shape{P}, Init::kOnes, P, P, false}},
                  Flops{10 * e, 30 * e, 2 * e},
                  Bytes{bytes_of(3 * e + p), bytes_of(5 * e + p), bytes_of(3 * e + 2 * p)}};
}

std::string describe_problem(const LayerNormDgradConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[1].shape.to_string(), " over ", to_string(cfg.ln.over));
}

}  // namespace tbd
