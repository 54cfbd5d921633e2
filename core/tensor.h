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
// The dtypes that carry gradients and that the math modes compute in: f32 and bf16.
inline bool is_floating(DType t) { return t == DType::kF32 || t == DType::kBF16; }
const char* to_string(DType t);

enum class DeviceKind { kCpu, kCuda };
const char* to_string(DeviceKind d);

// kRowMajor: plain C order of the logical dims (NCHW for 4-D).
// kNChw16c: 4-D activations with channels blocked by 16 (oneDNN nChw16c); C % 16 == 0.
// kNhwc: 4-D activations channels-last (stored N, H, W, C; oneDNN nhwc), where the kernels
//   want it (oneDNN 2.6 runs its AMX convolutions only channels-last).
// kPacked: a parameter in the layout its kernels want (oneDNN's blocked weight formats, such
//   as OIhw16i16o, padded with zeros to whole blocks). The element order and the size are the
//   backend's, described by TensorDesc::packing; element-wise code (optimizers, all-reduce,
//   accumulate) may run over it as a flat array of stored_numel() elements, and the backend's
//   copy_to_host / copy_from_host convert it to and from row-major.
enum class Layout { kRowMajor, kNChw16c, kNhwc, kPacked };
const char* to_string(Layout l);

// How a kPacked tensor is stored. A backend derives its own (the CPU backend's holds a oneDNN
// memory descriptor) and owns the conversions.
struct Packing {
  virtual ~Packing() = default;
  virtual bool same(const Packing& other) const = 0;
  std::size_t bytes = 0;  // storage, >= numel x dtype size (padded to whole blocks)
  std::string format;     // its name, for messages and descriptions ("OIhw16i16o")
};

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
  std::shared_ptr<const Packing> packing = nullptr;  // kPacked only

  // The storage: numel x dtype size, or the packing's (padded) size.
  std::size_t bytes() const {
    return packing ? packing->bytes : static_cast<std::size_t>(shape.numel()) * dtype_size(dtype);
  }
  // Elements stored, padding included: what element-wise code runs over.
  int64_t stored_numel() const { return static_cast<int64_t>(bytes() / dtype_size(dtype)); }
  // Same shape, dtype, layout and (for kPacked) packing: one can stand for the other.
  bool same_storage(const TensorDesc& o) const;
  std::string to_string() const;  // "(2, 3, 4) f32 row_major", "(64, 3, 7, 7) f32 Ohwi16o"
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
  int64_t stored_numel() const { return desc_.stored_numel(); }
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
