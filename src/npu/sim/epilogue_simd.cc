// The simulator's epilogue for the configuration every lowering emits (see
// common_epilogue()), in Highway's int64 lanes (dynamic dispatch: the best target of the
// running CPU). Exact integer arithmetic only: every value it computes is the one
// run_epilogue() (sim.cc, stage by stage) computes, which the simulator's loop tests check
// bit for bit. Products are taken with MulEven on the low 32 bits of each lane: both factors
// are int32 there (a value already saturated to int32 times a 16-bit operand).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "npu/sim/epilogue_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "core/isa.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/tensor_ops.h"
#include "npu/sim/conv_task.h"

#ifndef RKD_NPU_SIM_EPILOGUE_PARAMS
#define RKD_NPU_SIM_EPILOGUE_PARAMS
namespace rkd::npu::sim::detail {
// The epilogue's constants, prepared once per task (run_common_epilogue).
struct EpilogueParams {
  int64_t lo2, hi2;  // saturation to int32 and ReLU / ReLUX as one clamp
  int sp, sn, so, trunc, ew_shift;
  int64_t half_p, half_n, half_o, scale, offset;
  int64_t ew_offset, ew_scale, ew_half;
  bool mul, ew;
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
  const uint8_t* ew;  // the EW operand (NC1HWC2), or nullptr
  int64_t ew_surface;
};
}  // namespace rkd::npu::sim::detail
#endif

HWY_BEFORE_NAMESPACE();
namespace rkd::npu::sim::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// a * b for int64 lanes whose values are int32 (the product is exact in int64).
template <class D, class V>
HWY_INLINE V MulInt32(D d, V a, V b) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  return hn::Mul(a, b);
#else
  const hn::Repartition<int32_t, D> dw;  // the lanes' 32-bit halves: MulEven takes the low ones
  return hn::MulEven(hn::BitCast(dw, a), hn::BitCast(dw, b));
#endif
}

// Variants of the stages, as template flags: the BS MUL stage on; the EW add on; the BS
// shift the same for both signs; the MAC provably within int32 (its saturation a no-op);
// no CORE truncation either, so that the ALU operand is folded into the MAC's offset; and
// MAC + ALU provably within int32 too (the saturation after the add a no-op).
enum : int { kMul = 1, kEw = 2, kSameShift = 4, kMacFits = 8, kFolded = 16, kAluFits = 32 };
constexpr bool valid_flags(int f) {
  return (!(f & kSameShift) || (f & kMul)) && (!(f & kFolded) || (f & kMacFits)) && (!(f & kAluFits) || (f & kFolded));
}

// The stages for one vector of channels: v the MACs (int64 lanes), the channels' operands,
// x the EW operand. Returns the int8 results in int64 lanes. Roundings in closed form:
// half up, (u + 2^(s-1)) >> s; half to even, (u + 2^(s-1) - 1 + ((u >> s) & 1)) >> s.
// Saturation to int32 followed by the ReLU/ReLUX clamp is one clamp to the intersection
// (P.lo2, P.hi2): the ReLU bounds are 0 or none below and an int32 or none above.
template <int F, class D, class V>
HWY_INLINE V Stages(D d, const EpilogueParams& P, V v, V alu, V mul, V x) {
  const V kMin = hn::Set(d, std::numeric_limits<int32_t>::min()), kMax = hn::Set(d, std::numeric_limits<int32_t>::max());
  const V one = hn::Set(d, 1);
  auto sat32 = [&](V u) { return hn::Min(hn::Max(u, kMin), kMax); };
  auto round_even = [&](V u, int s, V half_minus_one) {
    return hn::ShiftRightSame(hn::Add(hn::Add(u, half_minus_one), hn::And(hn::ShiftRightSame(u, s), one)), s);
  };
  // The MAC saturated to int32, CORE's truncation, the BS ALU add (saturating).
  if constexpr (!(F & kMacFits)) v = sat32(v);
  if constexpr (!(F & kFolded)) {
    if (P.trunc > 0) v = round_even(v, P.trunc, hn::Set(d, (int64_t{1} << (P.trunc - 1)) - 1));
    v = hn::Add(v, alu);
  }
  if constexpr (F & kMul) {  // BS MUL, shifted half up by the sign's shift field
    if constexpr (!(F & kAluFits)) v = sat32(v);
    const V prod = MulInt32(d, v, mul);
    if constexpr (F & kSameShift) {
      v = hn::ShiftRightSame(hn::Add(prod, hn::Set(d, P.half_p)), P.sp);
    } else {
      const V pos = hn::ShiftRightSame(hn::Add(prod, hn::Set(d, P.half_p)), P.sp);
      const V neg = hn::ShiftRightSame(hn::Add(prod, hn::Set(d, P.half_n)), P.sn);
      v = hn::IfThenElse(hn::Lt(prod, hn::Zero(d)), neg, pos);
    }
  }
  v = hn::Min(hn::Max(v, hn::Set(d, P.lo2)), hn::Set(d, P.hi2));  // saturation and ReLU / ReLUX
  if constexpr (F & kEw) {  // EW: the operand converted (half up) and added; e + OFFSET fits int32 (common_epilogue)
    const V c = MulInt32(d, hn::Add(x, hn::Set(d, P.ew_offset)), hn::Set(d, P.ew_scale));
    v = sat32(hn::Add(v, hn::ShiftRightSame(hn::Add(c, hn::Set(d, P.ew_half)), P.ew_shift)));
  }
  // OUT_CVT: times SCALE, half to even, offset, int8.
  const V r = hn::Add(round_even(MulInt32(d, v, hn::Set(d, P.scale)), P.so, hn::Set(d, P.half_o - 1)), hn::Set(d, P.offset));
  return hn::Min(hn::Max(r, hn::Set(d, -128)), hn::Set(d, 127));
}

