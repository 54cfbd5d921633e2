// models/deepspeech2.h: Deep Speech 2 as TBD (2018) trained it with MXNet on LibriSpeech: two
// strided convolutions over a linear spectrogram, two 7-layer GRU stacks (one over the reversed
// sequence) and a CTC loss over characters.
//
// Input: a spectrogram (N, 1, T, F), T frames of 10 ms (default 1000, a 10 s utterance) by F =
// 161 frequency bins (20 ms windows up to 8 kHz), NCHW with the frames as H as MXNet lays it
// out. conv1: 32 filters 11x41 (time x frequency) stride (2, 2), no padding, no bias -> ReLU ->
// BatchNorm; conv2: 32 filters 11x21 stride (1, 2) -> ReLU -> BatchNorm (ReLU before the norm,
// as MXNet's stt_layer_conv applies it). Frames after the convolutions T2 = (T - 11)/2 + 1 - 10
// (485 for T = 1000), features 32 x 21 = 672 per frame. Then two stacks of 7 GRU layers of
// hidden 1760, one over the sequence and one over the reversed sequence (reversed back
// after), concatenated only after the last layer (MXNet's bi_gru_unroll) -> 3520; a
// sequence-wise FC 3520 -> 1760 (no bias) + BatchNorm over all N x T2 rows + ReLU; a per-frame
// classifier 1760 -> 29 characters (blank 0); CTC loss over every sample's T2 frames and its
// labels. SGD momentum 0.9, lr 3e-4, gradients clipped element-wise to [-100, 100].
// Synthetic labels: `label_len` characters per sample (default 15 per second of audio, about
// LibriSpeech's speaking rate: 150 for 10 s), uniform over the 28 non-blank characters.
//
// Deviation from MXNet's network: the GRU cells are the libraries' (cuDNN, oneDNN, PyTorch:
// the reset gate multiplies the recurrent product, n = tanh(W_in x + b_in + r*(W_hn h +
// b_hn))), not MXNet's stt_layer_gru variant (reset applied to h before its matmul, with a
// BatchNorm on the input projection inside the cell). The cuDNN cell is what a GPU runs
// fused; the MXNet cell cannot be. Parameters (F' = 32 * 21 features, H hidden, K classes):
//   convolutions  32*1*11*41 + 32*32*11*21                           =     250,976
//   conv norms    2 * 2*32                                           =         128
//   GRU stacks    2 * [(3H*(F' + H) + 6H) + 6 * (3H*(H + H) + 6H)]   = 248,856,960
//   rear FC + BN  2H*H + 2H                                          =   6,198,720
//   classifier    H*K + K                                            =      51,069
//   total                                                            = 255,357,853
// MXNet's cell adds a 4H BatchNorm (gamma, beta, and its two running statistics, which MXNet
// counts as parameters) per layer: 14 * 4 * 1760 = 98,560 more, 255,456,413.
#pragma once

#include <memory>

#include "models/model.h"

namespace tbd {

struct DeepSpeech2Spec {
  int64_t freq = 161;     // F: spectrogram bins
  int64_t frames = 1000;  // T: input frames (10 ms each)
  int64_t channels = 32;
  int64_t k1_time = 11, k1_freq = 41, s1_time = 2, s1_freq = 2;
  int64_t k2_time = 11, k2_freq = 21, s2_time = 1, s2_freq = 2;
  int64_t rnn_layers = 7;  // per stack
  int64_t hidden = 1760;
  int64_t classes = 29;   // blank, apostrophe, a-z, space
  int64_t label_len = 0;  // 0: 15 characters per second of audio
};

struct DeepSpeech2Options {
  DeepSpeech2Spec spec;
  int64_t batch = 8;  // utterances
  double lr = 3e-4;
  double momentum = 0.9;
  double clip = 100.0;  // element-wise gradient clip
  uint64_t seed = 0;
  bool build_only = false;  // the graph without storage (ModelArgs::build_only)
};

// Frames after the two convolutions (T2) and labels per sample for a spec.
int64_t deepspeech2_frames_out(const DeepSpeech2Spec& s);
int64_t deepspeech2_label_len(const DeepSpeech2Spec& s);
// The count above, as a function of the spec (tests compare it with the built model).
int64_t deepspeech2_param_count(const DeepSpeech2Spec& s);

std::unique_ptr<Model> build_deepspeech2(Backend& be, const DeepSpeech2Options& opt);
// The tiny configuration the model tests train and tools/peers mirrors: 20 frequency bins, 40
// frames, 4 channels, convolutions 5x5/2 (18 x 8 out) and 5x3 stride (1, 2) (14 x 3 out), 2
// recurrent layers of 16, 4 labels, batch 2.
DeepSpeech2Options deepspeech2_tiny();

}  // namespace tbd
