// models/tables.h: the layer shapes of the real models, as data.
//
// The model builders (models/resnet50.cpp, models/transformer.cpp, ...) are written from these
// same specifications, and the layer benchmarks iterate them, so every layer benchmark shape
// is one that a TBD model really runs (no hand-picked toy shapes). All shapes are per sample:
// the batch size is the benchmarks' axis. Names are the layer names inside the model
// ("layer2.0.conv2"); when a shape repeats, the table keeps its first occurrence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layers/conv2d.h"
#include "layers/pool2d.h"

namespace tbd {

// ---- ResNet-50 v1.5 (224x224x3, 1000 classes): stride on the 3x3 conv of each bottleneck ----
struct ResNetStage {
  int blocks;
  int64_t width;   // bottleneck width (64, 128, 256, 512); output channels = 4 * width
  int64_t stride;  // of the first block
};
std::vector<ResNetStage> resnet50_stages();  // {3,64,1} {4,128,2} {6,256,2} {3,512,2}

struct ConvShape {
  std::string name;
  int64_t c, h, w;  // input (C, H, W)
  Conv2dConfig cfg;
};
// Every distinct convolution of ResNet-50 at the given image size (default 224).
std::vector<ConvShape> resnet50_convs(int64_t image = 224);

struct ChannelShape {  // batchnorm / activation / pooling inputs
  std::string name;
  int64_t c, h, w;
};
std::vector<ChannelShape> resnet50_batchnorms(int64_t image = 224);  // distinct (C, H, W)
struct PoolShape {
  std::string name;
  int64_t c, h, w;
  Pool2dConfig cfg;
};
std::vector<PoolShape> resnet50_pools(int64_t image = 224);  // the stem max pool

// ---- Transformer-base (tensor2tensor transformer_base, Vaswani et al.) ----
struct TransformerSpec {
  int64_t layers = 6;  // encoder layers = decoder layers
  int64_t d_model = 512;
  int64_t heads = 8;
  int64_t ffn = 2048;
  int64_t vocab = 32000;  // shared source/target vocabulary, tied to the output projection
  int64_t src_len = 128;
  int64_t tgt_len = 128;
  double dropout = 0.1;
  double label_smoothing = 0.1;
};

struct LinearShape {
  std::string name;
  int64_t tokens;  // rows per sample (sequence length)
  int64_t in, out;
  bool bias = true;
};
// Distinct projections: attention q/k/v/out, FFN up/down, the tied output projection.
std::vector<LinearShape> transformer_linears(const TransformerSpec& s = {});

struct AttentionShape {
  std::string name;
  int64_t tq, tk, d_model, heads;
  bool causal, cross;
};
std::vector<AttentionShape> transformer_attentions(const TransformerSpec& s = {});

struct NormShape {
  std::string name;
  int64_t tokens, dim;
};
std::vector<NormShape> transformer_layernorms(const TransformerSpec& s = {});

struct LossShape {
  std::string name;
  int64_t tokens, classes;
};
// Softmax cross-entropy heads: Transformer (tokens x 32000) and ResNet-50 (1 x 1000).
std::vector<LossShape> loss_shapes(const TransformerSpec& s = {});

// ---- recurrent models ----
struct RnnShape {
  std::string name;
  bool gru;  // false: LSTM
  int64_t t, input, hidden, layers;
  bool bidirectional;
};
// Seq2Seq NMT (Sockeye, IWSLT15: 2+2 LSTM layers, hidden 512, length 50) and Deep Speech 2
// (LibriSpeech: bidirectional GRU layers, hidden 800 in the DS2 paper's smaller config,
// ~ 100 frames after the conv front end; documented in tables.cpp).
std::vector<RnnShape> rnn_shapes();
struct CellShape {
  std::string name;
  int64_t input, hidden;
};
std::vector<CellShape> lstm_cell_shapes();  // the Sockeye decoder cell

// Parameter counts of the full models (for optimizer benchmarks and tests).
int64_t resnet50_param_count();  // 25,557,032

}  // namespace tbd
