#include "npu/sim/sim.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

#include "core/target_clones.h"
#include "core/thread_pool.h"
#include "npu/arch/arch.h"
#include "kernels/tensor_ops.h"
#include "npu/regcmd/regcmd.h"

namespace rkd::npu::sim {

namespace {

using namespace arch;  // NOLINT: register constants

std::string hex32(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%08llx", static_cast<unsigned long long>(v));
  return b;
}

int32_t sat32(int64_t v) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
}

// The register values of one task (offset -> value, later writes win).
class Regs {
 public:
  explicit Regs(std::map<uint16_t, uint32_t> v) : v_(std::move(v)) {}
  uint32_t get(const Reg& r) const {
    auto it = v_.find(r.offset);
    return it == v_.end() ? 0 : it->second;
  }
  uint32_t get(const Field& f) const { return f.get(get(Reg{f.target, f.offset})); }

 private:
  std::map<uint16_t, uint32_t> v_;
};

struct Stage {
  bool bypass, alu_bypass, mul_bypass, prelu, relu_bypass, relux;
  bool alu_src, mul_src;
  uint32_t alu_algo;
  int32_t alu_operand;
  int16_t mul_operand;
  int shift_pos, shift_neg;
  int32_t relux_value;
};

// The BS and BN stages have the same register layout (BS_CFG/BN_CFG, *_MUL_CFG): one reader,
// with the BS field positions, for both.
static_assert(DPU_BS_CFG_BS_ALU_ALGO.lo == DPU_BN_CFG_BN_ALU_ALGO.lo && DPU_BS_CFG_BS_RELUX_EN.lo == DPU_BN_CFG_BN_RELUX_EN.lo &&
              DPU_BS_CFG_BS_ALU_SRC.lo == DPU_BN_CFG_BN_ALU_SRC.lo && DPU_BS_MUL_CFG_BS_MUL_OPERAND.lo == DPU_BN_MUL_CFG_BN_MUL_OPERAND.lo &&
              DPU_BS_MUL_CFG_BS_MUL_SHIFT_VALUE.lo == DPU_BN_MUL_CFG_BN_MUL_SHIFT_VALUE.lo && DPU_BS_MUL_CFG_BS_MUL_SRC.lo == DPU_BN_MUL_CFG_BN_MUL_SRC.lo,
              "BS and BN registers share one layout");

Stage read_stage(const Regs& r, Reg cfg_reg, Reg alu, Reg mul_reg, Reg relux, const Field& shift_neg) {
  const uint32_t cfg = r.get(cfg_reg), mul = r.get(mul_reg);
  return Stage{DPU_BS_CFG_BS_BYPASS.get(cfg) != 0,
               DPU_BS_CFG_BS_ALU_BYPASS.get(cfg) != 0,
               DPU_BS_CFG_BS_MUL_BYPASS.get(cfg) != 0,
               DPU_BS_CFG_BS_MUL_PRELU.get(cfg) != 0,
               DPU_BS_CFG_BS_RELU_BYPASS.get(cfg) != 0,
               DPU_BS_CFG_BS_RELUX_EN.get(cfg) != 0,
               DPU_BS_CFG_BS_ALU_SRC.get(cfg) != 0,
               DPU_BS_MUL_CFG_BS_MUL_SRC.get(mul) != 0,
               DPU_BS_CFG_BS_ALU_ALGO.get(cfg),
               static_cast<int32_t>(r.get(alu)),
               static_cast<int16_t>(DPU_BS_MUL_CFG_BS_MUL_OPERAND.get(mul)),
               static_cast<int>(DPU_BS_MUL_CFG_BS_MUL_SHIFT_VALUE.get(mul)),
               static_cast<int>(r.get(shift_neg)),
               static_cast<int32_t>(r.get(relux))};
}
Stage bs_stage(const Regs& r) {
  return read_stage(r, DPU_BS_CFG, DPU_BS_ALU_CFG, DPU_BS_MUL_CFG, DPU_BS_RELUX_CMP_VALUE, DPU_DATA_FORMAT_BS_MUL_SHIFT_VALUE_NEG);
}
Stage bn_stage(const Regs& r) {
  return read_stage(r, DPU_BN_CFG, DPU_BN_ALU_CFG, DPU_BN_MUL_CFG, DPU_BN_RELUX_CMP_VALUE, DPU_DATA_FORMAT_BN_MUL_SHIFT_VALUE_NEG);
}

// One BS/BN stage on an int32 value; alu/mul: the per-channel operands when read by DMA.
[[gnu::always_inline]] inline int32_t apply_stage(const Stage& s, int32_t v, int32_t alu, int16_t mul, Rounding shift_rounding) {
  if (s.bypass) return v;
  int64_t a = v;
  if (!s.alu_bypass) a = sat32(a + (s.alu_src ? alu : s.alu_operand));
  if (!s.mul_bypass) {
    const int64_t p = a * static_cast<int64_t>(s.mul_src ? mul : s.mul_operand);
    a = sat32(round_shift(p, p >= 0 ? s.shift_pos : s.shift_neg, shift_rounding));
  }
  if (!s.relu_bypass) a = std::max<int64_t>(a, 0);
  if (s.relux) a = std::min<int64_t>(a, s.relux_value);
  return static_cast<int32_t>(a);
}

Status check_stage(const Stage& s, const char* name, bool dma_allowed) {
  if (s.bypass) return {};
  if (!s.alu_bypass && s.alu_algo != 2) {
    return unsupported(std::string(name) + " ALU algorithm " + std::to_string(s.alu_algo) + " (only 2, add, is simulated)");
  }
  if (s.prelu) return unsupported(std::string(name) + " PReLU");
  if (!dma_allowed && ((!s.alu_bypass && s.alu_src) || (!s.mul_bypass && s.mul_src))) {
    return unsupported(std::string(name) + " operands read by DMA (per-channel NRDMA reads hung the NPU in one report)");
  }
  return {};
}

}  // namespace

