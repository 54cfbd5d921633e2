// layers/rnn.h: LSTM cell, multi-layer uni/bidirectional LSTM and GRU over a sequence.
//
// Time-major like cuDNN and oneDNN (tnc):
// Lstm/Gru: x: (T, N, I) row-major  y: (T, N, H*dirs) (the last layer's hidden states).
//   Initial states are zero. Per layer l and direction d, parameters (PyTorch naming and
//   gate order; one bias per gate, as oneDNN and the TBD models count them):
//     LSTM: w_ih (4H, I_l), w_hh (4H, H), b (4H); gates i, f, g(cell), o.
//     GRU (linear-before-reset, as cuDNN and PyTorch): w_ih (3H, I_l), w_hh (3H, H),
//       b_ih (3H), b_hh (3H); gates r, z, n: n = tanh(W_in x + b_in + r*(W_hn h + b_hn)).
//   I_0 = I, I_l = H*dirs for l > 0. Names: "<layer>.l<l>.<fwd|bwd>.w_ih" etc.
//   Parameter count: sum over l and d of G*H*(I_l + H) + B*H, with G = 4, B = 4 (LSTM) and
//   G = 3, B = 6 (GRU: b_ih and b_hh).
//   FLOPs per layer and direction: fprop 2*T*N*(I_l+H)*G*H + E*T*N*H (G = 4 or 3),
//   dgrad 2*T*N*(I_l+H)*G*H, wgrad 2*T*N*(I_l+H)*G*H. E counts the elementwise
//   work per hidden unit and step, one op per add, multiply and activation:
//     LSTM E = 17: 8 adds (x part + h part + bias, 4 gates), 5 activations (3 sigmoid,
//       tanh(g), tanh(c)), c = f*c + i*g (3), h = o*tanh(c) (1).
//     GRU E = 15: r and z 3 each (2 adds, sigmoid), n 5 (b_hn add, r*, 2 adds, tanh),
//       h = z*h + (1-z)*n (4).
//   The elementwise work of the backward pass is of the same order and not counted (the
//   GEMMs dominate: (I_l+H)*G*2 >> E).
// LstmCell: one step. Inputs x (N, I), h (N, H), c (N, H); outputs h' (N, H), c' (N, H).
//   Parameters w_ih (4H, I), w_hh (4H, H), b (4H): 4H*(I+H) + 4H. FLOPs: the LSTM formulas
//   with T = 1.
// Bytes (FP32, 4 per element; a lower bound, layers/layer.h). Per layer l and direction, with
//   TN = T*N, Pw = G*H*(I_l+H) weights, Pb = B*H biases and S values saved per position for
//   backward (cuDNN's reserve space): LSTM S = 5H (4 gates and the cell state), GRU S = 4H (3
//   gates and W_hn h + b_hn):
//     fprop         = 4*(TN*I_l + Pw + Pb + TN*H + TN*S)   read x_l, parameters; write h, saved
//     dgrad    = 4*(TN*H + TN*S + Pw + TN*I_l + TN*G*H)
//                   read dh, saved, weights; write dx_l and the gate gradients (for wgrad)
//     wgrad = 4*(TN*I_l + TN*H + TN*G*H + 2*(Pw + Pb))
//                   read x_l, h, gate gradients; read and write the parameter gradients
//   Weights are read once per phase, not once per time step (an ideal kernel keeps them on
//   chip, as persistent RNN kernels do); layer l's h is layer l+1's x.
//   LstmCell (x, h, c in; h', c' out; saved: the 4H gates):
//     fprop         = 4*(N*I + 2*N*H + Pw + Pb + 2*N*H + 4*N*H)
//     dgrad    = 4*(2*N*H + 4*N*H + N*H + Pw + N*I + 2*N*H + 4*N*H)
//                   read dh', dc', gates, c, weights; write dx, dh, dc, gate gradients
//     wgrad = 4*(N*I + N*H + 4*N*H + 2*(Pw + Pb))
#pragma once

#include "layers/layer.h"

namespace tbd {

struct LstmConfig {
  static constexpr const char* kKind = "LSTM";
  int64_t hidden = 0;
  int64_t num_layers = 1;
  bool bidirectional = false;
};

struct GruConfig {
  static constexpr const char* kKind = "GRU";
  int64_t hidden = 0;
  int64_t num_layers = 1;
  bool bidirectional = false;
};

struct LstmCellConfig {
  static constexpr const char* kKind = "LSTMCell";
  int64_t hidden = 0;
};

// Shape checks (throw naming the layer, the argument and the dims) and output shapes.
// x: (T, N, I) -> y: (T, N, H*dirs).
Shape lstm_output_shape(const std::string& name, const LstmConfig& cfg, const Shape& x);
Shape gru_output_shape(const std::string& name, const GruConfig& cfg, const Shape& x);
// x: (N, I), h: (N, H), c: (N, H) -> h', c': (N, H) each.
Shape lstm_cell_output_shape(const std::string& name, const LstmCellConfig& cfg, const Shape& x,
                             const Shape& h, const Shape& c);

Flops lstm_flops(const LstmConfig& cfg, const Shape& x);
Flops gru_flops(const GruConfig& cfg, const Shape& x);
Flops lstm_cell_flops(const LstmCellConfig& cfg, const Shape& x);
// Under bf16 (t) the activations and the weights the products read are 2 bytes (rnn.cpp).
Bytes lstm_bytes(const LstmConfig& cfg, const Shape& x, DType t = DType::kF32);
Bytes gru_bytes(const GruConfig& cfg, const Shape& x, DType t = DType::kF32);
Bytes lstm_cell_bytes(const LstmCellConfig& cfg, const Shape& x, DType t = DType::kF32);

// Parameter counts for input width I (the formulas above).
int64_t lstm_param_count(const LstmConfig& cfg, int64_t input_size);
int64_t gru_param_count(const GruConfig& cfg, int64_t input_size);
int64_t lstm_cell_param_count(const LstmCellConfig& cfg, int64_t input_size);

// Contract: one input x (T, N, I) f32; y (T, N, H*dirs) f32; the parameters of every
// layer and direction as above, U(-1/sqrt(H), 1/sqrt(H)), biases without decay.
template <>
Contract contract(const std::string& name, const LstmConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const LstmConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// Contract: as LSTM, with the GRU parameters above.
template <>
Contract contract(const std::string& name, const GruConfig& cfg, const std::vector<TensorDesc>& in);
std::string describe_problem(const GruConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// Contract: inputs x (N, I), h (N, H), c (N, H) f32; outputs h', c' (N, H); w_ih, w_hh, b.
template <>
Contract contract(const std::string& name, const LstmCellConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const LstmCellConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
