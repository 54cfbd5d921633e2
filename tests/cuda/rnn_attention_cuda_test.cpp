// tests/cuda/rnn_attention_cuda_test.cpp: LSTM, GRU, LSTMCell and MultiHeadAttention on CUDA
// (cuDNN RNN v8, cuBLAS) against the CPU backend.
//
// The CPU implementations are themselves checked against float64 references in tests/layers;
// here both backends get the same parameters (matched by name), inputs and output gradients,
// and forward outputs, input gradients and accumulated parameter gradients must agree, in strict
// FP32 (kF32* tolerances) and in TF32 (kTf32). Skips with the reason when no device is usable;
// compiles and links without CUDA too (only the Backend interface is used).
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "layers/attention.h"
#include "layers/rnn.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

// One CUDA backend per test binary: creating cuDNN and cuBLAS handles costs ~1 s.
Backend& cuda_backend(bool tf32) {
  static std::unique_ptr<Backend> be = make_backend(BackendChoice::kCuda);
#ifdef TBD_WITH_CUDA
  be->set_math_mode(tf32 ? MathMode::kTf32 : MathMode::kFp32);
#else
  (void)tf32;
#endif
  return *be;
}

Backend& cpu_backend() {
  static std::unique_ptr<Backend> be = make_cpu_backend();
  return *be;
}

struct Results {
  std::vector<Vec> y, dx;
  std::map<std::string, Vec> grads;
};

struct Data {
  std::vector<Vec> x, dy;
  std::map<std::string, Vec> params, grad_start;
};

// Random inputs (i32 inputs: `lengths`), output gradients and parameters, from the CPU layer.
Data make_data(Layer& ref, const std::vector<Vec>& int_inputs, uint64_t seed) {
  Data d;
  std::size_t next_int = 0;
  for (std::size_t k = 0; k < ref.input_descs().size(); ++k) {
    const TensorDesc& in = ref.input_descs()[k];
    d.x.push_back(in.dtype == DType::kI32 ? int_inputs.at(next_int++)
                                          : random_vec(in.shape.numel(), seed * 31 + k));
  }
  for (std::size_t k = 0; k < ref.output_descs().size(); ++k) {
    d.dy.push_back(random_vec(ref.output_descs()[k].shape.numel(), seed * 77 + k));
  }
  for (std::size_t k = 0; k < ref.params().size(); ++k) {
    const Param& p = ref.params()[k];
    d.params[p.name] = random_vec(p.value.numel(), seed * 1000 + k, -0.5, 0.5);
    d.grad_start[p.name] = random_vec(p.value.numel(), seed * 2000 + k, -0.25, 0.25);
  }
  return d;
}

// Forward then backward once on `be`; every f32 input gets a gradient.
Results run(Backend& be, Layer& layer, const Data& d) {
  Results r;
  std::vector<Tensor> x, y, dx, dy;
  std::vector<const Tensor*> xp, yp, dyp;
  std::vector<Tensor*> yw, dxw;
  const auto& in = layer.input_descs();
  for (std::size_t k = 0; k < in.size(); ++k) {
    x.push_back(be.empty(in[k], MemCategory::kDynamic));
    from_host(be, x.back(), d.x[k]);
    dx.push_back(be.empty(in[k], MemCategory::kDynamic));
  }
  for (const TensorDesc& o : layer.output_descs()) {
    y.push_back(be.empty(o, MemCategory::kFeatureMaps));
    dy.push_back(be.empty(o, MemCategory::kDynamic));
    from_host(be, dy.back(), d.dy[dy.size() - 1]);
  }
  for (Param& p : layer.params()) {
    auto it = d.params.find(p.name);
    EXPECT_NE(it, d.params.end()) << "CUDA parameter " << p.name << " has no CPU counterpart";
    if (it == d.params.end()) return r;
    EXPECT_EQ(static_cast<std::size_t>(p.value.numel()), it->second.size()) << p.name;
    from_host(be, p.value, it->second);
    from_host(be, p.grad, d.grad_start.at(p.name));
  }
  for (std::size_t k = 0; k < x.size(); ++k) {
    xp.push_back(&x[k]);
    dxw.push_back(in[k].dtype == DType::kF32 ? &dx[k] : nullptr);
  }
  for (std::size_t k = 0; k < y.size(); ++k) {
    yp.push_back(&y[k]);
    yw.push_back(&y[k]);
    dyp.push_back(&dy[k]);
  }
  layer.forward(yw, xp);
  layer.backward(dxw, dyp, xp, yp);
  be.synchronize();
  for (const Tensor& t : y) r.y.push_back(to_host(be, t));
  for (std::size_t k = 0; k < dx.size(); ++k) {
    r.dx.push_back(in[k].dtype == DType::kF32 ? to_host(be, dx[k]) : Vec());
  }
  for (const Param& p : layer.params()) r.grads[p.name] = to_host(be, p.grad);
  return r;
}

