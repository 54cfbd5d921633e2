// tests/layers/conv2d_test.cpp: Conv2d forward, dgrad and wgrad against a float64 reference, on
// every target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "core/random.h"
#include "layers/conv2d.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct ConvCase {
  std::string name;
  Shape x;  // (N, C, H, W)
  Conv2dConfig cfg;
  Layout layout = Layout::kRowMajor;
  bool want_dx = true;  // false: x is data (the first layer), only the weight gradients
};

// Naive float64 convolution: y[n,k,p,q] = b[k] + sum_{c,r,s} x[n, g*Cg+c, h, w] * w[k, c, r, s].
struct RefConv {
  Shape x;
  Conv2dConfig c;
  int64_t N, C, H, W, K, R, S, P, Q, G, Cg, Kg;
  RefConv(Shape xs, Conv2dConfig cfg) : x(xs), c(cfg) {
    N = xs[0], C = xs[1], H = xs[2], W = xs[3], K = cfg.out_channels, R = cfg.kernel_h,
    S = cfg.kernel_w, G = cfg.groups, Cg = C / G, Kg = K / G;
    P = (H + 2 * c.pad_h - c.dilation_h * (R - 1) - 1) / c.stride_h + 1;
    Q = (W + 2 * c.pad_w - c.dilation_w * (S - 1) - 1) / c.stride_w + 1;
  }
  template <class F>
  void each(F f) const {  // f(y index, x index, w index, k)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t q = 0; q < Q; ++q) {
            int64_t yi = ((n * K + k) * P + p) * Q + q;
            int64_t g = k / Kg;
            for (int64_t cc = 0; cc < Cg; ++cc)
              for (int64_t r = 0; r < R; ++r)
                for (int64_t s = 0; s < S; ++s) {
                  int64_t h = p * c.stride_h - c.pad_h + r * c.dilation_h;
                  int64_t w = q * c.stride_w - c.pad_w + s * c.dilation_w;
                  if (h < 0 || h >= H || w < 0 || w >= W) continue;
                  int64_t xi = ((n * C + g * Cg + cc) * H + h) * W + w;
                  int64_t wi = ((k * Cg + cc) * R + r) * S + s;
                  f(yi, xi, wi, k);
                }
          }
  }
  std::vector<Vec> forward(const std::vector<Vec>& xv, const std::vector<Vec>& p) const {
    Vec y(N * K * P * Q, 0.0);
    each([&](int64_t yi, int64_t xi, int64_t wi, int64_t) { y[yi] += xv[0][xi] * p[0][wi]; });
    if (c.bias) {
      for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i) y[i] += p[1][(i / (P * Q)) % K];
    }
    return {y};
  }
  RefGrads backward(const std::vector<Vec>& xv, const std::vector<Vec>& p,
                    const std::vector<Vec>& dy) const {
    RefGrads g;
    g.dx = {Vec(xv[0].size(), 0.0)};
    g.dparams = {Vec(p[0].size(), 0.0)};
    each([&](int64_t yi, int64_t xi, int64_t wi, int64_t) {
      g.dx[0][xi] += dy[0][yi] * p[0][wi];
      g.dparams[0][wi] += dy[0][yi] * xv[0][xi];
    });
    if (c.bias) {
      Vec db(K, 0.0);
      for (int64_t i = 0; i < static_cast<int64_t>(dy[0].size()); ++i)
        db[(i / (P * Q)) % K] += dy[0][i];
      g.dparams.push_back(db);
    }
    return g;
  }
};

class Conv2dTest : public LayerTest<ConvCase> {};

TEST_P(Conv2dTest, MatchesFloat64Reference) {
  const ConvCase& tc = tcase();
  auto layer = make("conv", tc.cfg, {TensorDesc{tc.x, DType::kF32, tc.layout}});
  RefConv ref(tc.x, tc.cfg);
  EXPECT_EQ(layer->output_descs()[0].shape, (Shape{ref.N, ref.K, ref.P, ref.Q}));
  LayerCheckOptions opt;
  opt.x_needs_grad = {tc.want_dx};
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
}

