// layers/cuda/tensor_ops_cuda.cu: Add, Concat, Split, Reshape, Detach, Transpose and Reverse on
// CUDA.
//
// Concat and Split are strided copies (cudaMemcpy2DAsync: `outer` rows of one input's slab
// each), Reshape a plain copy (layers own their outputs), Transpose a gather kernel over the
// output's coordinates; their backward passes run the inverse copies, and all of them move
// elements of any 4-byte dtype (labels, indices). Add is one kernel forward and two copies
// backward. Reverse is a gather kernel over y's elements that reads the lengths in device
// memory; a length outside [0, T] cannot throw there, so its sample's elements become all-ones
// bits (layers/tensor_ops.h). Shape rules and FLOP counts: the shared functions of
// layers/tensor_ops.cpp.
#include <numeric>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/tensor_ops.h"

namespace tbd::cuda {
namespace {

// ---- Add ----

__global__ void add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ y, int64_t n) {
  TBD_GRID_STRIDE(i, n) { y[i] = a[i] + b[i]; }
}

class AddCuda final : public Layer {
 public:
  AddCuda(Backend& be, const std::string& name, const AddConfig& cfg,
          const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cu_(as_cuda(be)) {
    n_ = in[0].shape.numel();
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    add_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(x[0]->f32(), x[1]->f32(), y[0]->f32(),
                                                          n_);
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    for (int i = 0; i < 2; ++i) {
      if (dx[i] != nullptr) copy_d2d(cu_, dx[i]->raw(), dy[0]->raw(), dy[0]->bytes());
    }
  }

 private:
  CudaBackend& cu_;
  int64_t n_ = 0;
};

TBD_REGISTER_LAYER(AddConfig, DeviceKind::kCuda, AddCuda);

// ---- Concat / Split: one strided copy per piece ----

// The tensor seen as (outer, dim_along_axis, inner).
struct AxisView {
  int64_t outer = 1, inner = 1;
};
AxisView axis_view(const Shape& s, int axis) {
  AxisView v;
  for (int i = 0; i < axis; ++i) v.outer *= s[i];
  for (int i = axis + 1; i < s.rank(); ++i) v.inner *= s[i];
  return v;
}

// Copies piece (outer, len, inner) at offset `off` along the axis of whole (outer, total,
// inner), in the direction given by `to_whole`; elements of `esize` bytes (any dtype).
void copy_piece(CudaBackend& cu, const Tensor& whole_t, const Tensor& piece_t, const AxisView& v,
                int64_t total, int64_t off, int64_t len, bool to_whole) {
  const std::size_t esize = dtype_size(whole_t.dtype());
  const std::size_t row = static_cast<std::size_t>(len * v.inner) * esize;
  const std::size_t pitch = static_cast<std::size_t>(total * v.inner) * esize;
  char* w = static_cast<char*>(whole_t.raw()) + off * v.inner * static_cast<int64_t>(esize);
  char* piece = static_cast<char*>(piece_t.raw());
  if (v.outer == 1) {
    copy_d2d(cu, to_whole ? w : piece, to_whole ? piece : w, row);
    return;
  }
  if (to_whole) {
    TBD_CUDA_CHECK(cudaMemcpy2DAsync(w, pitch, piece, row, row, v.outer, cudaMemcpyDeviceToDevice,
                                     cu.stream()));
  } else {
    TBD_CUDA_CHECK(cudaMemcpy2DAsync(piece, row, w, pitch, row, v.outer, cudaMemcpyDeviceToDevice,
                                     cu.stream()));
  }
}

class ConcatCuda final : public Layer {
 public:
  ConcatCuda(Backend& be, const std::string& name, const ConcatConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cu_(as_cuda(be)) {
    axis_ = normalize_axis(kind(), name, cfg.axis, outputs_[0].shape.rank());
    const Shape& s0 = in[0].shape;
    view_ = axis_view(s0, axis_);
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    const int64_t total = outputs_[0].shape[axis_];
    int64_t off = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const int64_t len = inputs_[i].shape[axis_];
      copy_piece(cu_, *y[0], *x[i], view_, total, off, len, /*to_whole=*/true);
      off += len;
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    const int64_t total = outputs_[0].shape[axis_];
    int64_t off = 0;
    for (std::size_t i = 0; i < dx.size(); ++i) {
      const int64_t len = inputs_[i].shape[axis_];
      if (dx[i] != nullptr) {
        copy_piece(cu_, *dy[0], *dx[i], view_, total, off, len, /*to_whole=*/false);
      }
      off += len;
    }
  }

 private:
  CudaBackend& cu_;
  int axis_ = 0;
  AxisView view_;
};

TBD_REGISTER_LAYER(ConcatConfig, DeviceKind::kCuda, ConcatCuda);

class SplitCuda final : public Layer {
 public:
  SplitCuda(Backend& be, const std::string& name, const SplitConfig& cfg,
            const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cu_(as_cuda(be)) {
    const Shape& xs = in[0].shape;
    axis_ = normalize_axis(kind(), name, cfg.axis, xs.rank());
    view_ = axis_view(xs, axis_);
    sizes_ = split_sizes(cfg, xs);
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    const int64_t total = inputs_[0].shape[axis_];
    int64_t off = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      copy_piece(cu_, *x[0], *y[i], view_, total, off, sizes_[i], /*to_whole=*/false);
      off += sizes_[i];
    }
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    const int64_t total = inputs_[0].shape[axis_];
    int64_t off = 0;
    for (std::size_t i = 0; i < dy.size(); ++i) {
      copy_piece(cu_, *dx[0], *dy[i], view_, total, off, sizes_[i], /*to_whole=*/true);
      off += sizes_[i];
    }
  }

