// models/inception_v3.cpp: the Inception-v3 training graph (torchvision's definition, with the
// auxiliary classifier trained) and its parameter count.
//
// One builder serves both: Net either adds the layers to a graph or, without one, only follows
// the shapes and counts the parameters, so the count cannot drift from the graph.
#include "models/inception_v3.h"

#include <algorithm>

#include "layers/activation.h"
#include "layers/batchnorm2d.h"
#include "layers/conv2d.h"
#include "layers/dropout.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/pool2d.h"
#include "layers/tensor_ops.h"
#include "models/registry.h"

namespace tbd {
namespace {

// A feature map: its tensor (none when only counting) and (C, H, W).
struct Fm {
  TensorId id = -1;
  int64_t c = 0, h = 0, w = 0;
};

class Net {
 public:
  Net(Graph* g, int64_t width_div) : g_(g), div_(width_div) {}
  int64_t params() const { return params_; }
  int64_t ch(int64_t c) const { return std::max<int64_t>(1, c / div_); }

  // torchvision's BasicConv2d: conv (no bias), BatchNorm (eps 1e-3, affine) with the ReLU fused.
  Fm conv(const std::string& name, const Fm& x, int64_t out, int64_t kh, int64_t kw,
          int64_t stride = 1, int64_t ph = 0, int64_t pw = 0) {
    Conv2dConfig c;
    c.out_channels = ch(out);
    c.kernel_h = kh, c.kernel_w = kw;
    c.stride_h = c.stride_w = stride;
    c.pad_h = ph, c.pad_w = pw;
    Fm y{-1, c.out_channels, (x.h + 2 * ph - kh) / stride + 1, (x.w + 2 * pw - kw) / stride + 1};
    params_ += c.out_channels * x.c * kh * kw + 2 * c.out_channels;
    if (g_ != nullptr) {
      BatchNorm2dConfig bn;
      bn.eps = 1e-3;
      bn.relu = true;  // fused: one pass over the feature map instead of two
      TensorId h = g_->add1(name + ".conv", c, {x.id});
      y.id = g_->add1(name + ".bn", bn, {h});
    }
    return y;
  }
  Fm conv(const std::string& name, const Fm& x, int64_t out, int64_t k) {
    return conv(name, x, out, k, k, 1, (k - 1) / 2, (k - 1) / 2);  // square, 'same'
  }

  Fm pool(const std::string& name, const Fm& x, PoolKind kind, int64_t k, int64_t stride,
          int64_t pad = 0) {
    Pool2dConfig p = Pool2dConfig::square(kind, k, stride, pad);
    p.count_include_pad = true;  // F.avg_pool2d's default (models/inception_v3.h)
    Fm y{-1, x.c, (x.h + 2 * pad - k) / stride + 1, (x.w + 2 * pad - k) / stride + 1};
    if (g_ != nullptr) y.id = g_->add1(name, p, {x.id});
    return y;
  }

  Fm concat(const std::string& name, const std::vector<Fm>& xs) {
    Fm y{-1, 0, xs[0].h, xs[0].w};
    std::vector<TensorId> ids;
    for (const Fm& x : xs) y.c += x.c, ids.push_back(x.id);
    if (g_ != nullptr) y.id = g_->add1(name, ConcatConfig{1}, ids);
    return y;
  }

  // Global average pool, optional dropout, FC (nn.Linear's default init).
  TensorId classifier(const std::string& pool, const std::string& drop, const std::string& fc,
                      const Fm& x, double p, int64_t classes) {
    params_ += x.c * classes + classes;
    if (g_ == nullptr) return -1;
    TensorId h = g_->add1(pool, GlobalAvgPool2dConfig{}, {x.id});
    if (p > 0) {
      DropoutConfig d;
      d.p = p;
      h = g_->add1(drop, d, {h});
    }
    LinearConfig l;
    l.out_features = classes;
    l.init = Init::kUniformFanIn;
    return g_->add1(fc, l, {h});
  }

