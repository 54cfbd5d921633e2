// core/tensor.h: shapes, dtypes, layouts, memory categories and the Tensor view.
//
// Dimension letters used throughout the suite (defined once, here):
//   N batch, C input channels, K output channels, H/W input height/width, R/S filter
//   height/width, P/Q output height/width, B attention batch*heads, T sequence length,
//   D model/feature width, G gates.
//
// A Tensor is a typed view (data pointer, shape, dtype, layout, device) over a Buffer that the
// tracking allocator owns; copying a Tensor copies the view, never the data. Layout is part of
// the tensor so that oneDNN's blocked formats (nChw16c) flow between consecutive layers without
// reordering to plain NCHW around every op; a layer that needs plain data asks the graph for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace tbd {

// kU8: unsigned bytes (Atari frames as A3C feeds them; CastScale turns them into f32).
enum class DType { kF32, kBF16, kF16, kI32, kU8 };
std::size_t dtype_size(DType t);
const char* to_string(DType t);

enum class DeviceKind { kCpu, kCuda };
const char* to_string(DeviceKind d);

// kRowMajor: plain C order of the logical dims (NCHW for 4-D).
// kNChw16c: 4-D activations with channels blocked by 16 (oneDNN nChw16c); C % 16 == 0.
enum class Layout { kRowMajor, kNChw16c };
const char* to_string(Layout l);

// What a buffer holds, for the memory breakdown (TBD paper categories plus optimizer state).
enum class MemCategory {
  kWeights,
  kWeightGrads,
  kOptimizerState,
  kFeatureMaps,  // activations kept for backward
  kWorkspace,    // library scratch (oneDNN scratchpad, cuDNN/cuBLAS workspaces)
  kDynamic,      // everything else: activation gradients, inputs, labels, temporaries
  kCount
};
constexpr int kNumMemCategories = static_cast<int>(MemCategory::kCount);
const char* to_string(MemCategory c);  // "weights", "weight_grads", ...

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_.at(i < 0 ? i + rank() : i); }
  int64_t numel() const;
  const std::vector<int64_t>& dims() const { return dims_; }
  std::string to_string() const;  // "(2, 3, 4)"
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }

 private:
  std::vector<int64_t> dims_;
};

struct TensorDesc {
  Shape shape;
  DType dtype = DType::kF32;
  Layout layout = Layout::kRowMajor;

  std::size_t bytes() const { return static_cast<std::size_t>(shape.numel()) * dtype_size(dtype); }
  std::string to_string() const;  // "(2, 3, 4) f32 row_major"
};

class TrackingAllocator;

// Owns one allocation; returns it to the allocator on destruction.
class Buffer {
 public:
  Buffer(TrackingAllocator* alloc, void* ptr, std::size_t bytes, MemCategory cat)
      : alloc_(alloc), ptr_(ptr), bytes_(bytes), category_(cat) {}
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  MemCategory category() const { return category_; }

 private:
  TrackingAllocator* alloc_;
  void* ptr_;
  std::size_t bytes_;
  MemCategory category_;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(TensorDesc desc, DeviceKind device, std::shared_ptr<Buffer> buf,
         std::size_t byte_offset = 0)
      : desc_(std::move(desc)), device_(device), buf_(std::move(buf)), offset_(byte_offset) {}

  // A tensor without storage yet (a parameter before its arena is bound): desc only.
  bool defined() const { return buf_ != nullptr; }
  const TensorDesc& desc() const { return desc_; }
  const Shape& shape() const { return desc_.shape; }
  DType dtype() const { return desc_.dtype; }
  Layout layout() const { return desc_.layout; }
  DeviceKind device() const { return device_; }
  int64_t numel() const { return desc_.shape.numel(); }
  std::size_t bytes() const { return desc_.bytes(); }
  MemCategory category() const;

  void* raw() const { return buf_ ? static_cast<char*>(buf_->data()) + offset_ : nullptr; }
  template <class T>
  T* data() const {
    return static_cast<T*>(raw());
  }
  float* f32() const { return data<float>(); }

  // Same storage, another shape of equal element count (row-major reinterpretation).
  Tensor view(Shape shape, Layout layout = Layout::kRowMajor) const;
  // A tensor of `desc` stored `byte_offset` bytes into this one's storage (an arena's piece);
  // it shares (and keeps alive) the buffer. Throws if it does not fit.
  Tensor slice(std::size_t byte_offset, TensorDesc desc) const;

 private:
  TensorDesc desc_;
  DeviceKind device_ = DeviceKind::kCpu;
  std::shared_ptr<Buffer> buf_;
  std::size_t offset_ = 0;  // bytes into buf_
};

}  // namespace tbd
