// tests/layers/bytes_test.cpp: the analytic bytes of every layer kind and optimizer against
// values worked out by hand for small shapes (the formulas documented in layers/*.h and
// layers/layer.h), that CPU layers report exactly their kind's formula through Layer::bytes(),
// and that a graph sums its layers.
//
// Each expectation spells out the tensors of its phase: "4 * (x + w + b + y)" with the element
// counts of the shape, so a change to a formula has to change the documented sum here too.
#include <gtest/gtest.h>

#include "layers/activation.h"
#include "layers/attention.h"
#include "layers/batchnorm2d.h"
#include "layers/cast_scale.h"
#include "layers/conv2d.h"
#include "layers/detection.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/input_grad.h"
#include "layers/layer_norm.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/mean_loss.h"
#include "layers/mlp_attention.h"
#include "layers/optimizer.h"
#include "layers/pool2d.h"
#include "layers/positional_encoding.h"
#include "layers/random_interpolation.h"
#include "layers/rnn.h"
#include "layers/roi_pool.h"
#include "layers/sequence_batchnorm.h"
#include "layers/sequence_last.h"
#include "layers/tensor_ops.h"
#include "layers/upsample.h"
#include "models/graph.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

void expect_bytes(const Bytes& got, double fwd, double dgrad, double wgrad) {
  EXPECT_DOUBLE_EQ(got.fprop, fwd);
  EXPECT_DOUBLE_EQ(got.dgrad, dgrad);
  EXPECT_DOUBLE_EQ(got.wgrad, wgrad);
  EXPECT_DOUBLE_EQ(got.total(), fwd + dgrad + wgrad);
}

void expect_same(const Bytes& a, const Bytes& b) {
  EXPECT_DOUBLE_EQ(a.fprop, b.fprop);
  EXPECT_DOUBLE_EQ(a.dgrad, b.dgrad);
  EXPECT_DOUBLE_EQ(a.wgrad, b.wgrad);
}

TEST(Bytes, Conv2d) {
  // x (2, 3, 5, 5) = 150, K = 4 3x3 s1 p1 with bias: y (2, 4, 5, 5) = 200, w 4*3*3*3 = 108, b 4.
  Conv2dConfig c = Conv2dConfig::square(4, 3, 1, 1, /*bias=*/true);
  Shape x{2, 3, 5, 5}, y{2, 4, 5, 5};
  expect_bytes(conv2d_bytes(c, x, y), 4 * (150 + 108 + 4 + 200),  // read x, w, b; write y
               4 * (200 + 108 + 150),                             // read dy, w; write dx
               4 * (150 + 200 + 2 * (108 + 4)));                  // read x, dy; rw dw, db
  // Grouped, no bias: C = 4, K = 4, groups 2: w (4, 2, 3, 3) = 72.
  Conv2dConfig g = Conv2dConfig::square(4, 3, 1, 1);
  g.groups = 2;
  Shape xg{1, 4, 5, 5}, yg{1, 4, 5, 5};
  expect_bytes(conv2d_bytes(g, xg, yg), 4 * (100 + 72 + 100), 4 * (100 + 72 + 100),
               4 * (100 + 100 + 2 * 72));
  auto be = make_cpu_backend();
  auto layer = make_layer(*be, "conv", c, {TensorDesc{x}});
  expect_same(layer->bytes(), conv2d_bytes(c, x, y));
}

