// tests/layers/attention_test.cpp: MultiHeadAttention forward, input and parameter gradients
// against a float64 reference (self, cross, causal, padding, dropout) on every target, dropout
// determinism, input checks, FLOPs, memory and the no-allocation rule.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/attention.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

struct MhaCase {
  std::string name;
  int64_t N, Tq, Tk, D;  // Tk ignored for self attention
  MultiHeadAttentionConfig cfg;
  bool training = true;
  bool run_fd = true;
};
void PrintTo(const MhaCase& c, std::ostream* os) { *os << c.name; }

MultiHeadAttentionConfig mha(int64_t heads, bool cross = false, bool causal = false,
                             bool padding = false, bool bias = true, double dropout = 0.0) {
  MultiHeadAttentionConfig c;
  c.num_heads = heads;
  c.cross = cross;
  c.causal = causal;
  c.padding_mask = padding;
  c.bias = bias;
  c.dropout = dropout;
  c.seed = 42;
  return c;
}

// Naive float64 multi-head attention with the layer's documented semantics (including its
// counter-based dropout mask for forward number `step`).
struct RefMha {
  MultiHeadAttentionConfig c;
  int64_t N, Tq, Tk, D, h, dh;
  bool dropout;
  uint64_t step;
  double scale;

  RefMha(const MhaCase& tc, uint64_t step_ = 0)
      : c(tc.cfg),
        N(tc.N),
        Tq(tc.Tq),
        Tk(tc.cfg.cross ? tc.Tk : tc.Tq),
        D(tc.D),
        h(tc.cfg.num_heads),
        dh(tc.D / tc.cfg.num_heads),
        dropout(tc.training && tc.cfg.dropout > 0),
        step(step_),
        scale(1.0 / std::sqrt(static_cast<double>(dh))) {}

  struct State {
    Vec Q, K, V, P, Pd, O, y;
    std::vector<double> keep_scale;  // per score: keep / (1 - p), or 1 without dropout
  };

