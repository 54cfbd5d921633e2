// tests/layers/rnn_test.cpp: LSTM, GRU and LSTMCell against float64 references (the cell math
// unrolled over time, full backpropagation through time) on every target, plus errors, FLOPs and
// parameter counts.
#include <gtest/gtest.h>

#include <cmath>

#include "layers/rnn.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

double sigm(double a) { return 1.0 / (1.0 + std::exp(-a)); }

// y[r] += sum_c W[r, c] * v[c], W (rows, cols) row-major.
void matvec_add(double* y, const double* W, const double* v, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[r] += W[r * cols + c] * v[c];
}
// dv[c] += sum_r W[r, c] * dy[r]
void matvec_t_add(double* dv, const double* W, const double* dy, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dv[c] += W[r * cols + c] * dy[r];
}
// dW[r, c] += dy[r] * v[c]
void outer_add(double* dW, const double* dy, const double* v, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dW[r * cols + c] += dy[r] * v[c];
}

// One direction's parameters: LSTM {w_ih, w_hh, b}, GRU {w_ih, w_hh, b_ih, b_hh}; gradients in
// the same order.
struct CellParams {
  const double* w_ih;
  const double* w_hh;
  const double* b0;
  const double* b1;  // GRU b_hh
};
struct CellGrads {
  double* w_ih;
  double* w_hh;
  double* b0;
  double* b1;
};

// What one step keeps for its backward.
struct StepCache {
  Vec x, h0, c0;
  Vec i, f, g, o, c1;  // LSTM
  Vec r, z, n, hn;     // GRU: hn = W_hn h0 + b_hn
};

// LSTM step, PyTorch gate order (i, f, g, o): c1 = f*c0 + i*g, h1 = o*tanh(c1).
void lstm_step(StepCache& s, const CellParams& p, int64_t I, int64_t H, Vec& h1, Vec& c1) {
  Vec a(p.b0, p.b0 + 4 * H);
  matvec_add(a.data(), p.w_ih, s.x.data(), 4 * H, I);
  matvec_add(a.data(), p.w_hh, s.h0.data(), 4 * H, H);
  s.i.resize(H), s.f.resize(H), s.g.resize(H), s.o.resize(H), s.c1.resize(H);
  h1.resize(H), c1.resize(H);
  for (int64_t j = 0; j < H; ++j) {
    s.i[j] = sigm(a[j]);
    s.f[j] = sigm(a[H + j]);
    s.g[j] = std::tanh(a[2 * H + j]);
    s.o[j] = sigm(a[3 * H + j]);
    s.c1[j] = s.f[j] * s.c0[j] + s.i[j] * s.g[j];
    c1[j] = s.c1[j];
    h1[j] = s.o[j] * std::tanh(s.c1[j]);
  }
}

// Gradients of one LSTM step: dh1, dc1 in; dx, dh0, dc0 out (assigned); parameters accumulate.
void lstm_step_back(const StepCache& s, const CellParams& p, const CellGrads& gr, int64_t I,
                    int64_t H, const Vec& dh1, const Vec& dc1, Vec& dx, Vec& dh0, Vec& dc0) {
  Vec da(4 * H);
  dc0.assign(H, 0.0);
  for (int64_t j = 0; j < H; ++j) {
    double tc = std::tanh(s.c1[j]);
    double dout = dh1[j] * tc;
    double dc = dc1[j] + dh1[j] * s.o[j] * (1 - tc * tc);
    double di = dc * s.g[j], dg = dc * s.i[j], df = dc * s.c0[j];
    dc0[j] = dc * s.f[j];
    da[j] = di * s.i[j] * (1 - s.i[j]);
    da[H + j] = df * s.f[j] * (1 - s.f[j]);
    da[2 * H + j] = dg * (1 - s.g[j] * s.g[j]);
    da[3 * H + j] = dout * s.o[j] * (1 - s.o[j]);
  }
  outer_add(gr.w_ih, da.data(), s.x.data(), 4 * H, I);
  outer_add(gr.w_hh, da.data(), s.h0.data(), 4 * H, H);
  for (int64_t k = 0; k < 4 * H; ++k) gr.b0[k] += da[k];
  dx.assign(I, 0.0);
  dh0.assign(H, 0.0);
  matvec_t_add(dx.data(), p.w_ih, da.data(), 4 * H, I);
  matvec_t_add(dh0.data(), p.w_hh, da.data(), 4 * H, H);
}

