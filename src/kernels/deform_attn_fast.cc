// The fast MSDA: one task per (batch, head, block of queries) on the thread pool.
// Within a task, per query:
//   1. plan (SIMD over the query's P points): sampling coordinates, corner weights and the
//      token index of each corner, with exactly the operations of deform_attn_coords.h;
//      corners outside the map index the zero token the prepared value keeps at T;
//   2. accumulate (SIMD over the head's channels, up to 8 lanes): for each point, read the
//      corners' hd channels (contiguous in the channels-last value), blend them with the
//      reference's fused multiply-add chain, weight and add to the accumulator.
// No intermediate [.., Lq, P] tensor exists; the result is bit-identical to the reference.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/deform_attn_fast.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "core/isa.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/deform_attn.h"
#include "kernels/deform_attn_coords.h"

#ifndef RKD_DEFORM_ATTN_FAST_SHARED  // defined once, though Highway re-includes this file
#define RKD_DEFORM_ATTN_FAST_SHARED
namespace rkd::msda_detail {
inline constexpr int64_t kMaxHeadDimPadded = 256;
inline constexpr int64_t kMaxPoints = 256;

// Per-point constants of the level each point samples, laid out for SIMD loads.
struct PointTables {
  alignas(64) float w[kMaxPoints], h[kMaxPoints], half_w[kMaxPoints], half_h[kMaxPoints];
  alignas(64) float x_hi[kMaxPoints], y_hi[kMaxPoints];  // discrete clamp bounds
  alignas(64) int32_t stride[kMaxPoints], start[kMaxPoints];
  int64_t padded_points = 0;
};
}  // namespace rkd::msda_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace rkd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#include "kernels/simd_fma-inl.h"
#include "kernels/bilinear_lanes-inl.h"

using msda_detail::kMaxHeadDimPadded;
using msda_detail::kMaxPoints;
using msda_detail::PointTables;

struct QueryPlan {
  alignas(64) int32_t token[4][kMaxPoints];
  alignas(64) float weight[4][kMaxPoints];
};

void PlanQuery(const float* loc, int64_t P, int32_t zero_token, MsdaMethod method, const PointTables& t, QueryPlan& plan) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  alignas(64) float buf[2 * kMaxPoints];
  std::memcpy(buf, loc, static_cast<size_t>(2 * P) * sizeof(float));
  std::fill(buf + 2 * P, buf + 2 * t.padded_points, 0.0f);
  const auto one = hn::Set(d, 1.0f), zero = hn::Zero(d);
  const auto vzero_token = hn::Set(di, zero_token);
  for (int64_t k = 0; k < P; k += N) {
    hn::Vec<decltype(d)> lx, ly;
    hn::LoadInterleaved2(d, buf + 2 * k, lx, ly);
    const auto W = hn::Load(d, t.w + k), H = hn::Load(d, t.h + k);
    const auto stride = hn::Load(di, t.stride + k), start = hn::Load(di, t.start + k);
    if (method == MsdaMethod::bilinear) {
      const auto gx = lx * hn::Set(d, 2.0f) - one, gy = ly * hn::Set(d, 2.0f) - one;
      const auto x = FusedMulAdd(d, gx + one, hn::Load(d, t.half_w + k), hn::Set(d, -0.5f));
      const auto y = FusedMulAdd(d, gy + one, hn::Load(d, t.half_h + k), hn::Set(d, -0.5f));
      const auto lanes = ComputeBilinearLanes(d, x, y, W, H, stride);
      for (int c = 0; c < 4; ++c) {
        hn::Store(lanes.weight[c], d, plan.weight[c] + k);
        hn::Store(hn::IfThenElse(hn::RebindMask(di, lanes.ok[c]), start + lanes.offset[c], vzero_token), di, plan.token[c] + k);
      }
    } else {
      // int64(loc * size + 0.5) with x86 conversion of unrepresentable values (-> INT64_MIN,
      // clamped to 0), then the clamp to [0, hi]; done in float, where it is exact.
      const auto lim = hn::Set(d, 9223372036854775808.0f);
      auto index = [&](hn::Vec<decltype(d)> l, hn::Vec<decltype(d)> size, hn::Vec<decltype(d)> hi) {
        const auto v = l * size + hn::Set(d, 0.5f);
        const auto repr = hn::And(v >= hn::Neg(lim), v < lim);
        auto r = hn::Trunc(v);
        r = hn::IfThenElse(r > zero, r, zero);
        r = hn::IfThenElse(r < hi, r, hi);
        return hn::ConvertTo(di, hn::IfThenElseZero(repr, r));
      };
      const auto ix = index(lx, W, hn::Load(d, t.x_hi + k));
      const auto iy = index(ly, H, hn::Load(d, t.y_hi + k));
      hn::Store(start + iy * stride + ix, di, plan.token[0] + k);
    }
  }
}

