// tests/layers/tensor_ops_test.cpp: Add, Concat, Split, Reshape, Transpose and Reverse forward
// and backward against float64 references (index arithmetic on plain host data), on every
// target.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "layers/tensor_ops.h"
#include "tests/layers/layer_steps.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

int64_t prod(const Shape& s, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; ++i) p *= s[i];
  return p;
}

// Structural ops and Add: a copy, or one rounding, per element.
LayerCheckOptions moves() {
  LayerCheckOptions o;
  o.op_class = OpClass::kElementwise;
  return o;
}

// ---- Add ----

struct AddCase {
  std::string name;
  Shape x;
  Layout layout = Layout::kRowMajor;
};

class AddTest : public LayerTest<AddCase> {};

TEST_P(AddTest, MatchesFloat64Reference) {
  const AddCase& tc = tcase();
  TensorDesc d{tc.x, DType::kF32, tc.layout};
  auto layer = make("add", AddConfig{}, {d, d});
  EXPECT_EQ(layer->output_descs()[0].shape, tc.x);
  EXPECT_EQ(layer->output_descs()[0].layout, layer->input_descs()[0].layout);
  check_layer(
      be(), *layer,
      [](auto& x, auto&) {
        Vec y(x[0].size());
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] + x[1][i];
        return std::vector<Vec>{y};
      },
      [](auto&, auto&, auto& dy) {
        RefGrads g;
        g.dx = {dy[0], dy[0]};
        return g;
      },
      moves());
}

INSTANTIATE_TEST_SUITE_P(Shapes, AddTest,
                         on_all_targets(::testing::Values(
                             AddCase{"plain_odd", Shape{3, 5, 7}},
                             AddCase{"batch1_scalarish", Shape{1, 1}},
                             AddCase{"blocked", Shape{2, 16, 3, 3}, Layout::kNChw16c},
                             AddCase{"blocked_batch1", Shape{1, 32, 5, 1}, Layout::kNChw16c},
                             AddCase{"channels_last", Shape{2, 5, 3, 4}, Layout::kNhwc})),
                         CaseOnTarget());

class TensorOpsOnTarget : public TargetTest {};

// Only one input needs a gradient (the other is data).
TEST_P(TensorOpsOnTarget, AddSkipsInputsWithoutGradient) {
  TensorDesc d{Shape{4, 6}};
  auto layer = make("add", AddConfig{}, {d, d});
  LayerCheckOptions opt = moves();
  opt.x_needs_grad = {false, true};
  check_layer(
      be(), *layer,
      [](auto& x, auto&) {
        Vec y(x[0].size());
        for (std::size_t i = 0; i < y.size(); ++i) y[i] = x[0][i] + x[1][i];
        return std::vector<Vec>{y};
      },
      [](auto&, auto&, auto& dy) {
        RefGrads g;
        g.dx = {Vec(), dy[0]};
        return g;
      },
      opt);
}

// ---- Concat and Split: (outer, axis, inner) views ----

// Concatenates pieces along `axis` of the whole shape `ws`.
Vec ref_concat(const std::vector<Vec>& pieces, const std::vector<int64_t>& sizes, const Shape& ws,
               int axis) {
  const int64_t outer = prod(ws, 0, axis), inner = prod(ws, axis + 1, ws.rank());
  Vec y(ws.numel());
  for (int64_t o = 0; o < outer; ++o) {
    int64_t base = 0;
    for (std::size_t k = 0; k < pieces.size(); ++k) {
      const int64_t len = sizes[k] * inner;
      for (int64_t i = 0; i < len; ++i)
        y[(o * ws[axis]) * inner + base + i] = pieces[k][o * len + i];
      base += len;
    }
  }
  return y;
}

std::vector<Vec> ref_split(const Vec& x, const std::vector<int64_t>& sizes, const Shape& ws,
                           int axis) {
  const int64_t outer = prod(ws, 0, axis), inner = prod(ws, axis + 1, ws.rank());
  std::vector<Vec> out;
  int64_t base = 0;
  for (int64_t s : sizes) {
    const int64_t len = s * inner;
    Vec v(outer * len);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < len; ++i) v[o * len + i] = x[(o * ws[axis]) * inner + base + i];
    out.push_back(v);
    base += len;
  }
  return out;
}

