// layers/ctc_loss.h: connectionist temporal classification loss (Graves et al. 2006).
//
// CtcLoss: logits (T, N, C) f32 row-major (time-major, pre-softmax), labels (N, S) i32 (padded;
//   values in [0, C) other than blank), input_lengths (N) i32 in [0, T], label_lengths (N) i32
//   in [0, S]  ->  y (1) = mean over the N samples of -log p(labels_n | logits_n), the sum over
//   all alignments of the first input_lengths[n] frames that collapse (merge repeats, drop
//   blanks) to the first label_lengths[n] labels. Log-space alpha recursion over the extended
//   label (blank, l1, blank, l2, ..., blank), alpha and beta in double.
//   Gradient w.r.t. the logits (softmax folded in): dy/N * (softmax(z_t) - gamma_t), gamma_t(k) =
//   sum over extended positions s with label k of alpha_t(s) beta_t(s) / p; zero for frames
//   t >= input_lengths[n]. Only the logits take a gradient.
//   Impossible samples (input too short for the labels and their repeats: p = 0) contribute a
//   loss of 0 and a gradient of 0 (PyTorch's zero_infinity), so the loss stays finite; they
//   still count in the mean. Label length 0: p = product of blank probabilities.
//   FLOPs, E = T*N*C, A = T*N*(2S+1): fprop 4E + 6A (log-softmax, the alpha recursion), dgrad
//   4E + 14A (log-softmax, alpha and beta again, gamma and the gradient).
//   Bytes (a lower bound, layers/layer.h): fprop 4*(E + N*S + 2N + 1) (read logits, labels,
//   lengths; write the loss), dgrad 4*(1 + E + N*S + 2N + E) (read dy, logits, labels, lengths;
//   write dlogits). Nothing is saved between the passes: backward recomputes alpha.
#pragma once

#include "layers/layer.h"

namespace tbd {

struct CtcLossConfig {
  static constexpr const char* kKind = "CtcLoss";
  int64_t blank = 0;
};

// Contract: inputs logits (T, N, C) f32, labels (N, S) i32, input_lengths (N) i32,
// label_lengths (N) i32; y (1) f32; only logits take a gradient.
template <>
Contract contract(const std::string& name, const CtcLossConfig& cfg,
                  const std::vector<TensorDesc>& in);

}  // namespace tbd
