// layers/ctc_loss.cpp: the contract of CtcLoss (shared by all backends).
#include "layers/ctc_loss.h"

namespace tbd {

template <>
Contract contract(const std::string& name, const CtcLossConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = CtcLossConfig::kKind;
  check_input_count(k, name, in, 4, "inputs (logits, labels, input_lengths, label_lengths)");
  check_f32(k, name, "logits", in[0]);
  const Shape& z = in[0].shape;
  TBD_LAYER_CHECK(z.rank() == 3 && in[0].layout == Layout::kRowMajor, k, name,
                  "input logits must be row-major (T, N, C), got ", in[0].to_string());
  check_positive(k, name, "logits", z);
  const int64_t N = z[1], C = z[2];
  TBD_LAYER_CHECK(in[1].dtype == DType::kI32 && in[1].shape.rank() == 2 && in[1].shape[0] == N, k,
                  name, "input labels must be (N, S) i32 with N = ", N, ", got ",
                  in[1].to_string());
  TBD_LAYER_CHECK(in[2].dtype == DType::kI32 && in[2].shape == Shape{N}, k, name,
                  "input input_lengths must be (", N, ") i32, got ", in[2].to_string());
  TBD_LAYER_CHECK(in[3].dtype == DType::kI32 && in[3].shape == Shape{N}, k, name,
                  "input label_lengths must be (", N, ") i32, got ", in[3].to_string());
  TBD_LAYER_CHECK(cfg.blank >= 0 && cfg.blank < C, k, name, "invalid config: blank=", cfg.blank,
                  " must be in [0, C=", C, ")");
  const int64_t S = in[1].shape[1];
  const double e = static_cast<double>(z.numel());
  const double a = static_cast<double>(z[0] * N * (2 * S + 1));
  const double small = static_cast<double>(N * S + 2 * N);
  Contract c{{TensorDesc{Shape{1}}},
             {},
             Flops{4 * e + 6 * a, 4 * e + 14 * a, 0},
             Bytes{bytes_of(e + small + 1), bytes_of(1 + 2 * e + small), 0}};
  c.input_grads = {true, false, false, false};
  return c;
}

std::string describe_problem(const CtcLossConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("logits ", in[0].shape.to_string(), " labels ", in[1].shape.to_string(),
                        " blank=", cfg.blank);
}

}  // namespace tbd