  // out (M, D) = in (M, D) W^T + b
  Vec proj(const Vec& in, int64_t m, const Vec& w, const Vec* b) const {
    Vec out(m * D, 0.0);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t o = 0; o < D; ++o) {
        double s = b ? (*b)[o] : 0.0;
        for (int64_t i = 0; i < D; ++i) s += in[r * D + i] * w[o * D + i];
        out[r * D + o] = s;
      }
    return out;
  }
  int64_t valid(const std::vector<Vec>& x, int64_t n, int64_t i) const {
    int64_t v = Tk;
    if (c.causal) v = std::min(v, i + 1);
    if (c.padding_mask) v = std::min(v, static_cast<int64_t>(x.back()[n]));
    return v;
  }
  const Vec& kv(const std::vector<Vec>& x) const { return c.cross ? x[1] : x[0]; }
  const Vec* bias(const std::vector<Vec>& p, int i) const { return c.bias ? &p[4 + i] : nullptr; }
  int64_t pidx(int64_t n, int64_t hh, int64_t i, int64_t j) const {
    return ((n * h + hh) * Tq + i) * Tk + j;
  }

  State run(const std::vector<Vec>& x, const std::vector<Vec>& p) const {
    State s;
    s.Q = proj(x[0], N * Tq, p[0], bias(p, 0));
    s.K = proj(kv(x), N * Tk, p[1], bias(p, 1));
    s.V = proj(kv(x), N * Tk, p[2], bias(p, 2));
    s.P.assign(N * h * Tq * Tk, 0.0);
    s.Pd = s.P;
    s.keep_scale.assign(s.P.size(), 1.0);
    s.O.assign(N * Tq * D, 0.0);
    const uint64_t base = attention_dropout_base(c.seed, step);
    const uint64_t thr = attention_dropout_threshold(c.dropout);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t i = 0; i < Tq; ++i) {
          int64_t L = valid(x, n, i);
          Vec e(L);
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j < L; ++j) {
            double d = 0;
            for (int64_t k = 0; k < dh; ++k)
              d += s.Q[(n * Tq + i) * D + hh * dh + k] * s.K[(n * Tk + j) * D + hh * dh + k];
            e[j] = d * scale;
            mx = std::max(mx, e[j]);
          }
          for (int64_t j = 0; j < L; ++j) sum += (e[j] = std::exp(e[j] - mx));
          for (int64_t j = 0; j < Tk; ++j) {
            int64_t pi = pidx(n, hh, i, j);
            if (dropout) {
              bool keep = attention_dropout_keep(base, static_cast<uint64_t>(pi), thr);
              s.keep_scale[pi] = keep ? 1.0 / (1.0 - c.dropout) : 0.0;
            }
            s.P[pi] = j < L ? e[j] / sum : 0.0;
            s.Pd[pi] = s.P[pi] * s.keep_scale[pi];
          }
          for (int64_t k = 0; k < dh; ++k) {
            double o = 0;
            for (int64_t j = 0; j < Tk; ++j)
              o += s.Pd[pidx(n, hh, i, j)] * s.V[(n * Tk + j) * D + hh * dh + k];
            s.O[(n * Tq + i) * D + hh * dh + k] = o;
          }
        }
    s.y = proj(s.O, N * Tq, p[3], bias(p, 3));
    return s;
  }

  std::vector<Vec> forward(const std::vector<Vec>& x, const std::vector<Vec>& p) const {
    return {run(x, p).y};
  }

  // For z = in W^T + b: dW += dz^T in, db += colsum dz, din (+)= dz W.
  void proj_backward(const Vec& dz, const Vec& in, const Vec& w, int64_t m, Vec& dw, Vec* db,
                     Vec* din) const {
    for (int64_t r = 0; r < m; ++r)
      for (int64_t o = 0; o < D; ++o) {
        double g = dz[r * D + o];
        if (db) (*db)[o] += g;
        for (int64_t i = 0; i < D; ++i) {
          dw[o * D + i] += g * in[r * D + i];
          if (din) (*din)[r * D + i] += g * w[o * D + i];
        }
      }
  }

  RefGrads backward(const std::vector<Vec>& x, const std::vector<Vec>& p,
                    const std::vector<Vec>& dy) const {
    State s = run(x, p);
    RefGrads g;
    for (const Vec& pv : p) g.dparams.emplace_back(pv.size(), 0.0);
    auto db = [&](int i) { return c.bias ? &g.dparams[4 + i] : nullptr; };
    Vec dO(N * Tq * D, 0.0), dQ(N * Tq * D, 0.0), dK(N * Tk * D, 0.0), dV(N * Tk * D, 0.0);
    proj_backward(dy[0], s.O, p[3], N * Tq, g.dparams[3], db(3), &dO);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t i = 0; i < Tq; ++i) {
          Vec dP(Tk);
          double dot = 0;
          for (int64_t j = 0; j < Tk; ++j) {
            int64_t pi = pidx(n, hh, i, j);
            double dpd = 0;
            for (int64_t k = 0; k < dh; ++k) {
              int64_t oi = (n * Tq + i) * D + hh * dh + k, vi = (n * Tk + j) * D + hh * dh + k;
              dpd += dO[oi] * s.V[vi];
              dV[vi] += s.Pd[pi] * dO[oi];
            }
            dP[j] = dpd * s.keep_scale[pi];
            dot += s.P[pi] * dP[j];
          }
          for (int64_t j = 0; j < Tk; ++j) {
            double ds = s.P[pidx(n, hh, i, j)] * (dP[j] - dot) * scale;
            for (int64_t k = 0; k < dh; ++k) {
              int64_t qi = (n * Tq + i) * D + hh * dh + k, ki = (n * Tk + j) * D + hh * dh + k;
              dQ[qi] += ds * s.K[ki];
              dK[ki] += ds * s.Q[qi];
            }
          }
        }
    Vec dq(N * Tq * D, 0.0), dkv(N * Tk * D, 0.0);
    Vec& dkv_target = c.cross ? dkv : dq;  // self: one input gets all three
    proj_backward(dQ, x[0], p[0], N * Tq, g.dparams[0], db(0), &dq);
    proj_backward(dK, kv(x), p[1], N * Tk, g.dparams[1], db(1), &dkv_target);
    proj_backward(dV, kv(x), p[2], N * Tk, g.dparams[2], db(2), &dkv_target);
    g.dx.push_back(dq);
    if (c.cross) g.dx.push_back(dkv);
    if (c.padding_mask) g.dx.emplace_back();  // kv_lengths: no gradient
    return g;
  }
};