TEST(Bytes, LinearAndGemm) {
  // x (3, 5, 7): M = 15, D_in = 7, D_out = 4 with bias: x 105, y 60, w 28, b 4.
  LinearConfig l;
  l.out_features = 4;
  Shape x{3, 5, 7};
  expect_bytes(linear_bytes(l, x), 4 * (105 + 28 + 4 + 60), 4 * (60 + 28 + 105),
               4 * (105 + 60 + 2 * (28 + 4)));
  auto be = make_cpu_backend();
  expect_same(make_layer(*be, "fc", l, {TensorDesc{x}})->bytes(), linear_bytes(l, x));

  // Batched a (2, 3, 4) b (2, 4, 5): a 24, b 40, y 30; dgrad reads dy, a, b, writes da, db.
  GemmDims d;
  gemm_output_shape("mm", GemmConfig{}, Shape{2, 3, 4}, Shape{2, 4, 5}, &d);
  expect_bytes(gemm_bytes(GemmConfig{}, d), 4 * (24 + 40 + 30), 4 * (30 + 2 * 24 + 2 * 40), 0);
  // b (4, 5) shared by both batches: b 20, read and its gradient written once.
  gemm_output_shape("mm", GemmConfig{}, Shape{2, 3, 4}, Shape{4, 5}, &d);
  expect_bytes(gemm_bytes(GemmConfig{}, d), 4 * (24 + 20 + 30), 4 * (30 + 2 * 24 + 2 * 20), 0);
  // With a bias (N = 5): read it in fwd; wgrad reads dy and reads and writes dbias.
  GemmConfig biased;
  biased.bias = true;
  expect_bytes(gemm_bytes(biased, d), 4 * (24 + 20 + 5 + 30), 4 * (30 + 2 * 24 + 2 * 20),
               4 * (30 + 2 * 5));
  auto mm = make_layer(*be, "mm", biased, {TensorDesc{Shape{2, 3, 4}}, TensorDesc{Shape{4, 5}}});
  expect_same(mm->bytes(), gemm_bytes(biased, d));
}

TEST(Bytes, BatchNorm2d) {
  // x (2, 3, 4, 5): E = 120, C = 3.
  Shape x{2, 3, 4, 5};
  expect_bytes(batchnorm2d_bytes(x),
               4 * (120 + 4 * 3 + 120 + 4 * 3),       // read x, gamma, beta, running mean/var;
                                                      // write y, saved mean/var, running mean/var
               4 * (120 + 120 + 3 * 3 + 120),         // read dy, x, saved mean/var, gamma; write dx
               4 * (120 + 120 + 2 * 3 + 2 * 2 * 3));  // read dy, x, saved stats; rw dgamma, dbeta
  auto be = make_cpu_backend();
  expect_same(make_layer(*be, "bn", BatchNorm2dConfig{}, {TensorDesc{x}})->bytes(),
              batchnorm2d_bytes(x));
  // A fused ReLU writes a one-byte mask per element forward and reads it backward.
  BatchNorm2dConfig relu;
  relu.relu = true;
  expect_bytes(batchnorm2d_bytes(x, true), 4 * (120 + 4 * 3 + 120 + 4 * 3) + 120,
               4 * (120 + 120 + 3 * 3 + 120) + 120, 4 * (120 + 120 + 2 * 3 + 2 * 2 * 3));
  expect_same(make_layer(*be, "bn", relu, {TensorDesc{x}})->bytes(), batchnorm2d_bytes(x, true));
  // Frozen: one affine pass with the running statistics; backward only dx (reads y with a ReLU).
  BatchNorm2dConfig frozen;
  frozen.frozen = true;
  expect_bytes(batchnorm2d_bytes(x, false, true), 4 * (120 + 4 * 3 + 120),  // x, 4 stats; y
               4 * (120 + 2 * 3 + 120), 0);                                 // dy, gamma, var; dx
  expect_bytes(batchnorm2d_bytes(x, true, true), 4 * (120 + 4 * 3 + 120),
               4 * (120 + 120 + 2 * 3 + 120), 0);  // dy, y, gamma, var; dx
  expect_same(make_layer(*be, "bn", frozen, {TensorDesc{x}})->bytes(),
              batchnorm2d_bytes(x, false, true));
}

TEST(Bytes, SequenceBatchNorm) {
  // x (4, 3, 5): E = 60, C = 5 (statistics over M = 12 rows); the terms of BatchNorm2d.
  Shape x{4, 3, 5};
  expect_bytes(sequence_batchnorm_bytes(x),
               4 * (60 + 4 * 5 + 60 + 4 * 5),       // read x, weight, bias, running mean/var;
                                                    // write y, saved mean/var, running mean/var
               4 * (60 + 60 + 3 * 5 + 60),          // read dy, x, saved mean/var, weight; write dx
               4 * (60 + 60 + 2 * 5 + 2 * 2 * 5));  // read dy, x, saved stats; rw dweight, dbias
  auto be = make_cpu_backend();
  expect_same(make_layer(*be, "bn", SequenceBatchNormConfig{}, {TensorDesc{x}})->bytes(),
              sequence_batchnorm_bytes(x));
}