 private:
  CudaBackend& cu_;
  int axis_ = 0;
  AxisView view_;
  std::vector<int64_t> sizes_;
};

TBD_REGISTER_LAYER(SplitConfig, DeviceKind::kCuda, SplitCuda);

// ---- Reshape ----

class ReshapeCuda final : public Layer {
 public:
  ReshapeCuda(Backend& be, const std::string& name, const ReshapeConfig& cfg,
              const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cu_(as_cuda(be)) {}

  void fprop(MutTensorRefs y, TensorRefs x) override {
    copy_d2d(cu_, y[0]->raw(), x[0]->raw(), x[0]->bytes());
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] != nullptr) copy_d2d(cu_, dx[0]->raw(), dy[0]->raw(), dy[0]->bytes());
  }

 private:
  CudaBackend& cu_;
};

TBD_REGISTER_LAYER(ReshapeConfig, DeviceKind::kCuda, ReshapeCuda);

// ---- Detach: a copy, no gradient ----

class DetachCuda final : public Layer {
 public:
  DetachCuda(Backend& be, const std::string& name, const DetachConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cu_(as_cuda(be)) {}
  void fprop(MutTensorRefs y, TensorRefs x) override {
    copy_d2d(cu_, y[0]->raw(), x[0]->raw(), x[0]->bytes());
  }
  // y carries no gradient: the graph never asks for one (Contract::output_grads).
  void bprop(MutTensorRefs, TensorRefs, TensorRefs, TensorRefs) override {}

 private:
  CudaBackend& cu_;
};

TBD_REGISTER_LAYER(DetachConfig, DeviceKind::kCuda, DetachCuda);

// ---- Transpose ----

constexpr int kMaxRank = 12;  // transpose_output_shape allows up to 12 dims
// dst[coords] = src[sum_k coords[k] * src_stride[k]]: `src_stride` is the source stride of the
// axis that destination axis k comes from.
struct PermuteArgs {
  int rank = 0;
  int64_t dst_dims[kMaxRank] = {};
  int64_t src_stride[kMaxRank] = {};
};

// Moves 4-byte elements as bits (f32 or i32 alike).
__global__ void permute_kernel(const uint32_t* __restrict__ src, uint32_t* __restrict__ dst,
                               int64_t n, PermuteArgs a) {
  TBD_GRID_STRIDE(i, n) {
    int64_t rest = i, off = 0;
    for (int k = a.rank - 1; k >= 0; --k) {
      off += (rest % a.dst_dims[k]) * a.src_stride[k];
      rest /= a.dst_dims[k];
    }
    dst[i] = src[off];
  }
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.rank(), 1);
  for (int i = s.rank() - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

class TransposeCuda final : public Layer {
 public:
  TransposeCuda(Backend& be, const std::string& name, const TransposeConfig& cfg,
                const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cfg_(cfg), cu_(as_cuda(be)) {
    const Shape ys = outputs_[0].shape;
    TBD_LAYER_CHECK(dtype_size(in[0].dtype) == 4, kind(), name,
                    "the CUDA transpose moves 4-byte elements (f32, i32), got ", in[0].to_string());
    const Shape& xs = in[0].shape;
    const int r = xs.rank();
    std::vector<int> inv(r);
    for (int i = 0; i < r; ++i) inv[cfg.perm[i]] = i;
    n_ = xs.numel();
    const std::vector<int64_t> xst = strides_of(xs), yst = strides_of(ys);
    fwd_.rank = bwd_.rank = r;
    for (int i = 0; i < r; ++i) {
      fwd_.dst_dims[i] = ys[i];
      fwd_.src_stride[i] = xst[cfg.perm[i]];
      bwd_.dst_dims[i] = xs[i];
      bwd_.src_stride[i] = yst[inv[i]];
    }
  }

  void fprop(MutTensorRefs y, TensorRefs x) override {
    permute_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(x[0]->data<uint32_t>(),
                                                              y[0]->data<uint32_t>(), n_, fwd_);
    TBD_CUDA_CHECK_LAST();
  }

  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    permute_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(dy[0]->data<uint32_t>(),
                                                              dx[0]->data<uint32_t>(), n_, bwd_);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  TransposeConfig cfg_;
  CudaBackend& cu_;
  int64_t n_ = 0;
  PermuteArgs fwd_, bwd_;
};

TBD_REGISTER_LAYER(TransposeConfig, DeviceKind::kCuda, TransposeCuda);

// ---- Reverse ----

// dst[t, n, k] = src[s, n, k] with s = T-1-t without lengths, else len-1-t for t < len and t
// past it; elements moved as words W of the dtype's size. A sample whose length is outside
// [0, T] gets all-ones words: NaN as f32, f16 and bf16, -1 as i32.
template <class W>
__global__ void reverse_kernel(const W* __restrict__ src, W* __restrict__ dst,
                               const int32_t* __restrict__ lengths, int64_t T, int64_t N,
                               int64_t inner) {
  TBD_GRID_STRIDE(i, T * N * inner) {
    const int64_t k = i % inner, tn = i / inner, n = tn % N, t = tn / N;
    const int64_t len = lengths ? lengths[n] : T;
    if (len < 0 || len > T) {
      dst[i] = static_cast<W>(~W{0});
      continue;
    }
    const int64_t from = t < len ? len - 1 - t : t;
    dst[i] = src[(from * N + n) * inner + k];
  }
}

class ReverseCuda final : public Layer {
 public:
  ReverseCuda(Backend& be, const std::string& name, const ReverseConfig& cfg,
              const std::vector<TensorDesc>& in)
      : Layer(be, name, in, contract_of(name, cfg, in)), cu_(as_cuda(be)) {
    const Shape& xs = in[0].shape;
    T_ = xs[0], N_ = xs[1], inner_ = xs.numel() / (T_ * N_);
    esize_ = dtype_size(in[0].dtype);
    TBD_LAYER_CHECK(esize_ == 4 || esize_ == 2, kind(), name,
                    "the CUDA reverse moves 4- or 2-byte elements, got ", in[0].to_string());
  }

  std::string implementation() const override { return "gather kernel"; }

  // y, x[0]: (T, N, ...)  x[1] = lengths: (N) i32, optional
  void fprop(MutTensorRefs y, TensorRefs x) override { permute(y[0]->raw(), x[0]->raw(), x); }

  // The permutation is its own inverse: dx is dy permuted like x.
  void bprop(MutTensorRefs dx, TensorRefs dy, TensorRefs x, TensorRefs /*y*/) override {
    if (dx[0] != nullptr) permute(dx[0]->raw(), dy[0]->raw(), x);
  }

 private:
  void permute(void* dst, const void* src, TensorRefs x) {
    const int32_t* len = x.size() > 1 ? x[1]->data<int32_t>() : nullptr;
    const int64_t n = T_ * N_ * inner_;
    if (esize_ == 4) {
      reverse_kernel<<<grid_for(n), kBlock, 0, cu_.stream()>>>(
          static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), len, T_, N_, inner_);
    } else {
      reverse_kernel<<<grid_for(n), kBlock, 0, cu_.stream()>>>(
          static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), len, T_, N_, inner_);
    }
    TBD_CUDA_CHECK_LAST();
  }

  CudaBackend& cu_;
  int64_t T_ = 0, N_ = 0, inner_ = 0;
  std::size_t esize_ = 4;
};

TBD_REGISTER_LAYER(ReverseConfig, DeviceKind::kCuda, ReverseCuda);

}  // namespace
}  // namespace tbd::cuda
