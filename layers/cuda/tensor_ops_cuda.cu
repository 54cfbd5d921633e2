// layers/cuda/tensor_ops_cuda.cu: Add, Concat, Split, Reshape and Transpose on CUDA.
//
// Concat and Split are strided copies (cudaMemcpy2DAsync: `outer` rows of one input's slab
// each), Reshape a plain copy (layers own their outputs), Transpose a gather kernel over the
// output's coordinates; their backward passes run the inverse copies. Add is one kernel
// forward and two copies backward. Shape rules: layers/tensor_ops.h.
#include <numeric>

#include "backends/cuda/cuda_backend.h"
#include "layers/cuda/cuda_layer_util.h"
#include "layers/cuda/kernel_util.cuh"
#include "layers/tensor_ops.h"

namespace tbd::cuda {
namespace {

void copy_d2d(CudaBackend& cu, void* dst, const void* src, std::size_t bytes) {
  if (dst != src) {
    TBD_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cu.stream()));
  }
}

// ---- Add ----

__global__ void add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                           float* __restrict__ y, int64_t n) {
  TBD_GRID_STRIDE(i, n) { y[i] = a[i] + b[i]; }
}

class AddCuda final : public Layer {
 public:
  AddCuda(Backend& be, const std::string& name, const AddConfig&,
          const std::vector<TensorDesc>& in)
      : Layer(be, name, in), cu_(as_cuda(be)) {
    check_arity(in.size(), 2, "inputs");
    const char* k = kind();
    for (int i = 0; i < 2; ++i) {
      const char* arg = i == 0 ? "x0" : "x1";
      TBD_LAYER_CHECK(in[i].shape.rank() >= 1, k, name, "input ", arg,
                      " must have rank >= 1, got ", in[i].shape.to_string());
      check_positive(k, name, arg, in[i].shape);
      check_f32(k, name, arg, in[i]);
    }
    TBD_LAYER_CHECK(in[0].shape == in[1].shape && in[0].layout == in[1].layout, k, name,
                    "inputs x0 ", in[0].to_string(), " and x1 ", in[1].to_string(),
                    " must have the same shape and layout");
    outputs_ = {in[0]};
    n_ = in[0].shape.numel();
    flops_ = Flops{static_cast<double>(n_), 0, 0};
  }

  const char* kind() const override { return AddConfig::kKind; }
  std::string describe() const override {
    return detail::concat("x ", inputs_[0].shape.to_string());
  }

  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), 2, "forward inputs");
    add_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(x[0]->f32(), x[1]->f32(), y[0]->f32(),
                                                          n_);
    TBD_CUDA_CHECK_LAST();
  }

  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
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