TEST(Bytes, ActivationPoolAndElementwise) {
  // Activation on (2, 3, 4) = 24: read x, write y; read dy and x (or y), write dx.
  for (ActKind k : {ActKind::kRelu, ActKind::kTanh, ActKind::kGelu, ActKind::kClippedRelu}) {
    ActivationConfig a;
    a.act = k;
    expect_bytes(activation_bytes(a, Shape{2, 3, 4}), 4 * 2 * 24, 4 * 3 * 24, 0);
  }
  // 3x3 s2 p1 pooling of x (1, 2, 7, 7) = 98: y (1, 2, 4, 4) = 32.
  Shape x{1, 2, 7, 7}, y{1, 2, 4, 4};
  Pool2dConfig mx = Pool2dConfig::square(PoolKind::kMax, 3, 2, 1);
  Pool2dConfig av = Pool2dConfig::square(PoolKind::kAvg, 3, 2, 1);
  expect_bytes(pool2d_bytes(mx, x, y), 4 * (98 + 32), 4 * (32 + 98 + 98), 0);  // dy, x; dx
  expect_bytes(pool2d_bytes(av, x, y), 4 * (98 + 32), 4 * (32 + 98), 0);       // dy; dx
  auto be = make_cpu_backend();
  expect_same(make_layer(*be, "pool", mx, {TensorDesc{x}})->bytes(), pool2d_bytes(mx, x, y));
  // Global average of (2, 3, 4, 4) = 96 into (2, 3) = 6.
  expect_bytes(global_avg_pool2d_bytes(Shape{2, 3, 4, 4}), 4 * (96 + 6), 4 * (6 + 96), 0);
  // Dropout on 24 elements: f32 in and out plus the one-byte mask, both ways.
  expect_bytes(dropout_bytes(Shape{2, 3, 4}), 4 * 48 + 24, 4 * 48 + 24, 0);
  // Add of two (2, 3): read both, write y; read dy, write both gradients.
  expect_bytes(add_bytes(Shape{2, 3}), 4 * 18, 4 * 18, 0);
  // Positional encoding of (2, 3, 4) = 24 with its (3, 4) table; backward is a copy.
  expect_bytes(positional_encoding_bytes(Shape{2, 3, 4}), 4 * (48 + 12), 4 * 48, 0);
}

TEST(Bytes, CopiesMoveEveryElementTwice) {
  // Concat of (2, 3) and (2, 5) f32 into (2, 8): 24 + 40 bytes in, 64 out; gradients alike.
  std::vector<TensorDesc> in{TensorDesc{Shape{2, 3}}, TensorDesc{Shape{2, 5}}};
  expect_bytes(copy_bytes(in, {TensorDesc{Shape{2, 8}}}), 128, 128, 0);
  // i32 labels reshaped: moved forward, no gradient.
  TensorDesc ids{Shape{6}, DType::kI32, Layout::kRowMajor};
  TensorDesc ids2{Shape{2, 3}, DType::kI32, Layout::kRowMajor};
  expect_bytes(copy_bytes({ids}, {ids2}), 48, 0, 0);
  auto be = make_cpu_backend();
  ConcatConfig cat;
  cat.axis = 1;
  expect_same(make_layer(*be, "cat", cat, in)->bytes(), copy_bytes(in, {TensorDesc{Shape{2, 8}}}));
  // Reverse of f32 x (4, 3, 2) = 24 with 3 lengths: x read, y written; dy read, dx written;
  // the lengths read by both. i32 ids (5, 3) = 15 without lengths: no gradient.
  const TensorDesc x{Shape{4, 3, 2}}, len{Shape{3}, DType::kI32, Layout::kRowMajor};
  expect_bytes(reverse_bytes({x, len}), 4 * (24 + 24) + 4 * 3, 4 * (24 + 24) + 4 * 3, 0);
  expect_bytes(reverse_bytes({TensorDesc{Shape{5, 3}, DType::kI32, Layout::kRowMajor}}),
               4 * (15 + 15), 0, 0);
  expect_same(make_layer(*be, "rev", ReverseConfig{}, {x, len})->bytes(), reverse_bytes({x, len}));
}