std::vector<TensorDesc> inputs_of(const MhaCase& tc) {
  std::vector<TensorDesc> in{TensorDesc{Shape{tc.N, tc.Tq, tc.D}}};
  if (tc.cfg.cross) in.push_back(TensorDesc{Shape{tc.N, tc.Tk, tc.D}});
  if (tc.cfg.padding_mask) in.push_back(TensorDesc{Shape{tc.N}, DType::kI32});
  return in;
}

class MultiHeadAttentionTest : public LayerTest<MhaCase> {};

TEST_P(MultiHeadAttentionTest, MatchesFloat64Reference) {
  const MhaCase& tc = tcase();
  auto layer = make("attn", tc.cfg, inputs_of(tc));
  EXPECT_EQ(layer->output_descs()[0].shape, (Shape{tc.N, tc.Tq, tc.D}));
  EXPECT_EQ(layer->params().size(), tc.cfg.bias ? 8u : 4u);
  RefMha ref(tc);
  LayerCheckOptions opt;
  opt.training = tc.training;
  opt.int_lo = 1;  // kv_lengths in [1, Tk]
  opt.int_hi = ref.Tk + 1;
  opt.run_fd = tc.run_fd;
  check_layer(
      be(), *layer, [&](auto& x, auto& p) { return ref.forward(x, p); },
      [&](auto& x, auto& p, auto& dy) { return ref.backward(x, p, dy); }, opt);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MultiHeadAttentionTest,
    on_all_targets(::testing::Values(
        MhaCase{"self_batch1", 1, 4, 0, 8, mha(2)}, MhaCase{"self_odd_3heads", 2, 5, 0, 12, mha(3)},
        MhaCase{"self_no_bias", 2, 3, 0, 8, mha(4, false, false, false, /*bias=*/false)},
        MhaCase{"cross", 2, 3, 5, 12, mha(4, /*cross=*/true)},
        MhaCase{"cross_batch1_longer_q", 1, 5, 3, 8, mha(2, true)},
        MhaCase{"causal_self", 2, 5, 0, 8, mha(2, false, /*causal=*/true)},
        MhaCase{"padding_self", 2, 5, 0, 12, mha(3, false, false, /*padding=*/true)},
        MhaCase{"causal_padding_self", 2, 4, 0, 8, mha(4, false, true, true)},
        MhaCase{"padding_cross", 2, 4, 5, 12, mha(2, true, false, true)},
        MhaCase{"dropout_self", 2, 5, 0, 8, mha(2, false, false, false, true, 0.3)},
        MhaCase{"dropout_cross_causal_padding", 2, 4, 5, 12, mha(3, true, true, true, true, 0.25)},
        MhaCase{"dropout_eval_mode", 2, 4, 0, 8, mha(2, false, true, false, true, 0.5), false},
        // Large enough for oneDNN's blocked brgemm kernels; finite differences skipped (slow).
        MhaCase{"medium_self_causal", 2, 19, 0, 64, mha(4, false, true, false, true, 0.1), true,
                false},
        MhaCase{"medium_cross_padding", 3, 17, 23, 48, mha(3, true, false, true), true, false},
        MhaCase{"self_one_head", 1, 7, 0, 6, mha(1)},
        MhaCase{"cross_no_bias", 2, 3, 5, 8, mha(4, true, false, false, /*bias=*/false)},
        MhaCase{"dropout_cross_padding", 2, 3, 5, 8, mha(2, true, false, true, true, 0.5)})),
    CaseOnTarget());

// Runs one forward with fixed inputs and parameters; returns y.
struct Runner {
  std::unique_ptr<Backend> be = make_cpu_backend();
  MhaCase tc;
  std::unique_ptr<Layer> layer;
  std::vector<Tensor> x;
  Tensor y;
  std::vector<Vec> xh, ph;

