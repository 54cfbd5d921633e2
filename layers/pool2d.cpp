// layers/pool2d.cpp: shape inference, FLOP and byte counts of Pool2d and GlobalAvgPool2d.
#include "layers/pool2d.h"

namespace tbd {

const char* to_string(PoolKind k) { return k == PoolKind::kMax ? "max" : "avg"; }

static void check_pool_input(const char* k, const std::string& name, const TensorDesc& x) {
  check_rank(k, name, "x", x, 4, "(N, C, H, W)");
  TBD_LAYER_CHECK(is_floating(x.dtype), k, name, "input x must be f32 or bf16, got ",
                  to_string(x.dtype), " ", x.shape.to_string());
  TBD_LAYER_CHECK(x.layout != Layout::kNChw16c || x.shape[1] % 16 == 0, k, name,
                  "input x in nChw16c needs C % 16 == 0, got ", x.shape.to_string());
}

Shape pool2d_output_shape(const std::string& name, const Pool2dConfig& c, const TensorDesc& x) {
  const char* k = Pool2dConfig::kKind;
  check_pool_input(k, name, x);
  TBD_LAYER_CHECK(c.kernel_h > 0 && c.kernel_w > 0 && c.stride_h > 0 && c.stride_w > 0 &&
                      c.pad_h >= 0 && c.pad_w >= 0 && c.pad_h < c.kernel_h && c.pad_w < c.kernel_w,
                  k, name, "invalid config: kernel ", c.kernel_h, "x", c.kernel_w, " stride ",
                  c.stride_h, "x", c.stride_w, " pad ", c.pad_h, "x", c.pad_w,
                  " (kernel and stride > 0, 0 <= pad < kernel)");
  const Shape& s = x.shape;
  TBD_LAYER_CHECK(s[2] + 2 * c.pad_h >= c.kernel_h && s[3] + 2 * c.pad_w >= c.kernel_w, k, name,
                  "input x ", s.to_string(), " is smaller than the ", c.kernel_h, "x", c.kernel_w,
                  " kernel with padding ", c.pad_h, "x", c.pad_w);
  int64_t p = (s[2] + 2 * c.pad_h - c.kernel_h) / c.stride_h + 1;
  int64_t q = (s[3] + 2 * c.pad_w - c.kernel_w) / c.stride_w + 1;
  return Shape{s[0], s[1], p, q};
}

Flops pool2d_flops(const Pool2dConfig& c, const Shape& x, const Shape& y) {
  (void)x;
  double out = static_cast<double>(y.numel());
  double win = static_cast<double>(c.kernel_h * c.kernel_w);
  if (c.pool == PoolKind::kMax) return Flops{out * win, out, 0};
  return Flops{out * (win + 1), out * (win + 1), 0};
}

Bytes pool2d_bytes(const Pool2dConfig& c, const Shape& x, const Shape& y, DType t) {
  const double xe = static_cast<double>(x.numel()), ye = static_cast<double>(y.numel());
  const double bwd = c.pool == PoolKind::kMax ? ye + 2 * xe : ye + xe;
  return Bytes{bytes_of(xe + ye, t), bytes_of(bwd, t), 0};
}

Shape global_avg_pool2d_output_shape(const std::string& name, const TensorDesc& x) {
  check_pool_input(GlobalAvgPool2dConfig::kKind, name, x);
  return Shape{x.shape[0], x.shape[1]};
}

Flops global_avg_pool2d_flops(const Shape& x) {
  double e = static_cast<double>(x.numel());
  return Flops{e, e, 0};
}

Bytes global_avg_pool2d_bytes(const Shape& x, DType t) {
  const double xe = static_cast<double>(x.numel()), ye = static_cast<double>(x[0] * x[1]);
  return Bytes{bytes_of(xe + ye, t), bytes_of(ye + xe, t), 0};
}

template <>
Contract contract(const std::string& name, const Pool2dConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(Pool2dConfig::kKind, name, in, 1);
  const Shape& xs = in[0].shape;
  const Shape ys = pool2d_output_shape(name, cfg, in[0]);
  // Saves x and y (the default): cuDNN's pooling backward reads both, where oneDNN's reads
  // neither (its max pooling keeps the argmax in a workspace of its own).
  return Contract{{TensorDesc{ys, in[0].dtype, in[0].layout}},
                  {},
                  pool2d_flops(cfg, xs, ys),
                  pool2d_bytes(cfg, xs, ys, in[0].dtype)};
}

std::string describe_problem(const Pool2dConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat(to_string(cfg.pool), " x ", in[0].shape.to_string(), " ", cfg.kernel_h, "x",
                        cfg.kernel_w, " s", cfg.stride_h, " p", cfg.pad_h);
}

template <>
Contract contract(const std::string& name, const GlobalAvgPool2dConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  (void)cfg;
  check_input_count(GlobalAvgPool2dConfig::kKind, name, in, 1);
  const Shape ys = global_avg_pool2d_output_shape(name, in[0]);
  Contract c{{TensorDesc{ys, in[0].dtype}},
             {},
             global_avg_pool2d_flops(in[0].shape),
             global_avg_pool2d_bytes(in[0].shape, in[0].dtype)};
  saves_nothing(c, in.size());  // dx = dy / HW everywhere
  return c;
}

std::string describe_problem(const GlobalAvgPool2dConfig&, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].shape.to_string());
}

}  // namespace tbd
