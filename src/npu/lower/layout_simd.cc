// NC1HWC2 <-> channel planes for one 16-channel block (Highway, dynamic dispatch): 16
// pixels x 16 channels at a time as a 16 x 16 byte transpose in four rounds of interleaves
// (8-, 16-, 32-, 64-bit units) on 128-bit vectors. Byte moves only: every target writes
// the same bytes (the lowering tests compare the layouts with the int8 reference).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "npu/lower/layout_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "core/isa.h"

#include "npu/lower/layout_simd.h"

HWY_BEFORE_NAMESPACE();
namespace rkd::npu::lower::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
// v[i] (16 bytes: row i) becomes row i of the transpose (byte j = v[j] byte i).
HWY_INLINE void Transpose16(hn::Vec128<uint8_t>* v) {
  const hn::Full128<uint8_t> d8;
  const hn::Full128<uint16_t> d16;
  const hn::Full128<uint32_t> d32;
  const hn::Full128<uint64_t> d64;
  hn::Vec128<uint8_t> t[16], s[16], u[16];
  // Rows 2i, 2i + 1 -> 16-bit units (row pair i) for columns 0-7 (t[i]) and 8-15 (t[8 + i]).
  for (int i = 0; i < 8; ++i) {
    t[i] = hn::InterleaveLower(v[2 * i], v[2 * i + 1]);
    t[8 + i] = hn::InterleaveUpper(d8, v[2 * i], v[2 * i + 1]);
  }
  // Row pairs 2j, 2j + 1 -> 32-bit units (row quad j), columns h * 8 + 0-3 and h * 8 + 4-7.
  for (int h = 0; h < 2; ++h)
    for (int j = 0; j < 4; ++j) {
      const auto a = hn::BitCast(d16, t[h * 8 + 2 * j]), b = hn::BitCast(d16, t[h * 8 + 2 * j + 1]);
      s[h * 8 + j] = hn::BitCast(d8, hn::InterleaveLower(a, b));
      s[h * 8 + 4 + j] = hn::BitCast(d8, hn::InterleaveUpper(d16, a, b));
    }
  // Quads 2k, 2k + 1 -> 64-bit units (row octet k), columns 4g + 0-1 and 4g + 2-3.
  for (int g = 0; g < 4; ++g)
    for (int k = 0; k < 2; ++k) {
      const int base = (g / 2) * 8 + (g % 2) * 4;
      const auto a = hn::BitCast(d32, s[base + 2 * k]), b = hn::BitCast(d32, s[base + 2 * k + 1]);
      u[g * 4 + k * 2] = hn::BitCast(d8, hn::InterleaveLower(a, b));
      u[g * 4 + k * 2 + 1] = hn::BitCast(d8, hn::InterleaveUpper(d32, a, b));
    }
  // Octets 0 and 1 -> whole columns 4g + 2m, 4g + 2m + 1.
  for (int g = 0; g < 4; ++g)
    for (int m = 0; m < 2; ++m) {
      const auto a = hn::BitCast(d64, u[g * 4 + m]), b = hn::BitCast(d64, u[g * 4 + 2 + m]);
      v[4 * g + 2 * m] = hn::BitCast(d8, hn::InterleaveLower(a, b));
      v[4 * g + 2 * m + 1] = hn::BitCast(d8, hn::InterleaveUpper(d64, a, b));
    }
}
#endif

void PlanesToBlock(const uint8_t* const* src, int64_t i0, int64_t i1, uint8_t fill, uint8_t flip, uint8_t* dst) {
  int64_t i = i0;
#if HWY_TARGET != HWY_SCALAR
  const hn::Full128<uint8_t> d8;
  const auto vflip = hn::Set(d8, flip), vfill = hn::Set(d8, fill);
  for (; i + 16 <= i1; i += 16) {
    hn::Vec128<uint8_t> v[16];
    for (int lane = 0; lane < 16; ++lane) v[lane] = src[lane] ? hn::Xor(hn::LoadU(d8, src[lane] + i), vflip) : vfill;
    Transpose16(v);
    for (int p = 0; p < 16; ++p) hn::StoreU(v[p], d8, dst + (i + p) * 16);
  }
#endif
  for (; i < i1; ++i)
    for (int lane = 0; lane < 16; ++lane) dst[i * 16 + lane] = src[lane] ? static_cast<uint8_t>(src[lane][i] ^ flip) : fill;
}

void BlockToPlanes(const uint8_t* src, int64_t i0, int64_t i1, uint8_t flip, uint8_t* const* dst) {
  int64_t i = i0;
#if HWY_TARGET != HWY_SCALAR
  const hn::Full128<uint8_t> d8;
  const auto vflip = hn::Set(d8, flip);
  for (; i + 16 <= i1; i += 16) {
    hn::Vec128<uint8_t> v[16];
    for (int p = 0; p < 16; ++p) v[p] = hn::LoadU(d8, src + (i + p) * 16);
    Transpose16(v);
    for (int lane = 0; lane < 16; ++lane) {
      if (dst[lane]) hn::StoreU(hn::Xor(v[lane], vflip), d8, dst[lane] + i);
    }
  }
#endif
  for (; i < i1; ++i)
    for (int lane = 0; lane < 16; ++lane) {
      if (dst[lane]) dst[lane][i] = static_cast<uint8_t>(src[i * 16 + lane] ^ flip);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace rkd::npu::lower::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rkd::npu::lower::detail {

RKD_HIGHWAY_HONOURS_ISA_CEILING;

HWY_EXPORT(PlanesToBlock);
HWY_EXPORT(BlockToPlanes);

void planes_to_block(const uint8_t* const* src, int64_t i0, int64_t i1, uint8_t fill, uint8_t flip, uint8_t* dst) {
  HWY_DYNAMIC_DISPATCH(PlanesToBlock)(src, i0, i1, fill, flip, dst);
}
void block_to_planes(const uint8_t* src, int64_t i0, int64_t i1, uint8_t flip, uint8_t* const* dst) {
  HWY_DYNAMIC_DISPATCH(BlockToPlanes)(src, i0, i1, flip, dst);
}

}  // namespace rkd::npu::lower::detail
#endif
