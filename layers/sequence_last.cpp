// layers/sequence_last.cpp: the contract of SequenceLast (all backends).
#include "layers/sequence_last.h"

namespace tbd {

template <>
Contract contract(const std::string& name, const SequenceLastConfig&,
                  const std::vector<TensorDesc>& in) {
  const char* k = SequenceLastConfig::kKind;
  check_input_count(k, name, in, 2, "inputs (x, lengths)");
  const TensorDesc& x = in[0];
  TBD_LAYER_CHECK(x.shape.rank() >= 2, k, name, "input x must have rank >= 2 (T, N, ...), got ",
                  x.shape.to_string());
  check_positive(k, name, "x", x.shape);
  check_f32(k, name, "x", x);
  TBD_LAYER_CHECK(x.layout == Layout::kRowMajor, k, name, "input x must be row-major, got ",
                  x.to_string());
  const int64_t T = x.shape[0], N = x.shape[1];
  TBD_LAYER_CHECK(in[1].dtype == DType::kI32 && in[1].shape == Shape{N}, k, name,
                  "input lengths must be (", N, ") i32, got ", in[1].to_string());
  std::vector<int64_t> dims(x.shape.dims().begin() + 1, x.shape.dims().end());
  const Shape ys(dims);
  const double r = static_cast<double>(ys.numel()), n = static_cast<double>(N);
  Contract c{{TensorDesc{ys}},
             {},
             Flops{},
             Bytes{bytes_of(n + 2 * r), bytes_of(n + r + static_cast<double>(T) * r), 0}};
  c.input_grads = {true, false};
  c.saved_inputs = {false, true};  // the lengths place dy back
  c.saved_outputs = {false};
  return c;
}

std::string describe_problem(const SequenceLastConfig&, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].shape.to_string());
}

}  // namespace tbd
