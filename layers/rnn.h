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
//   FLOPs per layer and direction: fwd 2*T*N*(I_l+H)*G*H + elementwise (G = 4 or 3),
//   bwd_data 2*T*N*(I_l+H)*G*H, bwd_weights 2*T*N*(I_l+H)*G*H.
// LstmCell: one step. Inputs x (N, I), h (N, H), c (N, H); outputs h' (N, H), c' (N, H).
//   Parameters w_ih (4H, I), w_hh (4H, H), b (4H).
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

}  // namespace tbd