// One 16-channel block's operands, split into even and odd channels: [0] channel 2t, [1]
// channel 2t + 1 at index t.
struct BlockOperands {
  HWY_ALIGN int64_t base[2][8];  // wsum_scale * wsum: the MAC = acc + base
  HWY_ALIGN int64_t alu[2][8];
  HWY_ALIGN int64_t mul[2][8];
  HWY_ALIGN int64_t x[2][8];  // the EW operand of the current pixel
};

// 16 channels of one pixel: a the accumulators, o the 16 output bytes. The accumulators are
// read as int64 lanes holding channel pairs and split into even and odd channels (no
// widening shuffles); the int8 results are paired back into int32 lanes in channel order and
// narrowed once.
template <int F>
HWY_INLINE void Block(const EpilogueParams& P, const int32_t* HWY_RESTRICT a, const BlockOperands& B, uint8_t* HWY_RESTRICT o) {
  const hn::ScalableTag<int64_t> d;
#if HWY_TARGET == HWY_SCALAR
  for (int c = 0; c < 16; ++c) {
    const int e = c & 1, t = c / 2;
    const auto r = Stages<F>(d, P, hn::Set(d, int64_t{a[c]} + B.base[e][t]), hn::Set(d, B.alu[e][t]), hn::Set(d, B.mul[e][t]),
                                     hn::Set(d, B.x[e][t]));
    o[c] = static_cast<uint8_t>(static_cast<int8_t>(hn::GetLane(r)));
  }
#else
  const hn::Repartition<int32_t, decltype(d)> dw;
  const hn::Rebind<int8_t, decltype(dw)> d8;
  const size_t N = hn::Lanes(d);
  for (size_t q = 0; q < 16; q += 2 * N) {
    const size_t t = q / 2;
    const auto pairs = hn::BitCast(d, hn::LoadU(dw, a + q));
    const auto even = hn::Add(hn::ShiftRight<32>(hn::ShiftLeft<32>(pairs)), hn::Load(d, B.base[0] + t));
    const auto odd = hn::Add(hn::ShiftRight<32>(pairs), hn::Load(d, B.base[1] + t));
    const auto re = Stages<F>(d, P, even, hn::Load(d, B.alu[0] + t), hn::Load(d, B.mul[0] + t), hn::Load(d, B.x[0] + t));
    const auto ro = Stages<F>(d, P, odd, hn::Load(d, B.alu[1] + t), hn::Load(d, B.mul[1] + t), hn::Load(d, B.x[1] + t));
    const auto paired = hn::Or(hn::And(re, hn::Set(d, int64_t{0xffffffff})), hn::ShiftLeft<32>(ro));
    hn::StoreU(hn::DemoteTo(d8, hn::BitCast(dw, paired)), d8, reinterpret_cast<int8_t*>(o + q));
  }
#endif
}

