// tests/layers/contract_test.cpp: what Layer takes from a kind's contract rather than from the
// implementation: the kind's name, the arity of every call, and the problem description that
// every backend shares (the implementation adds only its algorithm after " | ").
#include <gtest/gtest.h>

#include <vector>

#include "layers/activation.h"
#include "layers/conv2d.h"
#include "layers/linear.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

TEST(LayerContract, KindAndProblemComeFromTheContract) {
  auto be = make_cpu_backend();
  Conv2dConfig cfg;
  cfg.out_channels = 32;
  cfg.kernel_h = cfg.kernel_w = 3;
  cfg.pad_h = cfg.pad_w = 1;
  const std::vector<TensorDesc> in{TensorDesc{Shape{2, 16, 8, 8}}};
  auto layer = make_layer(*be, "c", cfg, in);
  EXPECT_STREQ(layer->kind(), "Conv2d");
  const Contract c = contract_of("c", cfg, in);
  EXPECT_EQ(c.problem, "x (2, 16, 8, 8) K=32 3x3 s1 p1");
  // The implementation's words follow the problem: oneDNN names its kernels.
  const std::string d = layer->describe();
  EXPECT_EQ(d.rfind(c.problem + " | fwd ", 0), 0u) << d;

  // A kind whose implementation names no algorithm is described by its problem alone.
  ActivationConfig relu;
  auto act = make_layer(*be, "r", relu, in);
  EXPECT_STREQ(act->kind(), "Activation");
  EXPECT_EQ(act->describe(), contract_of("r", relu, in).problem);
}

TEST(LayerContract, EveryCallChecksItsArity) {
  auto be = make_cpu_backend();
  LinearConfig cfg;
  cfg.out_features = 4;
  auto layer = make_layer(*be, "fc", cfg, {TensorDesc{Shape{2, 3}}});
  Tensor x = be->empty(Shape{2, 3}, MemCategory::kDynamic),
         y = be->empty(Shape{2, 4}, MemCategory::kDynamic);
  const Tensor* two_in[] = {&x, &x};
  Tensor* one_out[] = {&y};
  expect_error([&] { layer->forward(one_out, two_in); },
               {"Linear 'fc'", "forward inputs", "expected 1", "got 2"});
  const Tensor* one_in[] = {&x};
  expect_error([&] { layer->forward({}, one_in); },
               {"Linear 'fc'", "forward outputs", "expected 1", "got 0"});
  Tensor dx = be->empty(Shape{2, 3}, MemCategory::kDynamic);
  Tensor* dxs[] = {&dx, &dx};
  const Tensor* dys[] = {&y};
  const Tensor* ys[] = {&y};
  expect_error([&] { layer->backward(dxs, dys, one_in, ys); },
               {"Linear 'fc'", "backward input gradients", "expected 1", "got 2"});
  expect_error([&] { layer->backward_weights({}, one_in, ys); },
               {"Linear 'fc'", "backward output gradients", "expected 1", "got 0"});

  // A kind whose backward is one library call refuses the split calls by name.
  ActivationConfig relu;
  auto act = make_layer(*be, "r", relu, {TensorDesc{Shape{2, 3}}});
  ASSERT_FALSE(act->split_backward());
  Tensor* dx1[] = {&dx};
  const Tensor* dy1[] = {&x};
  expect_error([&] { act->backward_data(dx1, dy1, one_in, dy1); }, {"'r'", "one call"});
}

}  // namespace
}  // namespace tbd::test