// A task's prepared MAC (oneDNN exact int8 accumulation), reused while the task's registers
// and weight bytes stay the same.
struct SimCache::Entry {
  std::map<uint16_t, uint32_t> regs;
  std::vector<uint8_t> weights;
  bool tried = false, usable = false;
  std::unique_ptr<ops::QConvAccumulator> acc;
  std::vector<int64_t> wsum;  // per kernel: sum of (w + OW_OP) over all taps and channels
  int64_t M = 0, C = 0, crop_h = 0, crop_w = 0, OH = 0, OW = 0, pad_top = 0, pad_left = 0, padded_w = 0;
  int32_t pad = 0;
  Tensor out;
};

SimCache::SimCache() = default;
SimCache::~SimCache() = default;

namespace {

struct MacGeometry {
  int64_t C, H, W, OH, OW, KH, KW, sy, sx, pad_top, pad_left, stored, OC;
  bool depthwise;
  int32_t pad, ow_op;
};

// Runs the MAC on oneDNN when the task allows it: afterwards f.out holds, per pixel and
// kernel (channels last, f.M kernels), sum (x - PAD) (w + OW_OP), to which the caller adds
// PAD * f.wsum[k]. False when it does not (the caller computes the MAC itself). `in` is the
// task's NC1HWC2 input (surface and line strides in bytes).
template <typename WeightFn>
Result<bool> fast_mac(SimCache::Entry& f, const MacGeometry& g, WeightFn weight, const uint8_t* in, int64_t surface, int64_t line) {
  if (!f.tried) {
    f.tried = true;
    if (!ops::int8_conv_available()) return false;
    if (!g.depthwise && g.stored < g.OC && g.ow_op != 0) return false;
    const int64_t M = g.depthwise ? g.C : g.stored, Cg = g.depthwise ? 1 : g.C, kk = g.KH * g.KW;
    if (g.depthwise && g.stored != g.C) return false;
    Tensor w = Tensor::empty(DType::i8, {M, Cg, g.KH, g.KW});
    f.wsum.assign(static_cast<size_t>(M), 0);
    for (int64_t k = 0; k < M; ++k)
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t t = 0; t < kk; ++t) {
          const int32_t v = weight(k, c, t / g.KW, t % g.KW);
          if (v < -128 || v > 127) return false;  // uint8 models: w - z_w needs 9 bits
          w.data<int8_t>()[(k * Cg + c) * kk + t] = static_cast<int8_t>(v);
          f.wsum[static_cast<size_t>(k)] += v;
        }
    // The rows and columns the taps reach: crop the map or pad its far side.
    const int64_t need_h = (g.OH - 1) * g.sy + g.KH - g.pad_top, need_w = (g.OW - 1) * g.sx + g.KW - g.pad_left;
    f.crop_h = std::min(need_h, g.H);
    f.crop_w = std::min(need_w, g.W);
    ops::ConvParams cp;
    cp.strides = {g.sy, g.sx};
    cp.dilations = {1, 1};
    cp.pads = {g.pad_top, g.pad_left, std::max<int64_t>(need_h - g.H, 0), std::max<int64_t>(need_w - g.W, 0)};
    cp.group = g.depthwise ? g.C : 1;
    auto a = ops::make_qconv_accumulator({1, g.C, f.crop_h, f.crop_w}, DType::i8, g.pad, w, cp, {1, M, g.OH, g.OW});
    if (!a.ok()) return false;
    f.acc = std::move(a).value();
    f.M = M;
    f.C = g.C;
    f.OH = g.OH;
    f.OW = g.OW;
    f.pad = g.pad;
    f.pad_top = g.pad_top;
    f.pad_left = g.pad_left;
    f.padded_w = f.crop_w + cp.pads[1] + cp.pads[3];
    f.out = Tensor::empty(DType::i32, {1, g.OH, g.OW, M});
    f.usable = true;
  }
  if (!f.usable) return false;
  // NC1HWC2 -> oneDNN's padded channels-last uint8 (x + 128 = x ^ 0x80) for the rows and
  // columns the taps reach (all inside the map here): 16 channels per copy.
  uint8_t* buf = f.acc->padded_input();
  for (int64_t h = 0; h < f.crop_h; ++h)
    for (int64_t w = 0; w < f.crop_w; ++w) {
      uint8_t* dst = buf + ((f.pad_top + h) * f.padded_w + f.pad_left + w) * f.C;
      for (int64_t c1 = 0; c1 < f.C / 16; ++c1) {
        const uint8_t* src = in + c1 * surface + h * line + w * 16;
        for (int j = 0; j < 16; ++j) dst[c1 * 16 + j] = static_cast<uint8_t>(src[j] ^ 0x80);
      }
    }
  RKD_TRY(f.acc->run_filled(f.out));
  return true;
}

// The EW stage's operand add (see sim.h, stage 6).
struct Ew {
  bool on = false, cvt_bypass = false, relu = false, as_float = false;
  int64_t offset = 0, scale = 1, surface = 0;
  int shift = 0;
  const uint8_t* e = nullptr;
};
inline int32_t apply_ew(const Ew& w, int32_t v, int64_t p, int64_t k) {
  if (!w.on) return v;
  const int64_t e = static_cast<int8_t>(w.e[(k / 16) * w.surface + p * 16 + k % 16]);
  int64_t a;
  if (w.cvt_bypass) {
    a = static_cast<int64_t>(v) + e;
  } else if (w.as_float) {
    const float m = static_cast<float>(std::ldexp(static_cast<double>(w.scale), -w.shift));
    a = static_cast<int64_t>(std::nearbyint(static_cast<double>(static_cast<float>(v) + static_cast<float>(e + w.offset) * m)));
  } else {
    a = static_cast<int64_t>(v) + round_shift((e + w.offset) * w.scale, w.shift, Rounding::half_up);
  }
  a = sat32(a);
  if (w.relu) a = std::max<int64_t>(a, 0);
  return static_cast<int32_t>(a);
}