// GRU step as PyTorch (gates r, z, n): r = s(W_ir x + b_ir + W_hr h + b_hr), z likewise,
// n = tanh(W_in x + b_in + r*(W_hn h + b_hn)), h1 = (1-z)*n + z*h0.
void gru_step(StepCache& s, const CellParams& p, int64_t I, int64_t H, Vec& h1) {
  Vec gx(p.b0, p.b0 + 3 * H), gh(p.b1, p.b1 + 3 * H);
  matvec_add(gx.data(), p.w_ih, s.x.data(), 3 * H, I);
  matvec_add(gh.data(), p.w_hh, s.h0.data(), 3 * H, H);
  s.r.resize(H), s.z.resize(H), s.n.resize(H), s.hn.resize(H);
  h1.resize(H);
  for (int64_t j = 0; j < H; ++j) {
    s.r[j] = sigm(gx[j] + gh[j]);
    s.z[j] = sigm(gx[H + j] + gh[H + j]);
    s.hn[j] = gh[2 * H + j];
    s.n[j] = std::tanh(gx[2 * H + j] + s.r[j] * s.hn[j]);
    h1[j] = (1 - s.z[j]) * s.n[j] + s.z[j] * s.h0[j];
  }
}

void gru_step_back(const StepCache& s, const CellParams& p, const CellGrads& gr, int64_t I,
                   int64_t H, const Vec& dh1, Vec& dx, Vec& dh0) {
  Vec dgx(3 * H), dgh(3 * H);
  dh0.assign(H, 0.0);
  for (int64_t j = 0; j < H; ++j) {
    double dn = dh1[j] * (1 - s.z[j]);
    double dz = dh1[j] * (s.h0[j] - s.n[j]);
    dh0[j] = dh1[j] * s.z[j];
    double dan = dn * (1 - s.n[j] * s.n[j]);
    double dr = dan * s.hn[j];
    double dar = dr * s.r[j] * (1 - s.r[j]);
    double daz = dz * s.z[j] * (1 - s.z[j]);
    dgx[j] = dgh[j] = dar;
    dgx[H + j] = dgh[H + j] = daz;
    dgx[2 * H + j] = dan;
    dgh[2 * H + j] = dan * s.r[j];
  }
  outer_add(gr.w_ih, dgx.data(), s.x.data(), 3 * H, I);
  outer_add(gr.w_hh, dgh.data(), s.h0.data(), 3 * H, H);
  for (int64_t k = 0; k < 3 * H; ++k) gr.b0[k] += dgx[k], gr.b1[k] += dgh[k];
  dx.assign(I, 0.0);
  matvec_t_add(dx.data(), p.w_ih, dgx.data(), 3 * H, I);
  matvec_t_add(dh0.data(), p.w_hh, dgh.data(), 3 * H, H);
}

struct SeqCase {
  std::string name;
  int64_t T, N, I, H, layers;
  bool bidirectional;
};

void PrintTo(const SeqCase& c, std::ostream* os) { *os << c.name; }

// Multi-layer, uni/bidirectional LSTM or GRU over x (T, N, I), zero initial states.
struct RefRnn {
  bool lstm;
  int64_t T, N, I, H, L, D, P;  // P: parameters per direction
  RefRnn(bool is_lstm, const SeqCase& c)
      : lstm(is_lstm),
        T(c.T),
        N(c.N),
        I(c.I),
        H(c.H),
        L(c.layers),
        D(c.bidirectional ? 2 : 1),
        P(is_lstm ? 3 : 4) {}

  int64_t in_width(int64_t l) const { return l == 0 ? I : H * D; }
  CellParams cell_params(const std::vector<Vec>& p, int64_t l, int64_t d) const {
    std::size_t b = (l * D + d) * P;
    return {p[b].data(), p[b + 1].data(), p[b + 2].data(), lstm ? nullptr : p[b + 3].data()};
  }

