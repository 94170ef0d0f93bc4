// The simulator's epilogue for the configuration every lowering emits (see
// common_epilogue()), on Highway's float64 lanes (dynamic dispatch: the best target of the
// running CPU). Exact integer arithmetic only: every value it computes is the one
// run_epilogue() (sim.cc, stage by stage) computes, which the simulator's loop tests check
// bit for bit. Why doubles: every intermediate is an integer below 2^53 or such an integer
// times a power of two, so products, sums, scalings by 2^-s and the roundings (Floor for half
// up, Round for half to even) are exact, and min/max, multiply and rounding are one
// instruction on every target; int64 lanes had to emulate min/max and arithmetic shifts on
// AVX2 and SSE4 (compare + blend), which was half of a simulated model's time there.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "npu/sim/epilogue_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "core/isa.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/tensor_ops.h"
#include "npu/sim/conv_task.h"

#ifndef RKD_NPU_SIM_EPILOGUE_PARAMS
#define RKD_NPU_SIM_EPILOGUE_PARAMS
namespace rkd::npu::sim::detail {
// The epilogue's constants, prepared once per task (run_common_epilogue). A shift s appears
// as the factor 2^-s; shifts above kMaxShift act as kMaxShift (see Stages).
struct EpilogueParams {
  double lo2, hi2;             // saturation to int32 and ReLU / ReLUX as one clamp (with the EW add)
  double lo3, hi3;             // the clamp before OUT_CVT: lo2/hi2 (no EW) or int32's range, narrowed to out_range()
  double trunc_scale;          // 2^-truncate
  double out_scale;            // OUT_CVT: SCALE 2^-SHIFT
  int32_t offset;              // OUT_CVT: OFFSET, added to int32 lanes
  double ew_offset, ew_scale;  // EW: OFFSET, SCALE 2^-SHIFT
  int trunc;
  bool mul, ew, same_shift;
  bool mac_fits;  // |MAC| provably within int32
  bool alu_fits;  // |MAC| + |ALU operand| too, for every channel
};
// Pixels [p0, p1) of one task's output, channels [0, OCw).
struct EpilogueJob {
  MacView view;
  int64_t p0, p1, OCw, out_surface;
  uint8_t* y;
  const int32_t* alu;
  const int16_t* mul;
  int bs_shift_pos, bs_shift_neg;
  const uint8_t* ew;  // the EW operand (NC1HWC2), or nullptr
  int64_t ew_surface;
};
// Half-up shifts use Floor(u 2^-s + 1/2), exact while u 2^-s + 1/2 has at most 53 significant
// bits: |u| < 2^47 (every shifted operand here) and s <= 48. For s > 48 the true result is 0
// (|u| < 2^(s-1)), as it is for s = 48, so larger shifts are clamped to 48.
constexpr int kMaxShift = 48;
}  // namespace rkd::npu::sim::detail
#endif

HWY_BEFORE_NAMESPACE();
namespace rkd::npu::sim::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
#if !HWY_HAVE_FLOAT64
#error "the simulator's epilogue needs float64 lanes"
#endif

// Variants of the stages, as template flags: the BS MUL stage on; the EW add on; the BS
// shift the same for both signs; the MAC provably within int32 (its saturation a no-op);
// no CORE truncation either, so that the ALU operand is folded into the MAC's offset; and
// MAC + ALU provably within int32 too (the saturation after the add a no-op).
enum : int { kMul = 1, kEw = 2, kSameShift = 4, kMacFits = 8, kFolded = 16, kAluFits = 32 };
constexpr bool valid_flags(int f) {
  return (!(f & kSameShift) || (f & kMul)) && (!(f & kFolded) || (f & kMacFits)) && (!(f & kAluFits) || (f & kFolded));
}

