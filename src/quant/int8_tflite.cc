#include "quant/int8_tflite.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "quant/int8_access.h"

namespace rkd::quant {

namespace {

using detail::load_q;
using detail::multiply;
using detail::store_q;

Status check_unary(const Tensor& x, QTensorParams in, QTensorParams out, const Tensor& y, const char* what) {
  if (auto r = quantized_range(x.dtype()); !r.ok()) return r.error().with_context(what);
  if (auto r = quantized_range(y.dtype()); !r.ok()) return r.error().with_context(what);
  if (!(in.scale > 0) || !(out.scale > 0) || !std::isfinite(in.scale) || !std::isfinite(out.scale)) {
    return invalid(std::string(what) + ": scales must be positive and finite");
  }
  return {};
}

Status check_same_shape(const Tensor& x, const Tensor& y, const char* what) {
  if (x.shape() != y.shape()) return invalid(std::string(what) + ": output shape differs from the input's");
  return {};
}

// gemmlowp's 16-bit SaturatingRoundingDoublingHighMul: 2ab / 2^16 rounded to nearest (ties
// away from zero through the nudge), the one overflow saturating.
int16_t srdhm16(int16_t a, int16_t b) {
  if (a == b && a == std::numeric_limits<int16_t>::min()) return std::numeric_limits<int16_t>::max();
  const int32_t ab = static_cast<int32_t>(a) * static_cast<int32_t>(b);
  const int32_t nudge = ab >= 0 ? (1 << 14) : (1 - (1 << 14));
  return static_cast<int16_t>((ab + nudge) / (1 << 15));
}

// The same without rounding (truncation toward zero), as TFLite's HardSwish uses it.
int16_t sdhm16(int16_t a, int16_t b) {
  if (a == b && a == std::numeric_limits<int16_t>::min()) return std::numeric_limits<int16_t>::max();
  const int32_t ab = static_cast<int32_t>(a) * static_cast<int32_t>(b);
  return static_cast<int16_t>(ab / (1 << 15));
}

int16_t saturating_left_shift16(int16_t v, int amount) {
  const int64_t r = static_cast<int64_t>(v) * (int64_t{1} << amount);
  return static_cast<int16_t>(std::clamp<int64_t>(r, std::numeric_limits<int16_t>::min(), std::numeric_limits<int16_t>::max()));
}

// TFLite's DownScaleInt32ToInt16Multiplier.
int16_t to_int16_multiplier(int32_t m) {
  constexpr int32_t kRound = 1 << 15;
  if (m >= std::numeric_limits<int32_t>::max() - kRound) return std::numeric_limits<int16_t>::max();
  return static_cast<int16_t>((m + kRound) >> 16);
}

// XNNPACK's resize-bilinear (indirection_init_resize_bilinear2d_hwc_q11 + the s8/u8 ibilinear
// kernels): float32 source coordinates, 11-bit weights lrintf(alpha * 2^11), horizontal then
// vertical interpolation in int32, (acc + 2^21) >> 22.
Status xnnpack_resize_bilinear(const Tensor& x, bool align_corners, bool half_pixel_centers, Tensor& y) {
  const int64_t planes = x.dim(0) * x.dim(1);
  const int32_t H = static_cast<int32_t>(x.dim(2)), W = static_cast<int32_t>(x.dim(3));
  const int32_t OH = static_cast<int32_t>(y.dim(2)), OW = static_cast<int32_t>(y.dim(3));
  struct Tap {
    int32_t lo, hi, alpha;
  };
  auto taps = [&](int32_t in, int32_t outn) {
    const int32_t adjust = align_corners && outn != 1 ? 1 : 0;
    const float scale = static_cast<float>(in - adjust) / static_cast<float>(outn - adjust);
    const float offset = 0.5f * scale - 0.5f;
    std::vector<Tap> t;
    for (int32_t o = 0; o < outn; ++o) {
      float src;
      if (align_corners || !half_pixel_centers) {
        src = static_cast<float>(o) * scale;
      } else {
        src = std::min(std::max(static_cast<float>(o) * scale + offset, 0.0f), static_cast<float>(in - 1));
      }
      const int32_t lo = static_cast<int32_t>(src);
      const float alpha = src - static_cast<float>(lo);
      t.push_back(Tap{lo, std::min(lo + 1, in - 1), static_cast<int32_t>(static_cast<int16_t>(std::lrint(alpha * 2048.0f)))});
    }
    return t;
  };
  const std::vector<Tap> ty = taps(H, OH), tx = taps(W, OW);
  for (int64_t p = 0; p < planes; ++p) {
    auto at = [&](int32_t yy, int32_t xx) { return load_q(x, (p * H + yy) * W + xx); };
    for (int32_t oy = 0; oy < OH; ++oy) {
      for (int32_t ox = 0; ox < OW; ++ox) {
        const Tap& v = ty[static_cast<size_t>(oy)];
        const Tap& h = tx[static_cast<size_t>(ox)];
        const int32_t tl = at(v.lo, h.lo), tr = at(v.lo, h.hi), bl = at(v.hi, h.lo), br = at(v.hi, h.hi);
        const int32_t top = tl * 2048 + (tr - tl) * h.alpha;
        const int32_t bottom = bl * 2048 + (br - bl) * h.alpha;
        const int32_t acc = top * 2048 + (bottom - top) * v.alpha;
        store_q(y, (p * OH + oy) * OW + ox, (acc + (1 << 21)) >> 22);
      }
    }
  }
  return {};
}

}  // namespace

Result<std::vector<int32_t>> tflite_lut(LutFunction f, QTensorParams in, QTensorParams out, DType in_type, DType out_type) {
  RKD_ASSIGN(auto in_range, quantized_range(in_type));
  RKD_ASSIGN(auto out_range, quantized_range(out_type));
  std::vector<int32_t> table;
  const float inverse_scale = 1.f / out.scale;
  for (int32_t q = in_range.first; q <= in_range.second; ++q) {
    const float v = in.scale * static_cast<float>(q - in.zero_point);
    float t = 0;
    switch (f) {
      case LutFunction::logistic: t = 1.f / (1.f + std::exp(-v)); break;
      case LutFunction::tanh: t = std::tanh(v); break;
      case LutFunction::silu: t = v / (1.f + std::exp(-v)); break;
    }
    const float rescaled = std::round(t * inverse_scale);
    const int32_t y = static_cast<int32_t>(rescaled + static_cast<float>(out.zero_point));
    table.push_back(std::clamp(y, out_range.first, out_range.second));
  }
  return table;
}

Status lut_activation(const Tensor& x0, LutFunction f, QTensorParams in, QTensorParams out, Tensor& y) {
  RKD_TRY(check_unary(x0, in, out, y, "lut activation"));
  RKD_TRY(check_same_shape(x0, y, "lut activation"));
  RKD_ASSIGN(std::vector<int32_t> table, tflite_lut(f, in, out, x0.dtype(), y.dtype()));
  const Tensor x = x0.contiguous();
  const int32_t base = x.dtype() == DType::i8 ? -128 : 0;
  for (int64_t i = 0; i < x.numel(); ++i) store_q(y, i, table[static_cast<size_t>(load_q(x, i) - base)]);
  return {};
}

Status tflite_hard_swish(const Tensor& x0, QTensorParams in, QTensorParams out, Tensor& y) {
  RKD_TRY(check_unary(x0, in, out, y, "HardSwish"));
  RKD_TRY(check_same_shape(x0, y, "HardSwish"));
  RKD_ASSIGN(auto range, quantized_range(y.dtype()));
  const float hires_input_scale = (1.0f / 128.0f) * in.scale;
  const float reluish_scale = 3.0f / 32768.0f;
  RKD_ASSIGN(QuantizedMultiplier mo, quantize_multiplier(static_cast<double>(hires_input_scale / out.scale)));
  RKD_ASSIGN(QuantizedMultiplier mr, quantize_multiplier(static_cast<double>(hires_input_scale / reluish_scale)));
  if (mo.shift > 0) return invalid("HardSwish: input scale / output scale >= 128 (TFLite refuses such a model)");
  const int16_t out_mult = to_int16_multiplier(mo.multiplier), relu_mult = to_int16_multiplier(mr.multiplier);
  const Tensor x = x0.contiguous();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int16_t v = static_cast<int16_t>(load_q(x, i) - in.zero_point);
    const int16_t hires = static_cast<int16_t>(v * (1 << 7));
    const int16_t preshift_out = srdhm16(hires, out_mult);
    int16_t relu = hires;
    if (mr.shift > 0) relu = saturating_left_shift16(relu, mr.shift - 1);
    relu = srdhm16(relu, relu_mult);
    if (mr.shift > 0) relu = saturating_left_shift16(relu, 1);
    if (mr.shift < 0) relu = static_cast<int16_t>(rounding_divide_by_pot(relu, -mr.shift));
    relu = static_cast<int16_t>((relu + (1 << 15)) >> 1);
    const int16_t preshift = sdhm16(relu, preshift_out);
    int32_t o = rounding_divide_by_pot(preshift, -mo.shift) + out.zero_point;
    store_q(y, i, std::clamp(o, range.first, range.second));
  }
  return {};
}

