// Private to src/kernels: per-point coordinate arithmetic of the MSDA methods, shared by
// the reference and the SIMD kernel (which vectorises over channels, not points).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/deform_attn.h"
#include "kernels/grid_sample_coords.h"

namespace rkd::msda_detail {

// Bilinear corners of sampling location (lx, ly) on an H x W map, exactly as
// GridSample(bilinear, zeros, align_corners=0) on grid 2*loc-1 (PyTorch convention).
// Corner order nw, ne, sw, se; `token` is y*W + x within the level; ok=false reads 0.
struct BilinearCorners {
  int64_t token[4];
  bool ok[4];
  float weight[4];
};

inline BilinearCorners bilinear_corners(float lx, float ly, int64_t H, int64_t W) {
  const float gx = 2.0f * lx - 1.0f;
  const float gy = 2.0f * ly - 1.0f;
  const float x = gs::unnormalize_pt2(gx, W, false);
  const float y = gs::unnormalize_pt2(gy, H, false);
  const float x0 = std::floor(x), y0 = std::floor(y);
  const float w = x - x0, e = 1.0f - w;
  const float n = y - y0, s = 1.0f - n;
  BilinearCorners c;
  c.weight[0] = s * e;
  c.weight[1] = s * w;
  c.weight[2] = n * e;
  c.weight[3] = n * w;
  const int64_t ix = gs::to_index(x0), iy = gs::to_index(y0);
  for (int k = 0; k < 4; ++k) {
    const int64_t cx = ix == gs::kOutside ? gs::kOutside : ix + (k & 1);
    const int64_t cy = iy == gs::kOutside ? gs::kOutside : iy + (k >> 1);
    c.ok[k] = gs::in_range(cx, W) && gs::in_range(cy, H);
    c.token[k] = c.ok[k] ? cy * W + cx : 0;
  }
  return c;
}

// float -> int64 truncation with x86 semantics for values it cannot represent
// (NaN, +-inf, |t| >= 2^63 give INT64_MIN), identical on every architecture.
inline int64_t trunc_to_int64_x86(float t) {
  if (!(t >= -9223372036854775808.0f && t < 9223372036854775808.0f)) return INT64_MIN;
  return static_cast<int64_t>(t);
}

inline int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Discrete index along one axis before clamping: int64(loc * size + 0.5).
inline int64_t discrete_raw_index(float loc, int64_t size) {
  const float t = loc * static_cast<float>(size);
  return trunc_to_int64_x86(t + 0.5f);
}

// Token read by the discrete methods. For MsdaMethod::discrete, x is clamped with the
// height bound; the caller has checked that the result is < W.
inline int64_t discrete_token(float lx, float ly, int64_t H, int64_t W, MsdaMethod method) {
  const int64_t x_hi = method == MsdaMethod::discrete ? H - 1 : W - 1;
  const int64_t ix = clamp_i64(discrete_raw_index(lx, W), 0, x_hi);
  const int64_t iy = clamp_i64(discrete_raw_index(ly, H), 0, H - 1);
  return iy * W + ix;
}

}  // namespace rkd::msda_detail
