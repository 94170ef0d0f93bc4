// Integer requantization: how an int32 accumulator becomes an int8/uint8 output.
//
// One explicit enum names every convention rkdeploy implements; each quantized op carries
// the one its source format uses (a model imported from TFLite: tflite_*, from ONNX:
// onnx_float), so that our int8 path reproduces that format's runtime bit for bit.
//
// Contracts (acc = the int32 accumulator: sum of (x - x_zp) * (w - w_zp) plus the int32 bias,
// real_multiplier M = s_x * s_w[c] / s_y > 0):
//
//  tflite_double_rounding  (TFLite before 2.20, gemmlowp; what Teflon-era models assume)
//    M is encoded once as (q, shift) by quantize_multiplier(): M = q * 2^(shift - 31),
//    q in [2^30, 2^31 - 1], shift in [-31, 30] (smaller M -> q = 0: output = zero point;
//    larger -> saturated to q = 2^31 - 1, shift = 30).
//    y = RDBPOT(SRDHM(acc * 2^max(shift, 0), q), max(-shift, 0)) + y_zp, clamped to [qmin, qmax]
//      SRDHM(a, b) = 2*a*b / 2^32 rounded to nearest, ties toward +infinity (gemmlowp's
//                    nudge of 1 - 2^30 for negative products makes -0.5 round to 0); the
//                    one overflow (a = b = INT32_MIN) saturates to INT32_MAX.
//      RDBPOT(x, e) = x / 2^e rounded half away from zero.
//    Two roundings: the product is rounded to 32 bits, then again by the right shift.
//    Input range: acc * 2^max(shift,0) must fit int32 (a left shift is only used for
//    M >= 1, where |acc| is small); callers keep acc within int32 (see conv below).
//
//  tflite_single_rounding  (TFLite >= 2.20 default, TFLITE_SINGLE_ROUNDING=1)
//    the same (q, shift); y = floor((acc * q + 2^(30 - shift)) / 2^(31 - shift)) + y_zp,
//    i.e. one rounding, half toward +infinity, computed exactly in int64 (|acc * q| < 2^62).
//
//  tflite_xnnpack  (TFLite's interpreter with its default XNNPACK delegate, as measured against
//    TFLite's WebAssembly build in npm @tensorflow/tfjs-tflite 0.0.1-alpha.10; per operator in
//    quant/int8_tflite.h): convolutions and matrix products requantize as onnx_float below
//    (XNNPACK's "fp32" requantization: float32 scale, round half to even); operators the
//    delegate leaves to TFLite's builtin kernels use tflite_single_rounding.
//
//  rknpu_out_cvt  (the RK3588 NPU's output converter, one OUT_CVT per output channel)
//    M is encoded by quantize_multiplier_15(): M = scale * 2^-shift, scale in [2^14, 2^15)
//    (15 significant bits, rounded to nearest), shift in [0, 63];
//    y = round_half_even(acc * scale / 2^shift) + y_zp, clamped (exact in int64: |acc| < 2^31,
//    scale < 2^15). What a per-tensor model lowered with Mesa's arithmetic computes on the
//    NPU (and each channel of the per-channel strategy), so the lowering's packing, zero
//    points, padding, bias folding and tiling are checked bit for bit against it. Convolutions
//    and matrix products use it; so do the operators the NPU runs as DPU-only tasks, in their
//    own NPU form (quant/int8.h: rknpu_add_plan for Add, rknpu_leaky_relu_plan for the
//    LeakyRelu tables); the other quantized operators of an ONNX graph keep onnx_float, those
//    of a TFLite graph tflite_double_rounding.
//
//  onnx_float  (ONNX Runtime's QLinearConv / QLinearMatMul / MLAS requantize)
//    the scale is float32: s = (float)(s_x * s_w[c]) / s_y evaluated in float32;
//    y = nearbyint(clamp((float)acc * s, qmin - y_zp, qmax - y_zp)) + y_zp, rounding half to
//    even. (float)acc is exact for |acc| <= 2^24 and rounds to nearest beyond, as ORT does.
//
// Why the int32 accumulator of a conv cannot overflow: with int8 inputs and weights each
// product (x - x_zp)(w - w_zp) is at most 255 * 255 = 65025 in magnitude; a kernel of K
// taps sums K of them, so |acc - bias| <= 65025 * K < 2^31 for K < 33025 (e.g. 3x3x3669
// channels). Kernels whose K exceeds that are refused (see conv contract in int8.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace rkd::quant {