struct Epilogue {
  int truncate;
  Rounding core_round, bs_round, out_round;
  Stage bs, bn;
  Ew ew;
  const int32_t* alu;
  const int16_t* mul;
  int64_t scale, offset;
  int shift;
};
// run_epilogue's computation for the configuration every lowering emits (CORE truncate half
// to even, BS ALU add and optional MUL from BRDMA, ReLU/ReLUX, BN bypassed, the EW add in its
// integer form, default roundings: BS shift half up, OUT_CVT half to even) on oneDNN's
// accumulators (pixel-major, M kernels), 16 channels at a time so that the compiler
// vectorises it. The simulator's loop tests compare the two bit for bit.
bool common_epilogue(const Epilogue& e) {
  const Stage& b = e.bs;
  const bool ew_ok = !e.ew.on || (!e.ew.cvt_bypass && !e.ew.relu && !e.ew.as_float && e.ew.shift >= 0 && e.ew.shift < 63);
  return (e.truncate == 0 || e.core_round == Rounding::half_to_even) && e.truncate < 32 && e.bn.bypass && ew_ok && !b.bypass && !b.alu_bypass && b.alu_src && b.alu_algo == 2 && !b.prelu &&
         (b.mul_bypass || b.mul_src) && e.bs_round == Rounding::half_up && e.out_round == Rounding::half_to_even && e.shift > 0 &&
         (b.mul_bypass || (b.shift_pos > 0 && b.shift_neg > 0 && b.shift_pos < 63 && b.shift_neg < 63));
}
inline int64_t clamp64(int64_t v, int64_t l, int64_t h) { return v < l ? l : (v > h ? h : v); }

// The EW operand converter in the form common_block applies.
struct EwLanes {
  int64_t offset = 0, scale = 1, half = 0;
  int shift = 0;
};

// One block of 16 channels of one pixel; written as simple loops over int64 lanes so that
// GCC vectorises them. e: the EW operand's 16 bytes, or nullptr.
template <bool kMul, bool kEw>
[[gnu::always_inline]] inline void common_block(const int32_t* __restrict a, const int64_t* __restrict base, const int64_t* __restrict alu,
                                                const int64_t* __restrict mul, int64_t lo, int64_t hi, int sp, int sn, int64_t half_p, int64_t half_n,
                                                int64_t scale, int so, int64_t half_o, int64_t mask_o, int64_t offset, int trunc, const EwLanes& ew,
                                                const uint8_t* __restrict e, uint8_t* __restrict o) {
  constexpr int64_t kMin = std::numeric_limits<int32_t>::min(), kMax = std::numeric_limits<int32_t>::max();
  constexpr int count = 16;
  int64_t v[16], r[16];
  // The MAC's saturation to int32, CORE's truncation (half to even), the BS ALU add (saturating).
  _Pragma("GCC unroll 1") for (int64_t j = 0; j < count; ++j) v[j] = clamp64(static_cast<int64_t>(a[j]) + base[j], kMin, kMax);
  if (trunc > 0) {
    const int64_t th = int64_t{1} << (trunc - 1), tm = (int64_t{1} << trunc) - 1;
    _Pragma("GCC unroll 1") for (int64_t j = 0; j < count; ++j) {
      const int64_t q = v[j] >> trunc, rem = v[j] & tm;
      v[j] = q + ((rem > th || (rem == th && (q & 1))) ? 1 : 0);
    }
  }
  _Pragma("GCC unroll 1") for (int64_t j = 0; j < count; ++j) v[j] = clamp64(v[j] + alu[j], kMin, kMax);
  if constexpr (kMul) {
    _Pragma("GCC unroll 1") for (int64_t j = 0; j < count; ++j) {  // BS MUL, shifted half up by the sign's shift field
      const int64_t prod = v[j] * mul[j];
      const int64_t pos = (prod + half_p) >> sp, neg = (prod + half_n) >> sn;
      v[j] = clamp64(prod >= 0 ? pos : neg, kMin, kMax);
    }
  }
  _Pragma("GCC unroll 1") for (int64_t j = 0; j < count; ++j) v[j] = clamp64(v[j], lo, hi);  // ReLU / ReLUX as [lo, hi]
  if constexpr (kEw) {
    int64_t x[16];
    _Pragma("GCC unroll 1") for (int64_t j = 0; j < count; ++j) x[j] = static_cast<int8_t>(e[j]);
    _Pragma("GCC unroll 1") for (int64_t j = 0; j < count; ++j) {  // EW: the operand converted (half up) and added
      const int64_t c = ((x[j] + ew.offset) * ew.scale + ew.half) >> ew.shift;
      v[j] = clamp64(v[j] + c, kMin, kMax);
    }
  }
  _Pragma("GCC unroll 1") for (int64_t j = 0; j < count; ++j) {  // OUT_CVT half to even, offset, int8
    const int64_t p2 = v[j] * scale;
    const int64_t q = p2 >> so, rem = p2 & mask_o;
    const int64_t up = (rem > half_o || (rem == half_o && (q & 1))) ? 1 : 0;
    r[j] = clamp64(q + up + offset, -128, 127);
  }
  _Pragma("GCC unroll 1") for (int64_t j = 0; j < count; ++j) o[j] = static_cast<uint8_t>(r[j]);
}

