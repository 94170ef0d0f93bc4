// Byte-matrix transposes for the layout changes around the int8 products (NCHW <-> channels
// last), with the int8 <-> uint8 offset folded in.
#pragma once

#include <cstdint>

namespace rkd {

// dst[j * dst_stride + i] = src[i * src_stride + j] ^ flip for i < rows, j < cols (flip 0x80
// maps int8 to int8 + 128 as uint8 and back). src and dst must not overlap. Highway 16 x 16
// blocks (four rounds of byte interleaves), overlapping at the edges; zero-padded copies of
// blocks only for a dimension below 16.
void transpose_bytes(const uint8_t* src, int64_t rows, int64_t cols, int64_t src_stride, uint8_t* dst, int64_t dst_stride, uint8_t flip = 0);

}  // namespace rkd
