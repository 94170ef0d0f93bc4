// transpose_bytes (core/transpose.h): dynamic dispatch over Highway's 128-bit targets (the
// 16 x 16 block is one register per row on every one of them).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/transpose.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "core/isa.h"
#include "core/transpose.h"

#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace rkd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#include "core/transpose16-inl.h"

#if HWY_TARGET == HWY_SCALAR
void TransposeBytes(const uint8_t* src, int64_t rows, int64_t cols, int64_t ss, uint8_t* dst, int64_t ds, uint8_t flip) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) dst[j * ds + i] = src[i * ss + j] ^ flip;
}
#else
// One full 16 x 16 block.
HWY_INLINE void Block16(const uint8_t* src, int64_t ss, uint8_t* dst, int64_t ds, uint8_t flip) {
  const hn::Full128<uint8_t> d;
  const auto f = hn::Set(d, flip);
  hn::Vec128<uint8_t> r[16];
  for (int i = 0; i < 16; ++i) r[i] = hn::Xor(hn::LoadU(d, src + i * ss), f);
  Transpose16(r);
  for (int j = 0; j < 16; ++j) hn::StoreU(r[j], d, dst + j * ds);
}

// A block with fewer than 16 rows or columns, through zero-padded 16 x 16 copies.
HWY_NOINLINE void PartialBlock(const uint8_t* src, int64_t rows, int64_t cols, int64_t ss, uint8_t* dst, int64_t ds, uint8_t flip) {
  HWY_ALIGN uint8_t in[16 * 16] = {};
  HWY_ALIGN uint8_t out[16 * 16];
  for (int64_t i = 0; i < rows; ++i) std::memcpy(in + 16 * i, src + i * ss, static_cast<size_t>(cols));
  Block16(in, 16, out, 16, flip);
  for (int64_t j = 0; j < cols; ++j) std::memcpy(dst + j * ds, out + 16 * j, static_cast<size_t>(rows));
}

// A dimension of 16 or more is covered by full blocks: its last block starts 16 before its
// end and overlaps the one before (those bytes are written twice, with the same values). Only
// a dimension below 16 goes through PartialBlock.
void TransposeBytes(const uint8_t* src, int64_t rows, int64_t cols, int64_t ss, uint8_t* dst, int64_t ds, uint8_t flip) {
  for (int64_t i = 0; i < rows; i += 16) {
    const int64_t i0 = rows >= 16 ? (i + 16 <= rows ? i : rows - 16) : 0, ni = rows < 16 ? rows : 16;
    for (int64_t j = 0; j < cols; j += 16) {
      const int64_t j0 = cols >= 16 ? (j + 16 <= cols ? j : cols - 16) : 0, nj = cols < 16 ? cols : 16;
      if (ni == 16 && nj == 16) Block16(src + i0 * ss + j0, ss, dst + j0 * ds + i0, ds, flip);
      else PartialBlock(src + i0 * ss + j0, ni, nj, ss, dst + j0 * ds + i0, ds, flip);
    }
  }
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace rkd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rkd {
RKD_HIGHWAY_HONOURS_ISA_CEILING;
HWY_EXPORT(TransposeBytes);
void transpose_bytes(const uint8_t* src, int64_t rows, int64_t cols, int64_t src_stride, uint8_t* dst, int64_t dst_stride, uint8_t flip) {
  HWY_DYNAMIC_DISPATCH(TransposeBytes)(src, rows, cols, src_stride, dst, dst_stride, flip);
}
}  // namespace rkd
#endif