  // Forward; with dy, also the backward (returns the gradients in g).
  Vec run(const std::vector<Vec>& xv, const std::vector<Vec>& p, const Vec* dy, RefGrads* g) const {
    // cache[l][d][n][s]: step s of direction d (time t = s forward, T-1-s backward).
    std::vector<std::vector<std::vector<std::vector<StepCache>>>> cache(L);
    Vec in = xv[0];
    for (int64_t l = 0; l < L; ++l) {
      const int64_t In = in_width(l);
      Vec out(T * N * H * D);
      cache[l].resize(D);
      for (int64_t d = 0; d < D; ++d) {
        CellParams cp = cell_params(p, l, d);
        cache[l][d].resize(N);
        for (int64_t n = 0; n < N; ++n) {
          Vec h(H, 0.0), c(H, 0.0), h1, c1;
          cache[l][d][n].resize(T);
          for (int64_t s = 0; s < T; ++s) {
            int64_t t = d == 0 ? s : T - 1 - s;
            StepCache& st = cache[l][d][n][s];
            st.x.assign(in.begin() + (t * N + n) * In, in.begin() + (t * N + n + 1) * In);
            st.h0 = h, st.c0 = c;
            if (lstm) {
              lstm_step(st, cp, In, H, h1, c1);
              c = c1;
            } else {
              gru_step(st, cp, In, H, h1);
            }
            h = h1;
            for (int64_t j = 0; j < H; ++j) out[(t * N + n) * H * D + d * H + j] = h[j];
          }
        }
      }
      in = std::move(out);
    }
    if (dy == nullptr) return in;

    g->dparams.assign(p.size(), Vec());
    for (std::size_t k = 0; k < p.size(); ++k) g->dparams[k].assign(p[k].size(), 0.0);
    Vec dout = *dy;
    for (int64_t l = L - 1; l >= 0; --l) {
      const int64_t In = in_width(l);
      Vec din(T * N * In, 0.0);
      for (int64_t d = 0; d < D; ++d) {
        CellParams cp = cell_params(p, l, d);
        std::size_t b = (l * D + d) * P;
        CellGrads cg{g->dparams[b].data(), g->dparams[b + 1].data(), g->dparams[b + 2].data(),
                     lstm ? nullptr : g->dparams[b + 3].data()};
        for (int64_t n = 0; n < N; ++n) {
          Vec dh_next(H, 0.0), dc_next(H, 0.0), dx, dh0, dc0;
          for (int64_t s = T - 1; s >= 0; --s) {
            int64_t t = d == 0 ? s : T - 1 - s;
            Vec dh1(H);
            for (int64_t j = 0; j < H; ++j) {
              dh1[j] = dout[(t * N + n) * H * D + d * H + j] + dh_next[j];
            }
            const StepCache& st = cache[l][d][n][s];
            if (lstm) {
              lstm_step_back(st, cp, cg, In, H, dh1, dc_next, dx, dh0, dc0);
              dc_next = dc0;
            } else {
              gru_step_back(st, cp, cg, In, H, dh1, dx, dh0);
            }
            dh_next = dh0;
            for (int64_t k = 0; k < In; ++k) din[(t * N + n) * In + k] += dx[k];
          }
        }
      }
      dout = std::move(din);
    }
    g->dx = {dout};
    return in;
  }
};

template <class Config>
Config seq_config(const SeqCase& c) {
  Config cfg;
  cfg.hidden = c.H;
  cfg.num_layers = c.layers;
  cfg.bidirectional = c.bidirectional;
  return cfg;
}

// LSTM/GRU chains of sigmoid/tanh in float32 vs float64; parameter gradients sum T*N terms.
LayerCheckOptions rnn_options() {
  LayerCheckOptions o;
  o.op_class = OpClass::kRecurrent;
  return o;
}

