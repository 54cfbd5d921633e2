// layers/conv2d.cpp: shape inference, FLOP and byte counts of Conv2d (shared by all backends).
#include "layers/conv2d.h"

namespace tbd {

Shape conv2d_output_shape(const std::string& name, const Conv2dConfig& c, const Shape& x) {
  const char* k = Conv2dConfig::kKind;
  TBD_LAYER_CHECK(x.rank() == 4, k, name, "input x must have rank 4 (N, C, H, W), got ",
                  x.to_string());
  check_positive(k, name, "x", x);
  TBD_LAYER_CHECK(c.out_channels > 0 && c.kernel_h > 0 && c.kernel_w > 0 && c.stride_h > 0 &&
                      c.stride_w > 0 && c.pad_h >= 0 && c.pad_w >= 0 && c.dilation_h > 0 &&
                      c.dilation_w > 0 && c.groups > 0,
                  k, name, "invalid config: K=", c.out_channels, " kernel ", c.kernel_h, "x",
                  c.kernel_w, " stride ", c.stride_h, "x", c.stride_w, " pad ", c.pad_h, "x",
                  c.pad_w, " dilation ", c.dilation_h, "x", c.dilation_w, " groups ", c.groups);
  TBD_LAYER_CHECK(x[1] % c.groups == 0 && c.out_channels % c.groups == 0, k, name,
                  "channels C=", x[1], " and K=", c.out_channels,
                  " must divide by groups=", c.groups, " (x ", x.to_string(), ")");
  int64_t eff_r = c.dilation_h * (c.kernel_h - 1) + 1;
  int64_t eff_s = c.dilation_w * (c.kernel_w - 1) + 1;
  int64_t p = (x[2] + 2 * c.pad_h - eff_r) / c.stride_h + 1;
  int64_t q = (x[3] + 2 * c.pad_w - eff_s) / c.stride_w + 1;
  TBD_LAYER_CHECK(x[2] + 2 * c.pad_h >= eff_r && x[3] + 2 * c.pad_w >= eff_s, k, name, "input x ",
                  x.to_string(), " is smaller than the ", eff_r, "x", eff_s,
                  " (dilated) kernel with padding ", c.pad_h, "x", c.pad_w);
  return Shape{x[0], c.out_channels, p, q};
}

Flops conv2d_flops(const Conv2dConfig& c, const Shape& x, const Shape& y) {
  double mac =
      static_cast<double>(y[0]) * y[1] * (x[1] / c.groups) * c.kernel_h * c.kernel_w * y[2] * y[3];
  double bias = c.bias ? static_cast<double>(y.numel()) : 0.0;
  return Flops{2 * mac + bias, 2 * mac, 2 * mac + bias};
}

Bytes conv2d_bytes(const Conv2dConfig& c, const Shape& x, const Shape& y, DType t) {
  const double xe = static_cast<double>(x.numel()), ye = static_cast<double>(y.numel());
  const double we = static_cast<double>(c.out_channels) * static_cast<double>(x[1] / c.groups) *
                    static_cast<double>(c.kernel_h * c.kernel_w);
  const double be = c.bias ? static_cast<double>(c.out_channels) : 0.0;
  return Bytes{bytes_of(xe + we + ye, t) + bytes_of(be), bytes_of(ye + we + xe, t),
               bytes_of(xe + ye, t) + bytes_of(2 * (we + be))};
}

template <>
Contract contract(const std::string& name, const Conv2dConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(Conv2dConfig::kKind, name, in, 1);
  check_floating(Conv2dConfig::kKind, name, "x", in[0]);
  const Shape& xs = in[0].shape;
  const Shape ys = conv2d_output_shape(name, cfg, xs);
  const int64_t C = xs[1], K = cfg.out_channels, G = cfg.groups;
  const int64_t fan_in = (C / G) * cfg.kernel_h * cfg.kernel_w;
  const int64_t fan_out = (K / G) * cfg.kernel_h * cfg.kernel_w;
  // y in x's dtype: bf16 under --tbd_math=bf16 (computed with f32 accumulation).
  Contract c{{TensorDesc{ys, in[0].dtype}},
             {},
             conv2d_flops(cfg, xs, ys),
             conv2d_bytes(cfg, xs, ys, in[0].dtype)};
  c.saved_inputs = {true};  // x for the weight gradient; y is not read
  c.saved_outputs = {false};
  c.params.push_back({"weight", Shape{K, C / G, cfg.kernel_h, cfg.kernel_w}, Init::kHeNormal,
                      fan_in, fan_out, true});
  if (cfg.bias) c.params.push_back({"bias", Shape{K}, Init::kZeros, fan_in, fan_out, false});
  return c;
}

std::string describe_problem(const Conv2dConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].shape.to_string(), " K=", cfg.out_channels, " ", cfg.kernel_h,
                        "x", cfg.kernel_w, " s", cfg.stride_h, " p", cfg.pad_h,
                        cfg.dilation_h > 1 ? detail::concat(" d", cfg.dilation_h) : "",
                        cfg.groups > 1 ? detail::concat(" g", cfg.groups) : "",
                        cfg.bias ? " +bias" : "");
}

}  // namespace tbd
