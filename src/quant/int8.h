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
  std::vector<float> scales;         // one, or one per index of axis
  std::vector<int32_t> zero_points;  // one, or one per index of axis
  int axis = 1;                      // used when per-axis
};

Status quantize(const Tensor& x, const QuantParams& p, QuantizeRounding rounding, Tensor& out);
Status dequantize(const Tensor& q, const QuantParams& p, Tensor& out);

struct QConvParams {
  std::vector<int64_t> strides, dilations, pads;  // pads: begins then ends (2-D: 4 values)
  int64_t group = 1;
};

// x [N, C, H, W] int8/uint8; w [M, C/group, kh, kw] int8/uint8; bias [M] int32 or undefined
// tensor; out [N, M, Ho, Wo] preallocated with out's dtype giving the range.
Status qlinear_conv(const Tensor& x, int32_t x_zero_point, const Tensor& w, const std::vector<int32_t>& w_zero_points, const Tensor& bias,
                    const QConvParams& p, const Requantizer& rq, Tensor& out);

// bias: int32 [N] added to every accumulator of column n, or an undefined tensor (ONNX's
// QLinearMatMul has none; qdq-to-qlinear adds it for fully connected layers).
Status qlinear_matmul(const Tensor& a, int32_t a_zero_point, const Tensor& b, const std::vector<int32_t>& b_zero_points, const Requantizer& rq,
                      Tensor& out, const Tensor& bias = Tensor());

// TFLite's int8/uint8 Add and Sub (reference_ops / integer_ops): both inputs are brought to
// a common scale with 20 bits of headroom, summed in int32 and requantized:
//   m_i = s_i / (2 max(s_1, s_2)), m_out = 2 max(s_1, s_2) / (2^20 s_out)  (each encoded by
//   quantize_multiplier), v_i = M(((x_i - z_i) * 2^20), m_i), y = clamp(M(v_1 +- v_2, m_out) +
//   z_out, act_min, act_max), M = the convention's multiply_by_quantized_multiplier.
// Mul: y = clamp(M((x_1 - z_1)(x_2 - z_2), s_1 s_2 / s_out) + z_out, act_min, act_max);
// tflite_xnnpack (XNNPACK's vmul): y = nearbyint(clamp((float)((x_1 - z_1)(x_2 - z_2)) *
// f32(s_1 s_2 / s_out), act_min - z_out, act_max - z_out)) + z_out. Add/Sub under tflite_xnnpack
// are TFLite's form with single rounding (measured bit-exact on ties).
// b is a's shape or broadcasts to it one way (numpy rules, b's rank at most a's: a single
// element, one value per channel [1, C, 1, 1], ...); out has a's shape. convention: a
// tflite_* one, or onnx_float: for Add/Sub ONNX Runtime's QLinearAdd (MLAS on x86-64),
// y = clamp(nearbyint(fma(f32(s_a / s_out), x_a - z_a, +-f32(s_b / s_out) * (x_b - z_b))) + z_out):
// b's term is a float32 product, a's is fused into the sum (measured bit-exact against ONNX
// Runtime 1.30; a separately rounded product differs in about 1 of 10^5 outputs); for Mul ONNX
// Runtime's QLinearMul (MLAS's SSE2 kernel, the one x86-64 builds run):
// y = clamp(nearbyint(f32((x_a - z_a)(x_b - z_b)) * r + f32(z_out))) with r = f32(f32(s_a s_b) / s_out),
// the product and the sum rounded separately, half to even; or rknpu_out_cvt (rknpu_add_plan,
// rknpu_mul_plan: the NPU's arithmetic).
struct QBinaryParams {
  float a_scale = 1, b_scale = 1, out_scale = 1;
  int32_t a_zero_point = 0, b_zero_point = 0, out_zero_point = 0;
  int32_t act_min = -128, act_max = 127;  // the fused activation's range in output units
  Requant convention = Requant::tflite_double_rounding;
};
Status tflite_add(const Tensor& a, const Tensor& b, const QBinaryParams& p, bool subtract, Tensor& out);

// rknpu_out_cvt's Add: the RK3588 DPU's element-wise add of two int8 maps as npu/lower/eltwise.h
// lowers it (one DPU-only task). The operand with the larger scale (a on a tie) is the main
// input m, read by MRDMA and scaled in the BS stage by K = 2^14 (MUL operand, shift 0); the
// other is the EW operand e, read by ERDMA through the EW converter:
//   v = (x_m - z_m) K + round_half_up((x_e - z_e) S_e / 2^H_e)      S_e / 2^H_e = K s_e / s_m
//   y = clamp(round_half_even(v S_o / 2^H_o) + z_out, act_min, act_max)   S_o / 2^H_o = s_m / (K s_out)
// both multipliers by quantize_multiplier_15 (15 significant bits); exact in int64 (|v| < 2^23,
// S_o < 2^15). It differs from the real sum rounded once only near ties (the 15-bit
// multipliers); docs/npu.md states the bound against onnx_float, measured over all inputs.
// The same task computes Sub, Max and Min with the EW stage's other integer ALU algorithms
// (rknpu_binary_plan): v = max or min of the two terms, or for Sub the main term minus the
// EW term (EW_ALU_ALGO 4: main - ERDMA operand [HW]); a Sub's main input is always a (the
// minuend), with K = 2^14 halved until the EW multiplier K s_b / s_a fits 15 bits.
enum class BinaryAlu { add, sub, max, min };
const char* to_string(BinaryAlu a);
struct RknpuAdd {
  BinaryAlu alu = BinaryAlu::add;
  bool b_is_main = false;
  int32_t main_mul = 1 << 14;  // K
  Multiplier15 ew, out;
};
// b_broadcast: b is read one value per channel (EW_DATA_MODE 0), so it is the EW operand and a
// is main whatever the scales (K halved as for a Sub).
Result<RknpuAdd> rknpu_binary_plan(const QBinaryParams& p, BinaryAlu alu, bool b_broadcast = false);
inline Result<RknpuAdd> rknpu_add_plan(const QBinaryParams& p) { return rknpu_binary_plan(p, BinaryAlu::add); }
// v S_o / 2^H_o rounded, before the output zero point and the clamp; dm = x_m - z_m, de = x_e - z_e.
int64_t rknpu_add_value(const RknpuAdd& k, int32_t dm, int32_t de);

