// Tensor: a typed, strided view of shared storage.
//
// Contract:
//  - shape and strides are in elements; strides may be any non-negative values (views
//    produced by slice/permute), and contiguous() returns a dense C-order copy when the
//    view is not dense already.
//  - Creating a tensor goes through checked_shape_bytes(): a shape with a negative
//    dimension or whose byte size overflows size_t (or exceeds kMaxTensorBytes) is
//    refused with an Error, never allocated.
//  - Copies of a Tensor share storage (like numpy views); clone() copies the data.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/limits.h"
#include "core/result.h"

namespace rkd {

using Shape = std::vector<int64_t>;

// Number of elements of a shape, or an Error naming `what` if a dimension is negative
// or the product overflows.
Result<uint64_t> checked_numel(const Shape& shape, const std::string& what);
// Byte size of a dense tensor of this shape and dtype, checked as above and against
// kMaxTensorBytes.
Result<uint64_t> checked_shape_bytes(const Shape& shape, DType dtype, const std::string& what);

std::string shape_to_string(const Shape& shape);  // "[8, 24, 80, 80]"

class Tensor {
 public:
  Tensor() = default;

  // A dense, zero-filled tensor. Fails on shapes that checked_shape_bytes refuses.
  static Result<Tensor> zeros(DType dtype, const Shape& shape);
  // As zeros() but the elements are left uninitialised: for outputs a kernel overwrites
  // completely (saves a pass over memory on every call).
  static Result<Tensor> uninitialized(DType dtype, const Shape& shape);
  // As zeros(), for shapes the caller has already validated; throws std::bad_alloc when the
  // allocation fails.
  static Tensor empty(DType dtype, const Shape& shape);
  // Copies `values` into a new float32 tensor; values.size() must equal numel(shape).
  static Tensor from_floats(const Shape& shape, std::span<const float> values);
  // A dense tensor over memory owned by `owner` (e.g. an executor's arena), starting
  // `offset_bytes` into it. The caller guarantees the bytes exist and outlive `owner`'s
  // last copy; shape must be valid (checked_shape_bytes).
  static Tensor wrap(std::shared_ptr<uint8_t[]> owner, size_t offset_bytes, DType dtype, const Shape& shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t dim(int i) const { return shape_[static_cast<size_t>(i < 0 ? i + rank() : i)]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool defined() const { return storage_ != nullptr; }
  bool is_contiguous() const;

  // Raw pointer to element 0 of the view.
  void* raw() { return storage_.get() + offset_bytes_; }
  const void* raw() const { return storage_.get() + offset_bytes_; }
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(raw());
  }

  // Views (share storage).
  Result<Tensor> reshape(const Shape& shape) const;  // requires a contiguous view
  Result<Tensor> slice(int dim, int64_t begin, int64_t end) const;
  Result<Tensor> permute(const std::vector<int>& order) const;
  // The same storage seen from element `offset` (relative to this view's element 0) with
  // another shape and strides (elements; 0 = broadcast, negative = reversed). Unchecked:
  // the caller guarantees every addressed element lies inside this view's storage.
  Tensor with_layout(const Shape& shape, const Shape& strides, int64_t offset = 0) const {
    Tensor t = *this;
    t.offset_bytes_ = static_cast<size_t>(static_cast<int64_t>(offset_bytes_) + offset * static_cast<int64_t>(dtype_size(dtype_)));
    t.shape_ = shape;
    t.strides_ = strides;
    return t;
  }

  // A dense C-order tensor with the same values (this tensor itself if already dense).
  Tensor contiguous() const;
  Tensor clone() const;
  // Converts between float32, float16 and bfloat16 (round to nearest even) and between
  // any type and float32 for reading; other conversions are unsupported.
  Result<Tensor> to(DType dtype) const;

  // Element read as double, by flat C-order index of the view; for tests and printing.
  double get_as_double(int64_t flat_index) const;

 private:
  static Result<Tensor> allocate(DType dtype, const Shape& shape, bool zero);

  std::shared_ptr<uint8_t[]> storage_;
  size_t offset_bytes_ = 0;
  DType dtype_ = DType::f32;
  Shape shape_;
  Shape strides_;
};

// Dense C-order strides of a shape.
Shape contiguous_strides(const Shape& shape);

}  // namespace rkd
