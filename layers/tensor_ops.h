// layers/tensor_ops.h: structural layers: residual add, concat, split, reshape, transpose,
// detach, sequence reversal.
//
// Add:       x0, x1: same shape and layout (any layout)  y: like x0.  y = x0 + x1.
//            FLOPs fprop N, dgrad 0 (gradient passes through to both).
// Concat:    inputs equal except along `axis`; y concatenates them.  Row-major, or nChw16c
//            along channels when every input is nChw16c with C % 16 == 0 (an Inception
//            module's branches): per image, each input is then one contiguous run of bytes, as
//            in nchw, so the same copies concatenate either layout.
// Split:     one input; outputs of `sizes` along `axis` (sum(sizes) == dim), or `parts` equal
//            outputs (dim % parts == 0).  Row-major, or
//            nChw16c along channels with every size a multiple of 16 (as Concat).
// Reshape:   same element count; one dim may be -1.  Row-major (a copy: layers own outputs).
// Transpose: y = permute(x, perm), e.g. perm {1, 0, 2} swaps the first two dims.  Row-major.
// Detach:    y = x (any layout), and no gradient flows back through y (a GAN's critic step
//            reads the generator's images as data; detection's proposals). A copy.
// Reverse:   x (T, N, ...) time-major, row-major, any dtype (i32 token ids, f32 activations),
//            and optionally lengths (N) i32; y like x. Without lengths y[t] = x[T-1-t]; with
//            them, per sample n, y[t, n] = x[len_n-1-t, n] for t < len_n and y[t, n] = x[t, n]
//            for t >= len_n: the padding stays in place (MXNet's SequenceReverse with
//            sequence_length, as Sockeye's encoder reverses its source). A length outside
//            [0, T] is an error: the CPU's forward throws naming the layer, the sample and the
//            value; a CUDA kernel cannot throw (a host check would synchronise every step), so
//            there that sample's elements of y become all-ones bits: NaN as floats, -1 as i32
//            (an invalid id or length downstream). The gradient (f32 x) is the same
//            permutation of dy (it is its own inverse); lengths take none (input_grads).
// Axes may be negative (counted from the end). Concat, Split, Reshape and Transpose move
// elements of any dtype (labels, indices); gradients flow for f32. None has weights.
// Bytes (a lower bound, layers/layer.h; element size from the dtype):
//   Add: fprop 4*3E (read x0, x1, write y), dgrad 4*3E (read dy, write dx0 and dx1).
//   Concat, Split, Reshape, Transpose (and the graph's Reorder): copies, no FLOPs. fprop reads
//   every input and writes every output: bytes(x) + bytes(y), the same elements twice;
//   dgrad the same for the gradients (0 for non-f32 data, which takes no gradient).
//   Reverse: the copy of x into y (copy_bytes), plus 4N for reading lengths in fprop and, when
//   x is f32, in dgrad.
// The shape functions below check their inputs and throw naming the layer, the argument and
// the dims; every backend calls them.
#pragma once

#include <vector>

#include "layers/layer.h"

namespace tbd {

struct AddConfig {
  static constexpr const char* kKind = "Add";
};

struct ConcatConfig {
  static constexpr const char* kKind = "Concat";
  int axis = 1;
};

struct SplitConfig {
  static constexpr const char* kKind = "Split";
  int axis = 1;
  std::vector<int64_t> sizes;
  // Instead of sizes: this many equal pieces (torch.chunk), so the config does not depend on
  // the extent it cuts (a batch-major axis: one piece per decoder step of (T*N, E) rows).
  int64_t parts = 0;
};

struct ReshapeConfig {
  static constexpr const char* kKind = "Reshape";
  std::vector<int64_t> shape;  // one entry may be -1
};

struct TransposeConfig {
  static constexpr const char* kKind = "Transpose";
  std::vector<int> perm;
};

struct DetachConfig {
  static constexpr const char* kKind = "Detach";
};

struct ReverseConfig {
  static constexpr const char* kKind = "Reverse";
};

// x0, x1 equal in shape, layout and dtype (f32); returns y's desc.
TensorDesc add_output_desc(const std::string& name, const std::vector<TensorDesc>& x);
Flops add_flops(const Shape& x);
Bytes add_bytes(const Shape& x, DType t = DType::kF32);
// The copy kinds' bytes from their input and output descriptors (see above).
Bytes copy_bytes(const std::vector<TensorDesc>& x, const std::vector<TensorDesc>& y);
// True when x (nChw16c, rank 4, C % 16 == 0 each) can be cut or joined along `axis` (channels)
// without leaving the blocked layout.
bool channel_blocks_ok(const std::vector<TensorDesc>& x, int axis);
// True when x (nhwc each) is cut or joined along `axis` (channels), which stays channels-last.
bool channels_last_ok(const std::vector<TensorDesc>& x, int axis);
// At least one input, same rank and dtype, equal except along axis; row-major, or nChw16c or
// nhwc along channels (channel_blocks_ok, channels_last_ok).
Shape concat_output_shape(const std::string& name, const ConcatConfig& cfg,
                          const std::vector<TensorDesc>& x);
// sizes all positive and summing to x's extent along axis.
// The sizes of the pieces: cfg.sizes, or cfg.parts equal pieces of x's extent along the axis
// (unchecked: split_output_shapes checks).
std::vector<int64_t> split_sizes(const SplitConfig& cfg, const Shape& x);
std::vector<Shape> split_output_shapes(const std::string& name, const SplitConfig& cfg,
                                       const TensorDesc& x);
Shape reshape_output_shape(const std::string& name, const ReshapeConfig& cfg, const TensorDesc& x);
// perm a permutation of 0..rank-1 (rank <= 12, oneDNN's limit).
Shape transpose_output_shape(const std::string& name, const TransposeConfig& cfg,
                             const TensorDesc& x);
// Inputs x [, lengths] as documented above (x rank >= 2, positive dims, row-major; lengths
// (N) i32 row-major); returns y's shape (x's).
Shape reverse_output_shape(const std::string& name, const std::vector<TensorDesc>& in);
Bytes reverse_bytes(const std::vector<TensorDesc>& in);
// Normalises a possibly negative axis for rank `rank` (throws naming the layer).
int normalize_axis(const char* kind, const std::string& name, int axis, int rank);

// Contract: inputs x0, x1; y like x0 (its layout); no parameters.
template <>
Contract contract(const std::string& name, const AddConfig& cfg, const std::vector<TensorDesc>& in);
std::string describe_problem(const AddConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// Contract: inputs as above; y row-major in the inputs' dtype; a copy (no FLOPs).
template <>
Contract contract(const std::string& name, const ConcatConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const ConcatConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// Contract: one input; one output per size, row-major; a copy.
template <>
Contract contract(const std::string& name, const SplitConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const SplitConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// Contract: one input; y row-major; a copy.
template <>
Contract contract(const std::string& name, const ReshapeConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const ReshapeConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// Contract: one input; y row-major; a copy.
template <>
Contract contract(const std::string& name, const TransposeConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const TransposeConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// Contract: one input x; y like x; y carries no gradient (output_grads {false}); a copy.
template <>
Contract contract(const std::string& name, const DetachConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const DetachConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

// Contract: inputs x [, lengths]; y like x (row-major); lengths take no gradient; a copy.
template <>
Contract contract(const std::string& name, const ReverseConfig& cfg,
                  const std::vector<TensorDesc>& in);
std::string describe_problem(const ReverseConfig& cfg, const std::vector<TensorDesc>& in,
                             const Contract& c);

}  // namespace tbd