template <class Config>
void check_sequence(Backend& be, bool lstm, const SeqCase& c, bool want_dx = true) {
  Config cfg = seq_config<Config>(c);
  auto layer = make_target_layer(be, "rnn", cfg, {TensorDesc{Shape{c.T, c.N, c.I}}});
  const int64_t D = c.bidirectional ? 2 : 1;
  EXPECT_EQ(layer->output_descs()[0].shape, (Shape{c.T, c.N, c.H * D}));
  RefRnn ref(lstm, c);
  ASSERT_EQ(layer->params().size(), static_cast<std::size_t>(c.layers * D * ref.P));
  LayerCheckOptions opt = rnn_options();
  if (!want_dx) opt.x_needs_grad = {false};
  check_layer(
      be, *layer,
      [&](auto& x, auto& p) { return std::vector<Vec>{ref.run(x, p, nullptr, nullptr)}; },
      [&](auto& x, auto& p, auto& dy) {
        RefGrads g;
        ref.run(x, p, &dy[0], &g);
        return g;
      },
      opt);
}

const auto kSeqCases = on_all_targets(::testing::Values(
    SeqCase{"uni_1layer_odd", 3, 2, 5, 7, 1, false},
    SeqCase{"uni_one_step", 1, 2, 3, 2, 1, false},  // T = 1: h_{-1} = 0, no recurrent gradient
    SeqCase{"bi_one_step", 1, 1, 2, 3, 1, true}, SeqCase{"uni_1layer_batch1", 4, 1, 3, 4, 1, false},
    SeqCase{"uni_2layer", 3, 2, 5, 7, 2, false}, SeqCase{"uni_3layer_long", 7, 2, 3, 4, 3, false},
    SeqCase{"bi_1layer_odd", 3, 2, 5, 7, 1, true}, SeqCase{"bi_2layer_batch1", 3, 1, 4, 5, 2, true},
    SeqCase{"bi_2layer_h_gt_i", 4, 3, 2, 6, 2, true},
    SeqCase{"uni_1layer_5x3x7_h8", 5, 3, 7, 8, 1, false},
    SeqCase{"uni_batch1_4x1x5_h6", 4, 1, 5, 6, 1, false},
    SeqCase{"bi_2layer_6x2x5_h7", 6, 2, 5, 7, 2, true},
    SeqCase{"bi_2layer_4x2x6_h5", 4, 2, 6, 5, 2, true}));

class LstmTest : public LayerTest<SeqCase> {};
TEST_P(LstmTest, MatchesFloat64Reference) { check_sequence<LstmConfig>(be(), true, tcase()); }
INSTANTIATE_TEST_SUITE_P(Shapes, LstmTest, kSeqCases, CaseOnTarget());

class GruTest : public LayerTest<SeqCase> {};
TEST_P(GruTest, MatchesFloat64Reference) { check_sequence<GruConfig>(be(), false, tcase()); }
INSTANTIATE_TEST_SUITE_P(Shapes, GruTest, kSeqCases, CaseOnTarget());

// With no dx wanted, layer 0 still runs for the parameter gradients.
class RnnNoDx : public TargetTest {};
TEST_P(RnnNoDx, LstmParameterGradientsStillMatch) {
  check_sequence<LstmConfig>(be(), true, SeqCase{"no_dx", 3, 2, 5, 4, 2, true},
                             /*want_dx=*/false);
}
TEST_P(RnnNoDx, GruParameterGradientsStillMatch) {
  check_sequence<GruConfig>(be(), false, SeqCase{"no_dx", 3, 2, 5, 4, 1, false},
                            /*want_dx=*/false);
}
INSTANTIATE_TEST_SUITE_P(Targets, RnnNoDx, ::testing::ValuesIn(kAllTargets), TargetName());