struct Tols {
  Tol fwd, bwd_data, bwd_weights;
};

template <class Config>
void compare_backends(const Config& cfg, const std::vector<TensorDesc>& in, bool tf32, Tols tols,
                      const std::vector<Vec>& int_inputs = {}) {
  Backend& gpu = cuda_backend(tf32);  // math mode first: layers read it when built
  auto cpu_layer = make_layer(cpu_backend(), "l", cfg, in);
  auto gpu_layer = make_layer(gpu, "l", cfg, in);
  ASSERT_EQ(cpu_layer->output_descs().size(), gpu_layer->output_descs().size());
  for (std::size_t k = 0; k < cpu_layer->output_descs().size(); ++k) {
    EXPECT_EQ(cpu_layer->output_descs()[k].shape, gpu_layer->output_descs()[k].shape);
  }
  ASSERT_EQ(cpu_layer->params().size(), gpu_layer->params().size());
  // The FLOP and byte formulas are shared (layers/<kind>.cpp): both backends report the same
  // counts.
  EXPECT_DOUBLE_EQ(cpu_layer->flops().fprop, gpu_layer->flops().fprop);
  EXPECT_DOUBLE_EQ(cpu_layer->flops().dgrad, gpu_layer->flops().dgrad);
  EXPECT_DOUBLE_EQ(cpu_layer->flops().wgrad, gpu_layer->flops().wgrad);
  EXPECT_DOUBLE_EQ(cpu_layer->bytes().fprop, gpu_layer->bytes().fprop);
  EXPECT_DOUBLE_EQ(cpu_layer->bytes().dgrad, gpu_layer->bytes().dgrad);
  EXPECT_DOUBLE_EQ(cpu_layer->bytes().wgrad, gpu_layer->bytes().wgrad);

  Data d = make_data(*cpu_layer, int_inputs, 7);
  Results want = run(cpu_backend(), *cpu_layer, d);
  Results got = run(gpu, *gpu_layer, d);
  if (::testing::Test::HasFailure()) return;
  for (std::size_t k = 0; k < want.y.size(); ++k) {
    expect_close("forward y" + std::to_string(k), got.y[k], want.y[k], tols.fwd);
  }
  for (std::size_t k = 0; k < want.dx.size(); ++k) {
    if (want.dx[k].empty()) continue;
    expect_close("backward dx" + std::to_string(k), got.dx[k], want.dx[k], tols.bwd_data);
  }
  for (const auto& [name, g] : want.grads) {
    expect_close(name + " gradient (accumulated)", got.grads.at(name), g, tols.bwd_weights);
  }
}

// RNNs: chains of sigmoid/tanh through T steps on both sides (kF32Transcendental).
constexpr Tols kRnnFp32{kF32Transcendental, kF32Transcendental, kF32Reduction};
constexpr Tols kAttnFp32{kF32, kF32, kF32Reduction};
constexpr Tols kAnyTf32{kTf32, kTf32, kTf32};

struct RnnCase {
  std::string name;
  bool gru;
  int64_t T, N, I, H, layers;
  bool bidirectional;
};
void PrintTo(const RnnCase& c, std::ostream* os) { *os << c.name; }

class RnnCudaVsCpu : public ::testing::TestWithParam<std::tuple<RnnCase, bool>> {};

