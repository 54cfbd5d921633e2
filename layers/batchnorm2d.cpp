// layers/batchnorm2d.cpp: shape checks, FLOP and byte counts of BatchNorm2d (shared by all
// backends).
#include "layers/batchnorm2d.h"

namespace tbd {

Shape batchnorm2d_output_shape(const std::string& name, const BatchNorm2dConfig& cfg,
                               const TensorDesc& x) {
  const char* k = BatchNorm2dConfig::kKind;
  check_rank(k, name, "x", x, 4, "(N, C, H, W)");
  TBD_LAYER_CHECK(x.dtype == DType::kF32, k, name, "input x must be f32, got ", to_string(x.dtype),
                  " ", x.shape.to_string());
  TBD_LAYER_CHECK(x.layout == Layout::kRowMajor || x.shape[1] % 16 == 0, k, name,
                  "input x in nChw16c needs C % 16 == 0, got ", x.shape.to_string());
  TBD_LAYER_CHECK(cfg.eps > 0 && cfg.momentum >= 0 && cfg.momentum <= 1, k, name,
                  "invalid config: eps=", cfg.eps, " (must be > 0), momentum=", cfg.momentum,
                  " (must be in [0, 1])");
  return x.shape;
}

Flops batchnorm2d_flops(const Shape& x) {
  double e = static_cast<double>(x.numel());
  return Flops{8 * e, 10 * e, 4 * e};
}

Bytes batchnorm2d_bytes(const Shape& x) {
  const double e = static_cast<double>(x.numel()), c = static_cast<double>(x[1]);
  return Bytes{bytes_of(2 * e + 8 * c), bytes_of(3 * e + 3 * c), bytes_of(2 * e + 6 * c)};
}

template <>
Contract contract(const std::string& name, const BatchNorm2dConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(BatchNorm2dConfig::kKind, name, in, 1);
  batchnorm2d_output_shape(name, cfg, in[0]);
  const Shape& xs = in[0].shape;
  const int64_t C = xs[1];
  return Contract{{in[0]},
                  {{"weight", Shape{C}, Init::kOnes, C, C, false},
                   {"bias", Shape{C}, Init::kZeros, C, C, false}},
                  batchnorm2d_flops(xs),
                  batchnorm2d_bytes(xs)};
}

}  // namespace tbd