  explicit Runner(const MhaCase& c) : tc(c) {
    auto in = inputs_of(tc);
    layer = make_layer(*be, "attn", tc.cfg, in);
    for (std::size_t k = 0; k < in.size(); ++k) {
      x.push_back(be->empty(in[k], MemCategory::kDynamic));
      Vec v = random_vec(in[k].shape.numel(), 10 + k);
      if (in[k].dtype == DType::kI32) {  // lengths Tk, Tk-1, ... (at least 1)
        const int64_t tk = tc.cfg.cross ? tc.Tk : tc.Tq;
        for (int64_t n = 0; n < tc.N; ++n) v[n] = static_cast<double>(std::max<int64_t>(1, tk - n));
      }
      for (auto& e : v) e = static_cast<float>(e);
      from_host(*be, x.back(), v);
      xh.push_back(v);
    }
    for (std::size_t k = 0; k < layer->params().size(); ++k) {
      Vec v = random_vec(layer->params()[k].value.numel(), 100 + k, -0.5, 0.5);
      for (auto& e : v) e = static_cast<float>(e);
      from_host(*be, layer->params()[k].value, v);
      ph.push_back(v);
    }
    y = be->empty(layer->output_descs()[0], MemCategory::kFeatureMaps);
  }
  Vec forward() {
    std::vector<const Tensor*> xp;
    for (auto& t : x) xp.push_back(&t);
    std::vector<Tensor*> yp{&y};
    layer->forward(yp, xp);
    return to_host(*be, y);
  }
};

TEST(MultiHeadAttentionDropout, SameSeedSameMasksNewMaskEveryForward) {
  MhaCase tc{"d", 2, 6, 0, 8, mha(2, false, false, false, true, 0.3)};
  Runner a(tc), b(tc);
  Vec a1 = a.forward(), a2 = a.forward();
  Vec b1 = b.forward();
  EXPECT_EQ(a1, b1) << "same seed, same step: identical output";
  EXPECT_NE(a1, a2) << "a new mask every forward";
  // The second forward uses step 1 of the documented mask stream.
  expect_close("second forward vs reference at step 1", a2,
               RefMha(tc, /*step=*/1).forward(a.xh, a.ph)[0], kF32);
  MhaCase other = tc;
  other.cfg.seed = 43;
  Runner c(other);
  EXPECT_NE(c.forward(), a1) << "another seed, other masks";
}

// Layer::set_call_numbering: ranks numbered (2, 0) and (2, 1) draw the masks of one default
// layer's forwards 0, 2 and 1, 3 (a data-parallel rank r of P draws as the r-th micro-batch).
TEST(MultiHeadAttentionDropout, CallNumberingInterleavesTheMasks) {
  MhaCase tc{"d", 2, 6, 0, 8, mha(2, false, false, false, true, 0.3)};
  Runner one(tc);
  std::vector<Vec> seq;
  for (int s = 0; s < 4; ++s) seq.push_back(one.forward());
  for (uint64_t r = 0; r < 2; ++r) {
    Runner rank(tc);
    rank.layer->set_call_numbering(2, r);
    EXPECT_EQ(rank.forward(), seq[r]) << "rank " << r << ", forward 0";
    EXPECT_EQ(rank.forward(), seq[2 + r]) << "rank " << r << ", forward 1";
  }
  expect_close("rank 1's first forward vs reference at step 1", seq[1],
               RefMha(tc, /*step=*/1).forward(one.xh, one.ph)[0], kF32);
}

TEST(MultiHeadAttentionDropout, DropsAboutPOfTheProbabilities) {
  // A row-sum check on a bigger problem: with p = 0.5 about half the keys survive.
  const uint64_t base = attention_dropout_base(7, 3);
  const uint64_t thr = attention_dropout_threshold(0.5);
  int64_t kept = 0, n = 100000;
  for (int64_t i = 0; i < n; ++i) kept += attention_dropout_keep(base, i, thr);
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.5, 0.01);
  EXPECT_EQ(attention_dropout_threshold(0.0), 0u);  // p = 0 keeps everything
}

