// tests/cuda/rnn_attention_cuda_test.cpp: what CUDA's LSTM, GRU, LSTMCell and MultiHeadAttention
// (cuDNN RNN v8, cuBLAS) have beyond the layer comparisons.
//
// Their forward outputs, input and parameter gradients are checked on CUDA, in FP32 and TF32,
// against the float64 references of tests/layers/rnn_test.cpp and attention_test.cpp (the
// harness runs every case on every target). Here: attention dropout's behaviour across steps
// and modes, and the CUDA implementations' own input checks. Skips with the reason when no
// device is usable; compiles and links without CUDA too (only the Backend interface is used).
#include <gtest/gtest.h>

#include <memory>

#include "layers/attention.h"
#include "layers/rnn.h"
#include "tests/support/check.h"

namespace tbd::test {
namespace {

class RnnAttentionCuda : public ::testing::Test {
 protected:
  void SetUp() override { TBD_USE_TARGET(be_, Target::kCudaFp32); }
  Backend& be() { return *be_; }
  Backend* be_ = nullptr;
};

// Attention dropout on CUDA alone: no-op in eval mode, reproducible masks for equal seeds, a new
// mask per step (tests/layers/attention_test.cpp checks the first step's mask against float64).
TEST_F(RnnAttentionCuda, AttentionDropoutEvalIsIdentityAndMasksAreSeeded) {
  Backend& be = this->be();
  MultiHeadAttentionConfig plain;
  plain.num_heads = 2;
  MultiHeadAttentionConfig drop = plain;
  drop.dropout = 0.5, drop.seed = 42;
  std::vector<TensorDesc> in{TensorDesc{Shape{2, 8, 8}}};
  auto a = make_layer(be, "a", plain, in), b = make_layer(be, "a", drop, in),
       c = make_layer(be, "a", drop, in);
  const Vec xv = random_vec(in[0].shape.numel(), 3);
  auto forward = [&](Layer& l, bool training) {
    l.set_training(training);
    for (std::size_t k = 0; k < l.params().size(); ++k) {
      from_host(be, l.params()[k].value,
                random_vec(l.params()[k].value.numel(), 30 + k, -0.5, 0.5));
    }
    Tensor x = be.empty(in[0], MemCategory::kDynamic), y = be.empty(in[0], MemCategory::kDynamic);
    from_host(be, x, xv);
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
  const Vec second_b = forward(*b, true);
  EXPECT_NE(second_b, first_b) << "each forward must draw a new mask";
  // Numbered (2, 1), as data-parallel rank 1 of 2: its first forward draws step 1's mask.
  auto d = make_layer(be, "a", drop, in);
  d->set_call_numbering(2, 1);
  EXPECT_EQ(forward(*d, true), second_b) << "rank 1 of 2's first mask is step 1's";
}

TEST_F(RnnAttentionCuda, WrongRankNamesLayerArgumentAndDims) {
  Backend& be = this->be();
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