struct ConcatCase {
  std::string name;
  std::vector<Shape> x;
  int axis;
  Layout layout = Layout::kRowMajor;  // nChw16c: channels in blocks of 16 (an Inception concat)
};

class ConcatTest : public LayerTest<ConcatCase> {};

TEST_P(ConcatTest, MatchesFloat64Reference) {
  const ConcatCase& tc = tcase();
  std::vector<TensorDesc> in;
  for (const Shape& s : tc.x) in.push_back(TensorDesc{s, DType::kF32, tc.layout});
  ConcatConfig cfg;
  cfg.axis = tc.axis;
  auto layer = make("cat", cfg, in);
  EXPECT_EQ(layer->output_descs()[0].layout, layer->input_descs()[0].layout);
  const Shape ys = layer->output_descs()[0].shape;
  const int axis = tc.axis < 0 ? tc.axis + ys.rank() : tc.axis;
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const Shape& s : tc.x) {
    sizes.push_back(s[axis]);
    total += s[axis];
  }
  EXPECT_EQ(ys[axis], total);
  check_layer(
      be(), *layer,
      [&](auto& x, auto&) { return std::vector<Vec>{ref_concat(x, sizes, ys, axis)}; },
      [&](auto&, auto&, auto& dy) {
        RefGrads g;
        g.dx = ref_split(dy[0], sizes, ys, axis);
        return g;
      },
      moves());
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ConcatTest,
    on_all_targets(::testing::Values(
        ConcatCase{"channels_3_inputs", {Shape{2, 3, 4}, Shape{2, 5, 4}, Shape{2, 1, 4}}, 1},
        ConcatCase{"batch_axis0", {Shape{1, 3, 2}, Shape{3, 3, 2}}, 0},
        ConcatCase{"last_axis_negative", {Shape{3, 2, 5}, Shape{3, 2, 7}}, -1},
        ConcatCase{"single_input", {Shape{4, 3}}, 1},
        ConcatCase{"nchw_channels", {Shape{2, 3, 3, 5}, Shape{2, 4, 3, 5}}, 1},
        ConcatCase{"blocked_channels",
                   {Shape{2, 16, 3, 5}, Shape{2, 32, 3, 5}, Shape{2, 16, 3, 5}},
                   1,
                   Layout::kNChw16c},
        ConcatCase{"channels_last",
                   {Shape{2, 3, 3, 5}, Shape{2, 20, 3, 5}, Shape{2, 5, 3, 5}},
                   1,
                   Layout::kNhwc})),
    CaseOnTarget());

struct SplitCase {
  std::string name;
  Shape x;
  int axis;
  std::vector<int64_t> sizes;  // the pieces expected (given as sizes unless parts is set)
  Layout layout = Layout::kRowMajor;
  int64_t parts = 0;
};

class SplitTest : public LayerTest<SplitCase> {};

