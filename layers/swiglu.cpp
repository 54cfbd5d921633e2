// layers/swiglu.cpp: shape checks, FLOP and byte counts of SwiGLU (all backends).
#include "layers/swiglu.h"

namespace tbd {

template <>
Contract contract(const std::string& name, const SwiGluConfig&, const std::vector<TensorDesc>& in) {
  const char* k = SwiGluConfig::kKind;
  check_input_count(k, name, in, 1);
  check_floating(k, name, "x", in[0]);
  const Shape& x = in[0].shape;
  TBD_LAYER_CHECK(x.rank() >= 2, k, name, "input x must have rank >= 2 (..., 2F), got ",
                  x.to_string());
  check_positive(k, name, "x", x);
  TBD_LAYER_CHECK(in[0].layout == Layout::kRowMajor, k, name, "input x must be row-major, got ",
                  in[0].to_string());
  TBD_LAYER_CHECK(x[-1] % 2 == 0, k, name, "input x ", x.to_string(), ": the last dim ", x[-1],
                  " must be even ([gate | up], F each)");
  std::vector<int64_t> dims(x.dims().begin(), x.dims().end());
  dims.back() /= 2;
  const Shape ys(dims);
  const double e = static_cast<double>(ys.numel());
  const DType t = in[0].dtype;
  Contract c{{TensorDesc{ys, t}},
             {},
             Flops{5 * e, 10 * e, 0},
             Bytes{bytes_of(3 * e, t), bytes_of(5 * e, t), 0}};
  c.saved_inputs = {true};
  c.saved_outputs = {false};
  return c;
}

std::string describe_problem(const SwiGluConfig&, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].shape.to_string());
}

}  // namespace tbd