// ONNX QDQ Sub, Max and Min of two per-tensor quantized tensors (rkdeploy.QLinearSub /
// QLinearMax / QLinearMin from qdq-to-qlinear; b a's shape or broadcasting to it one way).
// onnx_float: what ONNX Runtime runs for DequantizeLinear x2 -> op -> QuantizeLinear (it has no
// QLinear form of them): each operand dequantized in float32 (dequantize()), the op in float32,
// then quantize() (division by the scale, half to even, saturation); act_min / act_max clamp
// after. rknpu_out_cvt: the NPU's task (rknpu_binary_plan, rknpu_add_value). Others unsupported.
Status qdq_binary(const Tensor& a, const Tensor& b, const QBinaryParams& p, BinaryAlu alu, Tensor& out);

// rknpu_out_cvt's LeakyRelu (0 < alpha < 1) as npu/lower/eltwise.h lowers it: one DPU-only task
// reading x twice, by MRDMA (BS: -z_x, MUL K = 2^14) and by ERDMA (the EW converter: -z_x,
// S_a / 2^H_a = K alpha), the EW stage taking the maximum:
//   v = max((x - z_x) K, round_half_up((x - z_x) S_a / 2^H_a))
//   y = clamp(round_half_even(v S_o / 2^H_o) + z_y, qmin, qmax)     S_o / 2^H_o = s_x / (K s_y)
struct RknpuLeakyRelu {
  int32_t main_mul = 1 << 14;  // K
  Multiplier15 alpha, out;
};
Result<RknpuLeakyRelu> rknpu_leaky_relu_plan(double x_scale, double y_scale, double alpha);
// v S_o / 2^H_o rounded (before z_y and the clamp), dx = x - z_x.
int64_t rknpu_leaky_relu_value(const RknpuLeakyRelu& k, int32_t dx);
// The 256-entry table of codes (x's codes in increasing order, i.e. uint8 0..255 or int8
// -128..127) of that definition, of dtype t.
Result<Tensor> rknpu_leaky_relu_table(DType t, double x_scale, int32_t x_zero_point, double y_scale, int32_t y_zero_point, double alpha);
Status tflite_mul(const Tensor& a, const Tensor& b, const QBinaryParams& p, Tensor& out);

// rknpu_out_cvt's Mul: the DPU's element-wise multiply as npu/lower/eltwise.h lowers it (one
// DPU-only task): a read by MRDMA, BS adding -z_a; b read by ERDMA (per element, or one value
// per channel: EW_DATA_MODE 0) through the EW converter at scale 1 (-z_b); the EW stage's
// integer MUL (EW_OP_TYPE 1) and OUT_CVT:
//   y = clamp(round_half_even((x_a - z_a)(x_b - z_b) S_o / 2^H_o) + z_out, act_min, act_max)
// with S_o / 2^H_o = s_a s_b / s_out by quantize_multiplier_15; exact in int64 (|v| <= 2^16).
struct RknpuMul {
  Multiplier15 out;
};
Result<RknpuMul> rknpu_mul_plan(const QBinaryParams& p);
// v S_o / 2^H_o rounded, before the output zero point and the clamp; da = x_a - z_a, db = x_b - z_b.
int64_t rknpu_mul_value(const RknpuMul& k, int32_t da, int32_t db);

// TFLite's int8/uint8 AveragePool (NCHW here): the sum over the window's in-bounds elements
// divided by their count, rounded half away from zero, clamped to [act_min, act_max].
// MaxPool: the maximum over in-bounds elements, clamped. Same scale and zero point in and out.
struct QPoolParams {
  std::vector<int64_t> kernel, strides, pads;  // 2-D; pads: top, left, bottom, right
  int32_t act_min = -128, act_max = 127;
};
Status tflite_average_pool(const Tensor& x, const QPoolParams& p, Tensor& out);
Status tflite_max_pool(const Tensor& x, const QPoolParams& p, Tensor& out);

// TFLite's quantized Concatenation: an input whose scale and zero point equal the output's
// is copied; any other is requantized element by element in float32 as
//   y = round_half_away(x * (s_i * (1 / s_out)) + (-z_i * (s_i * (1 / s_out)))) + z_out,
// clamped to the type's range, each multiply and add rounded separately (this build never
// contracts them into a fused multiply-add; a TFLite build that does can differ at ties).
struct QTensorParams {
  float scale = 1;
  int32_t zero_point = 0;
};
Status tflite_concat(const std::vector<const Tensor*>& inputs, const std::vector<QTensorParams>& in_params, const QTensorParams& out_params, int axis,
                     Tensor& out);

// The representable range of an int8 or uint8 tensor.
Result<std::pair<int32_t, int32_t>> quantized_range(DType t);

}  // namespace rkd::quant