TEST(MultiHeadAttentionDropout, ZeroDropoutMatchesReference) {
  MhaCase tc{"d0", 2, 5, 0, 8, mha(2, false, true, false, true, 0.0)};
  Runner r(tc);
  Vec y1 = r.forward(), y2 = r.forward();
  EXPECT_EQ(y1, y2);
  expect_close("p = 0 forward", y1, RefMha(tc).forward(r.xh, r.ph)[0], kF32);
}

TEST(MultiHeadAttentionRuntime, ForwardAndBackwardAllocateNothing) {
  MhaCase tc{"alloc", 2, 7, 5, 16, mha(4, true, true, true, true, 0.2)};
  Runner r(tc);
  std::vector<Tensor> dx;
  std::vector<const Tensor*> xp, dyp;
  std::vector<Tensor*> dxp;
  for (auto& t : r.x) {
    xp.push_back(&t);
    dx.push_back(r.be->empty(t.desc(), MemCategory::kDynamic));
  }
  for (std::size_t k = 0; k < dx.size(); ++k) dxp.push_back(k < 2 ? &dx[k] : nullptr);
  Tensor dy = r.be->empty(r.y.desc(), MemCategory::kDynamic);
  r.be->fill(dy, 0.5f);
  dyp.push_back(&dy);
  std::vector<const Tensor*> yp{&r.y};
  r.forward();  // warm-up (oneDNN JIT caches)
  r.layer->backward(dxp, dyp, xp, yp);
  const uint64_t before = r.be->allocator().stats().num_allocations;
  for (int i = 0; i < 2; ++i) {
    r.forward();
    r.layer->backward(dxp, dyp, xp, yp);
  }
  EXPECT_EQ(r.be->allocator().stats().num_allocations, before);
}

TEST(MultiHeadAttentionRuntime, SavedStateIsFeatureMaps) {
  auto be = make_cpu_backend();
  const int64_t N = 2, T = 5, D = 8, h = 2;
  const std::size_t before = be->allocator().stats().current_of(MemCategory::kFeatureMaps);
  auto layer =
      make_layer(*be, "attn", mha(h, false, false, false, true, 0.1), {TensorDesc{Shape{N, T, D}}});
  const std::size_t scores = N * h * T * T;
  // Q, K, V, O (N*T, D) + P and Pd (scores) in f32 + the keep mask (1 byte per score,
  // rounded to f32 elements).
  const std::size_t want = 4 * (4 * N * T * D) + 2 * 4 * scores + 4 * ((scores + 3) / 4);
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kFeatureMaps) - before, want);
  EXPECT_EQ(be->allocator().stats().current_of(MemCategory::kWeights), 4u * (4 * D * D + 4 * D));
}

TEST(MultiHeadAttentionRuntime, RejectsLengthsOutsideRange) {
  MhaCase tc{"len", 2, 4, 0, 8, mha(2, false, false, true)};
  Runner r(tc);
  std::vector<int32_t> bad{4, 0};
  r.be->copy_from_host(r.x[1], bad.data());
  try {
    r.forward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("MultiHeadAttention 'attn'"), std::string::npos) << m;
    EXPECT_NE(m.find("kv_lengths[1] = 0"), std::string::npos) << m;
  }
}

// Expects make_layer to throw an error containing every fragment.
void expect_error(const MultiHeadAttentionConfig& cfg, const std::vector<TensorDesc>& in,
                  std::vector<std::string> fragments) {
  auto be = make_cpu_backend();
  try {
    make_layer(*be, "dec.0.attn", cfg, in);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("MultiHeadAttention 'dec.0.attn'"), std::string::npos) << m;
    for (const auto& f : fragments) EXPECT_NE(m.find(f), std::string::npos) << f << " in: " << m;
  }
}

TEST(MultiHeadAttentionErrors, WrongRankNamesLayerArgumentAndDims) {
  expect_error(mha(2), {TensorDesc{Shape{4, 8}}}, {"q_in", "rank 3", "(4, 8)"});
  expect_error(mha(2, true), {TensorDesc{Shape{2, 4, 8}}, TensorDesc{Shape{2, 4, 8, 1}}},
               {"kv_in", "rank 3", "(2, 4, 8, 1)"});
  expect_error(mha(2, false, false, true),
               {TensorDesc{Shape{2, 4, 8}}, TensorDesc{Shape{2, 1}, DType::kI32}},
               {"kv_lengths", "rank 1", "(2, 1)"});
}

