// models/resnet50.cpp: the ResNet-50 v1.5 training graph, built from models/tables.h's spec.
#include "models/resnet50.h"

#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/pool2d.h"
#include "layers/tensor_ops.h"
#include "models/registry.h"

namespace tbd {
namespace {

TensorId conv_bn(Graph& g, const ConvShape& c, TensorId x, bool relu) {
  TensorId h = g.add1(c.name, c.cfg, {x});
  std::string bn = c.name;
  auto pos = bn.rfind("conv");
  if (pos != std::string::npos) bn.replace(pos, 4, "bn");
  else bn += ".bn";
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

  SgdConfig sgd;
  sgd.lr = o.lr;
  sgd.momentum = 0.9;
  sgd.weight_decay = 1e-4;
  m->finalize([&](std::vector<Param*> ps) { return make_optimizer(be, sgd, std::move(ps)); });
  m->set_samples_per_step(o.batch);
  return m;
}

TBD_REGISTER_MODEL(ModelEntry{
    "ResNet50", {1, 2, 4, 8, 16, 32, 64, 96, 128}, 1, [](Backend& be, int64_t batch) {
      ResNetOptions o;
      o.batch = batch;
      return build_resnet50(be, o);
    }});

}  // namespace tbd
