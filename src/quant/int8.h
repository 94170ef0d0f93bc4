// int8 reference semantics (readable, independent of any fast path): quantize,
// dequantize, and the integer convolution and matrix product of ONNX's QLinear ops.
//
// Contracts:
//  - Quantized tensors are int8 or uint8, affine: real = scale * (q - zero_point); scales are
//    float32, per tensor (one value) or per axis (one value per index of `axis`).
//  - quantize(): q = clamp(round(x / scale) + zero_point, qmin, qmax) with the division in
//    float32; rounding half to even for QuantizeRounding::half_to_even (ONNX QuantizeLinear,
//    ONNX Runtime) or half away from zero for half_away (TFLite's Quantize). NaN -> zero point.
//  - dequantize(): x = (float)(q - zero_point) * scale, float32.
//  - qlinear_conv(): NCHW, groups, dilations, strides, explicit pads (ONNX QLinearConv).
//    acc[c] = bias[c] + sum (x - x_zp) * (w - w_zp[c]) in int32, then the Requantizer of
//    requant.h. The kernel taps per output K = C/group * prod(kernel) must keep the int32
//    accumulator from overflowing: K * 255 * 255 + |bias| < 2^31, checked (invalid otherwise).
//  - qlinear_matmul(): [.., M, K] x [.., K, N] with equal batch dims or a 2-D b; b may be
//    per-tensor or per-column (N) quantized.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "quant/requant.h"

namespace rkd::quant {

enum class QuantizeRounding { half_to_even, half_away };

struct QuantParams {
  std::vector<float> scales;          // one, or one per index of axis
  std::vector<int32_t> zero_points;   // one, or one per index of axis
  int axis = 1;                       // used when per-axis
};

Status quantize(const Tensor& x, const QuantParams& p, QuantizeRounding rounding, Tensor& out);
Status dequantize(const Tensor& q, const QuantParams& p, Tensor& out);

struct QConvParams {
  std::vector<int64_t> strides, dilations, pads;  // pads: begins then ends (2-D: 4 values)
  int64_t group = 1;
};

// x [N, C, H, W] int8/uint8; w [M, C/group, kh, kw] int8/uint8; bias [M] int32 or undefined
// tensor; out [N, M, Ho, Wo] preallocated with out's dtype giving the range.
Status qlinear_conv(const Tensor& x, int32_t x_zero_point, const Tensor& w, const std::vector<int32_t>& w_zero_points,
                    const Tensor& bias, const QConvParams& p, const Requantizer& rq, Tensor& out);

Status qlinear_matmul(const Tensor& a, int32_t a_zero_point, const Tensor& b, const std::vector<int32_t>& b_zero_points,
                      const Requantizer& rq, Tensor& out);

// The representable range of an int8 or uint8 tensor.
Result<std::pair<int32_t, int32_t>> quantized_range(DType t);

}  // namespace rkd::quant
