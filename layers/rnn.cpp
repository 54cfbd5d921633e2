// layers/rnn.cpp: shape checks, FLOP, byte and parameter counts of LSTM, GRU and LSTMCell
// (shared by all backends; the formulas are documented in layers/rnn.h).
#include "layers/rnn.h"

namespace tbd {
namespace {

constexpr int64_t kLstmGates = 4;
constexpr int64_t kGruGates = 3;
constexpr double kLstmElementwise = 17;  // per hidden unit and step, see rnn.h
constexpr double kGruElementwise = 15;
// Values saved per hidden unit and position for backward (rnn.h): LSTM 4 gates + the cell
// state; GRU 3 gates + W_hn h + b_hn. Bias vectors per gate row: LSTM 1, GRU 2.
constexpr int64_t kLstmSaved = 5;
constexpr int64_t kGruSaved = 4;
constexpr int64_t kLstmBiasVectors = 4;
constexpr int64_t kGruBiasVectors = 6;

Shape sequence_output_shape(const char* kind, const std::string& name, int64_t hidden,
                            int64_t num_layers, bool bidirectional, const Shape& x) {
  TBD_LAYER_CHECK(x.rank() == 3, kind, name, "input x must have rank 3 (T, N, I), got ",
                  x.to_string());
  check_positive(kind, name, "x", x);
  TBD_LAYER_CHECK(hidden > 0 && num_layers > 0, kind, name, "invalid config: hidden=", hidden,
                  " num_layers=", num_layers, " (both must be positive; x ", x.to_string(), ")");
  return Shape{x[0], x[1], hidden * (bidirectional ? 2 : 1)};
}

// One direction of one layer with input width `in`, over T*N positions.
Flops cell_flops(double tn, int64_t in, int64_t hidden, int64_t gates, double elementwise) {
  double gemm = 2.0 * tn * static_cast<double>(in + hidden) * gates * hidden;
  return Flops{gemm + elementwise * tn * hidden, gemm, gemm};
}

Flops sequence_flops(const Shape& x, int64_t hidden, int64_t num_layers, bool bidirectional,
                     int64_t gates, double elementwise) {
  const int64_t dirs = bidirectional ? 2 : 1;
  const double tn = static_cast<double>(x[0]) * x[1];
  Flops f;
  for (int64_t l = 0; l < num_layers; ++l) {
    int64_t in = l == 0 ? x[2] : hidden * dirs;
    for (int64_t d = 0; d < dirs; ++d) f += cell_flops(tn, in, hidden, gates, elementwise);
  }
  return f;
}

// One direction of one layer with input width `in`, over T*N positions (rnn.h).
// Under bf16 (t) x, the outputs and the weights the products read are 2 bytes; the saved gates
// and states, the gates' gradients, the biases and the weight gradients stay f32.
Bytes cell_bytes(double tn, int64_t in, int64_t hidden, int64_t gates, int64_t saved,
                 int64_t bias_vectors, DType t) {
  const double h = static_cast<double>(hidden), x = tn * static_cast<double>(in);
  const double pw = static_cast<double>(gates * hidden * (in + hidden));
  const double pb = static_cast<double>(bias_vectors * hidden);
  const double s = tn * static_cast<double>(saved) * h,
               dgates = tn * static_cast<double>(gates) * h;
  return Bytes{bytes_of(x + pw + tn * h, t) + bytes_of(pb + s),
               bytes_of(tn * h + pw + x, t) + bytes_of(s + dgates),
               bytes_of(x + tn * h, t) + bytes_of(dgates + 2 * (pw + pb))};
}

Bytes sequence_bytes(const Shape& x, int64_t hidden, int64_t num_layers, bool bidirectional,
                     int64_t gates, int64_t saved, int64_t bias_vectors, DType t) {
  const int64_t dirs = bidirectional ? 2 : 1;
  const double tn = static_cast<double>(x[0]) * x[1];
  Bytes b;
  for (int64_t l = 0; l < num_layers; ++l) {
    int64_t in = l == 0 ? x[2] : hidden * dirs;
    for (int64_t d = 0; d < dirs; ++d)
      b += cell_bytes(tn, in, hidden, gates, saved, bias_vectors, t);
  }
  return b;
}

int64_t sequence_params(int64_t input_size, int64_t hidden, int64_t num_layers, bool bidirectional,
                        int64_t gates, int64_t bias_vectors) {
  const int64_t dirs = bidirectional ? 2 : 1;
  int64_t n = 0;
  for (int64_t l = 0; l < num_layers; ++l) {
    int64_t in = l == 0 ? input_size : hidden * dirs;
    n += dirs * (gates * hidden * (in + hidden) + bias_vectors * hidden);
  }
  return n;
}

}  // namespace

Shape lstm_output_shape(const std::string& name, const LstmConfig& cfg, const Shape& x) {
  return sequence_output_shape(LstmConfig::kKind, name, cfg.hidden, cfg.num_layers,
                               cfg.bidirectional, x);
}

Shape gru_output_shape(const std::string& name, const GruConfig& cfg, const Shape& x) {
  return sequence_output_shape(GruConfig::kKind, name, cfg.hidden, cfg.num_layers,
                               cfg.bidirectional, x);
}

Shape lstm_cell_output_shape(const std::string& name, const LstmCellConfig& cfg, const Shape& x,
                             const Shape& h, const Shape& c) {
  const char* k = LstmCellConfig::kKind;
  TBD_LAYER_CHECK(x.rank() == 2, k, name, "input x must have rank 2 (N, I), got ", x.to_string());
  check_positive(k, name, "x", x);
  TBD_LAYER_CHECK(cfg.hidden > 0, k, name, "invalid config: hidden=", cfg.hidden,
                  " must be positive (x ", x.to_string(), ")");
  Shape want{x[0], cfg.hidden};
  TBD_LAYER_CHECK(h == want, k, name, "input h must be (N, H) = ", want.to_string(), ", got ",
                  h.to_string(), " (x ", x.to_string(), ")");
  TBD_LAYER_CHECK(c == want, k, name, "input c must be (N, H) = ", want.to_string(), ", got ",
                  c.to_string(), " (x ", x.to_string(), ")");
  return want;
}

Flops lstm_flops(const LstmConfig& cfg, const Shape& x) {
  return sequence_flops(x, cfg.hidden, cfg.num_layers, cfg.bidirectional, kLstmGates,
                        kLstmElementwise);
}

Flops gru_flops(const GruConfig& cfg, const Shape& x) {
  return sequence_flops(x, cfg.hidden, cfg.num_layers, cfg.bidirectional, kGruGates,
                        kGruElementwise);
}

Flops lstm_cell_flops(const LstmCellConfig& cfg, const Shape& x) {
  return cell_flops(static_cast<double>(x[0]), x[1], cfg.hidden, kLstmGates, kLstmElementwise);
}

Bytes lstm_bytes(const LstmConfig& cfg, const Shape& x, DType t) {
  return sequence_bytes(x, cfg.hidden, cfg.num_layers, cfg.bidirectional, kLstmGates, kLstmSaved,
                        kLstmBiasVectors, t);
}

Bytes gru_bytes(const GruConfig& cfg, const Shape& x, DType t) {
  return sequence_bytes(x, cfg.hidden, cfg.num_layers, cfg.bidirectional, kGruGates, kGruSaved,
                        kGruBiasVectors, t);
}

// Under bf16 (t) x, h, c, h', c' and the weights the products read are 2 bytes.
Bytes lstm_cell_bytes(const LstmCellConfig& cfg, const Shape& x, DType t) {
  const double n = static_cast<double>(x[0]), i = static_cast<double>(x[1]);
  const double h = static_cast<double>(cfg.hidden);
  const double nh = n * h, ni = n * i;
  const double pw = static_cast<double>(kLstmGates * cfg.hidden * (x[1] + cfg.hidden));
  const double pb = static_cast<double>(kLstmBiasVectors * cfg.hidden);
  const double gates = static_cast<double>(kLstmGates) * nh;
  return Bytes{bytes_of(ni + 2 * nh + pw + 2 * nh, t) + bytes_of(pb + gates),
               bytes_of(2 * nh + nh + pw + ni + 2 * nh, t) + bytes_of(2 * gates),
               bytes_of(ni + nh, t) + bytes_of(gates + 2 * (pw + pb))};
}

int64_t lstm_param_count(const LstmConfig& cfg, int64_t input_size) {
  return sequence_params(input_size, cfg.hidden, cfg.num_layers, cfg.bidirectional, kLstmGates,
                         kLstmBiasVectors);
}

int64_t gru_param_count(const GruConfig& cfg, int64_t input_size) {
  return sequence_params(input_size, cfg.hidden, cfg.num_layers, cfg.bidirectional, kGruGates,
                         kGruBiasVectors);
}

int64_t lstm_cell_param_count(const LstmCellConfig& cfg, int64_t input_size) {
  return kLstmGates * cfg.hidden * (input_size + cfg.hidden) + kLstmGates * cfg.hidden;
}

namespace {

// One direction's parameters: PyTorch names, shapes and default init (U(-1/sqrt(H), 1/sqrt(H))
// for every parameter); LSTM has one bias per gate, GRU two (b_ih, b_hh).
void add_direction_params(std::vector<ParamSpec>& ps, bool lstm, const std::string& prefix,
                          int64_t in, int64_t H) {
  const int64_t G = lstm ? 4 : 3;
  ps.push_back({prefix + "w_ih", Shape{G * H, in}, Init::kUniformFanIn, H, G * H, true});
  ps.push_back({prefix + "w_hh", Shape{G * H, H}, Init::kUniformFanIn, H, G * H, true});
  if (lstm) {
    ps.push_back({prefix + "b", Shape{G * H}, Init::kUniformFanIn, H, G * H, false});
  } else {
    ps.push_back({prefix + "b_ih", Shape{G * H}, Init::kUniformFanIn, H, G * H, false});
    ps.push_back({prefix + "b_hh", Shape{G * H}, Init::kUniformFanIn, H, G * H, false});
  }
}

template <class Config>
Contract sequence_contract(const std::string& name, const Config& cfg,
                           const std::vector<TensorDesc>& in, bool lstm, Shape ys, Flops f,
                           Bytes b) {
  check_floating(Config::kKind, name, "x", in[0]);
  Contract c{{TensorDesc{std::move(ys), in[0].dtype}}, {}, f, b};  // y in x's dtype
  const int64_t I = in[0].shape[2], H = cfg.hidden, dirs = cfg.bidirectional ? 2 : 1;
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    for (int64_t d = 0; d < dirs; ++d) {
      add_direction_params(c.params, lstm, detail::concat("l", l, d == 0 ? ".fwd." : ".bwd."),
                           l == 0 ? I : H * dirs, H);
    }
  }
  return c;
}

}  // namespace

