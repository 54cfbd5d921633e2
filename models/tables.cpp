// models/tables.cpp: shapes of the TBD models' layers (see tables.h).
#include "models/tables.h"

#include <map>
#include <set>
#include <tuple>

#include "models/resnet50.h"

namespace tbd {

std::vector<ResNetStage> resnet50_stages() { return {{3, 64, 1}, {4, 128, 2}, {6, 256, 2}, {3, 512, 2}}; }

std::vector<BottleneckSpec> resnet50_blocks(int64_t image) {
  return resnet_blocks(image, resnet50_stages(), 64);
}

std::vector<BottleneckSpec> resnet_blocks(int64_t image, const std::vector<ResNetStage>& stages,
                                          int64_t stem_channels) {
  std::vector<BottleneckSpec> out;
  int64_t c = stem_channels, hw = ((image + 2 * 3 - 7) / 2 + 1 + 2 * 1 - 3) / 2 + 1;  // stem+pool
  for (std::size_t s = 0; s < stages.size(); ++s) {
    for (int b = 0; b < stages[s].blocks; ++b) {
      BottleneckSpec blk;
      blk.name = "layer" + std::to_string(s + 1) + "." + std::to_string(b);
      blk.in_c = c;
      blk.h = blk.w = hw;
      blk.width = stages[s].width;
      blk.stride = b == 0 ? stages[s].stride : 1;
      blk.downsample = b == 0;  // channels change (and maybe stride) in every stage's first block
      out.push_back(blk);
      c = 4 * blk.width;
      hw = (hw + 2 - 3) / blk.stride + 1;
    }
  }
  return out;
}

std::vector<ConvShape> bottleneck_convs(const BottleneckSpec& b) {
  int64_t out_hw = (b.h + 2 - 3) / b.stride + 1;
  std::vector<ConvShape> v{
      {b.name + ".conv1", b.in_c, b.h, b.w, Conv2dConfig::square(b.width, 1)},
      // ResNet v1.5: the stride sits on the 3x3 convolution.
      {b.name + ".conv2", b.width, b.h, b.w, Conv2dConfig::square(b.width, 3, b.stride, 1)},
      {b.name + ".conv3", b.width, out_hw, out_hw, Conv2dConfig::square(4 * b.width, 1)},
  };
  if (b.downsample) {
    v.push_back({b.name + ".downsample", b.in_c, b.h, b.w,
                 Conv2dConfig::square(4 * b.width, 1, b.stride, 0)});
  }
  return v;
}

ConvShape resnet50_stem(int64_t image) { return {"conv1", 3, image, image, Conv2dConfig::square(64, 7, 2, 3)}; }

std::vector<ConvShape> resnet50_convs(int64_t image) {
  std::vector<ConvShape> all{resnet50_stem(image)};
  for (const auto& b : resnet50_blocks(image)) {
    for (auto& c : bottleneck_convs(b)) all.push_back(c);
  }
  std::vector<ConvShape> out;
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>> seen;
  for (auto& c : all) {
    auto key = std::make_tuple(c.c, c.h, c.w, c.cfg.out_channels, c.cfg.kernel_h, c.cfg.stride_h,
                               c.cfg.pad_h);
    if (seen.insert(key).second) out.push_back(c);
  }
  return out;
}

std::vector<ChannelShape> resnet50_batchnorms(int64_t image) {
  // Every conv is followed by a batchnorm over its output.
  std::vector<ChannelShape> out;
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  std::vector<ConvShape> all{resnet50_stem(image)};
  for (const auto& b : resnet50_blocks(image)) {
    for (auto& c : bottleneck_convs(b)) all.push_back(c);
  }
  for (auto& c : all) {
    int64_t p = (c.h + 2 * c.cfg.pad_h - c.cfg.kernel_h) / c.cfg.stride_h + 1;
    auto key = std::make_tuple(c.cfg.out_channels, p, p);
    std::string name = c.name;
    auto pos = name.rfind("conv");
    if (pos != std::string::npos) name.replace(pos, 4, "bn");
    else name += ".bn";
    if (seen.insert(key).second) out.push_back({name, c.cfg.out_channels, p, p});
  }
  return out;
}

std::vector<PoolShape> resnet50_pools(int64_t image) {
  int64_t hw = (image + 2 * 3 - 7) / 2 + 1;
  return {{"maxpool", 64, hw, hw, Pool2dConfig::square(PoolKind::kMax, 3, 2, 1)}};
}

int64_t resnet50_param_count() {
  int64_t n = 3 * 64 * 49 + 2 * 64;  // stem conv + bn
  for (const auto& b : resnet50_blocks(224)) {
    for (auto& c : bottleneck_convs(b)) {
      n += c.cfg.out_channels * c.c * c.cfg.kernel_h * c.cfg.kernel_w + 2 * c.cfg.out_channels;
    }
  }
  return n + 2048 * 1000 + 1000;  // fc
}

// ---- Transformer ----

std::vector<LinearShape> transformer_linears(const TransformerSpec& s) {
  std::vector<LinearShape> all{
      {"transformer.encoder.0.self_attn.qkv_proj", s.src_len, s.d_model, s.d_model},
      {"transformer.decoder.0.self_attn.qkv_proj", s.tgt_len, s.d_model, s.d_model},
      {"transformer.encoder.0.ffn.fc1", s.src_len, s.d_model, s.ffn},
      {"transformer.encoder.0.ffn.fc2", s.src_len, s.ffn, s.d_model},
      {"transformer.decoder.0.ffn.fc1", s.tgt_len, s.d_model, s.ffn},
      {"transformer.decoder.0.ffn.fc2", s.tgt_len, s.ffn, s.d_model},
      {"transformer.output_proj", s.tgt_len, s.d_model, s.vocab, /*bias=*/false},
  };
  std::vector<LinearShape> out;
  std::set<std::tuple<int64_t, int64_t, int64_t, bool>> seen;
  for (auto& l : all) {
    if (seen.insert({l.tokens, l.in, l.out, l.bias}).second) out.push_back(l);
  }
  return out;
}

std::vector<AttentionShape> transformer_attentions(const TransformerSpec& s) {
  return {
      {"transformer.encoder.0.self_attn", s.src_len, s.src_len, s.d_model, s.heads, false, false},
      {"transformer.decoder.0.self_attn", s.tgt_len, s.tgt_len, s.d_model, s.heads, true, false},
      {"transformer.decoder.0.cross_attn", s.tgt_len, s.src_len, s.d_model, s.heads, false, true},
  };
}

std::vector<NormShape> transformer_layernorms(const TransformerSpec& s) {
  std::vector<NormShape> v{{"transformer.encoder.0.norm1", s.src_len, s.d_model}};
  if (s.tgt_len != s.src_len) v.push_back({"transformer.decoder.0.norm1", s.tgt_len, s.d_model});
  return v;
}

std::vector<LossShape> loss_shapes(const TransformerSpec& s) {
  return {{"transformer.loss", s.tgt_len, s.vocab}, {"resnet50.loss", 1, 1000}};
}

// Seq2Seq (Sockeye on IWSLT15 En-Vi as TBD ran it): embeddings 512, a bidirectional first
// encoder layer (2 x 256) and a unidirectional second (512), a 2-layer decoder LSTM (512)
// whose first layer sees the embedding plus the attention context (input feeding: 1024);
// sentences bucketed at length 50. Deep Speech 2 (deepspeech.pytorch on LibriSpeech): the conv
// front end leaves 32 channels x 41 frequency bins = 1312 features per frame; 5 bidirectional
// GRU layers of 800 units; ~2 s of audio = 100 frames after the front end's stride 2.
std::vector<RnnShape> rnn_shapes() {
  return {
      {"seq2seq.encoder.l0", false, 50, 512, 256, 1, true},
      {"seq2seq.encoder.l1", false, 50, 512, 512, 1, false},
      {"seq2seq.decoder", false, 50, 1024, 512, 2, false},
      {"deepspeech2.rnn.l0", true, 100, 1312, 800, 1, true},
      {"deepspeech2.rnn", true, 100, 1600, 800, 4, true},
  };
}

std::vector<CellShape> lstm_cell_shapes() { return {{"seq2seq.decoder.cell0", 1024, 512}}; }

}  // namespace tbd