Conv2dConfig cfg(int64_t k, int64_t kernel, int64_t stride, int64_t pad, bool bias = false,
                 int64_t groups = 1, int64_t dil = 1) {
  Conv2dConfig c = Conv2dConfig::square(k, kernel, stride, pad, bias);
  c.groups = groups;
  c.dilation_h = c.dilation_w = dil;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv2dTest,
    on_all_targets(
        ::testing::
            Values(
                ConvCase{"stem_batch1", Shape{1, 3, 9, 9}, cfg(16, 3, 2, 1)},  // stem-like, batch 1
                ConvCase{"odd_sizes_bias", Shape{2, 5, 7, 6},
                         cfg(7, 3, 1, 1, true)},  // odd sizes, bias
                ConvCase{"blocked_1x1", Shape{3, 16, 6, 6}, cfg(32, 1, 1, 0),
                         Layout::kNChw16c},  // blocked in/out
                ConvCase{"blocked_strided", Shape{2, 32, 8, 8}, cfg(16, 3, 2, 1),
                         Layout::kNChw16c},  // strided, blocked
                ConvCase{"blocked_strided_bias", Shape{2, 16, 9, 9},
                         cfg(32, 3, 2, 1, true),  // odd H, bias
                         Layout::kNChw16c},
                ConvCase{"blocked_strided_chunks", Shape{6, 16, 10, 10},
                         cfg(16, 3, 2, 1),  // 3 chunks
                         Layout::kNChw16c},
                ConvCase{
                    "blocked_strided_heavy_weights", Shape{2, 352, 4, 4}, cfg(352, 3, 2, 1),
                    Layout::kNChw16c},  // 4.5 MiB of weights: one image per chunk
                ConvCase{"groups_dilation", Shape{2, 4, 9, 9},
                         cfg(6, 3, 1, 2, false, 2, 2)},  // groups + dilation
                ConvCase{
                    "rect_kernel",
                    Shape{1, 2, 5, 7},
                    [] {
                      Conv2dConfig c = cfg(3, 1, 1, 0);
                      c.kernel_h = 3, c.kernel_w = 2, c.stride_w = 2, c.pad_h = 1;
                      return c;
                    }()},
                ConvCase{"3x3_batch2", Shape{2, 3, 9, 9}, cfg(8, 3, 1, 1)},
                ConvCase{"1x1_stride2_bias", Shape{1, 5, 7, 6}, cfg(4, 1, 2, 0, true)},
                ConvCase{"groups_dilation_stride2_bias", Shape{3, 8, 10, 11},
                         cfg(8, 3, 2, 2, true, 2, 2)},
                // The longest reductions here (wgrad over 2*14*14 positions, fwd over 16*9
                // products): where TF32's error is largest.
                ConvCase{"wide_16_to_32_14x14", Shape{2, 16, 14, 14}, cfg(32, 3, 1, 1)},
                ConvCase{"no_dx", Shape{1, 3, 6, 5}, cfg(8, 3, 1, 1), Layout::kRowMajor, false},
                // Deep Speech 2's second conv, smaller: a long rectangular kernel with a stride
                // along W only, whose backward oneDNN runs on reordered layouts (Conv2dImpl
                // below).
                // WGAN-GP's generator output: blocked x to a plain 3-channel y, whose forward
                // runs on reordered layouts (Conv2dImpl below).
                ConvCase{"blocked_to_3_channels_bias", Shape{2, 16, 6, 5}, cfg(3, 3, 1, 1, true),
                         Layout::kNChw16c},
                ConvCase{"speech_11x21_stride_1x2", Shape{2, 32, 13, 25},
                         [] {
                           Conv2dConfig c = cfg(32, 1, 1, 0);
                           c.kernel_h = 11, c.kernel_w = 21, c.stride_w = 2;
                           return c;
                         }(),
                         Layout::kNChw16c})),
    CaseOnTarget());

bool has_avx512_core() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

// Strided 3x3 convolutions on blocked data run their forward channels-last wherever oneDNN has
// its brgemm kernel (AVX-512); the float64 cases above check that path's numerics.
TEST(Conv2dImpl, StridedForwardIsChannelsLastOnAvx512) {
  auto be = make_cpu_backend();
  auto strided = make_layer(*be, "s2", Conv2dConfig::square(32, 3, 2, 1),
                            {TensorDesc{Shape{2, 32, 16, 16}, DType::kF32, Layout::kNChw16c}});
  auto unit = make_layer(*be, "s1", Conv2dConfig::square(32, 3, 1, 1),
                         {TensorDesc{Shape{2, 32, 16, 16}, DType::kF32, Layout::kNChw16c}});
  EXPECT_EQ(unit->describe().find("(nhwc)"), std::string::npos) << unit->describe();
  if (!has_avx512_core()) GTEST_SKIP() << "no AVX-512 core: oneDNN 2.6 has no brgconv here";
  const std::string d = strided->describe();
  EXPECT_NE(d.find("fwd brgconv:avx512_core (nhwc"), std::string::npos) << d;
}

