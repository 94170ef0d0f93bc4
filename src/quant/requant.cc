#include "quant/requant.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/isa.h"
#include "core/transpose.h"

namespace rkd::quant {

const char* to_string(Requant r) {
  switch (r) {
    case Requant::tflite_double_rounding: return "tflite_double_rounding";
    case Requant::tflite_single_rounding: return "tflite_single_rounding";
    case Requant::tflite_xnnpack: return "tflite_xnnpack";
    case Requant::onnx_float: return "onnx_float";
    case Requant::rknpu_out_cvt: return "rknpu_out_cvt";
  }
  return "?";
}

namespace {
constexpr Requant kAll[] = {Requant::tflite_double_rounding, Requant::tflite_single_rounding, Requant::tflite_xnnpack, Requant::onnx_float,
                            Requant::rknpu_out_cvt};
}  // namespace

std::vector<std::string> requant_names() {
  std::vector<std::string> v;
  for (Requant r : kAll) v.emplace_back(to_string(r));
  return v;
}

Result<Requant> parse_requant(const std::string& s) {
  std::string names;
  for (Requant r : kAll) {
    if (s == to_string(r)) return r;
    names += names.empty() ? "" : ", ";
    names += to_string(r);
  }
  return invalid("requantization '" + s + "': expected one of " + names);
}

Result<QuantizedMultiplier> quantize_multiplier(double m) {
  if (!std::isfinite(m) || m < 0) return invalid("real multiplier " + std::to_string(m) + " must be finite and >= 0");
  QuantizedMultiplier r;
  if (m == 0) return r;
  int shift = 0;
  const double f = std::frexp(m, &shift);  // m = f * 2^shift, f in [0.5, 1)
  int64_t q = static_cast<int64_t>(std::round(f * static_cast<double>(int64_t{1} << 31)));
  if (q == (int64_t{1} << 31)) {  // f rounded up to 1.0
    q /= 2;
    ++shift;
  }
  if (shift < -31) return r;  // below the smallest encodable multiplier: output = zero point
  if (shift > 30) {
    r.multiplier = std::numeric_limits<int32_t>::max();
    r.shift = 30;
    return r;
  }
  r.multiplier = static_cast<int32_t>(q);
  r.shift = shift;
  return r;
}

Result<Multiplier15> quantize_multiplier_15(double m) {
  if (!(m > 0) || !std::isfinite(m)) return invalid("OUT_CVT: multiplier " + std::to_string(m) + " must be positive and finite");
  int e = 0;
  std::frexp(m, &e);  // m = f 2^e, f in [0.5, 1)
  Multiplier15 c;
  c.shift = 15 - e;  // m 2^shift in [2^14, 2^15)
  double v = std::nearbyint(std::ldexp(m, c.shift));
  if (v >= 32768.0) {
    v /= 2;
    --c.shift;
  }
  if (c.shift < 0 || c.shift > 63) return unsupported("OUT_CVT: multiplier " + std::to_string(m) + " needs a shift outside [0, 63]");
  c.scale = static_cast<int32_t>(v);
  return c;
}

int32_t saturating_rounding_doubling_high_mul(int32_t a, int32_t b) {
  if (a == std::numeric_limits<int32_t>::min() && b == std::numeric_limits<int32_t>::min()) {
    return std::numeric_limits<int32_t>::max();
  }
  const int64_t ab = static_cast<int64_t>(a) * static_cast<int64_t>(b);
  const int64_t nudge = ab >= 0 ? (int64_t{1} << 30) : (1 - (int64_t{1} << 30));
  return static_cast<int32_t>((ab + nudge) / (int64_t{1} << 31));  // C division truncates toward zero
}

int32_t rounding_divide_by_pot(int32_t x, int exponent) {
  const int32_t mask = static_cast<int32_t>((int64_t{1} << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

int32_t multiply_by_quantized_multiplier_double_rounding(int32_t x, QuantizedMultiplier m) {
  const int left = m.shift > 0 ? m.shift : 0;
  const int right = m.shift > 0 ? 0 : -m.shift;
  // x * 2^left must fit int32 (the contract); computed in int64 and saturated so that a
  // contract breach gives a saturated value instead of undefined behaviour.
  const int64_t shifted = static_cast<int64_t>(x) * (int64_t{1} << left);
  const int32_t xs = static_cast<int32_t>(std::clamp<int64_t>(shifted, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
  return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(xs, m.multiplier), right);
}

int32_t multiply_by_quantized_multiplier_single_rounding(int32_t x, QuantizedMultiplier m) {
  const int total_shift = 31 - m.shift;  // in [1, 62]
  const int64_t round = int64_t{1} << (total_shift - 1);
  const int64_t r = (static_cast<int64_t>(x) * m.multiplier + round) >> total_shift;  // arithmetic shift: floor
  return static_cast<int32_t>(std::clamp<int64_t>(r, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
}

Result<Requantizer> Requantizer::make(Requant convention, float x_scale, const std::vector<float>& w_scales, float y_scale, int32_t y_zero_point,
                                      int32_t qmin, int32_t qmax) {
  if (!(x_scale > 0) || !(y_scale > 0) || !std::isfinite(x_scale) || !std::isfinite(y_scale)) {
    return invalid("requantization: input and output scales must be positive and finite");
  }
  if (w_scales.empty()) return invalid("requantization: no weight scale");
  if (qmin > qmax || y_zero_point < qmin || y_zero_point > qmax) {
    return invalid("requantization: output zero point " + std::to_string(y_zero_point) + " outside [" + std::to_string(qmin) + ", " +
                   std::to_string(qmax) + "]");
  }
  Requantizer r;
  r.conv_ = convention;
  r.zp_ = y_zero_point;
  r.qmin_ = qmin;
  r.qmax_ = qmax;
  for (size_t c = 0; c < w_scales.size(); ++c) {
    const float ws = w_scales[c];
    if (!(ws > 0) || !std::isfinite(ws)) {
      return invalid("requantization: weight scale " + std::to_string(c) + " must be positive and finite");
    }
    if (float_requant(convention)) {
      r.scales_.push_back(x_scale * ws / y_scale);  // float32, left to right, as ONNX Runtime and XNNPACK
    } else if (convention == Requant::rknpu_out_cvt) {
      RKD_ASSIGN(Multiplier15 m, quantize_multiplier_15(static_cast<double>(x_scale) * static_cast<double>(ws) / static_cast<double>(y_scale)));
      r.m15_.push_back(m);
    } else {
      RKD_ASSIGN(QuantizedMultiplier m, quantize_multiplier(static_cast<double>(x_scale) * static_cast<double>(ws) / static_cast<double>(y_scale)));
      r.mults_.push_back(m);
    }
  }
  return r;
}

namespace {

// apply()'s onnx_float arithmetic over the M channels of one pixel, written so that the
// compiler vectorises it (nearbyint rounds half to even in the default mode either way).
[[gnu::always_inline]] inline void float_requant_row_body(const int32_t* __restrict acc, const int32_t* __restrict bias, const float* __restrict s,
                                                          int64_t M, float lo, float hi, int32_t zp, uint8_t* __restrict out) {
  for (int64_t c = 0; c < M; ++c) {
    float f = static_cast<float>(acc[c] + bias[c]) * s[c];
    f = std::min(std::max(f, lo), hi);
    out[c] = static_cast<uint8_t>(static_cast<int32_t>(std::nearbyint(f)) + zp);
  }
}
RKD_ISA_CLONES(float_requant_row, (const int32_t* acc, const int32_t* bias, const float* s, int64_t M, float lo, float hi, int32_t zp, uint8_t* out),
               (acc, bias, s, M, lo, hi, zp, out), float_requant_row_body(acc, bias, s, M, lo, hi, zp, out))

}  // namespace

namespace {
constexpr int64_t kPlanesBlock = 64;  // pixels per transposed block
// Pixels the tiled constants cover: enough for full vectors at any channel count, small enough
// to stay in L1 beside the block (a tile of all 64 pixels per convolution measured slower than
// rebuilding one per call: 74 cold tiles on movenet).
constexpr int64_t kTilePixels = 8;
}  // namespace

Requantizer::PlanesPlan Requantizer::plan_planes(const int32_t* bias, int64_t M) const {
  PlanesPlan plan;
  plan.M = M;
  plan.bias.assign(static_cast<size_t>(M), 0);
  if (bias) std::copy(bias, bias + M, plan.bias.begin());
  if (float_requant(conv_)) {
    plan.bias_tile.resize(static_cast<size_t>(kTilePixels * M));
    plan.scale_tile.resize(static_cast<size_t>(kTilePixels * M));
    for (int64_t j = 0; j < kTilePixels; ++j)
      for (int64_t c = 0; c < M; ++c) {
        plan.bias_tile[static_cast<size_t>(j * M + c)] = plan.bias[static_cast<size_t>(c)];
        plan.scale_tile[static_cast<size_t>(j * M + c)] = scales_[scales_.size() == 1 ? 0 : static_cast<size_t>(c)];
      }
  }
  return plan;
}

void Requantizer::apply_to_planes(const int32_t* acc, const int32_t* bias, int64_t P, int64_t M, uint8_t* y, int64_t plane) const {
  apply_to_planes(plan_planes(bias, M), acc, P, y, plane);
}

// Pixels [0, n) of pixel-major accumulators requantized into pixel-major bytes rows[p * M + c].
void Requantizer::requant_rows(const PlanesPlan& plan, const int32_t* acc, int64_t n, uint8_t* rows) const {
  const int64_t M = plan.M;
  if (float_requant(conv_)) {
    // A block's accumulators are contiguous: loops over kTilePixels x M values (per pixel,
    // channel counts like 24 or 144 would leave most of the work to the scalar remainder).
    const float lo = static_cast<float>(qmin_ - zp_), hi = static_cast<float>(qmax_ - zp_);
    for (int64_t j = 0; j < n; j += kTilePixels) {
      const int64_t m = std::min(kTilePixels, n - j);
      float_requant_row(acc + j * M, plan.bias_tile.data(), plan.scale_tile.data(), m * M, lo, hi, zp_, rows + j * M);
    }
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    const int32_t* a = acc + j * M;
    uint8_t* r = rows + j * M;
    for (int64_t c = 0; c < M; ++c) r[c] = static_cast<uint8_t>(apply(a[c] + plan.bias[static_cast<size_t>(c)], static_cast<size_t>(c)));
  }
}

void Requantizer::apply_to_planes(const PlanesPlan& plan, const int32_t* acc, int64_t P, uint8_t* y, int64_t plane) const {
  const int64_t M = plan.M;
  // Per-thread scratch kept between calls: a block of a wide layer is past malloc's mmap
  // threshold, and a fresh mapping per call cost a page fault per 4 KB.
  thread_local std::vector<uint8_t> rows;
  rows.resize(static_cast<size_t>(kPlanesBlock * M));
  for (int64_t p0 = 0; p0 < P; p0 += kPlanesBlock) {
    const int64_t n = std::min(kPlanesBlock, P - p0);
    requant_rows(plan, acc + p0 * M, n, rows.data());
    transpose_bytes(rows.data(), n, M, M, y + p0, plane);
  }
}

void Requantizer::apply_to_rows(const PlanesPlan& plan, const int32_t* acc, int64_t P, uint8_t* y) const { requant_rows(plan, acc, P, y); }

int32_t Requantizer::apply(int32_t acc, size_t c) const {
  int32_t v = 0;
  switch (conv_) {
    case Requant::tflite_double_rounding: v = multiply_by_quantized_multiplier_double_rounding(acc, mults_[mults_.size() == 1 ? 0 : c]); break;
    case Requant::tflite_single_rounding: v = multiply_by_quantized_multiplier_single_rounding(acc, mults_[mults_.size() == 1 ? 0 : c]); break;
    case Requant::rknpu_out_cvt: {
      const Multiplier15 m = m15_[m15_.size() == 1 ? 0 : c];
      const int64_t p = static_cast<int64_t>(acc) * m.scale;
      int64_t q = p;
      if (m.shift > 0) {
        q = p >> m.shift;  // floor
        const int64_t rem = p - (q << m.shift), half = int64_t{1} << (m.shift - 1);
        if (rem > half || (rem == half && (q & 1))) ++q;  // half to even
      }
      return static_cast<int32_t>(std::clamp<int64_t>(q + zp_, qmin_, qmax_));
    }
    case Requant::tflite_xnnpack:
    case Requant::onnx_float: {
      const float s = scales_[scales_.size() == 1 ? 0 : c];
      float f = static_cast<float>(acc) * s;
      f = std::min(std::max(f, static_cast<float>(qmin_ - zp_)), static_cast<float>(qmax_ - zp_));
      return static_cast<int32_t>(std::nearbyint(f)) + zp_;  // default rounding mode: half to even
    }
  }
  const int64_t y = static_cast<int64_t>(v) + zp_;
  return static_cast<int32_t>(std::clamp<int64_t>(y, qmin_, qmax_));
}

}  // namespace rkd::quant