TEST(Bytes, EmbeddingAndLosses) {
  // 10 x 6 table, ids (2, 3): M = 6 ids (i32), 6 rows of 6 read, y 36 written; the other 4
  // rows are not touched. wgrad reads ids and dy (36) and reads and writes the 6 rows of dw.
  EmbeddingConfig e;
  e.num_embeddings = 10;
  e.dim = 6;
  Shape ids{2, 3};
  expect_bytes(embedding_bytes(e, ids), 4 * 6 + 4 * (36 + 36), 0, 4 * 6 + 4 * (36 + 2 * 36));
  auto be = make_cpu_backend();
  auto emb = make_layer(*be, "emb", e, {TensorDesc{ids, DType::kI32, Layout::kRowMajor}});
  expect_same(emb->bytes(), embedding_bytes(e, ids));
  // Softmax cross entropy of (4, 10) logits = 40 with 4 i32 labels; saved: 4 log-sum-exps and
  // the count.
  expect_bytes(softmax_cross_entropy_bytes(Shape{4, 10}),
               4 * (40 + 1 + 4 + 1) + 4 * 4,       // read logits, labels; write loss, lse, count
               4 * (1 + 1 + 40 + 4 + 40) + 4 * 4,  // read dy, count, logits, lse, labels; dlogits
               0);
  // bf16 logits (and dlogits) at 2 bytes; the rest as above.
  expect_bytes(softmax_cross_entropy_bytes(Shape{4, 10}, DType::kBF16),
               2 * 40 + 4 * (1 + 4 + 1) + 4 * 4, 2 * (40 + 40) + 4 * (1 + 1 + 4) + 4 * 4, 0);
  // MSE of (3, 4) = 12: read pred, target, write the scalar; read dy, both, write both grads.
  expect_bytes(mse_loss_bytes(Shape{3, 4}), 4 * (24 + 1), 4 * (1 + 48), 0);
  // Actor-critic of (5, 4) logits = 20, value 5, actions 5 (i32), returns 5: read all four,
  // write the scalar; backward reads dy and the four again, writes dlogits (20) and dvalue (5).
  expect_bytes(actor_critic_loss_bytes(Shape{5, 4}), 4 * (20 + 5 + 5 + 5 + 1),
               4 * (1 + 20 + 5 + 5 + 5 + 20 + 5), 0);
  auto ac = make_layer(*be, "ac", ActorCriticLossConfig{},
                       {TensorDesc{Shape{5, 4}}, TensorDesc{Shape{5, 1}},
                        TensorDesc{Shape{5}, DType::kI32}, TensorDesc{Shape{5}}});
  expect_same(ac->bytes(), actor_critic_loss_bytes(Shape{5, 4}));
  // CastScale of a (1, 4, 84, 84) u8 state = 28,224 bytes read, 28,224 floats written.
  expect_bytes(cast_scale_bytes(Shape{1, 4, 84, 84}), 28224 + 4 * 28224, 0, 0);
  auto cs = make_layer(*be, "cs", CastScaleConfig{}, {TensorDesc{Shape{1, 4, 84, 84}, DType::kU8}});
  expect_same(cs->bytes(), cast_scale_bytes(Shape{1, 4, 84, 84}));
}

