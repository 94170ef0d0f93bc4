// The fast GridSample: Highway SIMD over output points + the thread pool over
// (batch item x block of output points).
//
// What is vectorised: the 2-D PyTorch convention, bilinear and nearest, every padding
// mode and align_corners value - the DETR decoder's case and the common one. Per block of
// kBlock output points, phase 1 computes each point's corner offsets, bounds masks and
// weights once, lane-wise, with exactly the operations of grid_sample_coords.h; phase 2
// walks the channels, reading the corners and combining them with the same fused
// multiply-add chain as the reference. Results equal the reference bit for bit.
// Everything else (bicubic, 3-D, the ONNX convention) runs the reference loops, threaded
// over the same (n, block) tasks.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/grid_sample_fast.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "core/isa.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/grid_sample.h"
#include "kernels/grid_sample_coords.h"

HWY_BEFORE_NAMESPACE();
namespace rkd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#include "kernels/simd_fma-inl.h"
#include "kernels/bilinear_lanes-inl.h"

constexpr int64_t kBlock = gs::kMaxBlockPoints;  // a multiple of every lane count

struct BlockPlan {
  // Per point and corner (nw, ne, sw, se): gather index (0 when invalid), validity mask
  // as float bits (all ones / zero), weight.
  alignas(64) int32_t idx[4][kBlock];
  alignas(64) uint32_t mask[4][kBlock];
  alignas(64) float weight[4][kBlock];
};

template <class D>
hn::Vec<D> ClipPt2(D d, hn::Vec<D> p, float hi) {
  const auto zero = hn::Zero(d);
  p = hn::IfThenElse(p > zero, p, zero);  // NaN -> 0
  const auto vhi = hn::Set(d, hi);
  return hn::IfThenElse(p < vhi, p, vhi);
}

template <class D>
hn::Vec<D> ReflectPt2(D d, hn::Vec<D> p, int64_t size, bool align_corners) {
  if (align_corners && size == 1) return hn::Zero(d);
  const float ts = static_cast<float>(align_corners ? 2 * (size - 1) : 2 * size);
  const auto vts = hn::Set(d, ts);
  const auto a = align_corners ? hn::Abs(p) : hn::Abs(p + hn::Set(d, 0.5f));
  const auto k = hn::Trunc(a / vts);
  const auto extra = FusedMulAdd(d, hn::Neg(k), vts, a);
  const auto other = vts - extra;
  auto m = hn::IfThenElse(extra < other, extra, other);
  m = hn::IfThenElse(hn::Or(hn::IsNaN(extra), hn::IsNaN(other)), hn::Set(d, NAN), m);
  return align_corners ? m : m - hn::Set(d, 0.5f);
}

template <class D>
hn::Vec<D> Coordinate(D d, hn::Vec<D> g, int64_t size, const GridSampleOptions& opt) {
  hn::Vec<D> p;
  if (opt.align_corners) {
    p = (g + hn::Set(d, 1.0f)) * hn::Set(d, static_cast<float>(size - 1) / 2.0f);
  } else {
    p = FusedMulAdd(d, g + hn::Set(d, 1.0f), hn::Set(d, static_cast<float>(size) / 2.0f), hn::Set(d, -0.5f));
  }
  switch (opt.padding) {
    case GridSamplePadding::zeros: return p;
    case GridSamplePadding::border: return ClipPt2(d, p, static_cast<float>(size - 1));
    case GridSamplePadding::reflection: return ClipPt2(d, ReflectPt2(d, p, size, opt.align_corners), static_cast<float>(size - 1));
  }
  return p;
}