// The stages for one vector of channels: v the MACs, the channels' operands (mp, mn: MUL
// 2^-shift for each sign), x the EW operand. Returns the int8 results. Magnitudes, which
// make every operation exact: the MAC and the ALU operand below 2^32 (their sum too), every
// value saturated to int32 before it is multiplied by a 16-bit operand (products below 2^47),
// the EW operand plus its OFFSET within int32 (common_epilogue). Roundings: half up is
// Floor(u 2^-s + 1/2) (kMaxShift), half to even is Round(u 2^-s), which needs no addition.
// Saturation to int32 followed by the ReLU/ReLUX clamp is one clamp to the intersection
// (P.lo2, P.hi2): the ReLU bounds are 0 or none below and an int32 or none above. The clamp
// before OUT_CVT (that one without EW, int32's after the EW add) is narrowed to the values
// whose output is not saturated anyway (out_range()), so OUT_CVT's product is small: the
// result without its OFFSET fits int32, and OFFSET and the saturation to int8 are applied to
// int32 lanes after the conversion (Block).
template <int F, class D, class V>
HWY_INLINE V Stages(D d, const EpilogueParams& P, V v, V alu, V mp, V mn, V x) {
  const V kMin = hn::Set(d, std::numeric_limits<int32_t>::min()), kMax = hn::Set(d, std::numeric_limits<int32_t>::max());
  const V half = hn::Set(d, 0.5);
  auto sat32 = [&](V u) { return hn::Min(hn::Max(u, kMin), kMax); };
  // The MAC saturated to int32, CORE's truncation, the BS ALU add (saturating).
  if constexpr (!(F & kMacFits)) v = sat32(v);
  if constexpr (!(F & kFolded)) {
    if (P.trunc > 0) v = hn::Round(hn::Mul(v, hn::Set(d, P.trunc_scale)));
    v = hn::Add(v, alu);
  }
  if constexpr (F & kMul) {  // BS MUL, shifted half up by the sign's shift field
    if constexpr (!(F & kAluFits)) v = sat32(v);
    // v mp + 1/2 in one rounding (MulAdd) is exact: the exact value is representable.
    const V pos = hn::Floor(hn::MulAdd(v, mp, half));
    if constexpr (F & kSameShift) {
      v = pos;
    } else {
      v = hn::IfThenElse(hn::Lt(hn::Mul(v, mp), hn::Zero(d)), hn::Floor(hn::MulAdd(v, mn, half)), pos);
    }
  }
  if constexpr (F & kEw) {                                          // EW: the operand converted (half up) and added
    v = hn::Min(hn::Max(v, hn::Set(d, P.lo2)), hn::Set(d, P.hi2));  // saturation and ReLU / ReLUX
    const V e = hn::Floor(hn::MulAdd(hn::Add(x, hn::Set(d, P.ew_offset)), hn::Set(d, P.ew_scale), half));
    v = hn::Add(v, e);
  }
  v = hn::Min(hn::Max(v, hn::Set(d, P.lo3)), hn::Set(d, P.hi3));
  // OUT_CVT: times SCALE, half to even (OFFSET and int8 in Block).
  return hn::Round(hn::Mul(v, hn::Set(d, P.out_scale)));
}

// One 16-channel block's operands, in channel order.
struct BlockOperands {
  HWY_ALIGN double base[16];  // wsum_scale * wsum (+ the ALU operand when folded): the MAC = acc + base
  HWY_ALIGN double alu[16];
  HWY_ALIGN double mp[16], mn[16];
};

// 16 channels of one pixel: a the accumulators, e the 16 EW bytes (kEw), o the 16 output bytes.
template <int F>
HWY_INLINE void Block(const EpilogueParams& P, const int32_t* HWY_RESTRICT a, const uint8_t* HWY_RESTRICT e, const BlockOperands& B,
                      uint8_t* HWY_RESTRICT o) {
  const hn::ScalableTag<double> d;
#if HWY_TARGET == HWY_SCALAR
  for (int c = 0; c < 16; ++c) {
    const double x = (F & kEw) ? static_cast<int8_t>(e[c]) : 0;
    const auto r = Stages<F>(d, P, hn::Set(d, a[c] + B.base[c]), hn::Set(d, B.alu[c]), hn::Set(d, B.mp[c]), hn::Set(d, B.mn[c]), hn::Set(d, x));
    o[c] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(static_cast<int32_t>(hn::GetLane(r)) + P.offset, -128, 127)));
  }
#else
  const hn::Rebind<int32_t, decltype(d)> dh;  // as many int32 lanes as d has doubles
  const hn::Twice<decltype(dh)> dw;
  const hn::Rebind<int8_t, decltype(dw)> d8;
  const hn::Rebind<int8_t, decltype(dh)> d8h;
  const size_t N = hn::Lanes(d);
  auto lanes = [&](size_t q) {
    const auto v = hn::Add(hn::PromoteTo(d, hn::LoadU(dh, a + q)), hn::Load(d, B.base + q));
    hn::Vec<decltype(d)> x = hn::Zero(d);
    if constexpr (F & kEw) x = hn::PromoteTo(d, hn::PromoteTo(dh, hn::LoadU(d8h, reinterpret_cast<const int8_t*>(e) + q)));
    return hn::DemoteTo(dh, Stages<F>(d, P, v, hn::Load(d, B.alu + q), hn::Load(d, B.mp + q), hn::Load(d, B.mn + q), x));
  };
  const auto offset = hn::Set(dw, P.offset);
  for (size_t q = 0; q < 16; q += 2 * N) {
    const auto lo = lanes(q), hi = lanes(q + N);
    hn::StoreU(hn::DemoteTo(d8, hn::Add(hn::Combine(dw, hi, lo), offset)), d8, reinterpret_cast<int8_t*>(o + q));  // saturating
  }
#endif
}