TEST_P(RnnCudaVsCpu, ForwardAndBackwardAgree) {
  TBD_SKIP_WITHOUT_CUDA();
  const auto& [c, tf32] = GetParam();
  std::vector<TensorDesc> in{TensorDesc{Shape{c.T, c.N, c.I}}};
  if (c.gru) {
    GruConfig cfg;
    cfg.hidden = c.H, cfg.num_layers = c.layers, cfg.bidirectional = c.bidirectional;
    compare_backends(cfg, in, tf32, tf32 ? kAnyTf32 : kRnnFp32);
  } else {
    LstmConfig cfg;
    cfg.hidden = c.H, cfg.num_layers = c.layers, cfg.bidirectional = c.bidirectional;
    compare_backends(cfg, in, tf32, tf32 ? kAnyTf32 : kRnnFp32);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RnnCudaVsCpu,
    ::testing::Combine(::testing::Values(RnnCase{"lstm_1layer", false, 5, 3, 7, 8, 1, false},
                                         RnnCase{"lstm_batch1", false, 4, 1, 5, 6, 1, false},
                                         RnnCase{"lstm_2layer_bidir", false, 6, 2, 5, 7, 2, true},
                                         RnnCase{"gru_1layer", true, 5, 3, 7, 8, 1, false},
                                         RnnCase{"gru_2layer_bidir", true, 4, 2, 6, 5, 2, true}),
                       ::testing::Bool()),
    [](const auto& info) {
      return std::get<0>(info.param).name + (std::get<1>(info.param) ? "_tf32" : "_fp32");
    });

class LstmCellCudaVsCpu : public ::testing::TestWithParam<bool> {};

TEST_P(LstmCellCudaVsCpu, ForwardAndBackwardAgree) {
  TBD_SKIP_WITHOUT_CUDA();
  const bool tf32 = GetParam();
  LstmCellConfig cfg;
  cfg.hidden = 6;
  const int64_t N = 4, I = 5;
  compare_backends(cfg, {TensorDesc{Shape{N, I}}, TensorDesc{Shape{N, 6}}, TensorDesc{Shape{N, 6}}},
                   tf32, tf32 ? kAnyTf32 : kRnnFp32);
}

INSTANTIATE_TEST_SUITE_P(Math, LstmCellCudaVsCpu, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "tf32" : "fp32"; });

struct AttnCase {
  std::string name;
  int64_t N, Tq, Tk, D, heads;
  bool causal, cross, padding, bias;
  double dropout = 0.0;
};
void PrintTo(const AttnCase& c, std::ostream* os) { *os << c.name; }

class AttentionCudaVsCpu : public ::testing::TestWithParam<std::tuple<AttnCase, bool>> {};

TEST_P(AttentionCudaVsCpu, ForwardAndBackwardAgree) {
  TBD_SKIP_WITHOUT_CUDA();
  const auto& [c, tf32] = GetParam();
  MultiHeadAttentionConfig cfg;
  cfg.num_heads = c.heads, cfg.causal = c.causal, cfg.cross = c.cross;
  cfg.padding_mask = c.padding, cfg.bias = c.bias, cfg.dropout = c.dropout, cfg.seed = 5;
  std::vector<TensorDesc> in{TensorDesc{Shape{c.N, c.Tq, c.D}}};
  if (c.cross) in.push_back(TensorDesc{Shape{c.N, c.Tk, c.D}});
  std::vector<Vec> ints;
  if (c.padding) {
    in.push_back(TensorDesc{Shape{c.N}, DType::kI32});
    Vec lengths(static_cast<std::size_t>(c.N));
    for (int64_t n = 0; n < c.N; ++n) lengths[n] = static_cast<double>(c.Tk - (n % c.Tk) / 2);
    ints.push_back(lengths);  // every row keeps at least one key
  }
  compare_backends(cfg, in, tf32, tf32 ? kAnyTf32 : kAttnFp32, ints);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionCudaVsCpu,
    ::testing::Combine(
        ::testing::Values(
            AttnCase{"self", 2, 5, 5, 16, 4, false, false, false, true},
            AttnCase{"self_batch1_one_head", 1, 7, 7, 6, 1, false, false, false, true},
            AttnCase{"causal", 2, 6, 6, 12, 3, true, false, false, true},
            AttnCase{"cross_padding", 3, 4, 7, 8, 2, false, true, true, true},
            AttnCase{"cross_no_bias", 2, 3, 5, 8, 4, false, true, false, false},
            AttnCase{"self_causal_padding", 3, 5, 5, 8, 2, true, false, true, true},
            // The dropout mask is the shared counter-based one: identical on both.
            AttnCase{"self_dropout", 2, 6, 6, 8, 2, false, false, false, true, 0.3},
            AttnCase{"cross_padding_dropout", 2, 3, 5, 8, 2, false, true, true, true, 0.5}),
        ::testing::Bool()),
    [](const auto& info) {
      return std::get<0>(info.param).name + (std::get<1>(info.param) ? "_tf32" : "_fp32");
    });