Status tflite_leaky_relu(const Tensor& x0, float alpha, QTensorParams in, QTensorParams out, Requant convention, Tensor& y) {
  RKD_TRY(check_unary(x0, in, out, y, "LeakyRelu"));
  RKD_TRY(check_same_shape(x0, y, "LeakyRelu"));
  RKD_ASSIGN(auto range, quantized_range(y.dtype()));
  if (convention == Requant::tflite_xnnpack) {
    // XNNPACK's qs8/qu8 vlrelu: 8-bit multipliers lrintf(256 * scale), y = ((z_out << 8) + 128 +
    // (x - z_in) * multiplier) >> 8 (arithmetic shift). TFLite's delegate takes the op only
    // when XNNPACK accepts the scales; otherwise TFLite's kernel (single rounding) runs.
    const float positive = in.scale / out.scale;
    const float negative = positive * alpha;
    if (positive >= 0x1.0p-8f && positive <= 0x1.0p+7f && negative >= -0x1.0p+7f && negative <= 0x1.0p+7f) {
      const int32_t pm = static_cast<int32_t>(std::lrint(256.0f * positive));
      const int32_t nm = static_cast<int32_t>(std::lrint(256.0f * negative));
      const Tensor x = x0.contiguous();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const int32_t v = load_q(x, i) - in.zero_point;
        const int32_t acc = (out.zero_point * 256) + 128 + v * (v >= 0 ? pm : nm);
        const int32_t o = acc >= 0 ? acc >> 8 : -((-acc + 255) >> 8);  // floor(acc / 256)
        store_q(y, i, std::clamp(o, range.first, range.second));
      }
      return {};
    }
  }
  const float alpha_multiplier = in.scale * alpha / out.scale;
  if (!(alpha_multiplier >= 0)) return unsupported("LeakyRelu: a negative alpha has no TFLite integer form");
  RKD_ASSIGN(QuantizedMultiplier ma, quantize_multiplier(static_cast<double>(alpha_multiplier)));
  RKD_ASSIGN(QuantizedMultiplier mi, quantize_multiplier(static_cast<double>(in.scale / out.scale)));
  const Tensor x = x0.contiguous();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int32_t v = load_q(x, i) - in.zero_point;
    const int32_t o = out.zero_point + multiply(convention, v, v >= 0 ? mi : ma);
    store_q(y, i, std::clamp(o, range.first, range.second));
  }
  return {};
}

