// models/faster_rcnn.cpp: the Faster R-CNN (ResNet-101, MXNet's end-to-end variant) training
// graph, its parameter arithmetic and its registration.
#include "models/faster_rcnn.h"

#include <algorithm>
#include <set>

#include "core/random.h"
#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/detection.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/pool2d.h"
#include "layers/smooth_l1_loss.h"
#include "layers/tensor_ops.h"
#include "models/registry.h"

namespace tbd {
namespace {

// A stage of pre-activation bottleneck units: `mid` channels inside, `out` out, the stride in
// the first unit's 3x3 convolution and its projection shortcut.
struct Stage {
  int units;
  int64_t mid, out, stride;
};

std::vector<Stage> stages_of(const FasterRcnnOptions& o) {
  const int64_t d = o.width_div;
  return {{o.units.at(0), 64 / d, 256 / d, 1},
          {o.units.at(1), 128 / d, 512 / d, 2},
          {o.units.at(2), 256 / d, 1024 / d, 2},
          {o.units.at(3), 512 / d, 2048 / d, 2}};
}

int64_t anchors_per_cell(const FasterRcnnOptions& o) {
  return static_cast<int64_t>(o.anchor_scales.size() * o.anchor_ratios.size());
}

// MXNet's frozen BatchNorm (use_global_stats, eps 2e-5), optionally with the ReLU after it.
BatchNorm2dConfig frozen_bn(bool relu) {
  BatchNorm2dConfig c;
  c.eps = 2e-5;
  c.frozen = true;
  c.relu = relu;
  return c;
}

// MXNet's residual_unit (bottle_neck): act1 = relu(bn1(x)); conv1 1x1 mid; relu(bn2); conv2 3x3
// mid (stride); relu(bn3); conv3 1x1 out; + x, or + a 1x1 projection of act1 where the unit
// changes the shape.
TensorId unit(Graph& g, const std::string& name, TensorId x, int64_t in, const Stage& s,
              int64_t stride) {
  TensorId act1 = g.add1(name + ".bn1", frozen_bn(true), {x});
  TensorId h = g.add1(name + ".conv1", Conv2dConfig::square(s.mid, 1), {act1});
  h = g.add1(name + ".bn2", frozen_bn(true), {h});
  h = g.add1(name + ".conv2", Conv2dConfig::square(s.mid, 3, stride, 1), {h});
  h = g.add1(name + ".bn3", frozen_bn(true), {h});
  h = g.add1(name + ".conv3", Conv2dConfig::square(s.out, 1), {h});
  const bool project = in != s.out || stride != 1;
  TensorId shortcut =
      project ? g.add1(name + ".sc", Conv2dConfig::square(s.out, 1, stride, 0), {act1}) : x;
  return g.add1(name + ".add", AddConfig{}, {h, shortcut});
}

int64_t unit_params(int64_t in, const Stage& s, int64_t stride, int64_t* bn) {
  *bn += 2 * (in + 2 * s.mid);
  int64_t n = in * s.mid + 9 * s.mid * s.mid + s.mid * s.out;
  if (in != s.out || stride != 1) n += in * s.out;
  return n;
}

AnchorSpec anchor_spec(const FasterRcnnOptions& o) {
  AnchorSpec a;
  a.feature_stride = 16;
  a.scales = o.anchor_scales;
  a.ratios = o.anchor_ratios;
  a.image_h = o.image_h;
  a.image_w = o.image_w;
  std::tie(a.feature_h, a.feature_w) = faster_rcnn_feature_size(o);
  return a;
}

// num_gt random boxes per image inside the image (integer corners, sides from 32 px, or a
// quarter of the image when smaller, to half of it), classes in [1, classes); the rest of the
// max_gt rows -1. The batch follows from the element count (layer benchmarks use other ones).
Model::HostFill ground_truth(const FasterRcnnOptions& o) {
  return [o](void* host, int64_t numel) {
    float* p = static_cast<float*>(host);
    std::fill(p, p + numel, -1.f);
    Rng rng(seed_for(o.seed, "faster_rcnn.gt"));
    for (int64_t n = 0; n < numel / (o.max_gt * 5); ++n) {
      for (int64_t i = 0; i < o.num_gt; ++i) {
        float* b = p + (n * o.max_gt + i) * 5;
        const int64_t lo_w = std::min<int64_t>(32, o.image_w / 4), hi_w = o.image_w / 2;
        const int64_t lo_h = std::min<int64_t>(32, o.image_h / 4), hi_h = o.image_h / 2;
        const int64_t w = rng.randint(lo_w, hi_w + 1), h = rng.randint(lo_h, hi_h + 1);
        const int64_t x1 = rng.randint(0, o.image_w - w + 1),
                      y1 = rng.randint(0, o.image_h - h + 1);
        b[0] = static_cast<float>(x1);
        b[1] = static_cast<float>(y1);
        b[2] = static_cast<float>(x1 + w - 1);
        b[3] = static_cast<float>(y1 + h - 1);
        b[4] = static_cast<float>(rng.randint(1, o.classes));
      }
    }
  };
}

// RoIs as a layer benchmark of the head is fed them: `per_image` rows per image, each
// (n, x1, y1, x2, y2) with integer corners inside the image, sides from 16 px to half of it.
Model::HostFill sample_rois(const FasterRcnnOptions& o, int64_t per_image) {
  return [o, per_image](void* host, int64_t numel) {
    float* p = static_cast<float*>(host);
    Rng rng(seed_for(o.seed, "faster_rcnn.sample_rois"));
    for (int64_t r = 0; r < numel / 5; ++r) {
      float* b = p + r * 5;
      const int64_t w = rng.randint(16, std::max<int64_t>(17, o.image_w / 2));
      const int64_t h = rng.randint(16, std::max<int64_t>(17, o.image_h / 2));
      const int64_t x1 = rng.randint(0, std::max<int64_t>(1, o.image_w - w));
      const int64_t y1 = rng.randint(0, std::max<int64_t>(1, o.image_h - h));
      b[0] = static_cast<float>(r / per_image);
      b[1] = static_cast<float>(x1);
      b[2] = static_cast<float>(y1);
      b[3] = static_cast<float>(x1 + w - 1);
      b[4] = static_cast<float>(y1 + h - 1);
    }
  };
}

void check_options(const FasterRcnnOptions& o) {
  TBD_CHECK(o.batch > 0 && o.image_h >= 32 && o.image_w >= 32, "FasterRCNN: batch ", o.batch,
            " and image ", o.image_h, "x", o.image_w,
            " must be positive, the image at least 32x32");
  TBD_CHECK(o.classes >= 2, "FasterRCNN: classes=", o.classes, " must be >= 2 (with background)");
  TBD_CHECK(o.num_gt >= 1 && o.num_gt <= o.max_gt, "FasterRCNN: gt=", o.num_gt,
            " real boxes per image must be in [1, ", o.max_gt, "]");
  TBD_CHECK(o.units.size() == 4, "FasterRCNN: units must list 4 stages, got ", o.units.size());
  TBD_CHECK(o.width_div >= 1 && 64 % o.width_div == 0, "FasterRCNN: width_div=", o.width_div,
            " must divide 64");
}

}  // namespace

std::pair<int64_t, int64_t> faster_rcnn_feature_size(const FasterRcnnOptions& o) {
  auto down = [](int64_t x) {
    x = (x + 6 - 7) / 2 + 1;     // conv0 7x7/2 pad 3
    x = (x + 2 - 3) / 2 + 1;     // pool0 3x3/2 pad 1
    x = (x + 2 - 3) / 2 + 1;     // stage 2's 3x3/2
    return (x + 2 - 3) / 2 + 1;  // stage 3's
  };
  return {down(o.image_h), down(o.image_w)};
}

FasterRcnnOptions faster_rcnn_tiny() {
  FasterRcnnOptions o;
  o.batch = 2;
  o.image_h = o.image_w = 64;
  o.classes = 3;
  o.max_gt = 4;
  o.num_gt = 1;
  o.units = {1, 1, 1, 1};
  o.width_div = 4;
  o.anchor_scales = {1, 2};
  o.anchor_ratios = {1};
  o.rpn_channels = 32;
  o.rpn_batch = 16;
  o.pre_nms = 32;
  o.post_nms = 16;
  o.rois_per_image = 8;
  o.pooled = 4;
  o.lr = 0.01;
  o.seed = 14;
  return o;
}

int64_t faster_rcnn_param_count(const FasterRcnnOptions& o, bool trained) {
  const std::vector<Stage> st = stages_of(o);
  const int64_t c0 = 64 / o.width_div;
  int64_t bn = 2 * 3 + 2 * c0;        // bn_data, bn0
  const int64_t conv0 = 3 * 49 * c0;  // frozen
  int64_t stage1 = 0, convs = 0, in = c0;
  for (std::size_t s = 0; s < st.size(); ++s) {
    for (int u = 0; u < st[s].units; ++u) {
      const int64_t n = unit_params(in, st[s], u == 0 ? st[s].stride : 1, &bn);
      (s == 0 ? stage1 : convs) += n;
      in = st[s].out;
    }
  }
  bn += 2 * in;  // bn1 after stage 4
  const int64_t A = anchors_per_cell(o), c3 = st[2].out, r = o.rpn_channels;
  const int64_t rpn = (9 * c3 * r + r) + (r * 2 * A + 2 * A) + (r * 4 * A + 4 * A);
  const int64_t heads = (in * o.classes + o.classes) + (in * 4 * o.classes + 4 * o.classes);
  const int64_t train = convs + rpn + heads;
  return trained ? train : train + bn + conv0 + stage1;
}

std::vector<std::pair<std::string, float>> FasterRcnn::loss_terms() {
  std::vector<std::pair<std::string, float>> out;
  backend().synchronize();
  for (const auto& [name, id] : terms_) {
    float v = 0;
    backend().copy_to_host(&v, graph().tensor(id));
    out.emplace_back(name, v);
  }
  return out;
}

std::unique_ptr<FasterRcnn> build_faster_rcnn(Backend& be, const FasterRcnnOptions& o) {
  check_options(o);
  auto m = std::make_unique<FasterRcnn>(be, "FasterRCNN", o.seed);
  Graph& g = m->graph();
  const int64_t N = o.batch;
  TensorId x = m->data_input("images", Shape{N, 3, o.image_h, o.image_w}, DType::kF32, -1, 1);
  TensorId gt = m->data_input("gt_boxes", Shape{N, o.max_gt, 5}, DType::kF32, -1,
                              static_cast<double>(std::max(o.image_h, o.image_w)), ground_truth(o));

  // Backbone to stride 16. conv0 and stage 1 are frozen (as every BatchNorm is).
  const std::vector<Stage> st = stages_of(o);
  const int64_t c0 = 64 / o.width_div;
  TensorId h = g.add1("bn_data", frozen_bn(false), {x});
  h = g.add1("conv0", Conv2dConfig::square(c0, 7, 2, 3), {h});
  h = g.add1("bn0", frozen_bn(true), {h});
  h = g.add1("pool0", Pool2dConfig::square(PoolKind::kMax, 3, 2, 1), {h});
  int64_t in = c0;
  auto run_stage = [&](std::size_t s, TensorId t) {
    for (int u = 0; u < st[s].units; ++u) {
      const std::string name = "stage" + std::to_string(s + 1) + ".unit" + std::to_string(u + 1);
      t = unit(g, name, t, in, st[s], u == 0 ? st[s].stride : 1);
      in = st[s].out;
    }
    return t;
  };
  for (std::size_t s = 0; s < 3; ++s) h = run_stage(s, h);
  const TensorId feat = h;
  const int64_t c3 = in;

  // Region proposal network and its targets.
  const AnchorSpec anchors = anchor_spec(o);
  const int64_t A = anchors.num_anchors(), FH = anchors.feature_h, FW = anchors.feature_w;
  TensorId r = g.add1("rpn.conv", Conv2dConfig::square(o.rpn_channels, 3, 1, 1, true), {feat});
  r = g.add1("rpn.relu", ActivationConfig{ActKind::kRelu}, {r});
  TensorId rpn_cls = g.add1("rpn.cls", Conv2dConfig::square(2 * A, 1, 1, 0, true), {r});
  TensorId rpn_bbox = g.add1("rpn.bbox", Conv2dConfig::square(4 * A, 1, 1, 0, true), {r});

  AnchorTargetConfig at;
  at.anchors = anchors;
  at.batch_size = o.rpn_batch;
  at.seed = seed_for(o.seed, "rpn.anchor_target");
  std::vector<TensorId> atv = g.add("rpn.anchor_target", at, {gt});
  // (N, 2A, H, W) -> (N, 2, A*H*W) -> (N, A*H*W, 2): a softmax over (background, foreground)
  // per anchor, in AnchorTarget's (a, h, w) order (MXNet's reshape trick).
  TensorId logits = g.add1("rpn.cls_reshape", ReshapeConfig{{-1, 2, A * FH * FW}}, {rpn_cls});
  logits = g.add1("rpn.cls_pairs", TransposeConfig{{0, 2, 1}}, {logits});
  SoftmaxCrossEntropyConfig rpn_ce;
  rpn_ce.ignore_index = -1;
  TensorId rpn_cls_loss = g.add1("rpn.cls_loss", rpn_ce, {logits, atv[0]});
  SmoothL1LossConfig rpn_l1;
  rpn_l1.sigma = 3;
  rpn_l1.scale = 1.0 / static_cast<double>(o.rpn_batch * N);
  TensorId rpn_bbox_loss = g.add1("rpn.bbox_loss", rpn_l1, {rpn_bbox, atv[1], atv[2]});

  ProposalConfig pc;
  pc.anchors = anchors;
  pc.pre_nms_top_n = o.pre_nms;
  pc.post_nms_top_n = o.post_nms;
  TensorId proposals = g.add1("proposal", pc, {rpn_cls, rpn_bbox});
  ProposalTargetConfig ptc;
  ptc.num_classes = o.classes;
  ptc.rois_per_image = o.rois_per_image;
  ptc.seed = seed_for(o.seed, "proposal_target");
  std::vector<TensorId> ptv = g.add("proposal_target", ptc, {proposals, gt});

  // The detector head on the sampled RoIs.
  RoIPoolConfig rp;
  rp.mode = o.roi_mode;
  rp.pooled_h = rp.pooled_w = o.pooled;
  rp.spatial_scale = 1.0 / 16;
  TensorId pooled = g.add1("roi_pool", rp, {feat, ptv[0]});
  in = c3;
  h = run_stage(3, pooled);
  h = g.add1("bn1", frozen_bn(true), {h});
  h = g.add1("pool1", GlobalAvgPool2dConfig{}, {h});
  LinearConfig cls;
  cls.out_features = o.classes;
  cls.init = Init::kUniformFanIn;
  TensorId cls_score = g.add1("cls_score", cls, {h});
  LinearConfig box = cls;
  box.out_features = 4 * o.classes;
  TensorId bbox_pred = g.add1("bbox_pred", box, {h});
  TensorId rcnn_cls_loss =
      g.add1("rcnn.cls_loss", SoftmaxCrossEntropyConfig{}, {cls_score, ptv[1]});
  SmoothL1LossConfig rcnn_l1;
  rcnn_l1.sigma = 1;
  rcnn_l1.scale = 1.0 / static_cast<double>(o.rois_per_image * N);
  TensorId rcnn_bbox_loss = g.add1("rcnn.bbox_loss", rcnn_l1, {bbox_pred, ptv[2], ptv[3]});

  TensorId loss = g.add1("loss.rpn", AddConfig{}, {rpn_cls_loss, rpn_bbox_loss});
  loss = g.add1("loss.rcnn_cls", AddConfig{}, {loss, rcnn_cls_loss});
  loss = g.add1("loss", AddConfig{}, {loss, rcnn_bbox_loss});
  g.set_loss(loss);
  // What the layer benchmarks of the consumers are fed (models/model.h).
  const double extent = static_cast<double>(std::max(o.image_h, o.image_w));
  m->set_sample_values(gt, -1, extent, ground_truth(o));
  m->set_sample_values(atv[0], -1, 2);
  m->set_sample_values(proposals, 0, extent, sample_rois(o, o.post_nms));
  m->set_sample_values(ptv[0], 0, extent, sample_rois(o, o.rois_per_image));
  m->set_sample_values(ptv[1], 0, static_cast<double>(o.classes));
  m->terms_ = {{"rpn_cls", rpn_cls_loss},
               {"rpn_bbox", rpn_bbox_loss},
               {"rcnn_cls", rcnn_cls_loss},
               {"rcnn_bbox", rcnn_bbox_loss}};
  for (const auto& [term, id] : m->terms_) g.keep(id);  // read after the step (loss_terms)

  // Frozen before finalize: the stem and stage 1 run no backward at all.
  for (const char* prefix : {"conv0", "stage1."}) g.set_param_grads(prefix, false);
  m->set_samples_per_step(N);
  m->set_extra_items("rois", static_cast<double>(N * o.rois_per_image));
  if (o.build_only) return m;
  SgdConfig sgd;
  sgd.lr = o.lr;
  sgd.momentum = 0.9;
  sgd.weight_decay = 5e-4;
  sgd.clip.value = 5;
  std::set<const Param*> frozen;
  for (auto& node : g.nodes()) {
    if (node.layer->param_grads()) continue;
    for (const Param& p : node.layer->params()) frozen.insert(&p);
  }
  m->finalize([&](std::vector<Param*> ps) {
    std::erase_if(ps, [&](Param* p) { return frozen.count(p) > 0; });
    return make_optimizer(be, sgd, std::move(ps));
  });
  return m;
}

TBD_REGISTER_MODEL(ModelEntry{"FasterRCNN",
                              {1, 2, 4, 8},
                              1,
                              [](Backend& be, const ModelArgs& a) {
                                FasterRcnnOptions o;
                                o.batch = a.batch;
                                o.image_h = a.param("height", o.image_h);
                                o.image_w = a.param("width", o.image_w);
                                o.num_gt = a.param("gt", o.num_gt);
                                o.build_only = a.build_only;
                                return std::unique_ptr<Model>(build_faster_rcnn(be, o));
                              },
                              {"height", "width", "gt"}});

}  // namespace tbd