template <int F>
HWY_INLINE void Range(const EpilogueParams& params, const EpilogueJob& J) {
  // Local copies: the output bytes (uint8_t) may alias anything the caller passed by
  // reference, which would make the compiler reload every parameter after every store.
  const EpilogueParams P = params;
  const MacView view = J.view;
  const int64_t M = view.stride, total = view.avail;
  for (int64_t k0 = 0; k0 < J.OCw; k0 += 16) {
    const int64_t n = std::min<int64_t>(16, J.OCw - k0);
    BlockOperands B{};
    for (int64_t j = 0; j < n; ++j) {
      B.base[j & 1][j / 2] = view.wsum_scale * view.wsum[k0 + j];
      B.alu[j & 1][j / 2] = J.alu[k0 + j];
      B.mul[j & 1][j / 2] = J.mul[k0 + j];
      if constexpr ((F & kFolded) != 0) B.base[j & 1][j / 2] += J.alu[k0 + j];  // MAC + ALU, exact: no saturation or truncation between
    }
    uint8_t* out = J.y + (k0 / 16) * J.out_surface;
    const uint8_t* eb = (F & kEw) ? J.ew + (k0 / 16) * J.ew_surface : nullptr;
    for (int64_t p = J.p0; p < J.p1; ++p) {
      if constexpr (F & kEw) {
        for (int j = 0; j < 16; ++j) B.x[j & 1][j / 2] = static_cast<int8_t>(eb[p * 16 + j]);
      }
      // A partial block (n < 16) computes all 16 lanes too: the lanes past n read the next
      // accumulators (another task's kernels, operands 0) and write padding channels of the
      // same 16-channel group, which the hardware writes as well and nobody reads. Only the
      // last accumulators, where 16 lanes would run past the buffer, go through a copy.
      const int32_t* a = view.acc + p * M + k0;
      if (p * M + k0 + 16 <= total) {
        Block<F>(P, a, B, out + p * 16);
      } else {
        HWY_ALIGN int32_t a16[16] = {};
        std::memcpy(a16, a, static_cast<size_t>(n) * 4);
        Block<F>(P, a16, B, out + p * 16);
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
  const int f = (P.mul ? kMul : 0) | (P.ew ? kEw : 0) | (P.mul && P.sp == P.sn ? kSameShift : 0) | (P.mac_fits ? kMacFits : 0) |
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
  const bool ew_ok = !e.ew.on || (!e.ew.cvt_bypass && !e.ew.relu && !e.ew.as_float && e.ew.shift >= 0 && e.ew.shift < 63 && e.ew.offset >= kLo &&
                                  e.ew.offset <= kHi && e.ew.scale >= 0 && e.ew.scale <= 0xffff);
  return (e.truncate == 0 || e.core_round == Rounding::half_to_even) && e.truncate < 32 && e.bn.bypass && ew_ok && !b.bypass && !b.alu_bypass &&
         b.alu_src && b.alu_algo == 2 && !b.prelu && (b.mul_bypass || b.mul_src) && e.bs_round == Rounding::half_up &&
         e.out_round == Rounding::half_to_even && e.shift > 0 && e.shift < 63 && e.scale >= -32768 && e.scale <= 0xffff &&
         (b.mul_bypass || (b.shift_pos > 0 && b.shift_neg > 0 && b.shift_pos < 63 && b.shift_neg < 63));
}

void run_common_epilogue(const Epilogue& e, int64_t pixels, int64_t OCw, int64_t out_surface, uint8_t* y, const MacView& v) {
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  EpilogueParams P{};
  P.mul = !e.bs.mul_bypass;
  P.ew = e.ew.on;
  P.mac_fits = e.mac_bound <= kMax32;
  int64_t alu_max = 0;
  for (int64_t k = 0; k < OCw; ++k) alu_max = std::max<int64_t>(alu_max, e.alu[k] < 0 ? -int64_t{e.alu[k]} : e.alu[k]);
  P.alu_fits = P.mac_fits && e.mac_bound + alu_max <= kMax32;
  P.lo2 = e.bs.relu_bypass ? std::numeric_limits<int32_t>::min() : 0;
  P.hi2 = e.bs.relux ? static_cast<int64_t>(e.bs.relux_value) : std::numeric_limits<int32_t>::max();
  P.sp = P.mul ? e.bs.shift_pos : 1;
  P.sn = P.mul ? e.bs.shift_neg : 1;
  P.half_p = int64_t{1} << (P.sp - 1);
  P.half_n = int64_t{1} << (P.sn - 1);
  P.so = e.shift;
  P.half_o = int64_t{1} << (P.so - 1);
  P.scale = e.scale;
  P.offset = e.offset;
  P.trunc = e.truncate;
  if (P.ew) {
    P.ew_offset = e.ew.offset;
    P.ew_scale = e.ew.scale;
    P.ew_shift = e.ew.shift;
    P.ew_half = e.ew.shift > 0 ? int64_t{1} << (e.ew.shift - 1) : 0;
  }
  // Pixel ranges on the math threads (each writes its own pixels).
  const int64_t chunk = 256, chunks = (pixels + chunk - 1) / chunk;
  ops::math_parallel_for(chunks, pixels * OCw, [&](int64_t i) {
    const EpilogueJob job{v, i * chunk, std::min(pixels, (i + 1) * chunk), OCw, out_surface, y, e.alu, e.mul, e.ew.on ? e.ew.e : nullptr, e.ew.surface};
    HWY_DYNAMIC_DISPATCH(EpilogueRange)(P, job);
  });
}

}  // namespace rkd::npu::sim::detail
#endif