Status tflite_softmax(const Tensor& x0, float beta, QTensorParams in, QTensorParams out, Tensor& y) {
  RKD_TRY(check_unary(x0, in, out, y, "Softmax"));
  RKD_TRY(check_same_shape(x0, y, "Softmax"));
  if (x0.rank() < 1 || x0.dim(-1) < 1) return invalid("Softmax: empty last axis");
  RKD_ASSIGN(auto range, quantized_range(y.dtype()));
  // table[255 - d] = e^(-s_in * beta * d) for the distance d = max - q in [0, 255].
  float table[256];
  const float scale = -in.scale * beta;
  for (int32_t d = 0; d <= 255; ++d) table[255 - d] = std::exp(scale * static_cast<float>(d));
  const Tensor x = x0.contiguous();
  const int64_t n = x.dim(-1), rows = x.numel() / n;
  const bool int8_out = y.dtype() == DType::i8;
  for (int64_t r = 0; r < rows; ++r) {
    int32_t mx = std::numeric_limits<int32_t>::min();
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, load_q(x, r * n + j));
    float sum = 0.f;
    for (int64_t j = 0; j < n; ++j) sum += table[255 - (mx - load_q(x, r * n + j))];
    const float inv = 1.0f / (sum * out.scale);
    for (int64_t j = 0; j < n; ++j) {
      const float p = table[255 - (mx - load_q(x, r * n + j))] * inv;
      const int32_t q = int8_out ? static_cast<int32_t>(std::round(p)) + out.zero_point : static_cast<int32_t>(p + 0.5f);
      store_q(y, r * n + j, std::clamp(q, range.first, range.second));
    }
  }
  return {};
}