enum class Requant { tflite_double_rounding, tflite_single_rounding, tflite_xnnpack, onnx_float, rknpu_out_cvt };

// True for the conventions whose convolution requantization is a float32 product rounded half
// to even (onnx_float, tflite_xnnpack).
inline bool float_requant(Requant r) { return r == Requant::onnx_float || r == Requant::tflite_xnnpack; }

const char* to_string(Requant r);
Result<Requant> parse_requant(const std::string& s);  // the names above
std::vector<std::string> requant_names();             // every convention's name, in enum order

struct QuantizedMultiplier {
  int32_t multiplier = 0;  // q, fixed point with 31 fractional bits
  int shift = 0;           // power of two: M = q * 2^(shift - 31)
};

// TFLite's encoding of a positive real multiplier (frexp, q = round_half_away(f * 2^31));
// 0 for M == 0; an Error for negative or non-finite M.
Result<QuantizedMultiplier> quantize_multiplier(double real_multiplier);

// The RK3588 OUT_CVT encoding of a positive multiplier (rknpu_out_cvt): m = scale * 2^-shift
// rounded to 15 significant bits, scale in [2^14, 2^15); an Error when m is not positive and
// finite or needs a shift outside [0, 63].
struct Multiplier15 {
  int32_t scale = 0;
  int32_t shift = 0;
};
Result<Multiplier15> quantize_multiplier_15(double m);

int32_t saturating_rounding_doubling_high_mul(int32_t a, int32_t b);
int32_t rounding_divide_by_pot(int32_t x, int exponent);  // exponent in [0, 31]
int32_t multiply_by_quantized_multiplier_double_rounding(int32_t x, QuantizedMultiplier m);
int32_t multiply_by_quantized_multiplier_single_rounding(int32_t x, QuantizedMultiplier m);

// Per-output-channel requantization of int32 accumulators to [qmin, qmax].
class Requantizer {
 public:
  // real_multipliers[c] = s_x * s_w[c] / s_y in double (TFLite conventions);
  // float_scales[c] = (float)(s_x * s_w[c]) / s_y in float32 (ONNX convention). Both are
  // computed by make(); one value for per-tensor.
  static Result<Requantizer> make(Requant convention, float x_scale, const std::vector<float>& w_scales, float y_scale, int32_t y_zero_point,
                                  int32_t qmin, int32_t qmax);
  int32_t apply(int32_t acc, size_t channel) const;
  // y[c * plane + p] = apply(acc[p * M + c] + bias[c]) for p in [0, P), c in [0, M): pixel-major
  // accumulators (bias may be null) into channel-major 8-bit planes (the value's low byte:
  // int8 or uint8 by [qmin, qmax]). The same values as apply(), faster.
  void apply_to_planes(const int32_t* acc, const int32_t* bias, int64_t P, int64_t M, uint8_t* y, int64_t plane) const;
  // The same with the per-channel constants prepared once (for a convolution run many times):
  // the bias and, for the float conventions, the bias and scales repeated over a few pixels so
  // that those pixels are one vectorised loop.
  struct PlanesPlan {
    int64_t M = 0;
    std::vector<int32_t> bias, bias_tile;
    std::vector<float> scale_tile;
  };
  PlanesPlan plan_planes(const int32_t* bias, int64_t M) const;
  void apply_to_planes(const PlanesPlan& plan, const int32_t* acc, int64_t P, uint8_t* y, int64_t plane) const;
  // y[p * M + c] = apply(acc[p * M + c] + bias[c]): pixel-major in and out (channels-last
  // outputs), the same values.
  void apply_to_rows(const PlanesPlan& plan, const int32_t* acc, int64_t P, uint8_t* y) const;
  Requant convention() const { return conv_; }
  size_t channels() const { return float_requant(conv_) ? scales_.size() : conv_ == Requant::rknpu_out_cvt ? m15_.size() : mults_.size(); }

 private:
  void requant_rows(const PlanesPlan& plan, const int32_t* acc, int64_t n, uint8_t* rows) const;
  Requant conv_ = Requant::onnx_float;
  std::vector<QuantizedMultiplier> mults_;
  std::vector<float> scales_;
  std::vector<Multiplier15> m15_;
  int32_t zp_ = 0, qmin_ = -128, qmax_ = 127;
};

}  // namespace rkd::quant