// Two training steps with new parameter values in between (as after an optimizer update): the
// second forward must see the new values (staged and reordered copies are refreshed) and the
// gradients of both steps must add up.
template <class Config>
void check_two_steps(Backend& target_be, bool lstm, const SeqCase& c) {
  Backend* be = &target_be;
  const Target t = target_of(target_be);
  auto layer =
      make_target_layer(*be, "rnn", seq_config<Config>(c), {TensorDesc{Shape{c.T, c.N, c.I}}});
  RefRnn ref(lstm, c);
  Tensor x = be->empty(layer->input_descs()[0], MemCategory::kDynamic);
  Tensor y = be->empty(layer->output_descs()[0], MemCategory::kDynamic);
  Tensor dy = be->empty(layer->output_descs()[0], MemCategory::kDynamic);
  Tensor dx = be->empty(layer->input_descs()[0], MemCategory::kDynamic);
  auto f32 = [](Vec v) {
    for (auto& e : v) e = static_cast<float>(e);
    return v;
  };
  Vec xh = f32(random_vec(x.numel(), 11)), dyh = f32(random_vec(dy.numel(), 12));
  from_host(*be, x, xh);
  from_host(*be, dy, dyh);
  std::vector<Vec> grad_sum(layer->params().size());
  Vec y_last;
  for (int step = 0; step < 2; ++step) {
    std::vector<Vec> ph;
    for (std::size_t k = 0; k < layer->params().size(); ++k) {
      Param& p = layer->params()[k];
      ph.push_back(f32(random_vec(p.value.numel(), 100 * step + k, -0.5, 0.5)));
      from_host(*be, p.value, ph.back());
      if (step == 0) be->fill(p.grad, 0.f);
    }
    const Tensor* xs[] = {&x};
    Tensor* ys[] = {&y};
    const Tensor* cys[] = {&y};
    const Tensor* dys[] = {&dy};
    Tensor* dxs[] = {&dx};
    layer->forward(ys, xs);
    layer->backward(dxs, dys, xs, cys);
    RefGrads g;
    Vec y_ref = ref.run({xh}, ph, &dyh, &g);
    expect_close("step " + std::to_string(step) + " y", to_host(*be, y), y_ref,
                 tolerance(t, Phase::kFprop, OpClass::kRecurrent));
    expect_close("step " + std::to_string(step) + " dx", to_host(*be, dx), g.dx[0],
                 tolerance(t, Phase::kDgrad, OpClass::kRecurrent));
    for (std::size_t k = 0; k < grad_sum.size(); ++k) {
      if (grad_sum[k].empty()) grad_sum[k].assign(g.dparams[k].size(), 0.0);
      for (std::size_t i = 0; i < grad_sum[k].size(); ++i) grad_sum[k][i] += g.dparams[k][i];
    }
  }
  for (std::size_t k = 0; k < grad_sum.size(); ++k) {
    expect_close(layer->params()[k].name + " gradient after 2 steps",
                 to_host(*be, layer->params()[k].grad), grad_sum[k],
                 tolerance(t, Phase::kWgrad, OpClass::kRecurrent));
  }
}

class RnnTwoSteps : public TargetTest {};
TEST_P(RnnTwoSteps, UnidirectionalLstm) {
  check_two_steps<LstmConfig>(be(), true, SeqCase{"", 3, 2, 4, 5, 2, false});
}
TEST_P(RnnTwoSteps, BidirectionalLstm) {
  check_two_steps<LstmConfig>(be(), true, SeqCase{"", 3, 2, 4, 5, 1, true});
}
TEST_P(RnnTwoSteps, BidirectionalGru) {
  check_two_steps<GruConfig>(be(), false, SeqCase{"", 3, 2, 4, 5, 2, true});
}
INSTANTIATE_TEST_SUITE_P(Targets, RnnTwoSteps, ::testing::ValuesIn(kAllTargets), TargetName());

// ---- LSTMCell: inputs x (N, I), h (N, H), c (N, H); outputs h', c' ----

struct CellCase {
  std::string name;
  int64_t N, I, H;
};

void PrintTo(const CellCase& c, std::ostream* os) { *os << c.name; }