// Accumulates one query of one head into out[0..hd). kChunks > 0: the channel count in
// vectors is a compile-time constant, so the accumulators live in registers; kChunks == 0:
// any count, accumulators in memory.
template <int kChunks>
HWY_INLINE void AccumulateQuery(const float* head, const QueryPlan& plan, const float* wt, int64_t P, MsdaMethod method, int64_t hd, int64_t hdp,
                                float* out) {
  const hn::CappedTag<float, 8> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t chunks = kChunks > 0 ? kChunks : hdp / N;
  constexpr int64_t kSlots = kChunks > 0 ? kChunks : kMaxHeadDimPadded / 4;
  hn::Vec<decltype(d)> acc[kSlots];
  for (int64_t j = 0; j < chunks; ++j) acc[j] = hn::Zero(d);
  for (int64_t k = 0; k < P; ++k) {
    const auto a = hn::Set(d, wt[k]);
    if (method == MsdaMethod::bilinear) {
      const float* r0 = head + plan.token[0][k] * hdp;
      const float* r1 = head + plan.token[1][k] * hdp;
      const float* r2 = head + plan.token[2][k] * hdp;
      const float* r3 = head + plan.token[3][k] * hdp;
      const auto w0 = hn::Set(d, plan.weight[0][k]), w1 = hn::Set(d, plan.weight[1][k]);
      const auto w2 = hn::Set(d, plan.weight[2][k]), w3 = hn::Set(d, plan.weight[3][k]);
      for (int64_t j = 0; j < chunks; ++j) {
        auto s = hn::Load(d, r0 + j * N) * w0;
        s = FusedMulAdd(d, hn::Load(d, r1 + j * N), w1, s);
        s = FusedMulAdd(d, hn::Load(d, r2 + j * N), w2, s);
        s = FusedMulAdd(d, hn::Load(d, r3 + j * N), w3, s);
        acc[j] = acc[j] + s * a;
      }
    } else {
      const float* r = head + plan.token[0][k] * hdp;
      for (int64_t j = 0; j < chunks; ++j) acc[j] = acc[j] + hn::Load(d, r + j * N) * a;
    }
  }
  if (hd == hdp) {
    for (int64_t j = 0; j < chunks; ++j) hn::StoreU(acc[j], d, out + j * N);
  } else {
    alignas(64) float buf[kMaxHeadDimPadded];
    for (int64_t j = 0; j < chunks; ++j) hn::Store(acc[j], d, buf + j * N);
    std::memcpy(out, buf, static_cast<size_t>(hd) * sizeof(float));
  }
}