Status tflite_mean(const Tensor& x0, const std::vector<int64_t>& axes, QTensorParams in, QTensorParams out, Requant convention, Tensor& y) {
  RKD_TRY(check_unary(x0, in, out, y, "Mean"));
  RKD_ASSIGN(auto range, quantized_range(y.dtype()));
  const Tensor x = x0.contiguous();
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= x.rank() || reduced[static_cast<size_t>(a)]) return invalid("Mean: axes must be distinct and in range");
    reduced[static_cast<size_t>(a)] = true;
  }
  int64_t n = 1, kept = 1;
  for (int d = 0; d < x.rank(); ++d) (reduced[static_cast<size_t>(d)] ? n : kept) *= x.dim(d);
  if (y.numel() != kept) return invalid("Mean: output size differs from the kept dimensions'");
  if (n == 0) return invalid("Mean: nothing to average");
  // Sums per output element: the output index of input element i drops the reduced axes.
  std::vector<int32_t> sums(static_cast<size_t>(kept), 0);
  std::vector<int64_t> idx(static_cast<size_t>(x.rank()), 0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t o = 0;
    for (int d = 0; d < x.rank(); ++d) {
      if (!reduced[static_cast<size_t>(d)]) o = o * x.dim(d) + idx[static_cast<size_t>(d)];
    }
    sums[static_cast<size_t>(o)] += load_q(x, i);
    for (int d = x.rank() - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < x.dim(d)) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  if (convention == Requant::tflite_xnnpack) {
    // XNNPACK's global average pooling: float32 scale s_in / (s_out * n), round half to even.
    const float scale = in.scale / (out.scale * static_cast<float>(n));
    const float lo = static_cast<float>(range.first - out.zero_point), hi = static_cast<float>(range.second - out.zero_point);
    for (int64_t o = 0; o < kept; ++o) {
      const int32_t shifted = static_cast<int32_t>(sums[static_cast<size_t>(o)] - static_cast<int64_t>(in.zero_point) * n);
      const float v = std::clamp(static_cast<float>(shifted) * scale, lo, hi);
      store_q(y, o, static_cast<int32_t>(std::nearbyint(v)) + out.zero_point);
    }
    return {};
  }
  RKD_ASSIGN(QuantizedMultiplier m, quantize_multiplier(static_cast<double>(in.scale) / static_cast<double>(out.scale)));
  int k = 63 - __builtin_clzll(static_cast<unsigned long long>(n));
  k = std::min(k, 32);
  k = std::min(k, 31 + m.shift);
  QuantizedMultiplier mean;
  mean.multiplier = static_cast<int32_t>((static_cast<int64_t>(m.multiplier) << k) / n);
  mean.shift = m.shift - k;
  for (int64_t o = 0; o < kept; ++o) {
    const int32_t shifted = static_cast<int32_t>(sums[static_cast<size_t>(o)] - static_cast<int64_t>(in.zero_point) * n);
    const int32_t v = multiply(convention, shifted, mean) + out.zero_point;
    store_q(y, o, std::clamp(v, range.first, range.second));
  }
  return {};
}