TEST(Bytes, LayerNorm) {
  // x (2, 3, 8): E = 48, D = 8, M = 6 rows (saved mean and variance: 6 each).
  Shape x{2, 3, 8};
  expect_bytes(layer_norm_bytes(LayerNormConfig{}, x), 4 * (48 + 2 * 8 + 48 + 2 * 6),
               4 * (48 + 48 + 2 * 6 + 8 + 48), 4 * (48 + 48 + 2 * 6 + 2 * 2 * 8));
  auto be = make_cpu_backend();
  expect_same(make_layer(*be, "ln", LayerNormConfig{}, {TensorDesc{x}})->bytes(),
              layer_norm_bytes(LayerNormConfig{}, x));
  // Over (C, H, W): x (2, 3, 2, 2), E = 24, M = 2 samples, P = 3 channels of gamma and beta.
  LayerNormConfig chw;
  chw.over = LayerNormOver::kChw;
  const Shape xc{2, 3, 2, 2};
  const Bytes b = layer_norm_bytes(chw, xc);
  expect_bytes(b, 4 * (24 + 2 * 3 + 24 + 2 * 2), 4 * (24 + 24 + 2 * 2 + 3 + 24),
               4 * (24 + 24 + 2 * 2 + 2 * 2 * 3));
  expect_same(make_layer(*be, "ln", chw, {TensorDesc{xc}})->bytes(), b);
  const Shape xb{2, 16, 2, 2};  // nChw16c: the same formula
  expect_same(make_layer(*be, "ln", chw, {TensorDesc{xb, DType::kF32, Layout::kNChw16c}})->bytes(),
              layer_norm_bytes(chw, xb));
  // Its input gradient as a layer (layers/input_grad.h): read dy, x, gamma; write dx, and so on.
  LayerNormDgradConfig dg;
  dg.ln = chw;
  expect_bytes(make_layer(*be, "ln.dgrad", dg, {TensorDesc{xc}, TensorDesc{xc}})->bytes(),
               4 * (3 * 24 + 3), 4 * (5 * 24 + 3), 4 * (3 * 24 + 2 * 3));
}

TEST(Bytes, WganKinds) {
  auto be = make_cpu_backend();
  // Upsample2d x (2, 3, 2, 2) by 2: X = 24, Y = 96.
  const Shape x{2, 3, 2, 2};
  const Bytes up = upsample2d_bytes(Upsample2dConfig{}, x);
  expect_bytes(up, 4 * (24 + 96), 4 * (96 + 24), 0);
  expect_same(make_layer(*be, "up", Upsample2dConfig{}, {TensorDesc{x}})->bytes(), up);
  // RandomInterpolation of two (2, 3, 4): E = 24, N = 2 (alpha).
  const Shape r{2, 3, 4};
  const Bytes ri = random_interpolation_bytes(r);
  expect_bytes(ri, 4 * (24 + 24 + 24 + 2), 4 * (24 + 2 + 24 + 24), 0);
  expect_same(
      make_layer(*be, "mix", RandomInterpolationConfig{}, {TensorDesc{r}, TensorDesc{r}})->bytes(),
      ri);
  // MeanLoss of (5, 1): read 5, write 1; read dy, write 5.
  const Bytes ml = mean_loss_bytes(Shape{5, 1});
  expect_bytes(ml, 4 * (5 + 1), 4 * (1 + 5), 0);
  expect_same(make_layer(*be, "m", MeanLossConfig{}, {TensorDesc{Shape{5, 1}}})->bytes(), ml);
}

TEST(Bytes, FasterRcnnKinds) {
  auto be = make_cpu_backend();
  // RoIPool of x (2, 3, 4, 5) with 2 boxes (10 floats) to 2x3 bins: X = 120, Y = 2*3*2*3 = 36.
  const Shape x{2, 3, 4, 5}, rois{2, 5}, y{2, 3, 2, 3};
  RoIPoolConfig cfg;
  cfg.pooled_h = 2;
  cfg.pooled_w = 3;
  // Max: read x and the boxes, write y and the i32 argmax; read dy, argmax and boxes, write dx.
  const Bytes mx = roi_pool_bytes(cfg, x, rois, y);
  expect_bytes(mx, 4 * (120 + 10 + 36 + 36), 4 * (36 + 36 + 10 + 120), 0);
  expect_same(make_layer(*be, "roi", cfg, {TensorDesc{x}, TensorDesc{rois}})->bytes(), mx);
  // Align saves nothing: read x and the boxes, write y; read dy and the boxes, write dx.
  cfg.mode = RoIPoolMode::kAlign;
  const Bytes al = roi_pool_bytes(cfg, x, rois, y);
  expect_bytes(al, 4 * (120 + 10 + 36), 4 * (36 + 10 + 120), 0);
  expect_same(make_layer(*be, "roi", cfg, {TensorDesc{x}, TensorDesc{rois}})->bytes(), al);
  // SmoothL1Loss of (4, 6): E = 24; read pred, target, weight, write y; read dy and the three,
  // write dpred.
  const Shape e{4, 6};
  const Bytes sl = smooth_l1_loss_bytes(e);
  expect_bytes(sl, 4 * (3 * 24 + 1), 4 * (1 + 3 * 24 + 24), 0);
  expect_same(
      make_layer(*be, "l1", SmoothL1LossConfig{}, {TensorDesc{e}, TensorDesc{e}, TensorDesc{e}})
          ->bytes(),
      sl);
}