int normalize_axis(const char* kind, const std::string& name, int axis, int rank) {
  TBD_LAYER_CHECK(axis >= -rank && axis < rank, kind, name, "axis ", axis,
                  " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

// Copies piece (outer, len, inner) at offset `off` along the axis of whole (outer, total,
// inner), in the direction given by `to_whole`.
void copy_piece(CudaBackend& cu, float* whole, float* piece, const AxisView& v, int64_t total,
                int64_t off, int64_t len, bool to_whole) {
  const std::size_t row = static_cast<std::size_t>(len * v.inner) * sizeof(float);
  const std::size_t pitch = static_cast<std::size_t>(total * v.inner) * sizeof(float);
  float* w = whole + off * v.inner;
  if (v.outer == 1) {
    copy_d2d(cu, to_whole ? w : piece, to_whole ? piece : w, row);
    return;
  }
  if (to_whole) {
    TBD_CUDA_CHECK(cudaMemcpy2DAsync(w, pitch, piece, row, row, v.outer,
                                     cudaMemcpyDeviceToDevice, cu.stream()));
  } else {
    TBD_CUDA_CHECK(cudaMemcpy2DAsync(piece, row, w, pitch, row, v.outer,
                                     cudaMemcpyDeviceToDevice, cu.stream()));
  }
}

class ConcatCuda final : public Layer {
 public:
  ConcatCuda(Backend& be, const std::string& name, const ConcatConfig& cfg,
             const std::vector<TensorDesc>& in)
      : Layer(be, name, in), cu_(as_cuda(be)) {
    const char* k = kind();
    TBD_LAYER_CHECK(!in.empty(), k, name, "needs at least one input");
    const Shape& s0 = in[0].shape;
    for (std::size_t i = 0; i < in.size(); ++i) {
      // concat, not "x" + std::to_string(i): GCC 12 reports a false -Wrestrict on the latter.
      const std::string arg = detail::concat("x", i);
      check_plain_f32(k, name, arg.c_str(), in[i]);
    }
    axis_ = normalize_axis(k, name, cfg.axis, s0.rank());
    std::vector<int64_t> yd = s0.dims();
    yd[axis_] = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const Shape& s = in[i].shape;
      bool same = s.rank() == s0.rank();
      for (int d = 0; same && d < s.rank(); ++d) same = d == axis_ || s[d] == s0[d];
      TBD_LAYER_CHECK(same, k, name, "input x", i, " ", s.to_string(),
                      " must equal x0 ", s0.to_string(), " except along axis ", axis_);
      yd[axis_] += s[axis_];
    }
    outputs_ = {TensorDesc{Shape(yd), DType::kF32, Layout::kRowMajor}};
    view_ = axis_view(s0, axis_);
  }

  const char* kind() const override { return ConcatConfig::kKind; }
  std::string describe() const override {
    return detail::concat(inputs_.size(), " inputs -> ", outputs_[0].shape.to_string(),
                          " axis ", axis_);
  }

  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), inputs_.size(), "forward inputs");
    const int64_t total = outputs_[0].shape[axis_];
    int64_t off = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const int64_t len = inputs_[i].shape[axis_];
      copy_piece(cu_, y[0]->f32(), x[i]->f32(), view_, total, off, len, /*to_whole=*/true);
      off += len;
    }
  }

  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    const int64_t total = outputs_[0].shape[axis_];
    int64_t off = 0;
    for (std::size_t i = 0; i < dx.size(); ++i) {
      const int64_t len = inputs_[i].shape[axis_];
      if (dx[i] != nullptr) {
        copy_piece(cu_, dy[0]->f32(), dx[i]->f32(), view_, total, off, len, /*to_whole=*/false);
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
      : Layer(be, name, in), cfg_(cfg), cu_(as_cuda(be)) {
    const char* k = kind();
    check_arity(in.size(), 1, "inputs");
    check_plain_f32(k, name, "x", in[0]);
    const Shape& xs = in[0].shape;
    axis_ = normalize_axis(k, name, cfg.axis, xs.rank());
    TBD_LAYER_CHECK(!cfg.sizes.empty(), k, name, "invalid config: no sizes");
    int64_t sum = 0;
    for (int64_t s : cfg.sizes) {
      TBD_LAYER_CHECK(s > 0, k, name, "invalid config: sizes must be positive, got ", s);
      sum += s;
    }
    TBD_LAYER_CHECK(sum == xs[axis_], k, name, "sizes sum to ", sum, " but x ", xs.to_string(),
                    " has ", xs[axis_], " along axis ", axis_);
    for (int64_t s : cfg.sizes) {
      std::vector<int64_t> d = xs.dims();
      d[axis_] = s;
      outputs_.push_back(TensorDesc{Shape(d), DType::kF32, Layout::kRowMajor});
    }
    view_ = axis_view(xs, axis_);
  }

  const char* kind() const override { return SplitConfig::kKind; }
  std::string describe() const override {
    return detail::concat("x ", inputs_[0].shape.to_string(), " -> ", cfg_.sizes.size(),
                          " pieces along axis ", axis_);
  }

  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), 1, "forward inputs");
    const int64_t total = inputs_[0].shape[axis_];
    int64_t off = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      copy_piece(cu_, x[0]->f32(), y[i]->f32(), view_, total, off, cfg_.sizes[i],
                 /*to_whole=*/false);
      off += cfg_.sizes[i];
    }
  }

  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    const int64_t total = inputs_[0].shape[axis_];
    int64_t off = 0;
    for (std::size_t i = 0; i < dy.size(); ++i) {
      copy_piece(cu_, dx[0]->f32(), dy[i]->f32(), view_, total, off, cfg_.sizes[i],
                 /*to_whole=*/true);
      off += cfg_.sizes[i];
    }
  }

 private:
  SplitConfig cfg_;
  CudaBackend& cu_;
  int axis_ = 0;
  AxisView view_;
};

TBD_REGISTER_LAYER(SplitConfig, DeviceKind::kCuda, SplitCuda);

// ---- Reshape ----