// Attention dropout on CUDA alone: no-op in eval mode, reproducible masks for equal seeds, a new
// mask per step (the comparison with the CPU above covers the first step's mask).
TEST(AttentionCudaDropout, EvalIsIdentityAndMasksAreSeeded) {
  TBD_SKIP_WITHOUT_CUDA();
  Backend& be = cuda_backend(false);
  MultiHeadAttentionConfig plain;
  plain.num_heads = 2;
  MultiHeadAttentionConfig drop = plain;
  drop.dropout = 0.5, drop.seed = 42;
  std::vector<TensorDesc> in{TensorDesc{Shape{2, 8, 8}}};
  auto a = make_layer(be, "a", plain, in), b = make_layer(be, "a", drop, in),
       c = make_layer(be, "a", drop, in);
  Data d = make_data(*a, {}, 3);
  auto forward = [&](Layer& l, bool training) {
    l.set_training(training);
    for (Param& p : l.params()) from_host(be, p.value, d.params.at(p.name));
    Tensor x = be.empty(in[0], MemCategory::kDynamic), y = be.empty(in[0], MemCategory::kDynamic);
    from_host(be, x, d.x[0]);
    const Tensor* xp[] = {&x};
    Tensor* yp[] = {&y};
    l.forward(yp, xp);
    be.synchronize();
    return to_host(be, y);
  };
  Vec ref = forward(*a, true);
  expect_close("eval-mode dropout output", forward(*b, false), ref, kF32);
  Vec first_b = forward(*b, true), first_c = forward(*c, true);
  EXPECT_EQ(first_b, first_c) << "same seed and step must give the same mask";
  EXPECT_NE(first_b, ref) << "p = 0.5 must change the output";
  EXPECT_NE(forward(*b, true), first_b) << "each forward must draw a new mask";
}

TEST(RnnAttentionCudaErrors, WrongRankNamesLayerArgumentAndDims) {
  TBD_SKIP_WITHOUT_CUDA();
  Backend& be = cuda_backend(false);
  LstmConfig lstm;
  lstm.hidden = 8;
  try {
    make_layer(be, "encoder.lstm", lstm, {TensorDesc{Shape{3, 4}}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("LSTM 'encoder.lstm'"), std::string::npos) << m;
    EXPECT_NE(m.find("(3, 4)"), std::string::npos) << m;
  }
  GruConfig gru;
  gru.hidden = 0;
  EXPECT_THROW(make_layer(be, "g", gru, {TensorDesc{Shape{2, 3, 4}}}), Error);
  MultiHeadAttentionConfig attn;
  attn.num_heads = 3;
  EXPECT_THROW(make_layer(be, "attn", attn, {TensorDesc{Shape{2, 5, 8}}}), Error);  // 8 % 3
  attn.num_heads = 2, attn.cross = true;
  EXPECT_THROW(
      make_layer(be, "attn", attn, {TensorDesc{Shape{2, 5, 8}}, TensorDesc{Shape{3, 5, 8}}}),
      Error);  // batch mismatch
  LstmCellConfig cell;
  cell.hidden = 4;
  EXPECT_THROW(
      make_layer(be, "cell", cell,
                 {TensorDesc{Shape{2, 3}}, TensorDesc{Shape{2, 4}}, TensorDesc{Shape{2, 5}}}),
      Error);  // c is not (N, H)
}

}  // namespace
}  // namespace tbd::test