template <bool kMul, bool kEw>
[[gnu::always_inline]] inline void common_epilogue_body(const Epilogue& e, int64_t p0, int64_t p1, int64_t pixels, int64_t OCw, int64_t out_surface,
                                                        uint8_t* y, const int32_t* acc, int64_t M, int64_t pad, const int64_t* wsum) {
  const int64_t lo = e.bs.relu_bypass ? std::numeric_limits<int64_t>::min() : 0;
  const int64_t hi = e.bs.relux ? static_cast<int64_t>(e.bs.relux_value) : std::numeric_limits<int64_t>::max();
  const int sp = kMul ? e.bs.shift_pos : 1, sn = kMul ? e.bs.shift_neg : 1, so = e.shift;
  const int64_t half_p = int64_t{1} << (sp - 1), half_n = int64_t{1} << (sn - 1);
  const int64_t half_o = int64_t{1} << (so - 1), mask_o = (int64_t{1} << so) - 1, scale = e.scale, offset = e.offset;
  const int64_t total = pixels * M;  // accumulators in the buffer
  EwLanes ew;
  if (e.ew.on) ew = EwLanes{e.ew.offset, e.ew.scale, e.ew.shift > 0 ? int64_t{1} << (e.ew.shift - 1) : 0, e.ew.shift};
  for (int64_t k0 = 0; k0 < OCw; k0 += 16) {
    const int64_t n = std::min<int64_t>(16, OCw - k0);
    alignas(64) int64_t base[16] = {}, alu[16] = {}, mul[16] = {};
    for (int64_t j = 0; j < n; ++j) {
      base[j] = pad * wsum[k0 + j];
      alu[j] = e.alu[k0 + j];
      mul[j] = e.mul[k0 + j];
    }
    uint8_t* out = y + (k0 / 16) * out_surface;
    const uint8_t* eb = e.ew.on ? e.ew.e + (k0 / 16) * e.ew.surface : nullptr;
    for (int64_t p = p0; p < p1; ++p) {
      const uint8_t* ep = eb ? eb + p * 16 : nullptr;
      // A partial block (n < 16) computes all 16 lanes too: the lanes past n read the next
      // accumulators (operands 0) and write padding channels of the same 16-channel group,
      // which the hardware writes as well and nobody reads. Only the last accumulators,
      // where 16 lanes would run past the buffer, go through a copy.
      if (p * M + k0 + 16 <= total) {
        common_block<kMul, kEw>(acc + p * M + k0, base, alu, mul, lo, hi, sp, sn, half_p, half_n, scale, so, half_o, mask_o, offset, e.truncate, ew, ep, out + p * 16);
      } else {
        alignas(64) int32_t a16[16] = {};
        std::memcpy(a16, acc + p * M + k0, static_cast<size_t>(n) * 4);
        common_block<kMul, kEw>(a16, base, alu, mul, lo, hi, sp, sn, half_p, half_n, scale, so, half_o, mask_o, offset, e.truncate, ew, ep, out + p * 16);
      }
    }
  }
}

// Pixels [p0, p1) of `pixels`.
RKD_TARGET_CLONES void run_common_epilogue_mul(const Epilogue& e, int64_t p0, int64_t p1, int64_t pixels, int64_t OCw, int64_t out_surface, uint8_t* y,
                                                 const int32_t* acc, int64_t M, int64_t pad, const int64_t* wsum) {
  if (e.ew.on) common_epilogue_body<true, true>(e, p0, p1, pixels, OCw, out_surface, y, acc, M, pad, wsum);
  else common_epilogue_body<true, false>(e, p0, p1, pixels, OCw, out_surface, y, acc, M, pad, wsum);
}
RKD_TARGET_CLONES void run_common_epilogue_plain(const Epilogue& e, int64_t p0, int64_t p1, int64_t pixels, int64_t OCw, int64_t out_surface,
                                                   uint8_t* y, const int32_t* acc, int64_t M, int64_t pad, const int64_t* wsum) {
  if (e.ew.on) common_epilogue_body<false, true>(e, p0, p1, pixels, OCw, out_surface, y, acc, M, pad, wsum);
  else common_epilogue_body<false, false>(e, p0, p1, pixels, OCw, out_surface, y, acc, M, pad, wsum);
}

// CORE truncate, BS, BN, EW, OUT_CVT and the NC1HWC2 write of channels [0, OCw) at every
// pixel, stage by stage (the definition); acc(p, k) gives the MAC's accumulator.
template <typename AccFn>
void run_epilogue(const Epilogue& e, int64_t pixels, int64_t OCw, int64_t out_surface, uint8_t* y, AccFn acc) {
  for (int64_t p = 0; p < pixels; ++p) {
    for (int64_t k = 0; k < OCw; ++k) {
      int32_t v = sat32(round_shift(sat32(acc(p, k)), e.truncate, e.core_round));
      v = apply_stage(e.bs, v, e.alu[k], e.mul[k], e.bs_round);
      v = apply_stage(e.bn, v, 0, 0, e.bs_round);
      v = apply_ew(e.ew, v, p, k);
      const int64_t o = round_shift(static_cast<int64_t>(v) * e.scale, e.shift, e.out_round) + e.offset;
      y[(k / 16) * out_surface + p * 16 + k % 16] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp<int64_t>(o, -128, 127)));
    }
  }
}