// Phase 1 for `count` points starting at grid_pts (x, y interleaved).
void PlanBlock(const float* grid_pts, int64_t count, int64_t H, int64_t W, const GridSampleOptions& opt, BlockPlan& plan) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t N = hn::Lanes(d);
  alignas(64) float gbuf[2 * kBlock];
  std::memcpy(gbuf, grid_pts, static_cast<size_t>(2 * count) * sizeof(float));
  std::fill(gbuf + 2 * count, gbuf + 2 * kBlock, 0.0f);
  const auto fW = hn::Set(d, static_cast<float>(W)), fH = hn::Set(d, static_cast<float>(H));
  const auto zero = hn::Zero(d);
  const auto vW = hn::Set(di, static_cast<int32_t>(W));
  for (int64_t i = 0; i < count; i += static_cast<int64_t>(N)) {
    hn::Vec<decltype(d)> gx, gy;
    hn::LoadInterleaved2(d, gbuf + 2 * i, gx, gy);
    const auto x = Coordinate(d, gx, W, opt);
    const auto y = Coordinate(d, gy, H, opt);
    if (opt.mode == GridSampleMode::nearest) {
      const auto rx = hn::Round(x), ry = hn::Round(y);
      const auto ok = hn::And(hn::And(rx >= zero, rx < fW), hn::And(ry >= zero, ry < fH));
      const auto ix = hn::ConvertTo(di, hn::IfThenElseZero(ok, rx));
      const auto iy = hn::ConvertTo(di, hn::IfThenElseZero(ok, ry));
      hn::Store(iy * vW + ix, di, plan.idx[0] + i);
      hn::Store(hn::BitCast(di, hn::VecFromMask(d, ok)), di, reinterpret_cast<int32_t*>(plan.mask[0] + i));
      continue;
    }
    const auto lanes = ComputeBilinearLanes(d, x, y, fW, fH, vW);
    for (int k = 0; k < 4; ++k) {
      hn::Store(lanes.weight[k], d, plan.weight[k] + i);
      hn::Store(lanes.offset[k], di, plan.idx[k] + i);
      hn::Store(hn::BitCast(di, hn::VecFromMask(d, lanes.ok[k])), di, reinterpret_cast<int32_t*>(plan.mask[k] + i));
    }
  }
}

// Phase 2 for bilinear: all channels of one block; out points at output (n, 0, p0).
//
// Points are split into interior ones (every corner inside the map: plain loads, no
// masks) and edge ones (per-corner validity). The corners are read with scalar loads,
// point-major: a point's offsets and weights stay in registers across its C channels.
// SIMD gathers (channel-major) were measured slower here (4 gathers per vector of points:
// 280 vs 272 us at DEIMv2-S level 0, 210 vs 160 us at level 2); gathers are microcoded on
// current x86 cores and do not exist on NEON. The per-point work (coordinates, weights,
// offsets) stays vectorised in phase 1.
void ApplyBlockBilinear(const float* in_n, float* out, int64_t C, int64_t in_plane, int64_t out_plane, int64_t count, int64_t W,
                        const BlockPlan& plan) {
  int32_t inner[kBlock], edge[kBlock];
  int64_t n_inner = 0, n_edge = 0;
  for (int64_t i = 0; i < count; ++i) {
    const bool all = plan.mask[0][i] && plan.mask[1][i] && plan.mask[2][i] && plan.mask[3][i];
    if (all) {
      inner[n_inner++] = static_cast<int32_t>(i);
    } else {
      edge[n_edge++] = static_cast<int32_t>(i);
    }
  }
  for (int64_t j = 0; j < n_inner; ++j) {
    const int64_t i = inner[j];
    const float w0 = plan.weight[0][i], w1 = plan.weight[1][i], w2 = plan.weight[2][i], w3 = plan.weight[3][i];
    const float* p = in_n + plan.idx[0][i];
    float* o = out + i;
    for (int64_t c = 0; c < C; ++c, p += in_plane, o += out_plane) {
      *o = std::fma(p[W + 1], w3, std::fma(p[W], w2, std::fma(p[1], w1, p[0] * w0)));
    }
  }
  for (int64_t j = 0; j < n_edge; ++j) {
    const int64_t i = edge[j];
    const float w0 = plan.weight[0][i], w1 = plan.weight[1][i], w2 = plan.weight[2][i], w3 = plan.weight[3][i];
    const bool ok0 = plan.mask[0][i] != 0, ok1 = plan.mask[1][i] != 0, ok2 = plan.mask[2][i] != 0, ok3 = plan.mask[3][i] != 0;
    const int32_t i0 = plan.idx[0][i], i1 = plan.idx[1][i], i2 = plan.idx[2][i], i3 = plan.idx[3][i];
    for (int64_t c = 0; c < C; ++c) {
      const float* plane = in_n + c * in_plane;
      const float v0 = ok0 ? plane[i0] : 0.0f, v1 = ok1 ? plane[i1] : 0.0f;
      const float v2 = ok2 ? plane[i2] : 0.0f, v3 = ok3 ? plane[i3] : 0.0f;
      out[i + c * out_plane] = std::fma(v3, w3, std::fma(v2, w2, std::fma(v1, w1, v0 * w0)));
    }
  }
}