TEST(MultiHeadAttentionErrors, HeadsMustDivideD) {
  expect_error(mha(4), {TensorDesc{Shape{2, 4, 10}}}, {"q_in", "(2, 4, 10)", "num_heads=4"});
  expect_error(mha(0), {TensorDesc{Shape{2, 4, 8}}}, {"num_heads=0"});
}

TEST(MultiHeadAttentionErrors, MismatchedInputsAreRejected) {
  expect_error(mha(2, true), {TensorDesc{Shape{2, 4, 8}}, TensorDesc{Shape{2, 6, 12}}},
               {"kv_in", "(2, 6, 12)", "D=8"});
  expect_error(mha(2, true), {TensorDesc{Shape{2, 4, 8}}, TensorDesc{Shape{3, 6, 8}}},
               {"kv_in", "(3, 6, 8)", "N=2"});
  expect_error(mha(2, false, false, true),
               {TensorDesc{Shape{2, 4, 8}}, TensorDesc{Shape{3}, DType::kI32}},
               {"kv_lengths", "(3)"});
  expect_error(mha(2, false, false, true), {TensorDesc{Shape{2, 4, 8}}, TensorDesc{Shape{2}}},
               {"kv_lengths", "i32"});
  expect_error(mha(2, true), {TensorDesc{Shape{2, 4, 8}}}, {"expected 2 inputs", "kv_in"});
  expect_error(mha(2), {TensorDesc{Shape{2, 0, 8}}}, {"q_in", "non-positive", "(2, 0, 8)"});
  expect_error(mha(2, false, false, false, true, 1.0), {TensorDesc{Shape{2, 4, 8}}}, {"dropout=1"});
}

TEST(MultiHeadAttentionFlops, MatchesFormula) {
  // Transformer-base decoder cross attention: N=128, Tq=Tk=128, D=512, h=8.
  const double N = 128, T = 128, D = 512, h = 8, dh = 64;
  const double mq = N * T, mk = N * T, e = N * h * T * T;
  MultiHeadAttentionConfig c = mha(8, true, false, true, true, 0.1);
  AttentionDims d{128, 128, 128, 512, 8, 64};
  Flops f = attention_flops(c, d, /*dropout_active=*/true);
  const double gemm = 2 * (2 * mq * D * D + 2 * mk * D * D);
  EXPECT_DOUBLE_EQ(f.fprop, gemm + 4 * e * dh + 6 * e + 2 * e + 2 * (mq + mk) * D);
  EXPECT_DOUBLE_EQ(f.dgrad, gemm + 8 * e * dh + 5 * e + e + mk * D);
  EXPECT_DOUBLE_EQ(f.wgrad, gemm + 4 * D * D + 2 * (mq + mk) * D);
  // Self attention, no bias, eval: input sums 2*Mq*D, no dropout terms.
  Flops g = attention_flops(mha(8, false, true, false, false, 0.1), d, false);
  EXPECT_DOUBLE_EQ(g.fprop, gemm + 4 * e * dh + 6 * e);
  EXPECT_DOUBLE_EQ(g.dgrad, gemm + 8 * e * dh + 5 * e + 2 * mq * D);
  // The layer reports the same, and drops the dropout terms in eval mode.
  auto be = make_cpu_backend();
  MultiHeadAttentionConfig small_cfg = mha(2, false, false, false, true, 0.1);
  auto layer = make_layer(*be, "a", small_cfg, {TensorDesc{Shape{1, 3, 4}}});
  AttentionDims small{1, 3, 3, 4, 2, 2};
  EXPECT_DOUBLE_EQ(layer->flops().fprop, attention_flops(small_cfg, small, true).fprop);
  layer->set_training(false);
  EXPECT_DOUBLE_EQ(layer->flops().fprop, attention_flops(small_cfg, small, false).fprop);
}

}  // namespace
}  // namespace tbd::test
