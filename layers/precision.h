// layers/precision.h: what each layer kind computes in under --tbd_math=bf16, in one table.
//
// bf16 is mixed precision as PyTorch's autocast does it: weights, weight gradients and optimizer
// state stay f32 (the master copy); the products (convolutions, linears, matmuls, attention, RNN
// cells) take bf16 inputs and accumulate in f32; softmax, norms' statistics, losses and
// reductions run in f32; the activations between layers are bf16 wherever the consumer takes
// bf16, so what is saved for backward halves. Each kind has one of three policies:
//
//   kLowerPrecision  computes in bf16: its floating inputs are cast to bf16 and its outputs are
//                    bf16. A backend implementation without a bf16 path is an error naming the
//                    layer (the row becomes an error row), never a silent fp32 run.
//   kAsInput         runs in the dtype it is given (elementwise, pooling, batch norm with f32
//                    statistics, copies): bf16 in, bf16 out. An implementation without a bf16
//                    path gets its inputs cast to f32 (a Reorder node the breakdown shows).
//   kFp32            runs in f32: its inputs are cast to f32 (losses, layer norm, embeddings'
//                    tables, detection targets), except where its implementation reads bf16
//                    itself (kTakesBf16) and widens it exactly in registers: the same numbers
//                    without the cast's pass and f32 copy (the CPU's softmax cross-entropy on
//                    the language models' logits).
//
// The graph applies the table (Graph::add): it inserts a Reorder that converts the dtype
// wherever an input arrives in another. Under fp32 and tf32 every floating tensor is f32.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace tbd {

enum class Bf16Policy { kLowerPrecision, kAsInput, kFp32 };
const char* to_string(Bf16Policy p);  // "bf16", "as input", "fp32"

struct KindPrecision {
  const char* kind;   // Config::kKind
  Bf16Policy policy;  // under --tbd_math=bf16
  const char* why;    // the reason, as autocast's lists give it
};

// The table, every kind of the suite (a kind missing from it is an error at graph build).
std::span<const KindPrecision> precision_table();
// `kind`'s row; throws naming the kind where it has none.
const KindPrecision& kind_precision(const char* kind);

// The dtypes a layer of `kind` wants its inputs in under math mode `m`, given the inputs as
// they arrive and whether the backend's implementation takes bf16 (TBD_REGISTER_LAYER: the
// implementation's static constexpr bool kTakesBf16). Non-floating inputs (ids, bytes) keep
// theirs. Throws naming the layer for a kLowerPrecision kind whose implementation has no bf16.
std::vector<DType> wanted_dtypes(const char* kind, const std::string& name, bool takes_bf16,
                                 DeviceKind device, MathMode m, const std::vector<TensorDesc>& in);

}  // namespace tbd
