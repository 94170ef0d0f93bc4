// The exact int8 products of tensor_ops on Highway (private to src/kernels; the kernels'
// contracts are in tensor_ops_int8.cc, the accumulators' in tensor_ops.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/tensor_ops.h"

namespace rkd::ops {

namespace int8 {
// K is blocked by this many int16 pairs (256 taps): one panel's block, NR * 256 * 2 bytes
// (24 KB at NR = 48), stays in L1 while a tile's rows stream past it.
constexpr size_t kKBlockPairs = 128;
constexpr size_t kKBlockQuads = kKBlockPairs / 2;  // the same 256 taps for the dot-product kernel
// Output pixels (or matrix rows) per task: a multiple of every target's micro-kernel rows.
constexpr size_t kTileRows = 48;
// The most taps one int32 sum may take: K * 255 * 128 < 2^31.
constexpr int64_t kMaxTaps = 65793;

// Dispatched kernels (the target HWY_DYNAMIC_DISPATCH picks under the ISA ceiling).
size_t panel_width();         // NR: output channels per packed weight panel
size_t tile_rows_multiple();  // MR: gemm_tile's rows must be a multiple of it
// ct [rows, panels * NR] = init + a [rows, kp] x b; b: panels of [kp/2][NR][2] int16, aligned;
// init aligned; ct rows of ldc >= panels * NR int32 (any alignment); kp even; rows a multiple
// of MR (rows past the valid ones are computed too).
void gemm_tile(const int16_t* a, size_t rows, size_t kp, const int16_t* b, size_t panels, const int32_t* init, int32_t* ct, size_t ldc);
void widen(const uint8_t* src, size_t n, int16_t* dst);
void widen(const int8_t* src, size_t n, int16_t* dst);
// The dot-product kernel (tensor_ops_int8_dotprod.cc): gemm_tile's contract on int8 quads,
// a: rows of kp int8 (kp a multiple of 4), b: panels of [kp/4][kDotprodPanel][4] int8, rows a
// multiple of kDotprodRows. dotprod() says whether the products use it: on arm64 CPUs with
// the DotProd extension, unless set_dotprod_for_test chose (-1: the hardware decides; 0: off;
// 1: on, a plain loop where the CPU has no sdot).
constexpr size_t kDotprodPanel = 16, kDotprodRows = 4;
bool dotprod();
void set_dotprod_for_test(int mode);
void gemm_tile_dotprod(const int8_t* a, size_t rows, size_t kp, const int8_t* b, size_t panels, const int32_t* init, int32_t* ct, size_t ldc);
size_t depthwise_channel_multiple();
void depthwise_row(const uint8_t* x, size_t pixel_step, size_t count, const int64_t* tap_offset, size_t taps, const int16_t* w, const int32_t* init,
                   size_t C, size_t Cp, int32_t* out);
}  // namespace int8

// int8/uint8 x, NCHW (or NHWC with channels_last) -> the interior of a padded NHWC uint8
// buffer [N, hp, wp, C] at row pt and column pl (int8 stored + 128): the layout both engines'
// convolutions read.
void fill_padded_nhwc(const Tensor& x, uint8_t* padded, int64_t hp, int64_t wp, int64_t pt, int64_t pl, bool channels_last = false);

// The operand checks both engines' convolutions make (the contract in tensor_ops.h).
Status check_qconv_operands(const Shape& x_shape, DType x_type, const Tensor& weights, const Shape& out_shape);
Status check_qmatmul_operands(DType a_type, const Tensor& b);

Result<std::unique_ptr<QConvAccumulator>> make_qconv_accumulator_highway(const Shape& x_shape, DType x_type, int32_t x_zero_point,
                                                                         const Tensor& weights, const ConvParams& p, const Shape& out_shape);
Result<std::unique_ptr<QMatMulAccumulator>> make_qmatmul_accumulator_highway(int64_t rows, DType a_type, int32_t a_zero_point, const Tensor& b);
}  // namespace rkd::ops