TEST_P(SplitTest, MatchesFloat64Reference) {
  const SplitCase& tc = tcase();
  SplitConfig cfg;
  cfg.axis = tc.axis;
  if (tc.parts > 0) {
    cfg.parts = tc.parts;
  } else {
    cfg.sizes = tc.sizes;
  }
  auto layer = make("split", cfg, {TensorDesc{tc.x, DType::kF32, tc.layout}});
  for (const TensorDesc& d : layer->output_descs()) {
    EXPECT_EQ(d.layout, layer->input_descs()[0].layout);
  }
  const int axis = tc.axis < 0 ? tc.axis + tc.x.rank() : tc.axis;
  ASSERT_EQ(layer->output_descs().size(), tc.sizes.size());
  EXPECT_EQ(layer->output_descs()[0].shape[axis], tc.sizes[0]);
  check_layer(
      be(), *layer, [&](auto& x, auto&) { return ref_split(x[0], tc.sizes, tc.x, axis); },
      [&](auto&, auto&, auto& dy) {
        RefGrads g;
        g.dx = {ref_concat(dy, tc.sizes, tc.x, axis)};
        return g;
      },
      moves());
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SplitTest,
    on_all_targets(::testing::Values(
        SplitCase{"axis1_three", Shape{2, 6, 5}, 1, {2, 3, 1}},
        SplitCase{"axis0_batch", Shape{4, 3}, 0, {1, 3}},
        SplitCase{"last_axis_qkv", Shape{2, 3, 12}, -1, {4, 4, 4}},
        SplitCase{"batch1_one_piece", Shape{1, 7}, 1, {7}},
        SplitCase{"blocked_channels", Shape{2, 48, 3, 4}, 1, {16, 32}, Layout::kNChw16c},
        SplitCase{"channels_last", Shape{2, 9, 3, 4}, 1, {2, 7}, Layout::kNhwc},
        SplitCase{"last_axis_2_3", Shape{3, 5}, -1, {2, 3}},
        SplitCase{"axis0_three_parts", Shape{6, 5}, 0, {2, 2, 2}, Layout::kRowMajor, 3})),
    CaseOnTarget());

// An output nobody consumes has no gradient (null dy): it counts as zeros.
TEST(SplitGradients, MissingOutputGradientIsZero) {
  auto be = make_cpu_backend();
  SplitConfig cfg;
  cfg.axis = 1;
  cfg.sizes = {1, 2};
  auto layer = make_layer(*be, "split", cfg, {TensorDesc{Shape{2, 3}}});
  Tensor x = be->empty(Shape{2, 3}, MemCategory::kDynamic);
  Tensor dx = be->empty(Shape{2, 3}, MemCategory::kDynamic);
  Tensor y0 = be->empty(Shape{2, 1}, MemCategory::kDynamic);
  Tensor y1 = be->empty(Shape{2, 2}, MemCategory::kDynamic);
  Tensor dy1 = be->empty(Shape{2, 2}, MemCategory::kDynamic);
  from_host(*be, x, {1, 2, 3, 4, 5, 6});
  from_host(*be, dx, {9, 9, 9, 9, 9, 9});
  from_host(*be, dy1, {10, 20, 30, 40});
  const Tensor* xs[] = {&x};
  Tensor* ys[] = {&y0, &y1};
  layer->forward(ys, xs);
  EXPECT_EQ(to_host(*be, y0), (Vec{1, 4}));
  EXPECT_EQ(to_host(*be, y1), (Vec{2, 3, 5, 6}));
  const Tensor* dys[] = {nullptr, &dy1};
  const Tensor* yc[] = {&y0, &y1};
  Tensor* dxs[] = {&dx};
  layer->backward(dxs, dys, xs, yc);
  EXPECT_EQ(to_host(*be, dx), (Vec{0, 10, 20, 0, 30, 40}));
}

// ---- Reshape ----

struct ReshapeCase {
  std::string name;
  Shape x;
  std::vector<int64_t> target;
  Shape want;
};

class ReshapeTest : public LayerTest<ReshapeCase> {};

TEST_P(ReshapeTest, MatchesFloat64Reference) {
  const ReshapeCase& tc = tcase();
  ReshapeConfig cfg;
  cfg.shape = tc.target;
  auto layer = make("reshape", cfg, {TensorDesc{tc.x}});
  EXPECT_EQ(layer->output_descs()[0].shape, tc.want);
  check_layer(
      be(), *layer, [](auto& x, auto&) { return std::vector<Vec>{x[0]}; },
      [](auto&, auto&, auto& dy) {
        RefGrads g;
        g.dx = {dy[0]};
        return g;
      },
      moves());
}

