// models/deepspeech2.cpp: the Deep Speech 2 (TBD 2018) training graph.
#include "models/deepspeech2.h"

#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/ctc_loss.h"
#include "layers/linear.h"
#include "layers/rnn.h"
#include "layers/sequence_batchnorm.h"
#include "layers/tensor_ops.h"
#include "models/registry.h"

namespace tbd {
namespace {

int64_t conv_out(int64_t in, int64_t k, int64_t stride) { return (in - k) / stride + 1; }

// Frequency bins after the two convolutions.
int64_t freq_out(const DeepSpeech2Spec& s) {
  return conv_out(conv_out(s.freq, s.k1_freq, s.s1_freq), s.k2_freq, s.s2_freq);
}

}  // namespace

int64_t deepspeech2_frames_out(const DeepSpeech2Spec& s) {
  return conv_out(conv_out(s.frames, s.k1_time, s.s1_time), s.k2_time, s.s2_time);
}

int64_t deepspeech2_label_len(const DeepSpeech2Spec& s) {
  return s.label_len > 0 ? s.label_len : std::max<int64_t>(1, s.frames * 15 / 100);
}

int64_t deepspeech2_param_count(const DeepSpeech2Spec& s) {
  const int64_t C = s.channels, H = s.hidden, F = C * freq_out(s);
  const int64_t conv = C * s.k1_time * s.k1_freq + C * C * s.k2_time * s.k2_freq;
  const int64_t stack = (3 * H * (F + H) + 6 * H) + (s.rnn_layers - 1) * (3 * H * (2 * H) + 6 * H);
  return conv + 4 * C + 2 * stack + (2 * H * H + 2 * H) + (H * s.classes + s.classes);
}

std::unique_ptr<Model> build_deepspeech2(Backend& be, const DeepSpeech2Options& o) {
  const DeepSpeech2Spec& s = o.spec;
  const int64_t N = o.batch, T2 = deepspeech2_frames_out(s), bins2 = freq_out(s);
  const int64_t L = deepspeech2_label_len(s), H = s.hidden;
  TBD_CHECK(T2 >= 1 && bins2 >= 1, "DeepSpeech2: a spectrogram of ", s.frames, " frames x ", s.freq,
            " bins is too small for the convolutions (", T2, " x ", bins2, " left)");
  TBD_CHECK(L <= T2, "DeepSpeech2: ", L, " labels per sample cannot be aligned to ", T2,
            " frames (CTC needs at least one frame per label)");
  auto m = std::make_unique<Model>(be, "DeepSpeech2", o.seed);
  Graph& g = m->graph();

  TensorId x = m->data_input("spectrogram", Shape{N, 1, s.frames, s.freq}, DType::kF32, -1, 1);
  TensorId labels = m->data_input("labels", Shape{N, L}, DType::kI32, 1, s.classes);
  TensorId input_lengths = m->data_input("input_lengths", Shape{N}, DType::kI32,
                                         static_cast<double>(T2), static_cast<double>(T2 + 1));
  TensorId label_lengths = m->data_input("label_lengths", Shape{N}, DType::kI32,
                                         static_cast<double>(L), static_cast<double>(L + 1));

  // ---- convolutions: conv -> ReLU -> BatchNorm (MXNet's order), twice ----
  BatchNorm2dConfig bn;
  bn.eps = 1e-3;  // MXNet's
  const int64_t kernels[2][4] = {{s.k1_time, s.k1_freq, s.s1_time, s.s1_freq},
                                 {s.k2_time, s.k2_freq, s.s2_time, s.s2_freq}};
  for (int i = 0; i < 2; ++i) {
    const std::string n = "conv" + std::to_string(i + 1);
    Conv2dConfig c;
    c.out_channels = s.channels;
    c.kernel_h = kernels[i][0], c.kernel_w = kernels[i][1];
    c.stride_h = kernels[i][2], c.stride_w = kernels[i][3];
    x = g.add1(n, c, {x});
    x = g.add1(n + ".relu", ActivationConfig{ActKind::kRelu}, {x});
    x = g.add1(n + ".bn", bn, {x});
  }
  // (N, C, T2, bins2) -> (T2, N, C*bins2): time-major frames of features.
  x = g.add1("features", TransposeConfig{{2, 0, 1, 3}}, {x});
  x = g.add1("features.rows", ReshapeConfig{{T2, -1, s.channels * bins2}}, {x});

  // ---- two GRU stacks, one over the reversed sequence, joined after the last layer ----
  // One node per layer, so the breakdown and the layer benchmarks show each (rnn.l0 reads the
  // 672 conv features, rnn.l1 to l6 the 1760 hidden states).
  GruConfig gru;
  gru.hidden = H;
  TensorId fwd = x;
  TensorId bwd = g.add1("rnn.reverse", ReverseConfig{}, {x});
  for (int64_t l = 0; l < s.rnn_layers; ++l) {
    fwd = g.add1("rnn.l" + std::to_string(l), gru, {fwd});
    bwd = g.add1("rnn.reversed.l" + std::to_string(l), gru, {bwd});
  }
  bwd = g.add1("rnn.unreverse", ReverseConfig{}, {bwd});
  x = g.add1("rnn.concat", ConcatConfig{2}, {fwd, bwd});  // (T2, N, 2H)

  // ---- sequence-wise FC + BatchNorm + ReLU, per-frame classifier, CTC ----
  LinearConfig fc;
  fc.out_features = H;
  fc.bias = false;
  x = g.add1("fc", fc, {x});
  SequenceBatchNormConfig sbn;
  sbn.eps = 1e-3;
  x = g.add1("fc.bn", sbn, {x});
  x = g.add1("fc.relu", ActivationConfig{ActKind::kRelu}, {x});
  LinearConfig cls;
  cls.out_features = s.classes;
  TensorId logits = g.add1("classifier", cls, {x});  // (T2, N, K)
  g.set_loss(g.add1("ctc", CtcLossConfig{}, {logits, labels, input_lengths, label_lengths}));

  m->set_samples_per_step(N);
  m->set_extra_items("frames", static_cast<double>(N * s.frames));
  if (o.build_only) return m;
  SgdConfig sgd;
  sgd.lr = o.lr;
  sgd.momentum = o.momentum;
  sgd.clip.value = o.clip;
  m->finalize([&](std::vector<Param*> ps) { return make_optimizer(be, sgd, std::move(ps)); });
  return m;
}

DeepSpeech2Options deepspeech2_tiny() {
  DeepSpeech2Options o;
  DeepSpeech2Spec& s = o.spec;
  s.freq = 20;
  s.frames = 40;
  s.channels = 4;
  s.k1_time = 5, s.k1_freq = 5, s.s1_time = 2, s.s1_freq = 2;  // 18 x 8
  s.k2_time = 5, s.k2_freq = 3, s.s2_time = 1, s.s2_freq = 2;  // 14 x 3
  s.rnn_layers = 2;
  s.hidden = 16;
  s.label_len = 4;
  o.batch = 2;
  o.lr = 2e-2;
  o.seed = 11;
  return o;
}

TBD_REGISTER_MODEL(ModelEntry{"DeepSpeech2",
                              {1, 2, 4, 8, 16, 32, 64},
                              1,
                              [](Backend& be, const ModelArgs& a) {
                                DeepSpeech2Options o;
                                o.batch = a.batch;
                                o.build_only = a.build_only;
                                // frames: input frames (/frames:<T>), default 1000 (10 s).
                                o.spec.frames = a.param("frames", o.spec.frames);
                                return build_deepspeech2(be, o);
                              },
                              {"frames"}});

}  // namespace tbd