// The int8 convolution task of `r` on `mem`.
Result<TaskStats> run_conv(DeviceMemory& mem, const Regs& r, const Quirks& q, SimCache::Entry* fast) {
  const uint32_t mode = r.get(CNA_CONV_CON1_CONV_MODE);
  if (mode != 0 && mode != 3) return unsupported("CNA.CONV_CON1.CONV_MODE " + std::to_string(mode) + " (0 direct, 3 depthwise)");
  const bool depthwise = mode == 3;
  if (r.get(CNA_CONV_CON1_IN_PRECISION) != 0 || r.get(CNA_CONV_CON1_PROC_PRECISION) != 0) {
    return unsupported("CNA.CONV_CON1: only int8 input and processing precision are simulated");
  }
  if (r.get(DPU_DATA_FORMAT_OUT_PRECISION) != 0) return unsupported("DPU.DATA_FORMAT.OUT_PRECISION: only int8 output (int16 times out on hardware)");
  if (r.get(CNA_CONV_CON3_ATROUS_X_DILATION) != 0 || r.get(CNA_CONV_CON3_ATROUS_Y_DILATION) != 0) {
    return unsupported("CNA.CONV_CON3 dilation (not simulated yet)");
  }
  int64_t W = r.get(CNA_DATA_SIZE0_DATAIN_WIDTH), H = r.get(CNA_DATA_SIZE0_DATAIN_HEIGHT);
  if (!q.width_is_line) std::swap(W, H);
  const int64_t C = r.get(CNA_DATA_SIZE1_DATAIN_CHANNEL);
  const int64_t C_real = r.get(CNA_DATA_SIZE1_DATAIN_CHANNEL_REAL) + 1;
  const int64_t sx = r.get(CNA_CONV_CON3_CONV_X_STRIDE), sy = r.get(CNA_CONV_CON3_CONV_Y_STRIDE);
  const int64_t pad_top = r.get(CNA_PAD_CON0_PAD_TOP), pad_left = r.get(CNA_PAD_CON0_PAD_LEFT);
  const int32_t pad_value = static_cast<int8_t>(r.get(CNA_PAD_CON1) & 0xff);
  const int64_t KH = r.get(CNA_WEIGHT_SIZE2_WEIGHT_HEIGHT), KW = r.get(CNA_WEIGHT_SIZE2_WEIGHT_WIDTH);
  const int64_t kernels = r.get(CNA_WEIGHT_SIZE2_WEIGHT_KERNELS);
  const int64_t OW = r.get(CORE_DATAOUT_SIZE_0_DATAOUT_WIDTH) + 1, OH = r.get(CORE_DATAOUT_SIZE_0_DATAOUT_HEIGHT) + 1;
  const int64_t OC = r.get(DPU_DATA_CUBE_CHANNEL_CHANNEL) + 1;
  const int64_t OC_real = r.get(DPU_DATA_CUBE_CHANNEL_ORIG_CHANNEL) + 1;
  if (W < 1 || H < 1 || C < 1 || C % 16 != 0 || C_real > C) {
    return invalid("CNA.DATA_SIZE0/1: input " + std::to_string(C) + "x" + std::to_string(H) + "x" + std::to_string(W) +
                   " (channels must be a positive multiple of 16 holding the real ones)");
  }
  if (sx < 1 || sy < 1 || KH < 1 || KW < 1) return invalid("CNA: zero stride or kernel size");
  if (H < kRk3588.min_height) {
    return unsupported("CNA.DATA_SIZE0: input height " + std::to_string(H) + " (maps lower than " + std::to_string(kRk3588.min_height) +
                       " rows are broken on hardware)");
  }
  if (r.get(DPU_DATA_CUBE_WIDTH_WIDTH) + 1 != static_cast<uint32_t>(OW) || r.get(DPU_DATA_CUBE_HEIGHT_HEIGHT) + 1 != static_cast<uint32_t>(OH)) {
    return invalid("DPU.DATA_CUBE_WIDTH/HEIGHT disagree with CORE.DATAOUT_SIZE_0");
  }
  if (depthwise && OC > (C + 63) / 64 * 64) {
    return invalid("DPU.DATA_CUBE_CHANNEL: " + std::to_string(OC) + " output channels of a depthwise convolution over " + std::to_string(C));
  }
  // Input feature map.
  const int64_t line = static_cast<int64_t>(r.get(CNA_DMA_CON1_LINE_STRIDE)) * 4;
  const int64_t surface = (static_cast<int64_t>(r.get(CNA_DMA_CON2_SURF_STRIDE)) + 4 * W) * 16;
  if (line < 16 * W) return invalid("CNA.DMA_CON1.LINE_STRIDE " + std::to_string(line / 4) + " is shorter than a line of " + std::to_string(W) + " pixels");
  const uint32_t fin = r.get(CNA_FEATURE_DATA_ADDR);
  const size_t in_bytes = static_cast<size_t>((C / 16 - 1) * surface + (H - 1) * line + W * 16);
  RKD_ASSIGN(std::span<const uint8_t> x, mem.read(fin, in_bytes));
  auto xin = [&](int64_t c, int64_t h, int64_t w) -> int32_t {
    if (h < 0 || h >= H || w < 0 || w >= W) return pad_value;
    return static_cast<int8_t>(x[static_cast<size_t>((c / 16) * surface + h * line + w * 16 + c % 16)]);
  };
  // Weights.
  const uint32_t waddr = r.get(CNA_DCOMP_ADDR0);
  const int64_t kk = KH * KW;
  const int64_t w_bytes = depthwise ? (C + 63) / 64 * 64 * kk : kernels * kk * C;
  if (static_cast<int64_t>(r.get(CNA_WEIGHT_SIZE0_WEIGHT_BYTES)) != w_bytes) {
    return invalid("CNA.WEIGHT_SIZE0.WEIGHT_BYTES " + std::to_string(r.get(CNA_WEIGHT_SIZE0_WEIGHT_BYTES)) + " but the geometry needs " +
                   std::to_string(w_bytes));
  }
  RKD_ASSIGN(auto wb, mem.read(waddr, static_cast<size_t>(w_bytes)));
  // Written channels past the stored kernels (the hardware writes 32-channel groups, stores
  // only align2(OC) kernels) see zero weights.
  auto weight = [&](int64_t oc, int64_t ic, int64_t ky, int64_t kx) -> int32_t {
    if (!depthwise && oc >= kernels) return 0;
    size_t at;
    if (depthwise) {
      at = static_cast<size_t>((oc / 64) * kk * 64 + (ky * KW + kx) * 64 + oc % 64);
    } else {
      const int64_t oc1 = oc / 32, goc = std::min<int64_t>(32, kernels - 32 * oc1);
      const int64_t ic1 = ic / 32, gic = std::min<int64_t>(32, C - 32 * ic1);
      at = static_cast<size_t>(oc1 * 32 * kk * C + ic1 * goc * kk * 32 + ((ky * KW + kx) * goc + oc % 32) * gic + ic % 32);
    }
    return static_cast<int8_t>(wb[at]);
  };
  const int32_t ow_op = r.get(DPU_BS_OW_CFG_OD_BYPASS) ? 0 : static_cast<int16_t>(r.get(DPU_BS_OW_OP_OW_OP));
  // CORE.
  const int truncate = static_cast<int>(r.get(CORE_CLIP_TRUNCATE_CLIP_TRUNCATE));
  const Rounding core_round = r.get(CORE_CLIP_TRUNCATE_ROUND_TYPE) ? Rounding::half_up : Rounding::half_to_even;
  // DPU.
  const Stage bs = bs_stage(r), bn = bn_stage(r);
  RKD_TRY(check_stage(bs, "DPU.BS", true));
  RKD_TRY(check_stage(bn, "DPU.BN", false));
  Ew ew;
  ew.on = r.get(DPU_EW_CFG_EW_BYPASS) == 0;
  if (ew.on) {
    if (r.get(DPU_EW_CFG_EW_OP_BYPASS) || !r.get(DPU_EW_CFG_EW_OP_SRC) || r.get(DPU_EW_CFG_EW_ALU_ALGO) != 2 || !r.get(DPU_EW_CFG_EW_LUT_BYPASS) ||
        r.get(DPU_EW_CFG_EW_MUL_PRELU) || r.get(DPU_EW_CFG_EW_RELUX_EN) || r.get(DPU_EW_CFG_EW_DATA_MODE) != 1 || r.get(DPU_EW_CFG_EDATA_SIZE) != 1) {
      return unsupported("DPU.EW_CFG " + hex32(r.get(DPU_EW_CFG)) +
                         ": only the add of one int8 ERDMA operand per element (EW_OP_SRC 1, EW_ALU_ALGO 2, LUT bypassed, EW_DATA_MODE 1, EDATA_SIZE 1) is simulated");
    }
    if (r.get(DPU_RDMA_RDMA_ERDMA_CFG_ERDMA_DISABLE)) return invalid("DPU.EW_CFG adds an ERDMA operand but DPU_RDMA.RDMA_ERDMA_CFG.ERDMA_DISABLE is set");
    ew.cvt_bypass = r.get(DPU_EW_CFG_EW_OP_CVT_BYPASS) != 0;
    ew.relu = r.get(DPU_EW_CFG_EW_RELU_BYPASS) == 0;
    ew.as_float = q.ew_float;
    ew.offset = static_cast<int32_t>(r.get(DPU_EW_CVT_OFFSET_VALUE));
    ew.scale = r.get(DPU_EW_CVT_SCALE_VALUE_EW_OP_CVT_SCALE);
    ew.shift = static_cast<int>(r.get(DPU_EW_CVT_SCALE_VALUE_EW_OP_CVT_SHIFT));
    ew.surface = static_cast<int64_t>(r.get(DPU_RDMA_RDMA_EW_SURF_STRIDE_EW_SURF_STRIDE)) * 16;
  }
  const uint32_t data_use = r.get(DPU_RDMA_RDMA_BRDMA_CFG_BRDMA_DATA_USE);
  const bool bs_dma = !bs.bypass && ((!bs.alu_bypass && bs.alu_src) || (!bs.mul_bypass && bs.mul_src));
  std::vector<int32_t> alu(static_cast<size_t>(OC), 0);
  std::vector<int16_t> mul(static_cast<size_t>(OC), 0);
  if (bs_dma) {
    const uint32_t baddr = r.get(DPU_RDMA_RDMA_BS_BASE_ADDR);
    if (data_use == 1) {
      RKD_ASSIGN(auto b, mem.read(baddr, static_cast<size_t>(OC) * 4));
      for (int64_t k = 0; k < OC; ++k) std::memcpy(&alu[static_cast<size_t>(k)], b.data() + 4 * k, 4);
    } else {
      RKD_ASSIGN(auto b, mem.read(baddr, static_cast<size_t>((OC + 7) / 8) * 64));
      for (int64_t k = 0; k < OC; ++k) {
        const size_t blk = static_cast<size_t>(k / 8) * 64, lane = static_cast<size_t>(k % 8);
        if (data_use & 1) std::memcpy(&alu[static_cast<size_t>(k)], b.data() + blk + 4 * lane, 4);
        if (data_use & 4) std::memcpy(&mul[static_cast<size_t>(k)], b.data() + blk + 48 + 2 * lane, 2);
      }
    }
  }
  // OUT_CVT.
  const uint32_t scale_bits = r.get(DPU_OUT_CVT_SCALE_OUT_CVT_SCALE);
  const int64_t scale = q.out_cvt_scale_signed ? static_cast<int16_t>(scale_bits) : static_cast<int64_t>(scale_bits);
  const int shift = static_cast<int>(r.get(DPU_OUT_CVT_SHIFT_OUT_CVT_SHIFT));
  if (shift > 63) return unsupported("DPU.OUT_CVT_SHIFT " + std::to_string(shift) + " (above 63)");
  const int64_t offset = static_cast<int32_t>(r.get(DPU_OUT_CVT_OFFSET));
  // Output.
  const uint32_t dst = r.get(DPU_DST_BASE_ADDR);
  const int64_t out_surface = static_cast<int64_t>(r.get(DPU_DST_SURF_STRIDE_DST_SURF_STRIDE)) * 16;
  if (out_surface < OH * OW * 16 && OC > 16) return invalid("DPU.DST_SURF_STRIDE is smaller than one output surface");
  RKD_ASSIGN(auto y, mem.span(dst, static_cast<size_t>((OC - 1) / 16 * out_surface + OH * OW * 16)));
  if (ew.on) {
    if (ew.surface < OH * OW * 16 && OC > 16) return invalid("DPU_RDMA.RDMA_EW_SURF_STRIDE is smaller than one output surface");
    RKD_ASSIGN(auto eb, mem.read(r.get(DPU_RDMA_RDMA_EW_BASE_ADDR), static_cast<size_t>((OC - 1) / 16 * ew.surface + OH * OW * 16)));
    ew.e = eb.data();
  }
  // The MAC array: acc[(oy * OW + ox) * OC + k] = sum over taps of x * (w + OW_OP), padding
  // cells holding PAD. Written channels past the stored kernels see (0 + OW_OP) weights; a
  // depthwise task's channels past C have all-padding weights and accumulate 0.
  const int64_t stored = depthwise ? std::min(OC, C) : std::min(OC, kernels);
  // CORE, BS, BN, OUT_CVT, write: the channels DATA_CUBE_CHANNEL.ORIG_CHANNEL counts. The
  // hardware also writes the padding channels up to CHANNEL + 1; their values carry no
  // meaning (padded kernels): left as they are, or written by the 16-lane epilogue.
  const int64_t OCw = std::min(OC, OC_real);
  TaskStats stats;
  stats.macs = OH * OW * std::min(OC, OC_real) * kk * (depthwise ? 1 : C_real);
  stats.padded_macs = OH * OW * OC * kk * (depthwise ? 1 : C);
  stats.output_values = OH * OW * OC;
  const Epilogue ep{truncate, core_round, q.bs_shift_rounding, q.out_cvt_rounding, bs, bn, ew, alu.data(), mul.data(), scale, offset, shift};
  if (fast) {
    // oneDNN's exact int8 accumulation: with the padding value as the input zero point it
    // gives sum (x - PAD) w over all taps, so acc = that + PAD * (sum of the kernel's weights)
    // exactly (int64). Needs w + OW_OP to be int8.
    const MacGeometry g{C, H, W, OH, OW, KH, KW, sy, sx, pad_top, pad_left, stored, OC, depthwise, pad_value, ow_op};
    RKD_ASSIGN(bool done, fast_mac(*fast, g, [&](int64_t k, int64_t c, int64_t ky, int64_t kx) { return weight(k, c, ky, kx) + ow_op; },
                                   x.data(), surface, line));
    if (done) {
      const int32_t* acc = fast->out.data<int32_t>();
      const int64_t M = fast->M, padv = fast->pad;
      const int64_t* wsum = fast->wsum.data();
      if (common_epilogue(ep) && OCw <= M) {
        // Pixel ranges on the kernels' thread pool (each writes its own pixels).
        const int64_t pixels = OH * OW, chunk = 256, chunks = (pixels + chunk - 1) / chunk;
        uint8_t* yd = y.data();
        ThreadPool::global().parallel_for(chunks, [&](int64_t i) {
          const int64_t p0 = i * chunk, p1 = std::min(pixels, p0 + chunk);
          if (ep.bs.mul_bypass) run_common_epilogue_plain(ep, p0, p1, pixels, OCw, out_surface, yd, acc, M, padv, wsum);
          else run_common_epilogue_mul(ep, p0, p1, pixels, OCw, out_surface, yd, acc, M, padv, wsum);
        });
        return stats;
      }
      run_epilogue(ep, OH * OW, OCw, out_surface, y.data(), [&](int64_t p, int64_t k) -> int64_t {
        return k < M ? static_cast<int64_t>(acc[p * M + k]) + padv * wsum[k] : 0;
      });
      return stats;
    }
  }
  std::vector<int64_t> acc_all(static_cast<size_t>(OH * OW * OC), 0);
  {
    const int64_t GH = (OH - 1) * sy + KH, GW = (OW - 1) * sx + KW;
    std::vector<int16_t> grid(static_cast<size_t>(GH * GW * C));
    for (int64_t gy = 0; gy < GH; ++gy)
      for (int64_t gx = 0; gx < GW; ++gx)
        for (int64_t c = 0; c < C; ++c) grid[static_cast<size_t>((gy * GW + gx) * C + c)] = static_cast<int16_t>(xin(c, gy - pad_top, gx - pad_left));
    std::vector<int16_t> wk(static_cast<size_t>(depthwise ? stored * kk : stored * kk * C));
    for (int64_t k = 0; k < stored; ++k)
      for (int64_t t = 0; t < kk; ++t) {
        if (depthwise) {
          wk[static_cast<size_t>(t * stored + k)] = static_cast<int16_t>(weight(k, 0, t / KW, t % KW) + ow_op);
        } else {
          for (int64_t c = 0; c < C; ++c) wk[static_cast<size_t>((k * kk + t) * C + c)] = static_cast<int16_t>(weight(k, c, t / KW, t % KW) + ow_op);
        }
      }
    for (int64_t oy = 0; oy < OH; ++oy) {
      for (int64_t ox = 0; ox < OW; ++ox) {
        int64_t* accs = acc_all.data() + (oy * OW + ox) * OC;
        for (int64_t ky = 0; ky < KH; ++ky) {
          for (int64_t kx = 0; kx < KW; ++kx) {
            const int16_t* xg = grid.data() + ((oy * sy + ky) * GW + ox * sx + kx) * C;
            const int64_t t = ky * KW + kx;
            if (depthwise) {
              const int16_t* wt = wk.data() + t * stored;
              for (int64_t k = 0; k < stored; ++k) accs[k] += static_cast<int32_t>(xg[k]) * wt[k];
              continue;
            }
            for (int64_t k = 0; k < stored; ++k) {
              const int16_t* wt = wk.data() + (k * kk + t) * C;
              int32_t d = 0;
              for (int64_t c = 0; c < C; ++c) d += static_cast<int32_t>(xg[c]) * wt[c];
              accs[k] += d;
            }
            if (stored < OC && ow_op != 0) {
              int64_t xs = 0;
              for (int64_t c = 0; c < C; ++c) xs += xg[c];
              for (int64_t k = stored; k < OC; ++k) accs[k] += xs * ow_op;
            }
          }
        }
      }
    }
  }
  run_epilogue(ep, OH * OW, OCw, out_surface, y.data(), [&](int64_t p, int64_t k) { return acc_all[static_cast<size_t>(p * OC + k)]; });
  return stats;
}

}  // namespace