struct RefLstmCell {
  int64_t N, I, H;
  std::vector<Vec> run(const std::vector<Vec>& xv, const std::vector<Vec>& p,
                       const std::vector<Vec>* dy, RefGrads* g) const {
    CellParams cp{p[0].data(), p[1].data(), p[2].data(), nullptr};
    Vec hy(N * H), cy(N * H);
    if (g) {
      g->dx = {Vec(N * I), Vec(N * H), Vec(N * H)};
      g->dparams = {Vec(p[0].size()), Vec(p[1].size()), Vec(p[2].size())};
    }
    for (int64_t n = 0; n < N; ++n) {
      StepCache s;
      s.x.assign(xv[0].begin() + n * I, xv[0].begin() + (n + 1) * I);
      s.h0.assign(xv[1].begin() + n * H, xv[1].begin() + (n + 1) * H);
      s.c0.assign(xv[2].begin() + n * H, xv[2].begin() + (n + 1) * H);
      Vec h1, c1;
      lstm_step(s, cp, I, H, h1, c1);
      std::copy(h1.begin(), h1.end(), hy.begin() + n * H);
      std::copy(c1.begin(), c1.end(), cy.begin() + n * H);
      if (!g) continue;
      Vec dh1((*dy)[0].begin() + n * H, (*dy)[0].begin() + (n + 1) * H);
      Vec dc1((*dy)[1].begin() + n * H, (*dy)[1].begin() + (n + 1) * H);
      Vec dx, dh0, dc0;
      CellGrads cg{g->dparams[0].data(), g->dparams[1].data(), g->dparams[2].data(), nullptr};
      lstm_step_back(s, cp, cg, I, H, dh1, dc1, dx, dh0, dc0);
      std::copy(dx.begin(), dx.end(), g->dx[0].begin() + n * I);
      std::copy(dh0.begin(), dh0.end(), g->dx[1].begin() + n * H);
      std::copy(dc0.begin(), dc0.end(), g->dx[2].begin() + n * H);
    }
    return {hy, cy};
  }
};

void check_cell(Backend& be, const CellCase& c, std::vector<bool> needs = {}) {
  LstmCellConfig cfg{c.H};
  Shape hs{c.N, c.H};
  auto layer = make_target_layer(be, "cell", cfg,
                                 {TensorDesc{Shape{c.N, c.I}}, TensorDesc{hs}, TensorDesc{hs}});
  ASSERT_EQ(layer->output_descs().size(), 2u);
  EXPECT_EQ(layer->output_descs()[0].shape, hs);
  EXPECT_EQ(layer->output_descs()[1].shape, hs);
  RefLstmCell ref{c.N, c.I, c.H};
  LayerCheckOptions opt = rnn_options();
  opt.x_needs_grad = std::move(needs);
  check_layer(
      be, *layer, [&](auto& x, auto& p) { return ref.run(x, p, nullptr, nullptr); },
      [&](auto& x, auto& p, auto& dy) {
        RefGrads g;
        ref.run(x, p, &dy, &g);
        return g;
      },
      opt);
}

class LstmCellTest : public LayerTest<CellCase> {};
TEST_P(LstmCellTest, MatchesFloat64Reference) { check_cell(be(), tcase()); }
INSTANTIATE_TEST_SUITE_P(Shapes, LstmCellTest,
                         on_all_targets(::testing::Values(CellCase{"batch1", 1, 5, 7},
                                                          CellCase{"odd_sizes", 3, 4, 5},
                                                          CellCase{"wide_input", 2, 11, 3},
                                                          CellCase{"batch4", 4, 5, 6})),
                         CaseOnTarget());

class LstmCellNoDx : public TargetTest {};
TEST_P(LstmCellNoDx, OnlyStateGradients) {
  check_cell(be(), CellCase{"no_dx", 2, 3, 4}, {false, true, true});
}
INSTANTIATE_TEST_SUITE_P(Targets, LstmCellNoDx, ::testing::ValuesIn(kAllTargets), TargetName());

// ---- parameters ----

