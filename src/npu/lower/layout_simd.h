// One 16-channel NC1HWC2 block <-> its 16 channel planes, pixels [i0, i1) (layout_simd.cc;
// internal to the lowering). Every byte is XORed with `flip`.
#pragma once

#include <cstdint>

namespace rkd::npu::lower::detail {

// dst[i * 16 + lane] = src[lane][i] ^ flip, or `fill` where src[lane] is nullptr.
void planes_to_block(const uint8_t* const* src, int64_t i0, int64_t i1, uint8_t fill, uint8_t flip, uint8_t* dst);
// dst[lane][i] = src[i * 16 + lane] ^ flip, for the lanes whose dst is not nullptr.
void block_to_planes(const uint8_t* src, int64_t i0, int64_t i1, uint8_t flip, uint8_t* const* dst);

}  // namespace rkd::npu::lower::detail