void MsdaTask(const MsdaProblem* pp, const PointTables* tables, int method_int, int64_t b, int64_t m, int64_t q0, int64_t q1) {
  const MsdaProblem& p = *pp;
  const auto method = static_cast<MsdaMethod>(method_int);
  const MsdaValue& v = *p.value;
  const int64_t nH = v.heads, hd = v.head_dim, hdp = v.head_dim_padded;
  const int64_t P = p.total_points;
  const int64_t chunks = hdp / static_cast<int64_t>(hn::Lanes(hn::CappedTag<float, 8>()));
  const float* head = v.data.data<float>() + (b * nH + m) * v.head_stride();
  const auto zero_token = static_cast<int32_t>(v.tokens());
  // Double-buffered plans: the next query's corners are planned and prefetched before the
  // current one is accumulated, so its value rows (random tokens, L2/L3 latency) arrive
  // while this query computes.
  QueryPlan plans[2];
  const int corners = method == MsdaMethod::bilinear ? 4 : 1;
  auto plan_and_prefetch = [&](int64_t q, QueryPlan& plan) {
    const float* loc = p.locations + ((b * p.queries + q) * nH + m) * P * 2;
    PlanQuery(loc, P, zero_token, method, *tables, plan);
    for (int c = 0; c < corners; ++c) {
      for (int64_t k = 0; k < P; ++k) {
        const float* row = head + plan.token[c][k] * hdp;
        hwy::Prefetch(row);
        hwy::Prefetch(row + hdp - 1);
      }
    }
  };
  if (q0 < q1) plan_and_prefetch(q0, plans[0]);
  for (int64_t q = q0; q < q1; ++q) {
    const QueryPlan& plan = plans[(q - q0) & 1];
    if (q + 1 < q1) plan_and_prefetch(q + 1, plans[(q + 1 - q0) & 1]);
    const float* wt = p.weights + ((b * p.queries + q) * nH + m) * P;
    float* out = p.out + (b * p.queries + q) * nH * hd + m * hd;
    switch (chunks) {
      case 1: AccumulateQuery<1>(head, plan, wt, P, method, hd, hdp, out); break;
      case 2: AccumulateQuery<2>(head, plan, wt, P, method, hd, hdp, out); break;
      case 3: AccumulateQuery<3>(head, plan, wt, P, method, hd, hdp, out); break;
      case 4: AccumulateQuery<4>(head, plan, wt, P, method, hd, hdp, out); break;
      case 6: AccumulateQuery<6>(head, plan, wt, P, method, hd, hdp, out); break;
      case 8: AccumulateQuery<8>(head, plan, wt, P, method, hd, hdp, out); break;
      default: AccumulateQuery<0>(head, plan, wt, P, method, hd, hdp, out); break;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rkd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rkd {

RKD_HIGHWAY_HONOURS_ISA_CEILING;

HWY_EXPORT(MsdaTask);

void msda_fast_f32(const MsdaProblem& p, MsdaMethod method, ThreadPool& pool) {
  using msda_detail::kMaxHeadDimPadded;
  using msda_detail::kMaxPoints;
  const MsdaValue& v = *p.value;
  // Limits of the stack-resident plan and accumulators (DETR decoders use hd <= 64 and
  // P <= 32); larger problems and value tensors beyond int32 token indices run the reference.
  if (v.head_dim_padded > kMaxHeadDimPadded || p.total_points + 16 > kMaxPoints || v.tokens() + 1 > INT32_MAX / 2) {
    msda_reference_f32(p, method);
    return;
  }
  msda_detail::PointTables tables;
  tables.padded_points = (p.total_points + 15) / 16 * 16;
  for (int64_t k = 0; k < tables.padded_points; ++k) {
    const int64_t l = p.point_level[static_cast<size_t>(std::min(k, p.total_points - 1))];
    const auto& lv = v.levels[static_cast<size_t>(l)];
    tables.w[k] = static_cast<float>(lv.w);
    tables.h[k] = static_cast<float>(lv.h);
    tables.half_w[k] = static_cast<float>(lv.w) / 2.0f;
    tables.half_h[k] = static_cast<float>(lv.h) / 2.0f;
    tables.x_hi[k] = static_cast<float>(method == MsdaMethod::discrete ? lv.h - 1 : lv.w - 1);
    tables.y_hi[k] = static_cast<float>(lv.h - 1);
    tables.stride[k] = static_cast<int32_t>(lv.w);
    tables.start[k] = static_cast<int32_t>(v.level_start[static_cast<size_t>(l)]);
  }
  // Tasks: (b, head, block of queries); small enough to balance two to a few dozen
  // threads on DETR shapes (B=1, 8 heads, 300 queries -> 80 tasks).
  constexpr int64_t kQueryBlock = 30;
  const int64_t qblocks = (p.queries + kQueryBlock - 1) / kQueryBlock;
  const int64_t tasks = v.batch * v.heads * qblocks;
  pool.parallel_for(tasks, [&](int64_t t) {
    const int64_t qb = t % qblocks;
    const int64_t m = (t / qblocks) % v.heads;
    const int64_t b = t / (qblocks * v.heads);
    const int64_t q0 = qb * kQueryBlock, q1 = std::min(p.queries, q0 + kQueryBlock);
    HWY_DYNAMIC_DISPATCH(MsdaTask)(&p, &tables, static_cast<int>(method), b, m, q0, q1);
  });
}

}  // namespace rkd
#endif