TEST(Bytes, DetectionKinds) {
  auto be = make_cpu_backend();
  // Proposal, N = 2, anchors 2 scales x 1 ratio = 2 on a 3x4 map: K = 24 per image; per image
  // read cls 2K = 48 and deltas 4K = 96, write post_nms_top_n = 5 rows of 5.
  ProposalConfig p;
  p.anchors.scales = {8, 16};
  p.anchors.ratios = {1};
  p.anchors.feature_h = 3;
  p.anchors.feature_w = 4;
  p.pre_nms_top_n = 10;
  p.post_nms_top_n = 5;
  const Bytes pb = proposal_bytes(p, 2);
  expect_bytes(pb, 2 * 4 * (48 + 96 + 25), 0, 0);
  expect_same(
      make_layer(*be, "prop", p, {TensorDesc{Shape{2, 4, 3, 4}}, TensorDesc{Shape{2, 8, 3, 4}}})
          ->bytes(),
      pb);
  // AnchorTarget, N = 2, G = 3, K = 24: read gt 15; write labels 24 (i32), targets and weights
  // 4K = 96 each.
  AnchorTargetConfig a;
  a.anchors = p.anchors;
  const Bytes ab = anchor_target_bytes(a, 2, 3);
  expect_bytes(ab, 2 * 4 * (15 + 24 + 96 + 96), 0, 0);
  expect_same(make_layer(*be, "at", a, {TensorDesc{Shape{2, 3, 5}}})->bytes(), ab);
  // ProposalTarget, N = 2, P = 6, G = 3, R = 4, 3 classes: read rois 30 and gt 15; write rois
  // 20, labels 4 (i32), targets and weights 4 x 12 = 48 each.
  ProposalTargetConfig t;
  t.num_classes = 3;
  t.rois_per_image = 4;
  const Bytes tb = proposal_target_bytes(t, 2, 6, 3);
  expect_bytes(tb, 2 * 4 * (30 + 15 + 20 + 4 + 48 + 48), 0, 0);
  expect_same(
      make_layer(*be, "pt", t, {TensorDesc{Shape{12, 5}}, TensorDesc{Shape{2, 3, 5}}})->bytes(),
      tb);
}

TEST(Bytes, Attention) {
  // Self attention, N = 1, T = 2, D = 4, 2 heads, biases: one (N, T, D) tensor is 8 floats,
  // the scores E = 1*2*2*2 = 8, weights 4*4*4 = 64, parameters 64 + 16 = 80.
  MultiHeadAttentionConfig c;
  c.num_heads = 2;
  AttentionDims d{1, 2, 2, 4, 2, 2};
  expect_bytes(attention_bytes(c, d, false),
               4 * (8 + 80 + 8 + 8 + 16 + 8 + 8),   // q_in, params; y, Q, K+V, P, O
               4 * (8 + 64 + 8 + 16 + 8 + 8 + 24),  // dy, W, Q, K+V, P; dq_in, dQ+dK+dV
               4 * (8 + 8 + 24 + 8 + 2 * 80));      // dy, O, dQ+dK+dV, q_in; rw grads
  // Dropout adds the one-byte mask of the 8 scores to fwd and dgrad.
  Bytes drop = attention_bytes(c, d, true), plain = attention_bytes(c, d, false);
  EXPECT_DOUBLE_EQ(drop.fprop - plain.fprop, 8);
  EXPECT_DOUBLE_EQ(drop.dgrad - plain.dgrad, 8);
  EXPECT_DOUBLE_EQ(drop.wgrad, plain.wgrad);
}

