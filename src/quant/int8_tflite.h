// TFLite's int8/uint8 kernels for activations, Softmax, Mean and bilinear Resize (reference
// semantics, readable, no fast path). Each contract names the TFLite kernel it reproduces
// (tensorflow/lite/kernels, the default "generic optimized" kernel where it differs from the
// reference one) and is checked against TensorFlow Lite itself by tests/cli/test_tflite_peer.sh.
//
// Quantized tensors are affine: real = scale * (q - zero_point), per tensor. Outputs are
// preallocated with the output's type (int8 or uint8) and the input's shape (Softmax, the
// activations), the reduced shape (Mean) or the resized shape (Resize).
//
//  - lut_activation(): TFLite's LOGISTIC and TANH (activations.cc, LUTPopulate): a 256-entry
//    table, entry q = clamp((int)(round_half_away(f(s_in * (q - z_in)) * (1 / s_out)) + z_out)),
//    every operation in float32, f(v) = 1 / (1 + expf(-v)) or tanhf(v). silu (x * sigmoid(x),
//    f(v) = v / (1 + expf(-v))) uses the same table form; TFLite has no SiLU operator (its
//    converter emits LOGISTIC then MUL, which run as those two kernels).
//  - tflite_hard_swish(): TFLite's HARD_SWISH (reference_ops::HardSwish): 16-bit fixed point.
//    x' = (x - z_in) * 2^7 on the "high-resolution input scale" s_in / 128; the output
//    multiplier s_in / (128 s_out) and the "relu-ish" multiplier s_in / (128 * 3 / 32768), each
//    computed in float32, encoded by quantize_multiplier() and rounded to 16 bits
//    ((q + 2^15) >> 16, saturating); relu-ish = x' rescaled to [-3, 3] -> [-32768, 32767]
//    (saturating left shift, SRDHM16, rounding right shift), mapped to [0, 32767];
//    y = RDBPOT(SDHM16(relu-ish, SRDHM16(x', m_out)), -e_out) + z_out, clamped. SRDHM16 rounds
//    to nearest, SDHM16 truncates toward zero (as TFLite, to cancel SRDHM's bias). Requires
//    s_in / (128 s_out) < 1 (TFLite refuses the model otherwise).
//  - tflite_leaky_relu(): TFLite's LEAKY_RELU (reference_ops::QuantizeLeakyRelu):
//    y = z_out + M(x - z_in, m) with m = s_in / s_out for x >= z_in and
//    m = (float)(s_in * alpha) / s_out (float32 product and quotient) below, M = the
//    convention's multiply_by_quantized_multiplier; clamped to the type.
//  - tflite_softmax(): TFLite's SOFTMAX on x86 and WebAssembly (optimized_ops::Softmax with
//    PopulateSoftmaxLookupTable; aarch64 builds use a different uint16 table): over the last
//    axis, e(q) = expf((-s_in * beta) * (float)(max - q)) from a table, sum in float32 in index
//    order, p = e(q) * (1 / (sum * s_out)); int8: y = round_half_away(p) + z_out,
//    uint8: y = (int)(p + 0.5f) (TFLite ignores the zero point, which must be 0); clamped.
//  - tflite_mean(): TFLite's MEAN (reference_ops::QuantizedMeanOrSum, TFLite >= 2.10):
//    sum over the axes in int32, n = number of summed elements, (m, e) = quantize_multiplier(
//    s_in / s_out), k = min(floor(log2 n), 32, 31 + e), m' = (m * 2^k) / n (int64, truncating),
//    y = M(sum - z_in * n, (m', e - k)) + z_out, clamped.
//  - tflite_resize_bilinear(): TFLite's RESIZE_BILINEAR for int8/uint8 (ResizeBilinearInteger),
//    on NCHW planes: 10-bit fixed-point source coordinates, scale = (2^10 in + out / 2) / out
//    (align_corners: (2^10 (in - 1) + (out - 1) / 2) / (out - 1)), half-pixel centres
//    y_src = y * scale + scale / 2 - 2^9; lower = max(y_src / 2^10, 0), upper = min(
//    ceil(y_src / 2^10), in - 1) (C++ division); the four raw values weighted in int64 with
//    weights summing to 2^20, then divided by 2^20: double rounding -> half away from zero
//    (truncating division of sum +- 2^19), single rounding -> floor((sum + 2^19) / 2^20).
//    The zero point needs no correction (weights sum to one); input and output share it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "quant/int8.h"
#include "quant/requant.h"

namespace rkd::quant {

enum class LutFunction { logistic, tanh, silu };

// The 256-entry table of lut_activation for an int8 (index q + 128) or uint8 (index q) input.
Result<std::vector<int32_t>> tflite_lut(LutFunction f, QTensorParams in, QTensorParams out, DType in_type, DType out_type);
Status lut_activation(const Tensor& x, LutFunction f, QTensorParams in, QTensorParams out, Tensor& y);

Status tflite_hard_swish(const Tensor& x, QTensorParams in, QTensorParams out, Tensor& y);
Status tflite_leaky_relu(const Tensor& x, float alpha, QTensorParams in, QTensorParams out, Requant convention, Tensor& y);
Status tflite_softmax(const Tensor& x, float beta, QTensorParams in, QTensorParams out, Tensor& y);

// axes: distinct, in [0, rank); y holds the kept dimensions in order (with or without the
// reduced ones as size 1: only its element count and order are used).
Status tflite_mean(const Tensor& x, const std::vector<int64_t>& axes, QTensorParams in, QTensorParams out, Requant convention, Tensor& y);

// x [N, C, H, W] -> y [N, C, OH, OW], same type, scale and zero point.
Status tflite_resize_bilinear(const Tensor& x, bool align_corners, bool half_pixel_centers, Requant convention, Tensor& y);

}  // namespace rkd::quant