template <>
Contract contract(const std::string& name, const LstmConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(LstmConfig::kKind, name, in, 1);
  const Shape& xs = in[0].shape;
  Shape ys = lstm_output_shape(name, cfg, xs);  // checks x before the formulas read it
  return sequence_contract(name, cfg, in, true, std::move(ys), lstm_flops(cfg, xs),
                           lstm_bytes(cfg, xs, in[0].dtype));
}

std::string describe_problem(const LstmConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].shape.to_string(), " H=", cfg.hidden,
                        " layers=", cfg.num_layers, cfg.bidirectional ? " bidirectional" : "");
}

template <>
Contract contract(const std::string& name, const GruConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  check_input_count(GruConfig::kKind, name, in, 1);
  const Shape& xs = in[0].shape;
  Shape ys = gru_output_shape(name, cfg, xs);  // checks x before the formulas read it
  return sequence_contract(name, cfg, in, false, std::move(ys), gru_flops(cfg, xs),
                           gru_bytes(cfg, xs, in[0].dtype));
}

std::string describe_problem(const GruConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].shape.to_string(), " H=", cfg.hidden,
                        " layers=", cfg.num_layers, cfg.bidirectional ? " bidirectional" : "");
}

template <>
Contract contract(const std::string& name, const LstmCellConfig& cfg,
                  const std::vector<TensorDesc>& in) {
  const char* k = LstmCellConfig::kKind;
  check_input_count(k, name, in, 3, "inputs (x, h, c)");
  const Shape hs = lstm_cell_output_shape(name, cfg, in[0].shape, in[1].shape, in[2].shape);
  const char* args[] = {"x", "h", "c"};
  for (int i = 0; i < 3; ++i) {
    check_floating(k, name, args[i], in[i]);
    TBD_LAYER_CHECK(in[i].dtype == in[0].dtype, k, name, "inputs x ", in[0].to_string(), " and ",
                    args[i], " ", in[i].to_string(), " differ in dtype");
  }
  Contract c{{TensorDesc{hs, in[0].dtype}, TensorDesc{hs, in[0].dtype}},
             {},
             lstm_cell_flops(cfg, in[0].shape),
             lstm_cell_bytes(cfg, in[0].shape, in[0].dtype)};
  add_direction_params(c.params, true, "", in[0].shape[1], cfg.hidden);
  return c;
}

std::string describe_problem(const LstmCellConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract&) {
  return detail::concat("x ", in[0].shape.to_string(), " H=", cfg.hidden);
}

}  // namespace tbd