TEST(Bytes, MlpAttentionAndSequenceLast) {
  // N = 2, S = 3, A = 4, D = 5: query NA = 8, keys and t E = 24, memory M = 30, v 4, lengths
  // 2, ctx ND = 10, alpha and the score gradients P = 6.
  MlpAttentionDims d{2, 3, 4, 5};
  expect_bytes(mlp_attention_bytes(d),
               4 * (8 + 24 + 30 + 4 + 2) + 4 * (10 + 24 + 6),       // read q, keys, mem, v, len;
                                                                    // write ctx, t, alpha
               4 * (10 + 30 + 6 + 24 + 4 + 2) + 4 * (30 + 24 + 8),  // dctx, mem, alpha, t, v,
                                                                    // len; dmem, dkeys, dq
               4 * (24 + 6 + 2 * 4));                               // t, de; rw dv
  auto be = make_cpu_backend();
  const std::vector<TensorDesc> in{TensorDesc{Shape{2, 4}}, TensorDesc{Shape{2, 3, 4}},
                                   TensorDesc{Shape{2, 3, 5}}, TensorDesc{Shape{2}, DType::kI32}};
  expect_same(make_layer(*be, "attn", MlpAttentionConfig{}, in)->bytes(), mlp_attention_bytes(d));
  // SequenceLast of x (4, 2, 3): R = 6 selected values; dgrad writes all 24 of dx.
  auto last = make_layer(*be, "last", SequenceLastConfig{},
                         {TensorDesc{Shape{4, 2, 3}}, TensorDesc{Shape{2}, DType::kI32}});
  expect_bytes(last->bytes(), 4 * (2 + 6 + 6), 4 * (2 + 6 + 24), 0);
}

TEST(Bytes, Recurrent) {
  // LSTM, T = 2, N = 3, I = 4, H = 5, one layer: TN = 6, Pw = 4*5*(4+5) = 180, Pb = 20,
  // saved 5H per position = 150, h 30, x 24, gate gradients 4H per position = 120.
  LstmConfig l{5, 1, false};
  expect_bytes(lstm_bytes(l, Shape{2, 3, 4}), 4 * (24 + 180 + 20 + 30 + 150),
               4 * (30 + 150 + 180 + 24 + 120), 4 * (24 + 30 + 120 + 2 * (180 + 20)));
  // A bidirectional second layer reads the first's 2H-wide output: two directions per layer.
  LstmConfig bi{5, 2, true};
  Bytes b = lstm_bytes(bi, Shape{2, 3, 4});
  // Layer 1 (I_1 = 10): Pw = 4*5*15 = 300, x 60.
  const double l0 = 4 * (24 + 180 + 20 + 30 + 150), l1 = 4 * (60 + 300 + 20 + 30 + 150);
  EXPECT_DOUBLE_EQ(b.fprop, 2 * l0 + 2 * l1);
  // GRU: 3 gates, Pw = 3*5*9 = 135, Pb = 30 (b_ih and b_hh), saved 4H = 120, dgates 90.
  GruConfig g{5, 1, false};
  expect_bytes(gru_bytes(g, Shape{2, 3, 4}), 4 * (24 + 135 + 30 + 30 + 120),
               4 * (30 + 120 + 135 + 24 + 90), 4 * (24 + 30 + 90 + 2 * (135 + 30)));
  // LSTMCell, N = 3, I = 4, H = 5: NH = 15, NI = 12, gates 60.
  expect_bytes(lstm_cell_bytes(LstmCellConfig{5}, Shape{3, 4}),
               4 * (12 + 30 + 180 + 20 + 30 + 60),       // x, h, c, params; h', c', gates
               4 * (30 + 60 + 15 + 180 + 12 + 30 + 60),  // dh', dc', gates, c, W; dx, dh, dc,
                                                         // gate gradients
               4 * (12 + 15 + 60 + 2 * (180 + 20)));     // x, h, gate gradients; rw grads
  auto be = make_cpu_backend();
  expect_same(make_layer(*be, "lstm", l, {TensorDesc{Shape{2, 3, 4}}})->bytes(),
              lstm_bytes(l, Shape{2, 3, 4}));
}