// Deep Speech 2's convolutions: oneDNN 2.6 has only its reference kernel for their backward on
// nChw16c (about 1000x slower); the layer runs dgrad and wgrad on reordered layouts instead.
TEST(Conv2dImpl, SpeechConvBackwardHasNoReferenceKernel) {
  auto be = make_cpu_backend();
  Conv2dConfig c = Conv2dConfig::square(32, 1);
  c.kernel_h = 11, c.kernel_w = 21, c.stride_w = 2;
  auto conv2 = make_layer(*be, "conv2", c,
                          {TensorDesc{Shape{2, 32, 45, 61}, DType::kF32, Layout::kNChw16c}});
  const std::string d = conv2->describe();
  EXPECT_EQ(d.find("ref"), std::string::npos) << d;
  c.kernel_w = 41, c.stride_h = 2;
  auto conv1 = make_layer(*be, "conv1", c, {TensorDesc{Shape{2, 1, 100, 161}}});
  EXPECT_EQ(conv1->describe().find("ref"), std::string::npos) << conv1->describe();
}

// A blocked x into 3 output channels (y plain): oneDNN 2.6 has only its reference forward for
// nChw16c -> nchw (230 ms for one 64x64 image of WGAN-GP's generator); the forward runs on x
// and y reordered instead.
TEST(Conv2dImpl, BlockedToFewChannelsForwardHasNoReferenceKernel) {
  auto be = make_cpu_backend();
  auto out = make_layer(*be, "generator.output", Conv2dConfig::square(3, 3, 1, 1, true),
                        {TensorDesc{Shape{2, 64, 16, 16}, DType::kF32, Layout::kNChw16c}});
  EXPECT_EQ(out->output_descs()[0].layout, Layout::kRowMajor);
  EXPECT_EQ(out->describe().find("ref"), std::string::npos) << out->describe();
}

// A batch too large for one channels-last reorder (x + y > 16 MiB) goes span by span; the
// forward is checked against float64 on sampled outputs (the full reference is too slow here).
TEST(Conv2dImpl, LargeStridedForwardMatchesSampledFloat64) {
  auto be = make_cpu_backend();
  const Shape xs{8, 128, 64, 64};
  const Conv2dConfig c = Conv2dConfig::square(64, 3, 2, 1);
  auto layer = make_layer(*be, "s2", c, {TensorDesc{xs, DType::kF32, Layout::kNChw16c}});
  RefConv ref(xs, c);
  Tensor x = be->empty(layer->input_descs()[0], MemCategory::kDynamic);
  Tensor y = be->empty(layer->output_descs()[0], MemCategory::kDynamic);
  const Vec xv = random_vec(x.numel(), 7), wv = random_vec(layer->params()[0].value.numel(), 8);
  from_host(*be, x, xv);
  from_host(*be, layer->params()[0].value, wv);
  Tensor* yp = &y;
  const Tensor* xp = &x;
  layer->forward(MutTensorRefs(&yp, 1), TensorRefs(&xp, 1));
  const Vec yv = to_host(*be, y);
  Rng rng(9);
  Vec got, want;
  auto pick = [&](int64_t n) {
    return static_cast<int64_t>(rng.next_u64() % static_cast<uint64_t>(n));
  };
  for (int i = 0; i < 400; ++i) {
    const int64_t n = pick(ref.N), k = pick(ref.K), p = pick(ref.P), q = pick(ref.Q);
    double acc = 0;
    for (int64_t ch = 0; ch < ref.C; ++ch) {
      for (int64_t r = 0; r < ref.R; ++r) {
        for (int64_t s = 0; s < ref.S; ++s) {
          const int64_t h = p * c.stride_h - c.pad_h + r, w = q * c.stride_w - c.pad_w + s;
          if (h < 0 || h >= ref.H || w < 0 || w >= ref.W) continue;
          acc += xv[((n * ref.C + ch) * ref.H + h) * ref.W + w] *
                 wv[((k * ref.C + ch) * ref.R + r) * ref.S + s];
        }
      }
    }
    got.push_back(yv[((n * ref.K + k) * ref.P + p) * ref.Q + q]);
    want.push_back(acc);
  }
  expect_close("y (sampled)", got, want, kF32Reduction);
  if (has_avx512_core()) {
    EXPECT_NE(layer->describe().find("(nhwc, 2/chunk, 2/reorder)"), std::string::npos)
        << layer->describe();
  }
}

