// tests/models/inception_v3_test.cpp: Inception-v3 has torchvision's parameter count; on the
// CPU its data stays in oneDNN's blocked layout through the modules and no convolution runs on
// oneDNN's reference kernel; a tiny configuration (every module kind) overfits one batch and
// reruns identically; the auxiliary classifier trains with its 0.4 share of the loss.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backends/backends.h"
#include "layers/conv2d.h"
#include "models/inception_v3.h"
#include "models/registry.h"
#include "tests/models/overfit.h"
#include "tests/support/check.h"

namespace tbd {
namespace {

TEST(InceptionV3, ParameterCountsAreTorchvisions) {
  InceptionV3Options o;
  // torchvision's inception_v3 meta "num_params" (aux_logits=True, 1000 classes), and without
  // the aux head (what an eval-mode or aux_logits=False network trains).
  EXPECT_EQ(inception_v3_param_count(o), 27161264);
  o.aux = false;
  EXPECT_EQ(inception_v3_param_count(o), 23834568);

  auto be = make_cpu_backend();
  InceptionV3Options full;
  full.batch = 1;
  full.build_only = true;
  auto m = build_inception_v3(*be, full);
  EXPECT_EQ(m->graph().num_params(), 27161264);
}

// The full network at batch 2 (graph only): every convolution's forward and both backward
// primitives are real kernels (describe() names them), and no reorder sits anywhere but before
// the stem (the images arrive plain) or after the last blocked feature map.
TEST(InceptionV3, CpuKeepsBlockedLayoutAndNoReferenceConvolution) {
  auto be = make_cpu_backend();
  InceptionV3Options o;
  o.batch = 2;
  o.build_only = true;
  auto m = build_inception_v3(*be, o);
  int convs = 0;
  for (const Graph::Node& n : m->graph().nodes()) {
    const std::string kind = n.layer->kind();
    if (kind == Conv2dConfig::kKind) {
      ++convs;
      const std::string d = n.layer->describe();
      EXPECT_EQ(d.find("ref"), std::string::npos) << n.layer->name() << ": " << d;
    }
    if (kind == "Reorder") {
      ADD_FAILURE() << "reorder " << n.layer->name() << ": " << n.layer->describe();
    }
  }
  EXPECT_EQ(convs, 94 + 2);  // torchvision's 94 BasicConv2d, and the aux head's 2
}

TEST(InceptionV3, TinyConfigurationOverfitsAndReruns) {
  auto be = make_cpu_backend();
  auto a = losses(*build_inception_v3(*be, inception_v3_tiny()), 60);
  expect_overfits(a);
  auto b = losses(*build_inception_v3(*be, inception_v3_tiny()), 60);
  EXPECT_EQ(a, b);
}

// At 299 pixels (channels / 16) with the aux head: the loss is the main loss plus 0.4 times
// the aux loss, and the aux head's parameters get gradients.
TEST(InceptionV3, AuxClassifierTrainsWithItsShare) {
  auto be = make_cpu_backend();
  InceptionV3Options o = inception_v3_tiny();
  o.image = 299;
  o.batch = 2;
  o.aux = true;
  o.dropout = 0;
  auto m = build_inception_v3(*be, o);
  EXPECT_EQ(m->graph().num_params(), inception_v3_param_count(o));
  m->train_step();
  float main_loss = NAN, aux_loss = NAN, total = m->loss();
  Param* aux_fc = nullptr;
  for (Graph::Node& n : m->graph().nodes()) {
    const std::string& name = n.layer->name();
    if (name == "loss") main_loss = test::to_host(*be, m->graph().tensor(n.outputs[0]))[0];
    if (name == "AuxLogits.loss") aux_loss = test::to_host(*be, m->graph().tensor(n.outputs[0]))[0];
    if (name == "AuxLogits.fc") aux_fc = &n.layer->params()[0];
  }
  ASSERT_TRUE(std::isfinite(main_loss) && std::isfinite(aux_loss));
  // A near-uniform start: each CE is about log(10); the aux one enters with weight 0.4.
  EXPECT_NEAR(aux_loss, 0.4 * std::log(10.0), 0.4 * 1.0);
  EXPECT_NEAR(total, main_loss + aux_loss, 1e-5 * std::abs(total));
  ASSERT_NE(aux_fc, nullptr);
  double g2 = 0;
  for (double g : test::to_host(*be, aux_fc->grad)) g2 += g * g;
  EXPECT_GT(g2, 0) << "the aux classifier got no gradient";
}

TEST(InceptionV3, Registered) {
  bool found = false;
  for (const auto& e : model_registry()) {
    if (e.name != "InceptionV3") continue;
    found = true;
    EXPECT_EQ(e.batches, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 96, 128}));
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace tbd
