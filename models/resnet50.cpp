// models/resnet50.cpp: the ResNet-50 v1.5 training graph and its specification.
#include "models/resnet50.h"

#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/pool2d.h"
#include "layers/tensor_ops.h"
#include "models/registry.h"

namespace tbd {

std::vector<ResNetStage> resnet50_stages() {
  return {{3, 64, 1}, {4, 128, 2}, {6, 256, 2}, {3, 512, 2}};
}

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

ConvShape resnet50_stem(int64_t image) {
  return {"conv1", 3, image, image, Conv2dConfig::square(64, 7, 2, 3)};
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

namespace {

TensorId conv_bn(Graph& g, const ConvShape& c, TensorId x, bool relu) {
  TensorId h = g.add1(c.name, c.cfg, {x});
  std::string bn = c.name;
  auto pos = bn.rfind("conv");
  if (pos != std::string::npos)
    bn.replace(pos, 4, "bn");
  else
    bn += ".bn";
  h = g.add1(bn, BatchNorm2dConfig{}, {h});
  if (relu) h = g.add1(c.name + ".relu", ActivationConfig{ActKind::kRelu}, {h});
  return h;
}

}  // namespace

std::unique_ptr<Model> build_resnet50(Backend& be, const ResNetOptions& o) {
  auto m = std::make_unique<Model>(be, "ResNet50", o.seed);
  Graph& g = m->graph();
  TensorId x = m->data_input("images", Shape{o.batch, 3, o.image, o.image}, DType::kF32, -1, 1);
  TensorId labels = m->data_input("labels", Shape{o.batch}, DType::kI32, 0, o.classes);

  std::vector<ResNetStage> stages = resnet50_stages();
  stages.resize(o.num_stages);
  for (auto& s : stages) {
    s.width /= o.width_div;
    if (o.blocks_per_stage > 0) s.blocks = o.blocks_per_stage;
  }
  ConvShape stem = resnet50_stem(o.image);
  stem.cfg.out_channels /= o.width_div;
  TensorId h = conv_bn(g, stem, x, true);
  h = g.add1("maxpool", Pool2dConfig::square(PoolKind::kMax, 3, 2, 1), {h});

  for (const BottleneckSpec& b : resnet_blocks(o.image, stages, stem.cfg.out_channels)) {
    std::vector<ConvShape> convs = bottleneck_convs(b);
    TensorId y = conv_bn(g, convs[0], h, true);
    y = conv_bn(g, convs[1], y, true);
    y = conv_bn(g, convs[2], y, false);
    TensorId shortcut = b.downsample ? conv_bn(g, convs[3], h, false) : h;
    y = g.add1(b.name + ".add", AddConfig{}, {y, shortcut});
    h = g.add1(b.name + ".relu", ActivationConfig{ActKind::kRelu}, {y});
  }
  h = g.add1("avgpool", GlobalAvgPool2dConfig{}, {h});
  LinearConfig fc;
  fc.out_features = o.classes;
  fc.init = Init::kUniformFanIn;  // PyTorch's nn.Linear default
  TensorId logits = g.add1("fc", fc, {h});
  TensorId loss = g.add1("loss", SoftmaxCrossEntropyConfig{}, {logits, labels});
  g.set_loss(loss);
  finish_image_classifier(*m, o.batch, o.lr, o.build_only);
  return m;
}

ResNetOptions resnet50_tiny() {
  ResNetOptions o;
  o.batch = 8;
  o.image = 32;
  o.classes = 10;
  o.width_div = 16;  // stem 4 channels, bottleneck widths 4, 8
  o.num_stages = 2;
  o.blocks_per_stage = 1;
  o.lr = 0.05;
  o.seed = 3;
  return o;
}

TBD_REGISTER_MODEL(ModelEntry{"ResNet50",
                              {1, 2, 4, 8, 16, 32, 64, 96, 128},
                              1,
                              [](Backend& be, const ModelArgs& a) {
                                ResNetOptions o;
                                o.batch = a.batch;
                                o.build_only = a.build_only;
                                return build_resnet50(be, o);
                              },
                              {}});

}  // namespace tbd