INSTANTIATE_TEST_SUITE_P(Shapes, ReshapeTest,
                         on_all_targets(::testing::Values(
                             ReshapeCase{"flatten_infer", Shape{2, 3, 4}, {2, -1}, Shape{2, 12}},
                             ReshapeCase{"infer_first", Shape{6, 5}, {-1, 3, 5}, Shape{2, 3, 5}},
                             ReshapeCase{"add_unit_dims", Shape{5}, {1, 5, 1}, Shape{1, 5, 1}},
                             ReshapeCase{"explicit", Shape{3, 2, 7}, {7, 6}, Shape{7, 6}},
                             ReshapeCase{"3d_to_4_rows", Shape{2, 3, 4}, {4, -1}, Shape{4, 6}})),
                         CaseOnTarget());

// ---- Transpose ----

// y[j] = x[i] with y's multi-index (i_perm[0], ..., i_perm[r-1]).
Vec ref_transpose(const Vec& x, const Shape& xs, const std::vector<int>& perm) {
  const int r = xs.rank();
  std::vector<int64_t> xstride(r), ydims(r);
  int64_t acc = 1;
  for (int i = r - 1; i >= 0; --i) {
    xstride[i] = acc;
    acc *= xs[i];
  }
  for (int i = 0; i < r; ++i) ydims[i] = xs[perm[i]];
  Vec y(x.size());
  std::vector<int64_t> idx(r, 0);  // y's multi-index, row-major order
  for (std::size_t j = 0; j < y.size(); ++j) {
    int64_t src = 0;
    for (int i = 0; i < r; ++i) src += idx[i] * xstride[perm[i]];
    y[j] = x[src];
    for (int i = r - 1; i >= 0; --i) {
      if (++idx[i] < ydims[i]) break;
      idx[i] = 0;
    }
  }
  return y;
}

struct TransposeCase {
  std::string name;
  Shape x;
  std::vector<int> perm;
};

class TransposeTest : public LayerTest<TransposeCase> {};

TEST_P(TransposeTest, MatchesFloat64Reference) {
  const TransposeCase& tc = tcase();
  TransposeConfig cfg;
  cfg.perm = tc.perm;
  auto layer = make("t", cfg, {TensorDesc{tc.x}});
  std::vector<int> inv(tc.perm.size());
  for (std::size_t i = 0; i < tc.perm.size(); ++i) inv[tc.perm[i]] = static_cast<int>(i);
  const Shape ys = layer->output_descs()[0].shape;
  for (int i = 0; i < ys.rank(); ++i) EXPECT_EQ(ys[i], tc.x[tc.perm[i]]);
  check_layer(
      be(), *layer,
      [&](auto& x, auto&) { return std::vector<Vec>{ref_transpose(x[0], tc.x, tc.perm)}; },
      [&](auto&, auto&, auto& dy) {
        RefGrads g;
        g.dx = {ref_transpose(dy[0], ys, inv)};
        return g;
      },
      moves());
}

INSTANTIATE_TEST_SUITE_P(Shapes, TransposeTest,
                         on_all_targets(::testing::Values(
                             TransposeCase{"matrix", Shape{3, 7}, {1, 0}},
                             TransposeCase{"heads_BTHD_to_BHTD", Shape{2, 5, 3, 4}, {0, 2, 1, 3}},
                             TransposeCase{"rotate_3d", Shape{2, 3, 5}, {2, 0, 1}},
                             TransposeCase{"rank5_batch1", Shape{1, 2, 3, 2, 3}, {4, 2, 0, 3, 1}},
                             TransposeCase{"identity", Shape{4, 3}, {0, 1}},
                             TransposeCase{"time_major", Shape{1, 6, 9}, {1, 0, 2}},
                             TransposeCase{"swap_leading_3d", Shape{3, 4, 5}, {1, 0, 2}})),
                         CaseOnTarget());

// Structural ops move any dtype (i32 labels, indices); there is no gradient then.
TEST_P(TensorOpsOnTarget, TransposeMovesInt32) {
  LayerCheckOptions opt = moves();
  opt.int_lo = -50, opt.int_hi = 1000;
  for (const Shape& xs : {Shape{2, 3}, Shape{5, 3}}) {
    TransposeConfig cfg;
    cfg.perm = {1, 0};
    auto layer = make("t", cfg, {TensorDesc{xs, DType::kI32}});
    EXPECT_EQ(layer->output_descs()[0].dtype, DType::kI32);
    check_layer(
        be(), *layer,
        [&](auto& x, auto&) {
          return std::vector<Vec>{ref_transpose(x[0], xs, {1, 0})};
        },
        [](auto&, auto&, auto&) {
          return RefGrads{{Vec()}, {}};
        },
        opt);
  }
}

