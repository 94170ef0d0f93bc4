// Private to src/kernels: the scalar coordinate arithmetic of GridSample, one function
// per step of the semantics in grid_sample.h. The reference kernel is written with these;
// the SIMD kernel re-implements the same steps lane-wise and is tested against them bit
// for bit. Every float operation below is rounded separately unless it is written as
// std::fma (the build disables FP contraction).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/grid_sample.h"

namespace rkd::gs {

// Sentinel index for "not a valid pixel": any coordinate that is NaN, infinite or
// outside the int32 range (PyTorch converts through int32 lanes, where such values
// become INT_MIN and therefore fail every bounds check).
inline constexpr int64_t kOutside = INT64_MIN / 2;

// Largest block of output points one fast-kernel task plans at once (stack arrays).
inline constexpr int64_t kMaxBlockPoints = 1024;

inline int64_t to_index(float integral_value) {
  if (!(integral_value >= -2147483648.0f && integral_value < 2147483648.0f)) return kOutside;
  return static_cast<int64_t>(integral_value);
}

inline bool in_range(int64_t i, int64_t size) { return i >= 0 && i < size; }

// ---- PyTorch 2-D (ATen's vectorised CPU kernel) -------------------------------------

inline float unnormalize_pt2(float g, int64_t size, bool align_corners) {
  if (align_corners) return (g + 1.0f) * (static_cast<float>(size - 1) / 2.0f);
  return std::fma(g + 1.0f, static_cast<float>(size) / 2.0f, -0.5f);
}

// clip to [0, size-1]; NaN -> 0 (max(p, 0) is written so that a NaN comparison picks 0).
inline float clip_pt2(float p, int64_t size) {
  p = p > 0.0f ? p : 0.0f;
  const float hi = static_cast<float>(size - 1);
  return p < hi ? p : hi;
}

// NaN-propagating minimum, as ATen's Vectorized minimum.
inline float minimum_nan(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  return a < b ? a : b;
}

inline float reflect_pt2(float p, int64_t size, bool align_corners) {
  if (align_corners) {
    const float twice_span = static_cast<float>(2 * (size - 1));
    if (size == 1) return 0.0f;
    const float a = std::fabs(p);
    const float k = std::trunc(a / twice_span);
    const float extra = std::fma(-k, twice_span, a);
    return minimum_nan(extra, twice_span - extra);
  }
  const float twice_span = static_cast<float>(2 * size);
  const float a = std::fabs(p + 0.5f);
  const float k = std::trunc(a / twice_span);
  const float extra = std::fma(-k, twice_span, a);
  return minimum_nan(extra, twice_span - extra) - 0.5f;
}

inline float pad_pt2(float p, int64_t size, GridSamplePadding padding, bool align_corners) {
  switch (padding) {
    case GridSamplePadding::zeros: return p;
    case GridSamplePadding::border: return clip_pt2(p, size);
    case GridSamplePadding::reflection: return clip_pt2(reflect_pt2(p, size, align_corners), size);
  }
  return p;
}

// Bicubic convolution weights for fractional position t in [0, 1), A = -0.75.
inline void cubic_weights(float t, float w[4]) {
  constexpr float A = -0.75f;
  float x = t + 1.0f;
  w[0] = ((A * x - 5.0f * A) * x + 8.0f * A) * x - 4.0f * A;
  x = t;
  w[1] = ((A + 2.0f) * x - (A + 3.0f)) * x * x + 1.0f;
  x = 1.0f - t;
  w[2] = ((A + 2.0f) * x - (A + 3.0f)) * x * x + 1.0f;
  x = 2.0f - t;
  w[3] = ((A * x - 5.0f * A) * x + 8.0f * A) * x - 4.0f * A;
}

// ---- PyTorch 3-D (ATen's scalar kernel) ----------------------------------------------

// PyTorch's scalar kernel rounds every operation (measured: no fused multiply-add, unlike
// its vectorised 2-D kernel).
inline float unnormalize_pt3(float g, int64_t size, bool align_corners) {
  if (align_corners) return ((g + 1.0f) / 2.0f) * static_cast<float>(size - 1);
  return ((g + 1.0f) * static_cast<float>(size) - 1.0f) / 2.0f;
}

// std::min(size-1, std::max(p, 0)): NaN survives the max and the min returns size-1.
inline float clip_pt3(float p, int64_t size) {
  const float lo = (p < 0.0f) ? 0.0f : p;  // std::max(p, 0)
  const float hi = static_cast<float>(size - 1);
  return (lo < hi) ? lo : hi;  // std::min(hi, lo), NaN -> hi
}

inline float reflect_fmod(float p, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0.0f;
  const float mn = static_cast<float>(twice_low) / 2.0f;
  const float span = static_cast<float>(twice_high - twice_low) / 2.0f;
  p = std::fabs(p - mn);
  const float extra = std::fmod(p, span);
  const float fl = std::floor(p / span);
  // flips parity; a non-finite or huge flip count is taken as even (x86 converts it to
  // INT_MIN, which is even).
  const bool odd = std::isfinite(fl) && fl < 2147483648.0f && (static_cast<int64_t>(fl) % 2) != 0;
  return odd ? span - extra + mn : extra + mn;
}

inline float pad_pt3(float p, int64_t size, GridSamplePadding padding, bool align_corners) {
  if (padding == GridSamplePadding::border) {
    p = clip_pt3(p, size);
  } else if (padding == GridSamplePadding::reflection) {
    p = align_corners ? reflect_fmod(p, 0, 2 * (size - 1)) : reflect_fmod(p, -1, 2 * size - 1);
    p = clip_pt3(p, size);
  }
  // safe_downgrade_to_int_range
  if (!std::isfinite(p) || p > 2147483646.0f || p < -2147483648.0f) return -100.0f;
  return p;
}

// ---- ONNX convention (ONNX reference / ONNX Runtime) ---------------------------------

inline float unnormalize_onnx(float g, int64_t size, bool align_corners) {
  if (align_corners) return (g + 1.0f) / 2.0f * static_cast<float>(size - 1);
  return ((g + 1.0f) * static_cast<float>(size) - 1.0f) / 2.0f;
}

inline float onnx_min(int64_t size, bool align_corners) { return align_corners ? 0.0f : -0.5f; }
inline float onnx_max(int64_t size, bool align_corners) { return align_corners ? static_cast<float>(size - 1) : static_cast<float>(size) - 0.5f; }

// ORT's GsReflect: reflect x into [lo, hi]; values inside are returned unchanged.
inline float reflect_onnx(float x, float lo, float hi) {
  const float range = hi - lo;
  if (range == 0.0f) return lo;
  if (!std::isfinite(x)) return x;
  if (x < lo) {
    const float dx = lo - x;
    const float nf = std::trunc(dx / range);
    const float r = dx - nf * range;
    const bool even = !(nf < 2147483648.0f) || (static_cast<int64_t>(nf) % 2 == 0);
    return even ? lo + r : hi - r;
  }
  if (x > hi) {
    const float dx = x - hi;
    const float nf = std::trunc(dx / range);
    const float r = dx - nf * range;
    const bool even = !(nf < 2147483648.0f) || (static_cast<int64_t>(nf) % 2 == 0);
    return even ? hi - r : lo + r;
  }
  return x;
}

// Continuous-coordinate padding step of ORT: only coordinates outside [lo, hi] move.
inline float pad_onnx(float x, int64_t size, GridSamplePadding padding, bool align_corners) {
  const float lo = onnx_min(size, align_corners), hi = onnx_max(size, align_corners);
  if (x < lo || x > hi) {
    if (padding == GridSamplePadding::border) {
      x = std::clamp(x, 0.0f, static_cast<float>(size - 1));
    } else if (padding == GridSamplePadding::reflection) {
      x = reflect_onnx(x, lo, hi);
    }
  }
  return x;
}

// ORT's PixelAtGrid index mapping for one axis; returns kOutside for "reads 0".
inline int64_t pixel_index_onnx(int64_t i, int64_t size, GridSamplePadding padding, bool align_corners) {
  if (i == kOutside) return padding == GridSamplePadding::zeros ? kOutside : 0;
  switch (padding) {
    case GridSamplePadding::zeros: return in_range(i, size) ? i : kOutside;
    case GridSamplePadding::border: return std::clamp<int64_t>(i, 0, size - 1);
    case GridSamplePadding::reflection: {
      const float r = reflect_onnx(static_cast<float>(i), onnx_min(size, align_corners), onnx_max(size, align_corners));
      return std::clamp<int64_t>(to_index(r), 0, size - 1);
    }
  }
  return kOutside;
}

}  // namespace rkd::gs