TEST(Bytes, OptimizersPerElement) {
  // Two parameters, 12 + 4 = 16 elements (weight decay does not change the bytes).
  auto be = make_cpu_backend();
  std::vector<Param> ps(2);
  ps[0].value = be->empty(Shape{3, 4}, MemCategory::kWeights);
  ps[0].grad = be->empty(Shape{3, 4}, MemCategory::kWeightGrads);
  ps[1].value = be->empty(Shape{4}, MemCategory::kWeights);
  ps[1].grad = be->empty(Shape{4}, MemCategory::kWeightGrads);
  ps[1].decay = false;
  std::vector<Param*> ptrs{&ps[0], &ps[1]};
  SgdConfig sgd;
  sgd.weight_decay = 1e-4;
  EXPECT_DOUBLE_EQ(sgd_bytes(sgd, ptrs), 4 * 5 * 16);  // read w, g, v; write w, v
  sgd.momentum = 0;
  EXPECT_DOUBLE_EQ(sgd_bytes(sgd, ptrs), 4 * 3 * 16);            // read w, g; write w
  EXPECT_DOUBLE_EQ(adam_bytes(AdamConfig{}, ptrs), 4 * 7 * 16);  // w, g, m, v; w, m, v
  RmspropConfig rms;
  EXPECT_DOUBLE_EQ(rmsprop_bytes(rms, ptrs), 4 * 5 * 16);  // w, g, sq; w, sq
  rms.momentum = 0.9;
  EXPECT_DOUBLE_EQ(rmsprop_bytes(rms, ptrs), 4 * 7 * 16);  // and buf
  // The CPU optimizers report the shared counts.
  EXPECT_DOUBLE_EQ(make_optimizer(*be, AdamConfig{}, ptrs)->bytes(), 4 * 7 * 16);
  EXPECT_DOUBLE_EQ(make_optimizer(*be, rms, ptrs)->bytes(), 4 * 7 * 16);
  // Global-norm clipping reads every gradient once more; clipping by value reads nothing more.
  rms.clip.max_norm = 1;
  EXPECT_DOUBLE_EQ(rmsprop_bytes(rms, ptrs), 4 * 7 * 16 + 4 * 16);
  sgd.clip.value = 1;
  EXPECT_DOUBLE_EQ(sgd_bytes(sgd, ptrs), 4 * 3 * 16);
  AdamConfig adam;
  adam.clip = GradClip{0.5, 2};
  EXPECT_DOUBLE_EQ(adam_bytes(adam, ptrs), 4 * 7 * 16 + 4 * 16);
  EXPECT_DOUBLE_EQ(make_optimizer(*be, adam, ptrs)->bytes(), 4 * 7 * 16 + 4 * 16);
}

TEST(Bytes, GraphSumsItsLayers) {
  auto be = make_cpu_backend();
  Graph g(*be);
  TensorId x = g.input("x", Shape{2, 3, 5, 5});
  Conv2dConfig c = Conv2dConfig::square(4, 3, 1, 1, /*bias=*/true);
  TensorId h = g.add1("conv", c, {x});
  g.add1("relu", ActivationConfig{}, {h});
  Bytes want = conv2d_bytes(c, Shape{2, 3, 5, 5}, Shape{2, 4, 5, 5});
  want += activation_bytes(ActivationConfig{}, Shape{2, 4, 5, 5});
  ASSERT_EQ(g.nodes().size(), 2u);  // both take either layout: no reorder in between
  expect_same(g.bytes(), want);
  // zero_grad writes every parameter gradient once: w 108 and b 4 floats.
  EXPECT_DOUBLE_EQ(g.zero_grad_bytes(), 4 * (108 + 4));
}

}  // namespace
}  // namespace tbd::test