template <int F>
HWY_INLINE void Range(const EpilogueParams& params, const EpilogueJob& J) {
  // Local copies: the output bytes (uint8_t) may alias anything the caller passed by
  // reference, which would make the compiler reload every parameter after every store.
  const EpilogueParams P = params;
  const MacView view = J.view;
  const int64_t M = view.stride, total = view.avail, p0 = J.p0, p1 = J.p1, OCw = J.OCw, out_surface = J.out_surface, ew_surface = J.ew_surface;
  uint8_t* const y = J.y;
  const uint8_t* const ew = J.ew;
  const double sp = std::ldexp(1.0, -std::min(J.bs_shift_pos, kMaxShift)), sn = std::ldexp(1.0, -std::min(J.bs_shift_neg, kMaxShift));
  for (int64_t k0 = 0; k0 < OCw; k0 += 16) {
    const int64_t n = std::min<int64_t>(16, OCw - k0);
    BlockOperands B{};
    for (int64_t j = 0; j < n; ++j) {
      const int64_t k = k0 + j;
      B.base[j] = static_cast<double>(view.wsum_scale * view.wsum[k] +
                                      ((F & kFolded) ? J.alu[k] : 0));  // MAC + ALU, exact: no saturation or truncation between
      B.alu[j] = J.alu[k];
      B.mp[j] = P.mul ? J.mul[k] * sp : 0;
      B.mn[j] = P.mul ? J.mul[k] * sn : 0;
    }
    uint8_t* out = y + (k0 / 16) * out_surface;
    const uint8_t* eb = (F & kEw) ? ew + (k0 / 16) * ew_surface : nullptr;
    for (int64_t p = p0; p < p1; ++p) {
      const uint8_t* e = (F & kEw) ? eb + p * 16 : nullptr;
      // A partial block (n < 16) computes all 16 lanes too: the lanes past n read the next
      // accumulators (another task's kernels, operands 0) and write padding channels of the
      // same 16-channel group, which the hardware writes as well and nobody reads. Only the
      // last accumulators, where 16 lanes would run past the buffer, go through a copy.
      const int32_t* a = view.acc + p * M + k0;
      if (p * M + k0 + 16 <= total) {
        Block<F>(P, a, e, B, out + p * 16);
      } else {
        HWY_ALIGN int32_t a16[16] = {};
        std::memcpy(a16, a, static_cast<size_t>(n) * 4);
        Block<F>(P, a16, e, B, out + p * 16);
      }
    }
  }
}

template <int F>
void RangeIf(int f, const EpilogueParams& P, const EpilogueJob& J) {
  if constexpr (F < 64) {
    if constexpr (valid_flags(F)) {
      if (f == F) return Range<F>(P, J);
    }
    RangeIf<F + 1>(f, P, J);
  }
}

void EpilogueRange(const EpilogueParams& P, const EpilogueJob& J) {
  const bool folded = P.mac_fits && P.trunc == 0;
  const int f = (P.mul ? kMul : 0) | (P.ew ? kEw : 0) | (P.mul && P.same_shift ? kSameShift : 0) | (P.mac_fits ? kMacFits : 0) |
                (folded ? kFolded : 0) | (folded && P.alu_fits ? kAluFits : 0);
  RangeIf<0>(f, P, J);
}

}  // namespace HWY_NAMESPACE
}  // namespace rkd::npu::sim::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rkd::npu::sim::detail {

RKD_HIGHWAY_HONOURS_ISA_CEILING;

HWY_EXPORT(EpilogueRange);

bool common_epilogue(const Epilogue& e) {
  const Stage& b = e.bs;
  constexpr int64_t kLo = std::numeric_limits<int32_t>::min() + 128, kHi = std::numeric_limits<int32_t>::max() - 127;
  const bool ew_ok =
      !e.ew.on || (e.ew.algo == 2 && !e.ew.mul && !e.ew.per_channel && !e.ew.cvt_bypass && !e.ew.relu && !e.ew.as_float && e.ew.shift >= 0 &&
                   e.ew.shift < 63 && e.ew.offset >= kLo && e.ew.offset <= kHi && e.ew.scale >= 0 && e.ew.scale <= 0xffff);
  return !e.lut && (e.truncate == 0 || e.core_round == Rounding::half_to_even) && e.truncate < 32 && e.bn.bypass && ew_ok && !b.bypass &&
         !b.alu_bypass && b.alu_src && b.alu_algo == 2 && !b.prelu && (b.mul_bypass || b.mul_src) && e.bs_round == Rounding::half_up &&
         e.out_round == Rounding::half_to_even && e.shift > 0 && e.shift < 63 && e.scale >= -32768 && e.scale <= 0xffff &&
         e.offset >= -(int64_t{1} << 24) && e.offset <= (int64_t{1} << 24) &&
         (b.mul_bypass || (b.shift_pos > 0 && b.shift_neg > 0 && b.shift_pos < 63 && b.shift_neg < 63));
}

