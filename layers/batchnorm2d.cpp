// layers/batchnorm2d.cpp: shape checks, FLOP and byte counts of BatchNorm2d (shared by all
// backends), and what every batch normalization kind shares: the config check, the contract
// and BatchNormLayer's running statistics.
#include "layers/batchnorm2d.h"

#include <utility>

namespace tbd {

Shape batchnorm2d_output_shape(const std::string& name, const BatchNorm2dConfig& cfg,
                               const TensorDesc& x) {
  const char* k = BatchNorm2dConfig::kKind;
  check_rank(k, name, "x", x, 4, "(N, C, H, W)");
  TBD_LAYER_CHECK(is_floating(x.dtype), k, name, "input x must be f32 or bf16, got ",
                  to_string(x.dtype), " ", x.shape.to_string());
  TBD_LAYER_CHECK(x.layout != Layout::kNChw16c || x.shape[1] % 16 == 0, k, name,
                  "input x in nChw16c needs C % 16 == 0, got ", x.shape.to_string());
  check_batchnorm_config(k, name, cfg.eps, cfg.momentum);
  return x.shape;
}

void check_batchnorm_config(const char* kind, const std::string& name, double eps,
                            double momentum) {
  TBD_LAYER_CHECK(eps > 0 && momentum >= 0 && momentum <= 1, kind, name,
                  "invalid config: eps=", eps, " (must be > 0), momentum=", momentum,
                  " (must be in [0, 1])");
}

Flops batchnorm2d_flops(const Shape& x, bool relu, bool frozen) {
  const double e = static_cast<double>(x.numel()), r = relu ? e : 0;
  if (frozen) return Flops{2 * e + r, e + r, 0};
  return Flops{8 * e + r, 10 * e + r, 4 * e};
}

Bytes batchnorm2d_bytes(const Shape& x, bool relu, bool frozen, DType t) {
  const double e = static_cast<double>(x.numel()), c = static_cast<double>(x[1]);
  if (frozen) {
    return Bytes{bytes_of(2 * e, t) + bytes_of(4 * c),
                 bytes_of(2 * e + (relu ? e : 0), t) + bytes_of(2 * c), 0};
  }
  const double mask = relu ? e : 0;  // one byte per element
  return Bytes{bytes_of(2 * e, t) + bytes_of(8 * c) + mask,
               bytes_of(3 * e, t) + bytes_of(3 * c) + mask, bytes_of(2 * e, t) + bytes_of(6 * c)};
}

BatchNormLayer::BatchNormLayer(Backend& be, std::string name, std::vector<TensorDesc> inputs,
                               const Contract& c)
    : Layer(be, std::move(name), std::move(inputs), c) {
  const Shape& channels = c.params.at(0).shape;
  running_mean_ = be.empty(channels, MemCategory::kDynamic);
  running_var_ = be.empty(channels, MemCategory::kDynamic);
  be.fill(running_mean_, 0.f);
  be.fill(running_var_, 1.f);
}

Contract batchnorm_contract(const TensorDesc& x, const Shape& nchw, bool relu, bool frozen) {
  const int64_t C = nchw[1];
  Contract c{{x},
             {{"weight", Shape{C}, Init::kOnes, C, C, false},
              {"bias", Shape{C}, Init::kZeros, C, C, false}},
             batchnorm2d_flops(nchw, relu, frozen),
             batchnorm2d_bytes(nchw, relu, frozen, x.dtype)};
  c.saved_inputs = {true};   // x (and the batch statistics the layer keeps)
  c.saved_outputs = {relu};  // with the ReLU fused, y masks the gradient
  return c;
}

BatchNormSpec batchnorm_spec(const std::string& name, const BatchNorm2dConfig& cfg,
                             const std::vector<TensorDesc>& in) {
  check_input_count(BatchNorm2dConfig::kKind, name, in, 1);
  return BatchNormSpec{BatchNorm2dConfig::kKind,
                       cfg.eps,
                       cfg.momentum,
                       batchnorm2d_output_shape(name, cfg, in[0]),
                       cfg.relu,
                       cfg.frozen};
}

template <>
Contract contract(const std::string& name, const BatchNorm2dConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const BatchNormSpec spec = batchnorm_spec(name, cfg, in);  // checks in first
  return batchnorm_contract(in[0], spec.nchw, spec.relu, spec.frozen);
}

std::string describe_problem(const BatchNorm2dConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].to_string(), " eps=", cfg.eps, " momentum=", cfg.momentum,
                        cfg.relu ? " +relu" : "", cfg.frozen ? " frozen" : "");
}

}  // namespace tbd