TEST(RnnParams, NamesShapesAndCountsFollowPyTorch) {
  auto be = make_cpu_backend();
  LstmConfig lc{/*hidden=*/6, /*num_layers=*/2, /*bidirectional=*/true};
  auto lstm = make_layer(*be, "enc", lc, {TensorDesc{Shape{3, 2, 5}}});
  const auto& p = lstm->params();
  ASSERT_EQ(p.size(), 12u);
  EXPECT_EQ(p[0].name, "enc.l0.fwd.w_ih");
  EXPECT_EQ(p[0].value.shape(), (Shape{24, 5}));
  EXPECT_EQ(p[1].name, "enc.l0.fwd.w_hh");
  EXPECT_EQ(p[1].value.shape(), (Shape{24, 6}));
  EXPECT_EQ(p[2].name, "enc.l0.fwd.b");
  EXPECT_FALSE(p[2].decay);
  EXPECT_EQ(p[3].name, "enc.l0.bwd.w_ih");
  EXPECT_EQ(p[6].name, "enc.l1.fwd.w_ih");
  EXPECT_EQ(p[6].value.shape(), (Shape{24, 12}));  // input of layer 1: H*dirs
  int64_t n = 0;
  for (const auto& q : p) n += q.value.numel();
  EXPECT_EQ(n, lstm_param_count(lc, 5));
  // 4H(I+H) + 4H per layer and direction.
  EXPECT_EQ(lstm_param_count(lc, 5), 2 * (24 * 11 + 24) + 2 * (24 * 18 + 24));

  GruConfig gc{/*hidden=*/4, /*num_layers=*/2, /*bidirectional=*/false};
  auto gru = make_layer(*be, "ds2", gc, {TensorDesc{Shape{3, 2, 5}}});
  ASSERT_EQ(gru->params().size(), 8u);
  EXPECT_EQ(gru->params()[2].name, "ds2.l0.fwd.b_ih");
  EXPECT_EQ(gru->params()[3].name, "ds2.l0.fwd.b_hh");
  n = 0;
  for (const auto& q : gru->params()) n += q.value.numel();
  EXPECT_EQ(n, gru_param_count(gc, 5));
  EXPECT_EQ(gru_param_count(gc, 5), (12 * 9 + 24) + (12 * 8 + 24));  // 3H(I+H) + 6H

  auto cell =
      make_layer(*be, "dec", LstmCellConfig{7},
                 {TensorDesc{Shape{2, 5}}, TensorDesc{Shape{2, 7}}, TensorDesc{Shape{2, 7}}});
  n = 0;
  for (const auto& q : cell->params()) n += q.value.numel();
  EXPECT_EQ(cell->params()[0].name, "dec.w_ih");
  EXPECT_EQ(n, lstm_cell_param_count(LstmCellConfig{7}, 5));
  EXPECT_EQ(n, 28 * 12 + 28);
  // The TBD Seq2Seq encoder: 2 layers, hidden 512, embeddings 512.
  EXPECT_EQ(lstm_param_count(LstmConfig{512, 2, false}, 512), 2 * (2048 * 1024 + 2048));
}

// ---- errors ----

TEST(RnnErrors, WrongRankNamesLayerArgumentAndDims) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "enc", LstmConfig{8}, {TensorDesc{Shape{2, 5}}});
      },
      {"LSTM 'enc'", "input x", "(2, 5)"});
  expect_error(
      [&] {
        make_layer(*be, "ds2.rnn1", GruConfig{8}, {TensorDesc{Shape{1, 2, 3, 4}}});
      },
      {"GRU 'ds2.rnn1'", "input x", "(1, 2, 3, 4)"});
  expect_error(
      [&] {
        make_layer(*be, "dec", LstmCellConfig{8},
                   {TensorDesc{Shape{2, 3, 5}}, TensorDesc{Shape{2, 8}}, TensorDesc{Shape{2, 8}}});
      },
      {"LSTMCell 'dec'", "input x", "(2, 3, 5)"});
}

TEST(RnnErrors, ZeroOrNegativeSizesAreRejected) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "enc", LstmConfig{0}, {TensorDesc{Shape{3, 2, 5}}});
      },
      {"LSTM 'enc'", "hidden=0"});
  expect_error(
      [&] {
        make_layer(*be, "g", GruConfig{-4}, {TensorDesc{Shape{3, 2, 5}}});
      },
      {"GRU 'g'", "hidden=-4"});
  expect_error(
      [&] {
        make_layer(*be, "enc", LstmConfig{8, 0}, {TensorDesc{Shape{3, 2, 5}}});
      },
      {"num_layers=0"});
  expect_error(
      [&] {
        make_layer(*be, "enc", LstmConfig{8}, {TensorDesc{Shape{0, 2, 5}}});
      },
      {"LSTM 'enc'", "input x", "(0, 2, 5)"});
  expect_error(
      [&] {
        make_layer(*be, "dec", LstmCellConfig{0},
                   {TensorDesc{Shape{2, 5}}, TensorDesc{Shape{2, 0}}, TensorDesc{Shape{2, 0}}});
      },
      {"LSTMCell 'dec'", "hidden=0"});
}