const char* rounding_name(Rounding r) {
  switch (r) {
    case Rounding::half_to_even: return "half_to_even";
    case Rounding::half_away: return "half_away";
    case Rounding::half_up: return "half_up";
    case Rounding::truncate: return "truncate";
  }
  return "?";
}

std::vector<KnobInfo> knob_list() {
  return {
      {"out_cvt_rounding", "half_to_even|half_away|half_up|truncate", "half_to_even",
       "TRM: OUT_CVT rounds half to even; measured on RK3576, not on RK3588"},
      {"bs_shift_rounding", "half_to_even|half_away|half_up|truncate", "half_up", "rounding of the BS MUL right shift: unmeasured on RK3588"},
      {"out_cvt_scale_signed", "true|false", "true", "OUT_CVT_SCALE read as signed 16-bit (0x8000 flips the sign on RK3576)"},
      {"width_is_line", "true|false", "true",
       "CNA.DATA_SIZE0.DATAIN_WIDTH is the contiguous line dimension (hardware notes); false: Mesa's swap, consistent only on square maps"},
      {"ew_mode", "integer|float", "integer",
       "fused add (EW stage): Mesa's integer operand converter ((e + OFFSET) * SCALE >> SHIFT, half up) or float32 arithmetic (another report); disputed"},
  };
}

