// NC1HWC2 <-> channel planes for one 16-channel block (Highway, dynamic dispatch): 16 pixels x
// 16 channels at a time as a 16 x 16 byte transpose (core/transpose16-inl.h) on 128-bit
// vectors. Byte moves only: every target writes the same bytes (the lowering tests compare the
// layouts with the int8 reference).
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

#include "core/transpose16-inl.h"

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