// The weights are stored in the forward primitive's blocked format (value and gradient), with
// the padding up to whole blocks zero after initialisation and after a backward: optimizers run
// over the stored elements, so a non-zero pad would leak into the next step's kernels. K = 24
// pads the output channels to 32 where oneDNN blocks them by 16 or 32 (AVX-512: Acdb32a).
TEST(Conv2dImpl, WeightsAreStoredPackedWithZeroPadding) {
  auto be = make_cpu_backend();
  const Conv2dConfig c = Conv2dConfig::square(24, 3, 1, 1);
  auto layer =
      make_layer(*be, "c", c, {TensorDesc{Shape{2, 32, 6, 6}, DType::kF32, Layout::kNChw16c}});
  Param& w = layer->params()[0];
  ASSERT_EQ(w.value.layout(), Layout::kPacked) << layer->describe();
  EXPECT_EQ(w.value.shape(), (Shape{24, 32, 3, 3}));
  EXPECT_TRUE(w.grad.desc().same_storage(w.value.desc()));
  EXPECT_GE(w.value.stored_numel(), w.value.numel());
  // The stored floats are the values plus zeros: equal as multisets once sorted.
  auto padding_is_zero = [&](const Tensor& t, const char* what) {
    Vec want = to_host(*be, t);
    want.resize(static_cast<std::size_t>(t.stored_numel()), 0.0);
    Vec got(t.f32(), t.f32() + t.stored_numel());
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << what << " " << t.desc().to_string();
  };
  std::memset(w.value.raw(), 0x7f, w.value.bytes());  // garbage where the padding is
  from_host(*be, w.value, random_vec(w.value.numel(), 3));
  padding_is_zero(w.value, "value");
  init_param(*be, w, 11);
  padding_is_zero(w.value, "value after init_param");
  Tensor x = be->empty(layer->input_descs()[0], MemCategory::kDynamic);
  Tensor y = be->empty(layer->output_descs()[0], MemCategory::kDynamic);
  Tensor dy = be->empty(layer->output_descs()[0], MemCategory::kDynamic);
  Tensor dx = be->empty(layer->input_descs()[0], MemCategory::kDynamic);
  from_host(*be, x, random_vec(x.numel(), 4));
  from_host(*be, dy, random_vec(dy.numel(), 5));
  const Tensor* xp = &x;
  const Tensor* yp = &y;
  const Tensor* dyp = &dy;
  Tensor* yw = &y;
  Tensor* dxw = &dx;
  layer->forward(MutTensorRefs(&yw, 1), TensorRefs(&xp, 1));
  layer->backward(MutTensorRefs(&dxw, 1), TensorRefs(&dyp, 1), TensorRefs(&xp, 1),
                  TensorRefs(&yp, 1));
  layer->backward(MutTensorRefs(&dxw, 1), TensorRefs(&dyp, 1), TensorRefs(&xp, 1),
                  TensorRefs(&yp, 1));
  padding_is_zero(w.grad, "gradient after two backwards");
}

TEST(Conv2dErrors, WrongRankNamesLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  try {
    make_layer(*be, "layer1.0.conv1", Conv2dConfig::square(8, 3), {TensorDesc{Shape{3, 224, 224}}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("Conv2d 'layer1.0.conv1'"), std::string::npos) << m;
    EXPECT_NE(m.find("input x"), std::string::npos) << m;
    EXPECT_NE(m.find("(3, 224, 224)"), std::string::npos) << m;
  }
}

TEST(Conv2dErrors, ImpossibleShapesAreRejected) {
  auto be = make_cpu_backend();
  EXPECT_THROW(make_layer(*be, "c", Conv2dConfig::square(8, 7), {TensorDesc{Shape{1, 3, 4, 4}}}),
               Error);  // kernel larger than the padded input
  EXPECT_THROW(make_layer(*be, "c", Conv2dConfig::square(8, 3), {TensorDesc{Shape{1, 0, 8, 8}}}),
               Error);  // zero channels
  EXPECT_THROW(make_layer(*be, "c", Conv2dConfig::square(-8, 3), {TensorDesc{Shape{1, 3, 8, 8}}}),
               Error);  // negative K
}

TEST(Conv2dFlops, MatchesFormula) {
  Conv2dConfig c = Conv2dConfig::square(64, 3, 1, 1);
  Flops f = conv2d_flops(c, Shape{32, 64, 56, 56}, Shape{32, 64, 56, 56});
  EXPECT_DOUBLE_EQ(f.fprop, 2.0 * 32 * 64 * 64 * 9 * 56 * 56);
  EXPECT_DOUBLE_EQ(f.dgrad, f.fprop);
  EXPECT_DOUBLE_EQ(f.wgrad, f.fprop);
}

}  // namespace
}  // namespace tbd::test