// Phase 2 for nearest: channel-major, one SIMD gather per vector of points. With one
// corner per point the plane being read stays in L1 and the gather is cheaper than
// point-major scalar loads (measured: 113-125 us vs 151-164 us at DEIMv2-S level 0).
void ApplyBlockNearest(const float* in_n, float* out, int64_t C, int64_t in_plane, int64_t out_plane, int64_t count, const BlockPlan& plan) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::RebindToUnsigned<decltype(d)> du;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  alignas(64) float tail[64];
  for (int64_t c = 0; c < C; ++c) {
    const float* plane = in_n + c * in_plane;
    float* o = out + c * out_plane;
    for (int64_t i = 0; i < count; i += N) {
      const auto v = hn::GatherIndex(d, plane, hn::Load(di, plan.idx[0] + i));
      const auto r = hn::BitCast(d, hn::And(hn::BitCast(du, v), hn::Load(du, plan.mask[0] + i)));
      if (i + N <= count) {
        hn::StoreU(r, d, o + i);
      } else {
        hn::Store(r, d, tail);
        std::memcpy(o + i, tail, static_cast<size_t>(count - i) * sizeof(float));
      }
    }
  }
}

void SampleBlock2D(const float* input, const float* grid, float* output, const GridSampleGeometry* g, const GridSampleOptions* opt, int64_t n,
                   int64_t p0, int64_t count) {
  BlockPlan plan;
  const int64_t H = g->in[1], W = g->in[2];
  const int64_t in_plane = g->in_points(), out_plane = g->out_points();
  PlanBlock(grid + (n * out_plane + p0) * 2, count, H, W, *opt, plan);
  if (opt->mode == GridSampleMode::nearest) {
    ApplyBlockNearest(input + n * g->c * in_plane, output + n * g->c * out_plane + p0, g->c, in_plane, out_plane, count, plan);
  } else {
    ApplyBlockBilinear(input + n * g->c * in_plane, output + n * g->c * out_plane + p0, g->c, in_plane, out_plane, count, W, plan);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rkd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rkd {

RKD_HIGHWAY_HONOURS_ISA_CEILING;

HWY_EXPORT(SampleBlock2D);

void grid_sample_reference_range(const float* input, const float* grid, float* output, const GridSampleGeometry& g, const GridSampleOptions& opt,
                                 int64_t n, int64_t p_begin, int64_t p_end);

void grid_sample_fast_f32(const float* input, const float* grid, float* output, const GridSampleGeometry& g, const GridSampleOptions& opt,
                          ThreadPool& pool) {
  // Tasks are (batch item, block of output points): enough blocks that every thread gets
  // about four tasks even for a single batch item, blocks of at most gs::kMaxBlockPoints (phase 1
  // plans live on the stack), multiples of 16 (every lane count).
  const int64_t points = g.out_points();
  const int64_t wanted_tasks = 4 * pool.thread_count();
  const int64_t blocks_per_item = std::max<int64_t>(1, (wanted_tasks + g.n - 1) / g.n);
  int64_t block = (points + blocks_per_item - 1) / blocks_per_item;
  block = std::clamp<int64_t>((block + 15) / 16 * 16, 16, gs::kMaxBlockPoints);
  const int64_t blocks = (points + block - 1) / block;
  const bool simd = g.spatial_rank == 2 && opt.convention == GridSampleConvention::pytorch && opt.mode != GridSampleMode::bicubic &&
                    g.in_points() + g.in[2] + 1 < (int64_t{1} << 31);
  pool.parallel_for(g.n * blocks, [&](int64_t task) {
    const int64_t n = task / blocks;
    const int64_t p0 = (task % blocks) * block;
    const int64_t count = std::min(block, points - p0);
    if (simd) {
      HWY_DYNAMIC_DISPATCH(SampleBlock2D)(input, grid, output, &g, &opt, n, p0, count);
    } else {
      grid_sample_reference_range(input, grid, output, g, opt, n, p0, p0 + count);
    }
  });
}

}  // namespace rkd
#endif