Status set_knob(Quirks& q, const std::string& a) {
  const auto eq = a.find('=');
  if (eq == std::string::npos) return invalid("sim knob '" + a + "': expected NAME=VALUE");
  const std::string k = a.substr(0, eq), v = a.substr(eq + 1);
  auto rounding = [&](Rounding& out) -> Status {
    for (Rounding r : {Rounding::half_to_even, Rounding::half_away, Rounding::half_up, Rounding::truncate}) {
      if (v == rounding_name(r)) {
        out = r;
        return {};
      }
    }
    return invalid("sim knob " + k + ": '" + v + "' is not half_to_even, half_away, half_up or truncate");
  };
  auto boolean = [&](bool& out) -> Status {
    if (v != "true" && v != "false") return invalid("sim knob " + k + ": '" + v + "' is not true or false");
    out = v == "true";
    return {};
  };
  if (k == "out_cvt_rounding") return rounding(q.out_cvt_rounding);
  if (k == "bs_shift_rounding") return rounding(q.bs_shift_rounding);
  if (k == "out_cvt_scale_signed") return boolean(q.out_cvt_scale_signed);
  if (k == "width_is_line") return boolean(q.width_is_line);
  if (k == "ew_mode") {
    if (v != "integer" && v != "float") return invalid("sim knob ew_mode: '" + v + "' is not integer or float");
    q.ew_float = v == "float";
    return {};
  }
  return invalid("sim knob '" + k + "': unknown (rkdeploy help sim lists them)");
}

