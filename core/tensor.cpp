// core/tensor.cpp: shape/dtype helpers and tensor views.
#include "core/tensor.h"

#include <sstream>

#include "core/allocator.h"
#include "core/error.h"

namespace tbd {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
    case DType::kI32:
      return 4;
    case DType::kU8:
      return 1;
  }
  return 0;
}

const char* to_string(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kI32:
      return "i32";
    case DType::kU8:
      return "u8";
  }
  return "?";
}

const char* to_string(DeviceKind d) { return d == DeviceKind::kCpu ? "cpu" : "cuda"; }

const char* to_string(Layout l) {
  switch (l) {
    case Layout::kRowMajor:
      return "row_major";
    case Layout::kNChw16c:
      return "nChw16c";
    case Layout::kNhwc:
      return "nhwc";
    case Layout::kPacked:
      return "packed";
  }
  return "?";
}

const char* to_string(MemCategory c) {
  switch (c) {
    case MemCategory::kWeights:
      return "weights";
    case MemCategory::kWeightGrads:
      return "weight_grads";
    case MemCategory::kOptimizerState:
      return "optimizer_state";
    case MemCategory::kFeatureMaps:
      return "feature_maps";
    case MemCategory::kWorkspace:
      return "workspace";
    case MemCategory::kDynamic:
      return "dynamic";
    case MemCategory::kCount:
      break;
  }
  return "?";
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    TBD_CHECK(!__builtin_mul_overflow(n, d, &n), "shape ", to_string(),
              " has more elements than a 64-bit count holds");
  }
  return n;
}

std::string Shape::to_string() const {
  std::ostringstream os;
  os << "(";
  for (std::size_t i = 0; i < dims_.size(); ++i) os << (i ? ", " : "") << dims_[i];
  os << ")";
  return os.str();
}

std::string TensorDesc::to_string() const {
  return shape.to_string() + " " + tbd::to_string(dtype) + " " +
         (packing ? packing->format : std::string(tbd::to_string(layout)));
}

bool TensorDesc::same_storage(const TensorDesc& o) const {
  if (shape != o.shape || dtype != o.dtype || layout != o.layout) return false;
  if (!packing || !o.packing) return packing == o.packing;
  return packing->same(*o.packing);
}

Buffer::~Buffer() {
  if (alloc_ && ptr_) alloc_->deallocate(ptr_, bytes_, category_);
}

MemCategory Tensor::category() const { return buf_ ? buf_->category() : MemCategory::kDynamic; }

Tensor Tensor::view(Shape shape, Layout layout) const {
  TBD_CHECK(shape.numel() == numel(), "Tensor::view: ", shape.to_string(), " has ", shape.numel(),
            " elements, tensor ", desc_.shape.to_string(), " has ", numel());
  TBD_CHECK(desc_.layout != Layout::kPacked, "Tensor::view of a packed tensor (", desc_.to_string(),
            "): its elements are not in row-major order");
  TensorDesc d{std::move(shape), desc_.dtype, layout};
  return Tensor(std::move(d), device_, buf_, offset_);
}

Tensor Tensor::slice(std::size_t byte_offset, TensorDesc desc) const {
  TBD_CHECK(defined(), "Tensor::slice of a tensor without storage");
  TBD_CHECK(byte_offset + desc.bytes() <= bytes(), "Tensor::slice: ", desc.to_string(), " at byte ",
            byte_offset, " does not fit in ", desc_.to_string());
  return Tensor(std::move(desc), device_, buf_, offset_ + byte_offset);
}

}  // namespace tbd
