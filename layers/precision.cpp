// layers/precision.cpp: the bf16 policy of every layer kind (layers/precision.h).
#include "layers/precision.h"

#include <cstring>

#include "core/error.h"

namespace tbd {
namespace {

constexpr Bf16Policy kLow = Bf16Policy::kLowerPrecision;
constexpr Bf16Policy kAs = Bf16Policy::kAsInput;
constexpr Bf16Policy kF32 = Bf16Policy::kFp32;

// Sorted by kind. The reasons follow PyTorch's autocast lists (aten/src/ATen/autocast_mode.h:
// lower_precision_fp, fp32, and the ops it leaves alone).
const KindPrecision kTable[] = {
    {"Activation", kAs, "elementwise: bf16 in, f32 in registers, bf16 out"},
    {"ActivationDgrad", kAs, "elementwise (the activation's derivative)"},
    {"ActorCriticLoss", kF32, "a loss: f32 (autocast's fp32 list)"},
    {"Adam", kF32, "optimizer: f32 master weights, gradients and state"},
    {"Add", kAs, "elementwise; mixed inputs are promoted to f32 (autocast's promote list)"},
    {"AnchorTarget", kF32, "detection targets: box arithmetic in f32"},
    {"BatchNorm2d", kAs, "runs in its input's dtype with f32 statistics and parameters"},
    {"CastScale", kF32, "converts bytes to f32"},
    {"Concat", kAs, "a copy; mixed inputs are promoted to f32"},
    {"Conv2d", kLow, "a convolution (autocast's lower_precision_fp list)"},
    {"Conv2dDgrad", kLow, "a convolution's data gradient as a layer"},
    {"CtcLoss", kF32, "a loss: f32"},
    {"Detach", kAs, "a copy"},
    {"Dropout", kAs, "elementwise"},
    {"Embedding", kF32,
     "reads the f32 master table (PyTorch's embedding outputs the table's dtype)"},
    {"GRU", kLow, "an RNN (autocast's gru_cell, mkldnn_rnn_layer)"},
    {"Gemm", kLow, "a matrix product (mm, bmm)"},
    {"GlobalAvgPool2d", kAs, "pooling, accumulated in f32"},
    {"GradientPenalty", kF32, "a loss term: f32"},
    {"LSTM", kLow, "an RNN (autocast's lstm_cell, mkldnn_rnn_layer)"},
    {"LSTMCell", kLow, "an RNN cell (autocast's lstm_cell)"},
    {"LayerNorm", kF32, "a norm: f32 (autocast's fp32 list: layer_norm)"},
    {"LayerNormDgrad", kF32, "a norm's data gradient: f32"},
    {"Linear", kLow, "a matrix product (linear, addmm)"},
    {"LinearDgrad", kLow, "a linear's data gradient as a layer (mm)"},
    {"MeanLoss", kF32, "a loss: f32"},
    {"MlpAttention", kF32,
     "additive attention's tanh, softmax and per-sample weighted sums: memory-bound, in f32 "
     "(its projections are Linear layers, in bf16)"},
    {"MseLoss", kF32, "a loss: f32 (mse_loss)"},
    {"MultiHeadAttention", kLow, "attention (scaled_dot_product_attention); softmax in f32"},
    {"Pool2d", kAs, "pooling (max: exact; average: accumulated in f32)"},
    {"Pool2dDgrad", kAs, "pooling's data gradient as a layer"},
    {"PositionalEncoding", kF32, "adds f32 sinusoids (autocast: sin, cos, exp in f32)"},
    {"Proposal", kF32, "detection: box decoding and NMS in f32"},
    {"ProposalTarget", kF32, "detection targets: f32"},
    {"RMSNorm", kF32, "a norm: f32 (autocast's fp32 list: rms_norm)"},
    {"RMSprop", kF32, "optimizer: f32"},
    {"RandomInterpolation", kF32, "interpolates f32 samples"},
    {"Reorder", kAs, "a layout conversion (and the graph's dtype casts)"},
    {"Reshape", kAs, "a view"},
    {"Reverse", kAs, "a copy"},
    {"RoIPool", kAs, "pooling"},
    {"RoPE", kAs, "an elementwise rotation: bf16 in, f32 in registers, bf16 out"},
    {"SGD", kF32, "optimizer: f32"},
    {"ScaledDotProductAttention", kLow,
     "fused attention (scaled_dot_product_attention): bf16 q, k, v and o; products, online "
     "softmax and gradients accumulated in f32"},
    {"SequenceBatchNorm", kAs, "batch norm over sequences, f32 statistics"},
    {"SequenceLast", kAs, "a copy"},
    {"SmoothL1Loss", kF32, "a loss: f32 (smooth_l1_loss)"},
    {"SoftmaxCrossEntropy", kF32,
     "softmax and a loss: f32 (log_softmax, nll_loss); the CPU reads bf16 logits widened "
     "exactly, without an f32 copy"},
    {"Split", kAs, "a copy"},
    {"SwiGLU", kAs, "elementwise (silu, multiply): bf16 in, f32 in registers, bf16 out"},
    {"Transpose", kAs, "a copy"},
    {"Upsample2d", kF32, "upsampling: f32 (autocast's fp32 list: upsample_*)"},
};

}  // namespace

const char* to_string(Bf16Policy p) {
  switch (p) {
    case Bf16Policy::kLowerPrecision:
      return "bf16";
    case Bf16Policy::kAsInput:
      return "as input";
    case Bf16Policy::kFp32:
      return "fp32";
  }
  return "?";
}

std::span<const KindPrecision> precision_table() { return kTable; }

const KindPrecision& kind_precision(const char* kind) {
  for (const KindPrecision& k : kTable) {
    if (std::strcmp(k.kind, kind) == 0) return k;
  }
  TBD_FAIL("layer kind ", kind, " has no bf16 policy: add it to the table in layers/precision.cpp");
}

std::vector<DType> wanted_dtypes(const char* kind, const std::string& name, bool takes_bf16,
                                 DeviceKind device, MathMode m, const std::vector<TensorDesc>& in) {
  std::vector<DType> want;
  want.reserve(in.size());
  DType floating = DType::kF32;
  if (m == MathMode::kBf16) {
    switch (kind_precision(kind).policy) {
      case Bf16Policy::kLowerPrecision:
        TBD_CHECK(takes_bf16, kind, " '", name, "': no bf16 implementation on the ",
                  to_string(device), " backend (--tbd_math=bf16 computes ", kind,
                  " in bf16: layers/precision.h)");
        floating = DType::kBF16;
        break;
      case Bf16Policy::kAsInput:
      case Bf16Policy::kFp32: {
        // Both keep bf16 inputs for an implementation that takes them: kAsInput runs in bf16,
        // kFp32 widens them exactly in registers (the same numbers as after a cast).
        bool any = false, all_bf16 = true;
        for (const TensorDesc& d : in) {
          if (!is_floating(d.dtype)) continue;
          any = true;
          all_bf16 = all_bf16 && d.dtype == DType::kBF16;
        }
        floating = takes_bf16 && any && all_bf16 ? DType::kBF16 : DType::kF32;
        break;
      }
    }
  }
  for (const TensorDesc& d : in) want.push_back(is_floating(d.dtype) ? floating : d.dtype);
  return want;
}

}  // namespace tbd