 private:
  Graph* g_;
  int64_t div_;
  int64_t params_ = 0;
};

Fm inception_a(Net& n, const std::string& m, const Fm& x, int64_t pool_features) {
  Fm b1 = n.conv(m + ".branch1x1", x, 64, 1);
  Fm b5 = n.conv(m + ".branch5x5_1", x, 48, 1);
  b5 = n.conv(m + ".branch5x5_2", b5, 64, 5);
  Fm b3 = n.conv(m + ".branch3x3dbl_1", x, 64, 1);
  b3 = n.conv(m + ".branch3x3dbl_2", b3, 96, 3);
  b3 = n.conv(m + ".branch3x3dbl_3", b3, 96, 3);
  Fm bp = n.pool(m + ".branch_pool.avgpool", x, PoolKind::kAvg, 3, 1, 1);
  bp = n.conv(m + ".branch_pool", bp, pool_features, 1);
  return n.concat(m + ".concat", {b1, b5, b3, bp});
}

Fm inception_b(Net& n, const std::string& m, const Fm& x) {
  Fm b3 = n.conv(m + ".branch3x3", x, 384, 3, 3, 2);
  Fm bd = n.conv(m + ".branch3x3dbl_1", x, 64, 1);
  bd = n.conv(m + ".branch3x3dbl_2", bd, 96, 3);
  bd = n.conv(m + ".branch3x3dbl_3", bd, 96, 3, 3, 2);
  Fm bp = n.pool(m + ".branch_pool", x, PoolKind::kMax, 3, 2);
  return n.concat(m + ".concat", {b3, bd, bp});
}

Fm inception_c(Net& n, const std::string& m, const Fm& x, int64_t c7) {
  auto c1x7 = [&](const std::string& name, const Fm& in, int64_t out) {
    return n.conv(name, in, out, 1, 7, 1, 0, 3);
  };
  auto c7x1 = [&](const std::string& name, const Fm& in, int64_t out) {
    return n.conv(name, in, out, 7, 1, 1, 3, 0);
  };
  Fm b1 = n.conv(m + ".branch1x1", x, 192, 1);
  Fm b7 = n.conv(m + ".branch7x7_1", x, c7, 1);
  b7 = c1x7(m + ".branch7x7_2", b7, c7);
  b7 = c7x1(m + ".branch7x7_3", b7, 192);
  Fm bd = n.conv(m + ".branch7x7dbl_1", x, c7, 1);
  bd = c7x1(m + ".branch7x7dbl_2", bd, c7);
  bd = c1x7(m + ".branch7x7dbl_3", bd, c7);
  bd = c7x1(m + ".branch7x7dbl_4", bd, c7);
  bd = c1x7(m + ".branch7x7dbl_5", bd, 192);
  Fm bp = n.pool(m + ".branch_pool.avgpool", x, PoolKind::kAvg, 3, 1, 1);
  bp = n.conv(m + ".branch_pool", bp, 192, 1);
  return n.concat(m + ".concat", {b1, b7, bd, bp});
}

Fm inception_d(Net& n, const std::string& m, const Fm& x) {
  Fm b3 = n.conv(m + ".branch3x3_1", x, 192, 1);
  b3 = n.conv(m + ".branch3x3_2", b3, 320, 3, 3, 2);
  Fm b7 = n.conv(m + ".branch7x7x3_1", x, 192, 1);
  b7 = n.conv(m + ".branch7x7x3_2", b7, 192, 1, 7, 1, 0, 3);
  b7 = n.conv(m + ".branch7x7x3_3", b7, 192, 7, 1, 1, 3, 0);
  b7 = n.conv(m + ".branch7x7x3_4", b7, 192, 3, 3, 2);
  Fm bp = n.pool(m + ".branch_pool", x, PoolKind::kMax, 3, 2);
  return n.concat(m + ".concat", {b3, b7, bp});
}

// The 1x3 and 3x1 convolutions of a branch read one shared input; all six outputs are
// concatenated at once (torchvision's nested concat gives the same channel order).
Fm inception_e(Net& n, const std::string& m, const Fm& x) {
  Fm b1 = n.conv(m + ".branch1x1", x, 320, 1);
  Fm b3 = n.conv(m + ".branch3x3_1", x, 384, 1);
  Fm b3a = n.conv(m + ".branch3x3_2a", b3, 384, 1, 3, 1, 0, 1);
  Fm b3b = n.conv(m + ".branch3x3_2b", b3, 384, 3, 1, 1, 1, 0);
  Fm bd = n.conv(m + ".branch3x3dbl_1", x, 448, 1);
  bd = n.conv(m + ".branch3x3dbl_2", bd, 384, 3);
  Fm bda = n.conv(m + ".branch3x3dbl_3a", bd, 384, 1, 3, 1, 0, 1);
  Fm bdb = n.conv(m + ".branch3x3dbl_3b", bd, 384, 3, 1, 1, 1, 0);
  Fm bp = n.pool(m + ".branch_pool.avgpool", x, PoolKind::kAvg, 3, 1, 1);
  bp = n.conv(m + ".branch_pool", bp, 192, 1);
  return n.concat(m + ".concat", {b1, b3a, b3b, bda, bdb, bp});
}

// The whole network on `n` from the images x; returns the logits and the aux logits (-1
// without the aux head or when counting).
std::pair<TensorId, TensorId> inception_v3(Net& n, const Fm& images, const InceptionV3Options& o) {
  Fm h = n.conv("Conv2d_1a_3x3", images, 32, 3, 3, 2);
  h = n.conv("Conv2d_2a_3x3", h, 32, 3, 3, 1);
  h = n.conv("Conv2d_2b_3x3", h, 64, 3);
  h = n.pool("maxpool1", h, PoolKind::kMax, 3, 2);
  h = n.conv("Conv2d_3b_1x1", h, 80, 1);
  h = n.conv("Conv2d_4a_3x3", h, 192, 3, 3, 1);
  h = n.pool("maxpool2", h, PoolKind::kMax, 3, 2);
  h = inception_a(n, "Mixed_5b", h, 32);
  h = inception_a(n, "Mixed_5c", h, 64);
  h = inception_a(n, "Mixed_5d", h, 64);
  h = inception_b(n, "Mixed_6a", h);
  h = inception_c(n, "Mixed_6b", h, 128);
  h = inception_c(n, "Mixed_6c", h, 160);
  h = inception_c(n, "Mixed_6d", h, 160);
  h = inception_c(n, "Mixed_6e", h, 192);
  TensorId aux = -1;
  if (o.aux) {
    Fm a = n.pool("AuxLogits.avgpool", h, PoolKind::kAvg, 5, 3);
    a = n.conv("AuxLogits.conv0", a, 128, 1);
    a = n.conv("AuxLogits.conv1", a, 768, 5, 5, 1);
    aux = n.classifier("AuxLogits.gap", "", "AuxLogits.fc", a, 0, o.classes);
  }
  h = inception_d(n, "Mixed_7a", h);
  h = inception_e(n, "Mixed_7b", h);
  h = inception_e(n, "Mixed_7c", h);
  TensorId logits = n.classifier("avgpool", "dropout", "fc", h, o.dropout, o.classes);
  return {logits, aux};
}

}  // namespace

int64_t inception_v3_param_count(const InceptionV3Options& o) {
  Net n(nullptr, o.width_div);
  inception_v3(n, Fm{-1, 3, o.image, o.image}, o);
  return n.params();
}

std::unique_ptr<Model> build_inception_v3(Backend& be, const InceptionV3Options& o) {
  auto m = std::make_unique<Model>(be, "InceptionV3", o.seed);
  Graph& g = m->graph();
  TensorId x = m->data_input("images", Shape{o.batch, 3, o.image, o.image}, DType::kF32, -1, 1);
  TensorId labels = m->data_input("labels", Shape{o.batch}, DType::kI32, 0, o.classes);
  Net n(&g, o.width_div);
  auto [logits, aux] = inception_v3(n, Fm{x, 3, o.image, o.image}, o);
  TensorId loss = g.add1("loss", SoftmaxCrossEntropyConfig{}, {logits, labels});
  if (aux >= 0) {
    SoftmaxCrossEntropyConfig a;
    a.weight = o.aux_weight;
    TensorId aux_loss = g.add1("AuxLogits.loss", a, {aux, labels});
    g.keep(loss);  // both terms readable after a step
    g.keep(aux_loss);
    loss = g.add1("loss.total", AddConfig{}, {loss, aux_loss});
  }
  g.set_loss(loss);
  finish_image_classifier(*m, o.batch, o.lr, o.build_only);
  return m;
}

InceptionV3Options inception_v3_tiny() {
  InceptionV3Options o;
  o.batch = 4;
  o.image = 75;
  o.classes = 10;
  o.aux = false;
  o.width_div = 16;
  o.dropout = 0.5;
  o.lr = 0.05;
  o.seed = 11;
  return o;
}

TBD_REGISTER_MODEL(ModelEntry{"InceptionV3",
                              {1, 2, 4, 8, 16, 32, 64, 96, 128},
                              1,
                              [](Backend& be, const ModelArgs& a) {
                                InceptionV3Options o;
                                o.batch = a.batch;
                                o.build_only = a.build_only;
                                return build_inception_v3(be, o);
                              },
                              {}});

}  // namespace tbd