TEST_P(TensorOpsOnTarget, ConcatAndSplitMoveInt32) {
  LayerCheckOptions opt = moves();
  opt.int_lo = -50, opt.int_hi = 1000;
  ConcatConfig cat;
  cat.axis = 0;
  auto c = make("cat", cat,
                {TensorDesc{Shape{2, 3}, DType::kI32}, TensorDesc{Shape{4, 3}, DType::kI32}});
  EXPECT_EQ(c->output_descs()[0].dtype, DType::kI32);
  check_layer(
      be(), *c,
      [&](auto& x, auto&) {
        return std::vector<Vec>{ref_concat(x, {2, 4}, Shape{6, 3}, 0)};
      },
      [](auto&, auto&, auto&) {
        return RefGrads{{Vec(), Vec()}, {}};
      },
      opt);
  SplitConfig split;
  split.axis = 1;
  split.sizes = {1, 2};
  auto sp = make("split", split, {TensorDesc{Shape{4, 3}, DType::kI32}});
  EXPECT_EQ(sp->output_descs()[1].dtype, DType::kI32);
  check_layer(
      be(), *sp,
      [&](auto& x, auto&) {
        return ref_split(x[0], {1, 2}, Shape{4, 3}, 1);
      },
      [](auto&, auto&, auto&) {
        return RefGrads{{Vec()}, {}};
      },
      opt);
}

// ---- Reverse ----

// x (T, N, inner...) reversed along T per sample: the first len_n steps of sample n backwards,
// the rest in place (no lengths: len_n = T).
Vec ref_reverse(const Vec& x, const Shape& xs, const std::vector<int>& lengths) {
  const int64_t T = xs[0], N = xs[1], inner = xs.numel() / (T * N);
  Vec y(x.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t len = lengths.empty() ? T : lengths[n];
      const int64_t from = t < len ? len - 1 - t : t;
      for (int64_t k = 0; k < inner; ++k)
        y[(t * N + n) * inner + k] = x[(from * N + n) * inner + k];
    }
  return y;
}

struct ReverseCase {
  std::string name;
  Shape x;
  DType dtype = DType::kF32;
  std::vector<int> lengths = {};  // empty: no lengths input (whole sequences)
};

class ReverseTest : public LayerTest<ReverseCase> {};

TEST_P(ReverseTest, MatchesFloat64Reference) {
  const ReverseCase& tc = tcase();
  std::vector<TensorDesc> in{TensorDesc{tc.x, tc.dtype, Layout::kRowMajor}};
  LayerCheckOptions opt = moves();
  opt.int_lo = -50, opt.int_hi = 1000;
  if (!tc.lengths.empty()) {
    in.push_back(TensorDesc{Shape{tc.x[1]}, DType::kI32, Layout::kRowMajor});
    opt.x_values[1] = Vec(tc.lengths.begin(), tc.lengths.end());
  }
  auto layer = make("enc.reverse", ReverseConfig{}, in);
  EXPECT_EQ(layer->output_descs()[0].shape, tc.x);
  EXPECT_EQ(layer->output_descs()[0].dtype, tc.dtype);
  EXPECT_EQ(layer->input_grad(0), tc.dtype == DType::kF32);
  if (in.size() > 1) {
    EXPECT_FALSE(layer->input_grad(1)) << "lengths take no gradient";
  }
  EXPECT_DOUBLE_EQ(layer->flops().total(), 0);
  const bool f32 = tc.dtype == DType::kF32;
  check_layer(
      be(), *layer,
      [&](auto& x, auto&) { return std::vector<Vec>{ref_reverse(x[0], tc.x, tc.lengths)}; },
      [&](auto&, auto&, auto& dy) {
        RefGrads g;
        g.dx = {f32 ? ref_reverse(dy[0], tc.x, tc.lengths) : Vec(), Vec()};
        g.dx.resize(in.size());
        return g;
      },
      opt);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ReverseTest,
    on_all_targets(::testing::Values(
        ReverseCase{"f32_whole", Shape{5, 3, 4}},
        // Lengths 0 (nothing reversed) and T (all of it) at the ends of the range.
        ReverseCase{"f32_lengths", Shape{5, 3, 4}, DType::kF32, {3, 0, 5}},
        ReverseCase{"f32_rank2_lengths", Shape{6, 4}, DType::kF32, {6, 1, 0, 4}},
        ReverseCase{"f32_rank4", Shape{3, 2, 2, 3}},
        ReverseCase{"f32_batch1", Shape{4, 1, 3}, DType::kF32, {2}},
        ReverseCase{"f32_one_step", Shape{1, 3, 2}, DType::kF32, {1, 0, 1}},
        // Token ids (T, N) as Sockeye's encoder reverses its source.
        ReverseCase{"i32_whole", Shape{5, 3}, DType::kI32},
        ReverseCase{"i32_lengths", Shape{7, 3}, DType::kI32, {7, 2, 0}},
        ReverseCase{"i32_lengths_rank3", Shape{4, 2, 3}, DType::kI32, {3, 4}})),
    CaseOnTarget());

