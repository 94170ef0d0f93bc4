// The fast MSDA: one pass per (batch, head, block of queries) task on the thread pool;
// within a task, each point's corners are computed once (scalar, the same functions as
// the reference) and the head's hd channels are processed as SIMD vectors of up to 8
// lanes, reading the channels-last prepared value. No intermediate [.., Lq, P] tensor is
// materialised: samples are weighted and accumulated in registers. Bit-exact with the
// reference (same operations per lane, same fused multiply-adds, same summation order).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/deform_attn_fast.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/deform_attn.h"
#include "kernels/deform_attn_coords.h"

HWY_BEFORE_NAMESPACE();
namespace rkd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#include "kernels/simd_fma-inl.h"

constexpr int64_t kMaxHeadDimPadded = 256;

void MsdaTask(const MsdaProblem* pp, int method_int, int64_t b, int64_t m, int64_t q0, int64_t q1) {
  const MsdaProblem& p = *pp;
  const auto method = static_cast<MsdaMethod>(method_int);
  const MsdaValue& v = *p.value;
  const int64_t nH = v.heads, hd = v.head_dim, hdp = v.head_dim_padded, T = v.tokens();
  const int64_t P = p.total_points;
  const hn::CappedTag<float, 8> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t chunks = hdp / N;
  const float* head = v.data.data<float>() + (b * nH + m) * T * hdp;
  alignas(64) static const float kZeros[kMaxHeadDimPadded] = {};
  alignas(64) float acc_buf[kMaxHeadDimPadded];

  for (int64_t q = q0; q < q1; ++q) {
    const float* loc = p.locations + ((b * p.queries + q) * nH + m) * P * 2;
    const float* wt = p.weights + ((b * p.queries + q) * nH + m) * P;
    hn::Vec<decltype(d)> acc[kMaxHeadDimPadded / 4];
    for (int64_t j = 0; j < chunks; ++j) acc[j] = hn::Zero(d);
    for (int64_t k = 0; k < P; ++k) {
      const int64_t l = p.point_level[static_cast<size_t>(k)];
      const int64_t H = v.levels[static_cast<size_t>(l)].h, W = v.levels[static_cast<size_t>(l)].w;
      const float* level = head + v.level_start[static_cast<size_t>(l)] * hdp;
      const auto a = hn::Set(d, wt[k]);
      if (method == MsdaMethod::bilinear) {
        const auto cr = msda_detail::bilinear_corners(loc[2 * k], loc[2 * k + 1], H, W);
        const float* src[4];
        for (int i = 0; i < 4; ++i) src[i] = cr.ok[i] ? level + cr.token[i] * hdp : kZeros;
        const auto w0 = hn::Set(d, cr.weight[0]), w1 = hn::Set(d, cr.weight[1]);
        const auto w2 = hn::Set(d, cr.weight[2]), w3 = hn::Set(d, cr.weight[3]);
        for (int64_t j = 0; j < chunks; ++j) {
          auto s = hn::Load(d, src[0] + j * N) * w0;
          s = FusedMulAdd(d, hn::Load(d, src[1] + j * N), w1, s);
          s = FusedMulAdd(d, hn::Load(d, src[2] + j * N), w2, s);
          s = FusedMulAdd(d, hn::Load(d, src[3] + j * N), w3, s);
          acc[j] = acc[j] + s * a;
        }
      } else {
        const float* src = level + msda_detail::discrete_token(loc[2 * k], loc[2 * k + 1], H, W, method) * hdp;
        for (int64_t j = 0; j < chunks; ++j) acc[j] = acc[j] + hn::Load(d, src + j * N) * a;
      }
    }
    float* out = p.out + (b * p.queries + q) * nH * hd + m * hd;
    if (hd == hdp) {
      for (int64_t j = 0; j < chunks; ++j) hn::StoreU(acc[j], d, out + j * N);
    } else {
      for (int64_t j = 0; j < chunks; ++j) hn::Store(acc[j], d, acc_buf + j * N);
      std::memcpy(out, acc_buf, static_cast<size_t>(hd) * sizeof(float));
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace rkd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rkd {

HWY_EXPORT(MsdaTask);

void msda_fast_f32(const MsdaProblem& p, MsdaMethod method, ThreadPool& pool) {
  const MsdaValue& v = *p.value;
  if (v.head_dim_padded > HWY_NAMESPACE::kMaxHeadDimPadded) {
    msda_reference_f32(p, method);
    return;
  }
  // Tasks: (b, head, block of queries). Blocks small enough to balance two to a few
  // dozen threads on DETR shapes (B=1, 8 heads, 300 queries -> 80 tasks).
  constexpr int64_t kQueryBlock = 30;
  const int64_t qblocks = (p.queries + kQueryBlock - 1) / kQueryBlock;
  const int64_t tasks = v.batch * v.heads * qblocks;
  pool.parallel_for(tasks, [&](int64_t t) {
    const int64_t qb = t % qblocks;
    const int64_t m = (t / qblocks) % v.heads;
    const int64_t b = t / (qblocks * v.heads);
    const int64_t q0 = qb * kQueryBlock, q1 = std::min(p.queries, q0 + kQueryBlock);
    HWY_DYNAMIC_DISPATCH(MsdaTask)(&p, static_cast<int>(method), b, m, q0, q1);
  });
}

}  // namespace rkd
#endif