Status tflite_resize_bilinear(const Tensor& x0, bool align_corners, bool half_pixel_centers, Requant convention, Tensor& y) {
  if (x0.rank() != 4 || y.rank() != 4 || x0.dim(0) != y.dim(0) || x0.dim(1) != y.dim(1)) {
    return invalid("ResizeBilinear: x [N, C, H, W] -> y [N, C, OH, OW]");
  }
  if (x0.dtype() != y.dtype()) return invalid("ResizeBilinear: input and output types differ");
  if (auto r = quantized_range(x0.dtype()); !r.ok()) return r.error().with_context("ResizeBilinear");
  if (align_corners && half_pixel_centers) return invalid("ResizeBilinear: align_corners and half_pixel_centers exclude each other");
  const Tensor x = x0.contiguous();
  const int64_t planes = x.dim(0) * x.dim(1);
  const int32_t H = static_cast<int32_t>(x.dim(2)), W = static_cast<int32_t>(x.dim(3));
  const int32_t OH = static_cast<int32_t>(y.dim(2)), OW = static_cast<int32_t>(y.dim(3));
  if (H < 1 || W < 1 || OH < 1 || OW < 1) return invalid("ResizeBilinear: empty image");
  auto scale10 = [&](int32_t in, int32_t outn) {
    if (align_corners && outn > 1) return ((1 << 10) * (in - 1) + (outn - 1) / 2) / (outn - 1);
    return ((1 << 10) * in + outn / 2) / outn;
  };
  struct Src {
    int32_t scaled, lo, hi;
  };
  auto source = [&](int32_t v, int32_t s10, int32_t in) {
    Src r;
    r.scaled = half_pixel_centers ? v * s10 + s10 / 2 - (1 << 9) : v * s10;
    r.lo = std::max(r.scaled / (1 << 10), 0);
    r.hi = std::min((r.scaled + (1 << 10) - 1) / (1 << 10), in - 1);
    return r;
  };
  if (convention == Requant::tflite_xnnpack) return xnnpack_resize_bilinear(x, align_corners, half_pixel_centers, y);
  const int32_t sh = scale10(H, OH), sw = scale10(W, OW);
  for (int64_t p = 0; p < planes; ++p) {
    for (int32_t oy = 0; oy < OH; ++oy) {
      const Src sy = source(oy, sh, H);
      const int64_t fy = sy.scaled - (1 << 10) * sy.lo;  // weight of the upper row, in 1/2^10
      for (int32_t ox = 0; ox < OW; ++ox) {
        const Src sx = source(ox, sw, W);
        const int64_t fx = sx.scaled - (1 << 10) * sx.lo;
        auto at = [&](int32_t yy, int32_t xx) { return static_cast<int64_t>(load_q(x, (p * H + yy) * W + xx)); };
        const int64_t sum = at(sy.lo, sx.lo) * ((1 << 10) - fy) * ((1 << 10) - fx) + at(sy.hi, sx.lo) * fy * ((1 << 10) - fx) +
                            at(sy.lo, sx.hi) * ((1 << 10) - fy) * fx + at(sy.hi, sx.hi) * fy * fx;
        int64_t v;
        if (convention == Requant::tflite_single_rounding) {
          v = (sum + (1 << 19)) >> 20;
        } else {
          v = (sum + (sum > 0 ? (1 << 19) : -(1 << 19))) / (1 << 20);
        }
        store_q(y, (p * OH + oy) * OW + ox, static_cast<int32_t>(v));
      }
    }
  }
  return {};
}

}  // namespace rkd::quant