// A length outside [0, T]: the CPU's forward throws naming the layer, the sample and the value
// before writing anything; a CUDA kernel cannot throw, so that sample's elements come out as
// all-ones bits (NaN as f32, -1 as i32) and the others as usual.
TEST_P(TensorOpsOnTarget, ReverseRejectsLengthsOutsideTheSequence) {
  const Shape xs{4, 3, 2};
  for (DType dt : {DType::kF32, DType::kI32}) {
    for (int bad : {7, -1}) {
      SCOPED_TRACE(detail::concat(to_string(dt), " length ", bad));
      const std::vector<TensorDesc> in{TensorDesc{xs, dt, Layout::kRowMajor},
                                       TensorDesc{Shape{3}, DType::kI32, Layout::kRowMajor}};
      auto layer = make("enc.reverse", ReverseConfig{}, in);
      Backend& b = be();
      Tensor x = b.empty(in[0], MemCategory::kDynamic), len = b.empty(in[1], MemCategory::kDynamic);
      Tensor y = b.empty(layer->output_descs()[0], MemCategory::kDynamic);
      const Vec xv = random_vec(xs.numel(), 3, -100, 100);
      Vec xr = xv;
      for (auto& v : xr) v = dt == DType::kI32 ? std::round(v) : static_cast<float>(v);
      from_host(b, x, xr);
      from_host(b, len, {2, static_cast<double>(bad), 4});
      const Tensor* xp[] = {&x, &len};
      Tensor* yp[] = {&y};
      if (b.kind() == DeviceKind::kCpu) {
        expect_error([&] { layer->forward(yp, xp); }, {"Reverse 'enc.reverse'", "lengths",
                                                       "sample 1", std::to_string(bad), "[0, 4]"});
        continue;
      }
      layer->forward(yp, xp);
      b.synchronize();
      const Vec got = to_host(b, y), want = ref_reverse(xr, xs, {2, 0, 4});
      for (int64_t i = 0; i < xs.numel(); ++i) {
        const bool bad_sample = (i / 2) % 3 == 1;
        if (!bad_sample) {
          EXPECT_EQ(got[i], want[i]) << "element " << i;
        } else if (dt == DType::kF32) {
          EXPECT_TRUE(std::isnan(got[i])) << "element " << i << ": " << got[i];
        } else {
          EXPECT_EQ(got[i], -1) << "element " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, TensorOpsOnTarget, ::testing::ValuesIn(kAllTargets),
                         TargetName());

// ---- Errors ----

template <class Config>
void expect_layer_error(const Config& cfg, const std::vector<TensorDesc>& in,
                        const std::vector<std::string>& parts) {
  auto be = make_cpu_backend();
  try {
    make_layer(*be, "op", cfg, in);
    ADD_FAILURE() << Config::kKind << ": expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(std::string(Config::kKind) + " 'op'"), std::string::npos) << m;
    for (const auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << m;
  }
}

TEST(TensorOpsErrors, AddRejectsMismatchedShapesLayoutsAndRanks) {
  expect_layer_error(AddConfig{}, {TensorDesc{Shape{2, 3}}, TensorDesc{Shape{2, 4}}},
                     {"x0 (2, 3)", "x1 (2, 4)"});
  expect_layer_error(AddConfig{},
                     {TensorDesc{Shape{2, 16, 2, 2}, DType::kF32, Layout::kNChw16c},
                      TensorDesc{Shape{2, 16, 2, 2}}},
                     {"layout"});
  expect_layer_error(AddConfig{}, {TensorDesc{Shape{2, 3}}}, {"expected 2"});
  expect_layer_error(AddConfig{}, {TensorDesc{Shape{2, 0}}, TensorDesc{Shape{2, 0}}},
                     {"input x0", "(2, 0)"});
}

TEST(TensorOpsErrors, ConcatRejectsMismatches) {
  ConcatConfig c;
  c.axis = 1;
  expect_layer_error(c, {TensorDesc{Shape{2, 3, 4}}, TensorDesc{Shape{2, 3, 5}}},
                     {"x1", "(2, 3, 5)", "axis 1"});
  expect_layer_error(c, {TensorDesc{Shape{2, 3}}, TensorDesc{Shape{2, 3, 1}}}, {"x1"});  // rank
  // nChw16c only along channels (axis 1) in blocks of 16.
  c.axis = 0;
  expect_layer_error(c, {TensorDesc{Shape{2, 16, 2, 2}, DType::kF32, Layout::kNChw16c}},
                     {"row-major"});
  c.axis = 3;
  expect_layer_error(c, {TensorDesc{Shape{2, 3}}}, {"axis 3", "rank 2"});
  expect_layer_error(ConcatConfig{}, {}, {"at least one"});
}

TEST(TensorOpsErrors, SplitRejectsBadSizes) {
  SplitConfig c;
  c.axis = 1;
  c.sizes = {2, 2};
  expect_layer_error(c, {TensorDesc{Shape{2, 5}}}, {"sum", "(2, 5)"});
  c.sizes = {5, 0};
  expect_layer_error(c, {TensorDesc{Shape{2, 5}}}, {"positive"});
  c.sizes = {};
  expect_layer_error(c, {TensorDesc{Shape{2, 5}}}, {"at least one"});
  c.sizes = {1};
  expect_layer_error(c, {TensorDesc{Shape{-1, 1}}}, {"input x", "(-1, 1)"});
  c.sizes = {};
  c.parts = 2;
  expect_layer_error(c, {TensorDesc{Shape{2, 5}}}, {"parts=2", "divide", "= 5"});
  c.sizes = {1, 4};
  expect_layer_error(c, {TensorDesc{Shape{2, 4}}}, {"parts=2", "without sizes"});
}

TEST(TensorOpsErrors, ReshapeRejectsBadTargets) {
  ReshapeConfig c;
  c.shape = {4, 4};
  expect_layer_error(c, {TensorDesc{Shape{3, 5}}}, {"(3, 5)", "(4, 4)"});
  c.shape = {-1, -1};
  expect_layer_error(c, {TensorDesc{Shape{3, 5}}}, {"at most one -1"});
  c.shape = {4, -1};
  expect_layer_error(c, {TensorDesc{Shape{3, 5}}}, {"cannot reshape"});
  c.shape = {0, 15};
  expect_layer_error(c, {TensorDesc{Shape{3, 5}}}, {"positive"});
}

TEST(TensorOpsErrors, TransposeRejectsBadPermutations) {
  TransposeConfig c;
  c.perm = {0, 0, 1};
  expect_layer_error(c, {TensorDesc{Shape{2, 3, 4}}}, {"perm {0, 0, 1}", "(2, 3, 4)"});
  c.perm = {1, 0};
  expect_layer_error(c, {TensorDesc{Shape{2, 3, 4}}}, {"perm {1, 0}"});
  c.perm = {0, 3, 1};
  expect_layer_error(c, {TensorDesc{Shape{2, 3, 4}}}, {"not a permutation"});
}

TEST(TensorOpsErrors, ReverseRejectsBadInputs) {
  ReverseConfig c;
  const TensorDesc ids{Shape{5, 3}, DType::kI32, Layout::kRowMajor};
  expect_layer_error(c, {TensorDesc{Shape{7}}}, {"input x", "rank >= 2", "(7)"});
  expect_layer_error(c, {TensorDesc{Shape{5, 0, 2}}}, {"input x", "(5, 0, 2)"});
  expect_layer_error(c, {TensorDesc{Shape{2, 16, 2, 2}, DType::kF32, Layout::kNChw16c}},
                     {"input x", "row-major"});
  expect_layer_error(c, {ids, TensorDesc{Shape{4}, DType::kI32, Layout::kRowMajor}},
                     {"input lengths", "(3)", "(4)"});
  expect_layer_error(c, {ids, TensorDesc{Shape{3}}}, {"input lengths", "i32"});
  expect_layer_error(c, {ids, TensorDesc{Shape{3, 1}, DType::kI32, Layout::kRowMajor}},
                     {"input lengths", "(3, 1)"});
  const TensorDesc len{Shape{3}, DType::kI32, Layout::kRowMajor};
  expect_layer_error(c, {ids, len, len}, {"expected 1 or 2", "got 3"});
  expect_layer_error(c, {}, {"expected 1 or 2", "got 0"});
}

TEST(TensorOpsFlops, MatchesFormula) {
  Flops f = add_flops(Shape{32, 256, 56, 56});
  EXPECT_DOUBLE_EQ(f.fprop, 32.0 * 256 * 56 * 56);
  EXPECT_DOUBLE_EQ(f.dgrad, 0);
  EXPECT_DOUBLE_EQ(f.wgrad, 0);
  auto be = make_cpu_backend();
  ConcatConfig c;
  auto cat = make_layer(*be, "c", c, {TensorDesc{Shape{2, 3}}, TensorDesc{Shape{2, 4}}});
  EXPECT_DOUBLE_EQ(cat->flops().total(), 0);
  auto add = make_layer(*be, "a", AddConfig{}, {TensorDesc{Shape{2, 3}}, TensorDesc{Shape{2, 3}}});
  EXPECT_DOUBLE_EQ(add->flops().fprop, 6);
}

TEST(TensorOpsSteps, AllocateNothing) {
  auto be = make_cpu_backend();
  TensorDesc d{Shape{2, 6, 5}};
  auto add = make_layer(*be, "add", AddConfig{}, {d, d});
  EXPECT_EQ(allocations_in_step(*be, *add), 0u);
  auto cat = make_layer(*be, "cat", ConcatConfig{}, {d, d});
  EXPECT_EQ(allocations_in_step(*be, *cat), 0u);
  SplitConfig s;
  s.sizes = {2, 4};
  auto split = make_layer(*be, "split", s, {d});
  EXPECT_EQ(allocations_in_step(*be, *split), 0u);
  ReshapeConfig r;
  r.shape = {-1};
  auto reshape = make_layer(*be, "reshape", r, {d});
  EXPECT_EQ(allocations_in_step(*be, *reshape), 0u);
  TransposeConfig t;
  t.perm = {2, 0, 1};
  auto tr = make_layer(*be, "t", t, {d});
  EXPECT_EQ(allocations_in_step(*be, *tr), 0u);
  // Zero lengths: a valid step that keeps every sample in place.
  auto rev = make_layer(*be, "rev", ReverseConfig{},
                        {d, TensorDesc{Shape{6}, DType::kI32, Layout::kRowMajor}});
  EXPECT_EQ(allocations_in_step(*be, *rev), 0u);
}

}  // namespace
}  // namespace tbd::test
