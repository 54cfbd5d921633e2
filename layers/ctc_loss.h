// layers/ctc_loss.h: connectionist temporal classification loss (Graves et al. 2006).
//
// CtcLoss: logits (T, N, C) f32 row-major (time-major, pre-softmax), labels (N, S) i32 (padded;
//   values in [0, C) other than blank), input_lengths (N) i32 in [0, T], label_lengths (N) i32
//   in [0, S]  ->  y (1) = mean over the N samples of -log p(labels_n | logits_n), the sum over
//   all alignments of the first input_lengths[n] frames that collapse (merge repeats, drop
//   blanks) to the first label_lengths[n] labels. Log-space alpha recursion over the extended
//   label (blank, l1, blank, l2, ..., blank).
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
//
//   CPU (layers/cpu/ctc_loss_cpu.cpp): own code, samples in parallel, each frame's row of the
//   recursion vectorised, all in double; the same bits for any thread count.
//   CUDA (layers/cuda/ctc_loss_cuda.cu): cuDNN's CTC loss (cudnnCTCLoss_v8,
//   CUDNN_CTC_LOSS_ALGO_DETERMINISTIC, softmax normalisation: float arithmetic in cuDNN's order,
//   the same bits run to run), labels packed on the device into buffers made at build. cuDNN's
//   limits are checked at build, naming the layer: blank must be 0, S at most 255. cuDNN is
//   given only the samples a path exists for (input length >= label length + adjacent repeats)
//   with at least one label; the others are sorted out on the device and stand in as one-frame
//   samples whose results are replaced: impossible samples and those with no frames get loss 0
//   and gradient 0 as above, label length 0 an own kernel (in double). Invalid values (a length
//   out of range, a label outside [1, C)) make the loss and that sample's gradient NaN instead
//   of an error: the values are on the device, and checking them would cost a synchronisation.
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
std::string describe_problem(const CtcLossConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
