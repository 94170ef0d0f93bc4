#include "core/tensor.h"

#include <sys/mman.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>

namespace rkd {

Result<uint64_t> checked_numel(const Shape& shape, const std::string& what) {
  // The product of the non-zero dimensions must fit too: strides are computed from it even
  // when another dimension is zero.
  uint64_t n = 1, strides_product = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return invalid(what + ": dimension " + std::to_string(i) + " is negative (" + std::to_string(shape[i]) + ")");
    }
    const uint64_t d = static_cast<uint64_t>(shape[i]);
    const uint64_t nz = std::max<uint64_t>(d, 1);
    if (strides_product > static_cast<uint64_t>(INT64_MAX) / nz) {
      return invalid(what + ": shape " + shape_to_string(shape) + " has too many elements");
    }
    strides_product *= nz;
    n *= d;
  }
  return n;
}

Result<uint64_t> checked_shape_bytes(const Shape& shape, DType dtype, const std::string& what) {
  RKD_ASSIGN(uint64_t n, checked_numel(shape, what));
  const uint64_t es = dtype_size(dtype);
  if (n > kMaxTensorBytes / es) {
    return invalid(what + ": shape " + shape_to_string(shape) + " of " + dtype_name(dtype) + " exceeds the " + std::to_string(kMaxTensorBytes >> 30) +
                   " GiB tensor limit");
  }
  return n * es;
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

Result<Tensor> Tensor::zeros(DType dtype, const Shape& shape) { return allocate(dtype, shape, true); }

Result<Tensor> Tensor::uninitialized(DType dtype, const Shape& shape) { return allocate(dtype, shape, false); }

Result<Tensor> Tensor::allocate(DType dtype, const Shape& shape, bool zero) {
  RKD_ASSIGN(uint64_t bytes, checked_shape_bytes(shape, dtype, "tensor"));
  Tensor t;
  // Allocate at least one byte so that raw() is valid for empty tensors, plus 64 bytes of
  // slack after the end; 64-byte alignment for SIMD loads. Tensors of 2 MiB and more are
  // 2 MiB-aligned and advised into transparent huge pages: the sampling kernels read
  // feature maps at random positions, where 4 KiB pages cost a TLB miss per access.
  constexpr size_t kHuge = size_t{2} << 20;
  const bool huge = bytes >= kHuge;
  const size_t align = huge ? kHuge : 64;
  const size_t alloc = static_cast<size_t>((bytes + 64 + align - 1) / align * align);
  uint8_t* p = static_cast<uint8_t*>(std::aligned_alloc(align, alloc));
  if (p == nullptr) return io_error("out of memory allocating " + std::to_string(bytes) + " bytes");
  if (huge) ::madvise(p, alloc, MADV_HUGEPAGE);
  if (zero) {
    std::memset(p, 0, alloc);
  } else {
    std::memset(p + bytes, 0, alloc - static_cast<size_t>(bytes));  // the slack stays defined
  }
  t.storage_ = std::shared_ptr<uint8_t[]>(p, [](uint8_t* q) { std::free(q); });
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::empty(DType dtype, const Shape& shape) {
  auto r = zeros(dtype, shape);
  // The shape was validated by the caller: what can still fail is the allocation itself, which
  // the command line reports as "out of memory" (exit 1).
  if (!r.ok()) throw std::bad_alloc();
  return std::move(r).value();
}

Tensor Tensor::wrap(std::shared_ptr<uint8_t[]> owner, size_t offset_bytes, DType dtype, const Shape& shape) {
  Tensor t;
  t.storage_ = std::move(owner);
  t.offset_bytes_ = offset_bytes;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Tensor Tensor::from_floats(const Shape& shape, std::span<const float> values) {
  Tensor t = empty(DType::f32, shape);
  if (static_cast<size_t>(t.numel()) != values.size()) std::abort();
  std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

bool Tensor::is_contiguous() const {
  int64_t s = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != s) return false;
    s *= shape_[i];
  }
  return true;
}

Result<Tensor> Tensor::reshape(const Shape& shape) const {
  RKD_ASSIGN(uint64_t n, checked_numel(shape, "reshape"));
  if (static_cast<int64_t>(n) != numel()) {
    return invalid("reshape: cannot view " + shape_to_string(shape_) + " as " + shape_to_string(shape));
  }
  if (!is_contiguous()) return invalid("reshape: the tensor is not contiguous");
  Tensor t = *this;
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  return t;
}

Result<Tensor> Tensor::slice(int d, int64_t begin, int64_t end) const {
  if (d < 0 || d >= rank()) return invalid("slice: dimension " + std::to_string(d) + " out of range");
  if (begin < 0 || end < begin || end > shape_[d]) {
    return invalid("slice: range [" + std::to_string(begin) + ", " + std::to_string(end) + ") out of bounds for dimension " + std::to_string(d) +
                   " of size " + std::to_string(shape_[d]));
  }
  Tensor t = *this;
  t.offset_bytes_ += static_cast<size_t>(begin * strides_[d]) * dtype_size(dtype_);
  t.shape_[d] = end - begin;
  return t;
}

Result<Tensor> Tensor::permute(const std::vector<int>& order) const {
  if (static_cast<int>(order.size()) != rank()) return invalid("permute: order has the wrong rank");
  std::vector<bool> seen(order.size(), false);
  Tensor t = *this;
  for (size_t i = 0; i < order.size(); ++i) {
    const int o = order[i];
    if (o < 0 || o >= rank() || seen[o]) return invalid("permute: order is not a permutation");
    seen[o] = true;
    t.shape_[i] = shape_[o];
    t.strides_[i] = strides_[o];
  }
  return t;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  Tensor out = empty(dtype_, shape_);
  const size_t es = dtype_size(dtype_);
  const int64_t n = numel();
  std::vector<int64_t> idx(shape_.size(), 0);
  const uint8_t* src = static_cast<const uint8_t*>(raw());
  uint8_t* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * strides_[k];
    std::memcpy(dst + static_cast<size_t>(i) * es, src + static_cast<size_t>(off) * es, es);
    for (size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < shape_[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

Tensor Tensor::clone() const {
  Tensor c = contiguous();
  if (c.storage_ != storage_) return c;
  Tensor out = empty(dtype_, shape_);
  std::memcpy(out.raw(), c.raw(), c.nbytes());
  return out;
}

double Tensor::get_as_double(int64_t flat) const {
  int64_t off = 0;
  for (size_t k = shape_.size(); k-- > 0;) {
    const int64_t i = flat % shape_[k];
    flat /= shape_[k];
    off += i * strides_[k];
  }
  const uint8_t* p = static_cast<const uint8_t*>(raw()) + static_cast<size_t>(off) * dtype_size(dtype_);
  switch (dtype_) {
    case DType::f32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::f16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return f16_to_f32(v);
    }
    case DType::bf16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return bf16_to_f32(v);
    }
    case DType::i8: return static_cast<int8_t>(*p);
    case DType::u8: return *p;
    case DType::i16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::i32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::i64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case DType::b8: return *p != 0;
  }
  return 0;
}

Result<Tensor> Tensor::to(DType target) const {
  if (target == dtype_) return *this;
  const Tensor src = contiguous();
  const int64_t n = src.numel();
  Tensor out = empty(target, shape_);
  if (target == DType::f32) {
    float* o = out.data<float>();
    if (dtype_ == DType::f16) {
      const uint16_t* s = src.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) o[i] = f16_to_f32(s[i]);
    } else if (dtype_ == DType::bf16) {
      const uint16_t* s = src.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) o[i] = bf16_to_f32(s[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(src.get_as_double(i));
    }
    return out;
  }
  if (dtype_ == DType::f32 && (target == DType::f16 || target == DType::bf16)) {
    const float* s = src.data<float>();
    uint16_t* o = out.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) o[i] = target == DType::f16 ? f32_to_f16(s[i]) : f32_to_bf16(s[i]);
    return out;
  }
  if (dtype_is_float(dtype_) && dtype_is_float(target)) {
    RKD_ASSIGN(Tensor f, to(DType::f32));
    return f.to(target);
  }
  return unsupported(std::string("conversion from ") + dtype_name(dtype_) + " to " + dtype_name(target));
}

}  // namespace rkd