TEST(RnnErrors, MismatchedStatesAreRejected) {
  auto be = make_cpu_backend();
  expect_error(
      [&] {
        make_layer(*be, "dec", LstmCellConfig{8},
                   {TensorDesc{Shape{2, 5}}, TensorDesc{Shape{3, 8}}, TensorDesc{Shape{2, 8}}});
      },
      {"LSTMCell 'dec'", "input h", "(3, 8)", "(2, 8)"});
  expect_error(
      [&] {
        make_layer(*be, "dec", LstmCellConfig{8},
                   {TensorDesc{Shape{2, 5}}, TensorDesc{Shape{2, 8}}, TensorDesc{Shape{2, 7}}});
      },
      {"LSTMCell 'dec'", "input c", "(2, 7)"});
  expect_error(
      [&] {
        make_layer(*be, "dec", LstmCellConfig{8}, {TensorDesc{Shape{2, 5}}});
      },
      {"LSTMCell 'dec'", "inputs"});
}

// ---- FLOPs ----

TEST(RnnFlops, LstmMatchesFormula) {
  // TBD Seq2Seq encoder: T = 30, batch 32, embeddings 512, 2 layers of hidden 512.
  const double T = 30, N = 32, I = 512, H = 512;
  Flops f = lstm_flops(LstmConfig{512, 2, false}, Shape{30, 32, 512});
  double gemm = 2 * T * N * (I + H) * 4 * H;  // both layers have I_l = 512
  EXPECT_DOUBLE_EQ(f.fprop, 2 * (gemm + 17 * T * N * H));
  EXPECT_DOUBLE_EQ(f.dgrad, 2 * gemm);
  EXPECT_DOUBLE_EQ(f.wgrad, 2 * gemm);
}

TEST(RnnFlops, BidirectionalGruMatchesFormula) {
  // Deep Speech 2-like: T = 50, batch 8, input 1312, 2 bidirectional layers of 800.
  const double T = 50, N = 8, H = 800;
  Flops f = gru_flops(GruConfig{800, 2, true}, Shape{50, 8, 1312});
  double l0 = 2 * T * N * (1312 + H) * 3 * H, l1 = 2 * T * N * (2 * H + H) * 3 * H;
  EXPECT_DOUBLE_EQ(f.fprop, 2 * (l0 + 15 * T * N * H) + 2 * (l1 + 15 * T * N * H));
  EXPECT_DOUBLE_EQ(f.dgrad, 2 * (l0 + l1));
  EXPECT_DOUBLE_EQ(f.wgrad, 2 * (l0 + l1));
}

TEST(RnnFlops, LstmCellAndLayerAgree) {
  auto be = make_cpu_backend();
  auto cell =
      make_layer(*be, "dec", LstmCellConfig{7},
                 {TensorDesc{Shape{3, 5}}, TensorDesc{Shape{3, 7}}, TensorDesc{Shape{3, 7}}});
  Flops want = lstm_cell_flops(LstmCellConfig{7}, Shape{3, 5});
  EXPECT_DOUBLE_EQ(want.fprop, 2.0 * 3 * (5 + 7) * 4 * 7 + 17.0 * 3 * 7);
  EXPECT_DOUBLE_EQ(cell->flops().fprop, want.fprop);
  // A one-step LSTM layer costs what the cell does.
  Flops seq = lstm_flops(LstmConfig{7}, Shape{1, 3, 5});
  EXPECT_DOUBLE_EQ(seq.fprop, want.fprop);
  EXPECT_DOUBLE_EQ(seq.dgrad, want.dgrad);
  EXPECT_DOUBLE_EQ(seq.wgrad, want.wgrad);
}

}  // namespace
}  // namespace tbd::test
