// The readable GridSample reference: plain loops over (n, output point, channel), the
// coordinate arithmetic from grid_sample_coords.h. See grid_sample.h for the semantics.
#include <cmath>

#include "kernels/grid_sample.h"
#include "kernels/grid_sample_coords.h"

namespace rkd {
namespace {

using gs::in_range;
using gs::kOutside;
using gs::to_index;

// One output point of the PyTorch 2-D kernel, all channels. `in` points at plane (n, 0),
// `out` at output (n, 0, point); planes are `in_plane` and `out_plane` floats apart.
void sample_point_pt2(const float* in, float* out, int64_t C, int64_t H, int64_t W, int64_t in_plane, int64_t out_plane, float gx, float gy,
                      const GridSampleOptions& opt) {
  const bool ac = opt.align_corners;
  if (opt.mode == GridSampleMode::bicubic) {
    // Taps are padded one by one; the coordinate itself is only unnormalised.
    const float x = gs::unnormalize_pt2(gx, W, ac);
    const float y = gs::unnormalize_pt2(gy, H, ac);
    const float x0 = std::floor(x), y0 = std::floor(y);
    float wx[4], wy[4];
    gs::cubic_weights(x - x0, wx);
    gs::cubic_weights(y - y0, wy);
    int64_t ix[4], iy[4];
    for (int k = 0; k < 4; ++k) {
      // Tap coordinates are integers (or NaN/inf); padding keeps them integral.
      const float tx = gs::pad_pt2(x0 + static_cast<float>(k - 1), W, opt.padding, ac);
      const float ty = gs::pad_pt2(y0 + static_cast<float>(k - 1), H, opt.padding, ac);
      ix[k] = to_index(std::trunc(tx));
      iy[k] = to_index(std::trunc(ty));
      if (!in_range(ix[k], W)) ix[k] = kOutside;
      if (!in_range(iy[k], H)) iy[k] = kOutside;
    }
    for (int64_t c = 0; c < C; ++c) {
      const float* plane = in + c * in_plane;
      float rows[4];
      for (int i = 0; i < 4; ++i) {
        float v[4];
        for (int j = 0; j < 4; ++j) {
          v[j] = (iy[i] != kOutside && ix[j] != kOutside) ? plane[iy[i] * W + ix[j]] : 0.0f;
        }
        rows[i] = wx[0] * v[0] + wx[1] * v[1] + wx[2] * v[2] + wx[3] * v[3];
      }
      out[c * out_plane] = wy[0] * rows[0] + wy[1] * rows[1] + wy[2] * rows[2] + wy[3] * rows[3];
    }
    return;
  }

  const float x = gs::pad_pt2(gs::unnormalize_pt2(gx, W, ac), W, opt.padding, ac);
  const float y = gs::pad_pt2(gs::unnormalize_pt2(gy, H, ac), H, opt.padding, ac);

  if (opt.mode == GridSampleMode::nearest) {
    const int64_t ix = to_index(std::nearbyint(x));
    const int64_t iy = to_index(std::nearbyint(y));
    const bool ok = in_range(ix, W) && in_range(iy, H);
    for (int64_t c = 0; c < C; ++c) out[c * out_plane] = ok ? in[c * in_plane + iy * W + ix] : 0.0f;
    return;
  }

  // bilinear
  const float x0 = std::floor(x), y0 = std::floor(y);
  const float w = x - x0, e = 1.0f - w;
  const float n = y - y0, s = 1.0f - n;
  const float nw = s * e, ne = s * w, sw = n * e, se = n * w;
  const int64_t ix = to_index(x0), iy = to_index(y0);
  const bool xw_ok = ix != kOutside && in_range(ix, W);
  const bool xe_ok = ix != kOutside && in_range(ix + 1, W);
  const bool yn_ok = iy != kOutside && in_range(iy, H);
  const bool ys_ok = iy != kOutside && in_range(iy + 1, H);
  for (int64_t c = 0; c < C; ++c) {
    const float* plane = in + c * in_plane;
    const float v_nw = (yn_ok && xw_ok) ? plane[iy * W + ix] : 0.0f;
    const float v_ne = (yn_ok && xe_ok) ? plane[iy * W + ix + 1] : 0.0f;
    const float v_sw = (ys_ok && xw_ok) ? plane[(iy + 1) * W + ix] : 0.0f;
    const float v_se = (ys_ok && xe_ok) ? plane[(iy + 1) * W + ix + 1] : 0.0f;
    out[c * out_plane] = std::fma(v_se, se, std::fma(v_sw, sw, std::fma(v_ne, ne, v_nw * nw)));
  }
}

// One output point of the PyTorch 3-D kernel (scalar ATen code), all channels.
void sample_point_pt3(const float* in, float* out, int64_t C, int64_t D, int64_t H, int64_t W, int64_t in_plane, int64_t out_plane, float gx,
                      float gy, float gz, const GridSampleOptions& opt) {
  const bool ac = opt.align_corners;
  const float x = gs::pad_pt3(gs::unnormalize_pt3(gx, W, ac), W, opt.padding, ac);
  const float y = gs::pad_pt3(gs::unnormalize_pt3(gy, H, ac), H, opt.padding, ac);
  const float z = gs::pad_pt3(gs::unnormalize_pt3(gz, D, ac), D, opt.padding, ac);
  if (opt.mode == GridSampleMode::nearest) {
    const int64_t ix = to_index(std::round(x)), iy = to_index(std::round(y)), iz = to_index(std::round(z));
    const bool ok = in_range(ix, W) && in_range(iy, H) && in_range(iz, D);
    for (int64_t c = 0; c < C; ++c) {
      out[c * out_plane] = ok ? in[c * in_plane + (iz * H + iy) * W + ix] : 0.0f;
    }
    return;
  }
  // trilinear; coordinates are finite here (pad_pt3 replaced the rest by -100).
  const float fx0 = std::floor(x), fy0 = std::floor(y), fz0 = std::floor(z);
  const float fx1 = fx0 + 1.0f, fy1 = fy0 + 1.0f, fz1 = fz0 + 1.0f;
  const float wt[8] = {(fx1 - x) * (fy1 - y) * (fz1 - z), (x - fx0) * (fy1 - y) * (fz1 - z), (fx1 - x) * (y - fy0) * (fz1 - z),
                       (x - fx0) * (y - fy0) * (fz1 - z), (fx1 - x) * (fy1 - y) * (z - fz0), (x - fx0) * (fy1 - y) * (z - fz0),
                       (fx1 - x) * (y - fy0) * (z - fz0), (x - fx0) * (y - fy0) * (z - fz0)};
  const int64_t ix = static_cast<int64_t>(fx0), iy = static_cast<int64_t>(fy0), iz = static_cast<int64_t>(fz0);
  int64_t off[8];
  bool ok[8];
  for (int k = 0; k < 8; ++k) {
    const int64_t cx = ix + (k & 1), cy = iy + ((k >> 1) & 1), cz = iz + ((k >> 2) & 1);
    ok[k] = in_range(cx, W) && in_range(cy, H) && in_range(cz, D);
    off[k] = ok[k] ? (cz * H + cy) * W + cx : 0;
  }
  for (int64_t c = 0; c < C; ++c) {
    const float* plane = in + c * in_plane;
    float acc = 0.0f;
    for (int k = 0; k < 8; ++k) {
      if (ok[k]) acc = acc + plane[off[k]] * wt[k];
    }
    out[c * out_plane] = acc;
  }
}

// One output point under the ONNX convention (ONNX Runtime's algorithm), 2-D or 3-D.
void sample_point_onnx(const float* in, float* out, int64_t C, const int64_t size[3], int rank, int64_t in_plane, int64_t out_plane, const float g[3],
                       const GridSampleOptions& opt) {
  const bool ac = opt.align_corners;
  float p[3];
  for (int a = 0; a < 3; ++a) {
    if (a < 3 - rank) {
      p[a] = 0.0f;
      continue;
    }
    p[a] = gs::unnormalize_onnx(g[a], size[a], ac);
    if (opt.mode == GridSampleMode::nearest) p[a] = std::nearbyint(p[a]);
    p[a] = gs::pad_onnx(p[a], size[a], opt.padding, ac);
  }
  auto index = [&](int a, int64_t i) { return gs::pixel_index_onnx(i, size[a], opt.padding, ac); };
  auto read = [&](const float* plane, int64_t iz, int64_t iy, int64_t ix) {
    if (iz == kOutside || iy == kOutside || ix == kOutside) return 0.0f;
    return plane[(iz * size[1] + iy) * size[2] + ix];
  };
  if (opt.mode == GridSampleMode::nearest) {
    int64_t i[3];
    for (int a = 0; a < 3; ++a) i[a] = index(a, to_index(p[a]));
    for (int64_t c = 0; c < C; ++c) out[c * out_plane] = read(in + c * in_plane, i[0], i[1], i[2]);
    return;
  }
  if (opt.mode == GridSampleMode::bicubic) {
    const float x0 = std::floor(p[2]) - 1.0f, y0 = std::floor(p[1]) - 1.0f;
    float wx[4], wy[4];
    gs::cubic_weights(p[2] - x0 - 1.0f, wx);
    gs::cubic_weights(p[1] - y0 - 1.0f, wy);
    int64_t ix[4], iy[4];
    for (int k = 0; k < 4; ++k) {
      ix[k] = index(2, to_index(x0 + static_cast<float>(k)));
      iy[k] = index(1, to_index(y0 + static_cast<float>(k)));
    }
    for (int64_t c = 0; c < C; ++c) {
      const float* plane = in + c * in_plane;
      float rows[4];
      for (int i = 0; i < 4; ++i) {
        rows[i] = wx[0] * read(plane, 0, iy[i], ix[0]) + wx[1] * read(plane, 0, iy[i], ix[1]) + wx[2] * read(plane, 0, iy[i], ix[2]) +
                  wx[3] * read(plane, 0, iy[i], ix[3]);
      }
      out[c * out_plane] = wy[0] * rows[0] + wy[1] * rows[1] + wy[2] * rows[2] + wy[3] * rows[3];
    }
    return;
  }
  // linear: interpolate along x, then y, then z (ORT's nesting).
  float f0[3], f1[3];  // weights of the lower and upper neighbour per axis
  int64_t i0[3], i1[3];
  for (int a = 0; a < 3; ++a) {
    if (a < 3 - rank) {
      f0[a] = 1.0f, f1[a] = 0.0f, i0[a] = 0, i1[a] = 0;
      continue;
    }
    const float lo = std::floor(p[a]);
    f1[a] = p[a] - lo;
    f0[a] = (lo + 1.0f) - p[a];
    const int64_t il = to_index(lo);
    i0[a] = index(a, il);
    i1[a] = index(a, il == kOutside ? kOutside : il + 1);
  }
  for (int64_t c = 0; c < C; ++c) {
    const float* plane = in + c * in_plane;
    float zs[2];
    for (int dz = 0; dz < 2; ++dz) {
      const int64_t iz = dz ? i1[0] : i0[0];
      const float r0 = f0[2] * read(plane, iz, i0[1], i0[2]) + f1[2] * read(plane, iz, i0[1], i1[2]);
      const float r1 = f0[2] * read(plane, iz, i1[1], i0[2]) + f1[2] * read(plane, iz, i1[1], i1[2]);
      zs[dz] = f0[1] * r0 + f1[1] * r1;
    }
    out[c * out_plane] = rank == 3 ? f0[0] * zs[0] + f1[0] * zs[1] : zs[0];
  }
}

}  // namespace

// Samples output points [p_begin, p_end) of batch item n. Shared by the reference (one
// call per n) and by the fast kernel for the combinations it does not vectorise.
void grid_sample_reference_range(const float* input, const float* grid, float* output, const GridSampleGeometry& g, const GridSampleOptions& opt,
                                 int64_t n, int64_t p_begin, int64_t p_end) {
  const int r = g.spatial_rank;
  const int64_t in_plane = g.in_points(), out_plane = g.out_points();
  const float* in_n = input + n * g.c * in_plane;
  float* out_n = output + n * g.c * out_plane;
  const float* grid_n = grid + n * out_plane * r;
  for (int64_t p = p_begin; p < p_end; ++p) {
    const float* gp = grid_n + p * r;
    if (opt.convention == GridSampleConvention::onnx) {
      const float gz[3] = {r == 3 ? gp[2] : 0.0f, gp[1], gp[0]};
      sample_point_onnx(in_n, out_n + p, g.c, g.in, r, in_plane, out_plane, gz, opt);
    } else if (r == 2) {
      sample_point_pt2(in_n, out_n + p, g.c, g.in[1], g.in[2], in_plane, out_plane, gp[0], gp[1], opt);
    } else {
      sample_point_pt3(in_n, out_n + p, g.c, g.in[0], g.in[1], g.in[2], in_plane, out_plane, gp[0], gp[1], gp[2], opt);
    }
  }
}

void grid_sample_reference_f32(const float* input, const float* grid, float* output, const GridSampleGeometry& g, const GridSampleOptions& opt) {
  for (int64_t n = 0; n < g.n; ++n) {
    grid_sample_reference_range(input, grid, output, g, opt, n, 0, g.out_points());
  }
}

}  // namespace rkd