namespace {
// OUT_CVT's value before saturation (sim.h stage 7; |t SCALE| < 2^47).
int64_t out_cvt(int64_t t, int64_t scale, int shift, int64_t offset) { return round_shift(t * scale, shift, Rounding::half_to_even) + offset; }

// [tlo, thi] within int32's range such that clamping an int32 t to it leaves OUT_CVT's
// saturated output unchanged: beyond each end the output saturates at the value it has at the
// end (OUT_CVT is monotonic in t). Inside, |out_cvt(t)| <= 128 + |SCALE| / 2 + 1, so that
// without its OFFSET it fits int32 (common_epilogue bounds OFFSET).
std::pair<int64_t, int64_t> out_range(int64_t scale, int shift, int64_t offset) {
  constexpr int64_t kLo = std::numeric_limits<int32_t>::min(), kHi = std::numeric_limits<int32_t>::max();
  if (scale == 0) return {kLo, kHi};
  const bool up = scale > 0;
  auto low_end = [&](int64_t t) { return up ? out_cvt(t, scale, shift, offset) <= -128 : out_cvt(t, scale, shift, offset) >= 127; };
  auto high_end = [&](int64_t t) { return up ? out_cvt(t, scale, shift, offset) >= 127 : out_cvt(t, scale, shift, offset) <= -128; };
  int64_t tlo = kLo, thi = kHi;
  if (low_end(kLo)) {  // the largest t with low_end(t): low_end holds on a prefix of the range
    int64_t a = kLo, b = kHi;
    while (a < b) {
      const int64_t m = a + (b - a + 1) / 2;
      if (low_end(m)) a = m;
      else b = m - 1;
    }
    tlo = a;
  }
  if (high_end(kHi)) {  // the smallest t with high_end(t): it holds on a suffix
    int64_t a = kLo, b = kHi;
    while (a < b) {
      const int64_t m = a + (b - a) / 2;
      if (high_end(m)) b = m;
      else a = m + 1;
    }
    thi = a;
  }
  return {tlo, std::max(tlo, thi)};
}
}  // namespace

void run_common_epilogue(const Epilogue& e, int64_t pixels, int64_t OCw, int64_t out_surface, uint8_t* y, const MacView& v) {
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  EpilogueParams P{};
  P.mul = !e.bs.mul_bypass;
  P.ew = e.ew.on;
  P.mac_fits = e.mac_bound <= kMax32;
  int64_t alu_max = 0;
  for (int64_t k = 0; k < OCw; ++k) alu_max = std::max<int64_t>(alu_max, e.alu[k] < 0 ? -int64_t{e.alu[k]} : e.alu[k]);
  P.alu_fits = P.mac_fits && e.mac_bound + alu_max <= kMax32;
  const int64_t lo2 = e.bs.relu_bypass ? std::numeric_limits<int32_t>::min() : 0;
  const int64_t hi2 = e.bs.relux ? e.bs.relux_value : std::numeric_limits<int32_t>::max();
  P.lo2 = static_cast<double>(lo2);
  P.hi2 = static_cast<double>(hi2);
  const auto [tlo, thi] = out_range(e.scale, e.shift, e.offset);
  P.lo3 = static_cast<double>(std::max(P.ew ? std::numeric_limits<int32_t>::min() : lo2, tlo));
  P.hi3 = static_cast<double>(std::min(P.ew ? std::numeric_limits<int32_t>::max() : hi2, thi));
  P.same_shift = e.bs.shift_pos == e.bs.shift_neg;
  P.out_scale = std::ldexp(static_cast<double>(e.scale), -e.shift);
  P.offset = static_cast<int32_t>(e.offset);
  P.trunc = e.truncate;
  P.trunc_scale = std::ldexp(1.0, -e.truncate);
  if (P.ew) {
    P.ew_offset = static_cast<double>(e.ew.offset);
    P.ew_scale = std::ldexp(static_cast<double>(e.ew.scale), -std::min(e.ew.shift, kMaxShift));
  }
  // Pixel ranges on the math threads (each writes its own pixels).
  const int64_t chunk = 256, chunks = (pixels + chunk - 1) / chunk;
  ops::math_parallel_for(chunks, pixels * OCw, [&](int64_t i) {
    const EpilogueJob job{v,
                          i * chunk,
                          std::min(pixels, (i + 1) * chunk),
                          OCw,
                          out_surface,
                          y,
                          e.alu,
                          e.mul,
                          e.bs.shift_pos,
                          e.bs.shift_neg,
                          e.ew.on ? e.ew.e : nullptr,
                          e.ew.surface};
    HWY_DYNAMIC_DISPATCH(EpilogueRange)(P, job);
  });
}

}  // namespace rkd::npu::sim::detail
#endif