Result<std::vector<TaskStats>> run(DeviceMemory& mem, uint32_t address, size_t words, const Quirks& q, SimCache* cache) {
  std::vector<TaskStats> stats;
  for (size_t t = 0; address != 0; ++t) {
    if (t > 100000) return invalid("regcmd chain longer than 100000 tasks (a loop?)");
    RKD_ASSIGN(auto bytes, mem.read(address, words * 8));
    std::vector<uint64_t> w(words);
    std::memcpy(w.data(), bytes.data(), words * 8);
    const auto tasks = regcmd::decode(w);
    if (tasks.size() != 1 || !tasks[0].has_trailer) {
      return invalid("task " + std::to_string(t) + " at " + hex32(address) + ": " + std::to_string(words) +
                     " words do not hold exactly one task ending with its trailer");
    }
    const regcmd::DecodedTask& d = tasks[0];
    if (!d.problems.empty()) return invalid("task " + std::to_string(t) + " at " + hex32(address) + ": " + d.problems.front());
    if (d.enable_mask != kConvEnableMask) {
      return unsupported("task " + std::to_string(t) + ": enable mask " + hex32(d.enable_mask) + " (only convolutions, 0x1d, are simulated)");
    }
    auto values = d.final_values();
    SimCache::Entry* entry = nullptr;
    if (cache) {
      // Reuse the task's prepared MAC only for the same registers and the same weight bytes.
      auto& e = cache->entries[address];
      const uint32_t waddr = values.count(CNA_DCOMP_ADDR0.offset) ? values[CNA_DCOMP_ADDR0.offset] : 0;
      const uint32_t wbytes = values.count(CNA_WEIGHT_SIZE0.offset) ? values[CNA_WEIGHT_SIZE0.offset] : 0;
      auto wb = mem.read(waddr, wbytes);
      const bool same_weights = e && wb.ok() && e->weights.size() == wb->size() && std::memcmp(e->weights.data(), wb->data(), wb->size()) == 0;
      if (!e || e->regs != values || !same_weights) {
        e = std::make_shared<SimCache::Entry>();
        e->regs = values;
        if (wb.ok()) e->weights.assign(wb->begin(), wb->end());
      }
      entry = e.get();
    }
    auto st = run_conv(mem, Regs(values), q, entry);
    if (!st.ok()) return st.error().with_context("task " + std::to_string(t) + " at " + hex32(address));
    stats.push_back(*st);
    if (d.next_is_zero_word) break;
    address = d.next_address;
    words = (static_cast<size_t>(d.next_amount) + 1) * 2;
  }
  return stats;
}

}  // namespace rkd::npu::sim