class ReshapeCuda final : public Layer {
 public:
  ReshapeCuda(Backend& be, const std::string& name, const ReshapeConfig& cfg,
              const std::vector<TensorDesc>& in)
      : Layer(be, name, in), cu_(as_cuda(be)) {
    const char* k = kind();
    check_arity(in.size(), 1, "inputs");
    check_plain_f32(k, name, "x", in[0]);
    const int64_t n = in[0].shape.numel();
    TBD_LAYER_CHECK(!cfg.shape.empty(), k, name, "invalid config: empty target shape");
    std::vector<int64_t> d = cfg.shape;
    int infer = -1;
    int64_t known = 1;
    for (std::size_t i = 0; i < d.size(); ++i) {
      if (d[i] == -1) {
        TBD_LAYER_CHECK(infer < 0, k, name, "target shape ", Shape(cfg.shape).to_string(),
                        " has more than one -1");
        infer = static_cast<int>(i);
      } else {
        TBD_LAYER_CHECK(d[i] > 0, k, name, "target shape ", Shape(cfg.shape).to_string(),
                        " has a non-positive dim");
        known *= d[i];
      }
    }
    if (infer >= 0) {
      TBD_LAYER_CHECK(n % known == 0, k, name, "cannot reshape x ", in[0].shape.to_string(),
                      " to ", Shape(cfg.shape).to_string());
      d[infer] = n / known;
    }
    TBD_LAYER_CHECK(Shape(d).numel() == n, k, name, "cannot reshape x ", in[0].shape.to_string(),
                    " (", n, " elements) to ", Shape(d).to_string());
    outputs_ = {TensorDesc{Shape(d), DType::kF32, Layout::kRowMajor}};
  }

  const char* kind() const override { return ReshapeConfig::kKind; }
  std::string describe() const override {
    return detail::concat("x ", inputs_[0].shape.to_string(), " -> ",
                          outputs_[0].shape.to_string());
  }

  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), 1, "forward inputs");
    copy_d2d(cu_, y[0]->raw(), x[0]->raw(), x[0]->bytes());
  }

  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] != nullptr) copy_d2d(cu_, dx[0]->raw(), dy[0]->raw(), dy[0]->bytes());
  }

 private:
  CudaBackend& cu_;
};

TBD_REGISTER_LAYER(ReshapeConfig, DeviceKind::kCuda, ReshapeCuda);

// ---- Transpose ----

constexpr int kMaxRank = 8;
// dst[coords] = src[sum_k coords[k] * src_stride[k]]: `src_stride` is the source stride of the
// axis that destination axis k comes from.
struct PermuteArgs {
  int rank = 0;
  int64_t dst_dims[kMaxRank] = {};
  int64_t src_stride[kMaxRank] = {};
};

__global__ void permute_kernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n,
                               PermuteArgs a) {
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
      : Layer(be, name, in), cfg_(cfg), cu_(as_cuda(be)) {
    const char* k = kind();
    check_arity(in.size(), 1, "inputs");
    check_plain_f32(k, name, "x", in[0]);
    const Shape& xs = in[0].shape;
    const int r = xs.rank();
    TBD_LAYER_CHECK(static_cast<int>(cfg.perm.size()) == r && r <= kMaxRank, k, name, "perm has ",
                    cfg.perm.size(), " entries for x ", xs.to_string(), " (rank <= ", kMaxRank,
                    ")");
    std::vector<int> inv(r, -1);
    for (int i = 0; i < r; ++i) {
      const int p = cfg.perm[i];
      TBD_LAYER_CHECK(p >= 0 && p < r && inv[p] < 0, k, name,
                      "perm is not a permutation of 0..", r - 1);
      inv[p] = i;
    }
    std::vector<int64_t> yd(r);
    for (int i = 0; i < r; ++i) yd[i] = xs[cfg.perm[i]];
    Shape ys(yd);
    outputs_ = {TensorDesc{ys, DType::kF32, Layout::kRowMajor}};
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

  const char* kind() const override { return TransposeConfig::kKind; }
  std::string describe() const override {
    return detail::concat("x ", inputs_[0].shape.to_string(), " -> ",
                          outputs_[0].shape.to_string());
  }

  void forward(MutTensorRefs y, TensorRefs x) override {
    check_arity(x.size(), 1, "forward inputs");
    permute_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(x[0]->f32(), y[0]->f32(), n_,
                                                              fwd_);
    TBD_CUDA_CHECK_LAST();
  }

  void backward(MutTensorRefs dx, TensorRefs dy, TensorRefs /*x*/, TensorRefs /*y*/) override {
    if (dx[0] == nullptr) return;
    permute_kernel<<<grid_for(n_), kBlock, 0, cu_.stream()>>>(dy[0]->f32(), dx[0]->f32(), n_,
                                                              bwd_);
    TBD_CUDA_CHECK_LAST();
  }

 private:
  TransposeConfig cfg_;
  CudaBackend& cu_;
  int64_t n_ = 0;
  PermuteArgs fwd_, bwd_;
};

TBD_REGISTER_LAYER(TransposeConfig, DeviceKind::kCuda, TransposeCuda);

}  // namespace
}  // namespace tbd::cuda
