#include "npu/sim/sim.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "npu/arch/arch.h"
#include "npu/regcmd/regcmd.h"
#include "npu/sim/conv_task.h"

namespace rkd::npu::sim {

namespace {

using namespace arch;  // NOLINT: register constants
using detail::ConvTask;
using detail::Epilogue;
using detail::Ew;
using detail::MacView;
using detail::sat32;
using detail::Stage;

std::string hex32(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%08llx", static_cast<unsigned long long>(v));
  return b;
}

// The register values of one task (offset -> value, later writes win).
class Regs {
 public:
  explicit Regs(const std::map<uint16_t, uint32_t>& v) : v_(v) {}
  uint32_t get(const Reg& r) const {
    auto it = v_.find(r.offset);
    return it == v_.end() ? 0 : it->second;
  }
  uint32_t get(const Field& f) const { return f.get(get(Reg{f.target, f.offset})); }

 private:
  const std::map<uint16_t, uint32_t>& v_;
};

// The BS and BN stages have the same register layout (BS_CFG/BN_CFG, *_MUL_CFG): one reader,
// with the BS field positions, for both.
static_assert(DPU_BS_CFG_BS_ALU_ALGO.lo == DPU_BN_CFG_BN_ALU_ALGO.lo && DPU_BS_CFG_BS_RELUX_EN.lo == DPU_BN_CFG_BN_RELUX_EN.lo &&
                  DPU_BS_CFG_BS_ALU_SRC.lo == DPU_BN_CFG_BN_ALU_SRC.lo && DPU_BS_MUL_CFG_BS_MUL_OPERAND.lo == DPU_BN_MUL_CFG_BN_MUL_OPERAND.lo &&
                  DPU_BS_MUL_CFG_BS_MUL_SHIFT_VALUE.lo == DPU_BN_MUL_CFG_BN_MUL_SHIFT_VALUE.lo &&
                  DPU_BS_MUL_CFG_BS_MUL_SRC.lo == DPU_BN_MUL_CFG_BN_MUL_SRC.lo,
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

// The EW stage on v with the operand value e (sim.h, stage 6).
inline int32_t ew_combine(const Ew& w, int32_t v, int64_t e) {
  int64_t a;
  if (w.mul) {
    if (w.as_float) {
      const float c = static_cast<float>(e + w.offset) * static_cast<float>(std::ldexp(static_cast<double>(w.scale), -w.shift));
      a = static_cast<int64_t>(std::nearbyint(static_cast<double>(static_cast<float>(v) * c)));
    } else {
      a = static_cast<int64_t>(v) * (w.cvt_bypass ? e : round_shift((e + w.offset) * w.scale, w.shift, Rounding::half_up));
    }
  } else if (w.algo == 4 && w.as_float && !w.cvt_bypass) {
    // minus in float32 (ew_mode=float), as the add.
    const float m = static_cast<float>(std::ldexp(static_cast<double>(w.scale), -w.shift));
    a = static_cast<int64_t>(std::nearbyint(static_cast<double>(static_cast<float>(v) - static_cast<float>(e + w.offset) * m)));
  } else if (w.algo != 2) {
    // max / min of v and the converted operand, or v minus it (integer converter, or float32
    // with ew_mode=float).
    int64_t c;
    if (w.cvt_bypass) c = e;
    else if (w.as_float)
      c = static_cast<int64_t>(std::nearbyint(
          static_cast<double>(static_cast<float>(e + w.offset) * static_cast<float>(std::ldexp(static_cast<double>(w.scale), -w.shift)))));
    else c = round_shift((e + w.offset) * w.scale, w.shift, Rounding::half_up);
    a = w.algo == 0 ? std::max<int64_t>(v, c) : w.algo == 1 ? std::min<int64_t>(v, c) : static_cast<int64_t>(v) - c;
  } else if (w.cvt_bypass) {
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

inline int32_t apply_ew(const Ew& w, int32_t v, int64_t p, int64_t k) {
  if (!w.on) return v;
  return ew_combine(w, v, static_cast<int8_t>(w.e[(k / 16) * w.surface + (w.per_channel ? 0 : p * 16) + k % 16]));
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
      if (e.lut) v = detail::apply_lut(*e.lut, v, *e.quirks);
      const int64_t o = round_shift(static_cast<int64_t>(v) * e.scale, e.shift, e.out_round) + e.offset;
      y[(k / 16) * out_surface + p * 16 + k % 16] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp<int64_t>(o, -128, 127)));
    }
  }
}

// The MAC on the simulator's own loops: acc[(oy * OW + ox) * OC + k] = sum over taps of
// x * (w + OW_OP), padding cells holding PAD. Written channels past the stored kernels see
// (0 + OW_OP) weights; a depthwise task's channels past C have all-padding weights and
// accumulate 0.
std::vector<int64_t> loops_mac(const ConvTask& t, std::span<const uint8_t> x, std::span<const uint8_t> wb) {
  const int64_t OH = t.OH, OW = t.OW, OC = t.OC, C = t.C, KH = t.KH, KW = t.KW, kk = KH * KW, stored = t.stored();
  std::vector<int64_t> acc_all(static_cast<size_t>(OH * OW * OC), 0);
  auto xin = [&](int64_t c, int64_t h, int64_t w) -> int32_t {
    if (h < 0 || h >= t.H || w < 0 || w >= t.W) return t.pad_value;
    return static_cast<int8_t>(x[static_cast<size_t>((c / 16) * t.surface + h * t.line + w * 16 + c % 16)]);
  };
  auto weight = [&](int64_t oc, int64_t ic, int64_t ky, int64_t kx) -> int32_t {
    return static_cast<int8_t>(wb[t.weight_index(oc, ic, ky, kx)]) + t.ow_op;
  };
  const int64_t GH = (OH - 1) * t.sy + KH, GW = (OW - 1) * t.sx + KW;
  std::vector<int16_t> grid(static_cast<size_t>(GH * GW * C));
  for (int64_t gy = 0; gy < GH; ++gy)
    for (int64_t gx = 0; gx < GW; ++gx)
      for (int64_t c = 0; c < C; ++c)
        grid[static_cast<size_t>((gy * GW + gx) * C + c)] = static_cast<int16_t>(xin(c, gy - t.pad_top, gx - t.pad_left));
  std::vector<int16_t> wk(static_cast<size_t>(t.depthwise ? stored * kk : stored * kk * C));
  for (int64_t k = 0; k < stored; ++k)
    for (int64_t i = 0; i < kk; ++i) {
      if (t.depthwise) {
        wk[static_cast<size_t>(i * stored + k)] = static_cast<int16_t>(weight(k, 0, i / KW, i % KW));
      } else {
        for (int64_t c = 0; c < C; ++c) wk[static_cast<size_t>((k * kk + i) * C + c)] = static_cast<int16_t>(weight(k, c, i / KW, i % KW));
      }
    }
  for (int64_t oy = 0; oy < OH; ++oy) {
    for (int64_t ox = 0; ox < OW; ++ox) {
      int64_t* accs = acc_all.data() + (oy * OW + ox) * OC;
      for (int64_t ky = 0; ky < KH; ++ky) {
        for (int64_t kx = 0; kx < KW; ++kx) {
          const int16_t* xg = grid.data() + ((oy * t.sy + ky) * GW + ox * t.sx + kx) * C;
          const int64_t i = ky * KW + kx;
          if (t.depthwise) {
            const int16_t* wt = wk.data() + i * stored;
            for (int64_t k = 0; k < stored; ++k) accs[k] += static_cast<int32_t>(xg[k]) * wt[k];
            continue;
          }
          for (int64_t k = 0; k < stored; ++k) {
            const int16_t* wt = wk.data() + (k * kk + i) * C;
            int32_t d = 0;
            for (int64_t c = 0; c < C; ++c) d += static_cast<int32_t>(xg[c]) * wt[c];
            accs[k] += d;
          }
          if (stored < OC && t.ow_op != 0) {
            int64_t xs = 0;
            for (int64_t c = 0; c < C; ++c) xs += xg[c];
            for (int64_t k = stored; k < OC; ++k) accs[k] += xs * t.ow_op;
          }
        }
      }
    }
  }
  return acc_all;
}

// Runs task `t` on `mem`; `chain`/`index`: its place in a planned chain (the prepared MAC),
// or nullptr (the loops).
// The BS stage's per-channel operands read by BRDMA (zeros when it reads none).
Status read_bs_operands(const DeviceMemory& mem, const ConvTask& t, std::vector<int32_t>& alu, std::vector<int16_t>& mul) {
  alu.assign(static_cast<size_t>(t.OC), 0);
  mul.assign(static_cast<size_t>(t.OC), 0);
  if (t.bs_dma) {
    if (t.data_use == 1) {
      RKD_ASSIGN(auto b, mem.read(t.operands, static_cast<size_t>(t.OC) * 4));
      std::memcpy(alu.data(), b.data(), static_cast<size_t>(t.OC) * 4);
    } else {
      RKD_ASSIGN(auto b, mem.read(t.operands, static_cast<size_t>((t.OC + 7) / 8) * 64));
      for (int64_t k = 0; k < t.OC; ++k) {
        const size_t blk = static_cast<size_t>(k / 8) * 64, lane = static_cast<size_t>(k % 8);
        if (t.data_use & 1) std::memcpy(&alu[static_cast<size_t>(k)], b.data() + blk + 4 * lane, 4);
        if (t.data_use & 4) std::memcpy(&mul[static_cast<size_t>(k)], b.data() + blk + 48 + 2 * lane, 2);
      }
    }
  }
  return {};
}

// The task's DPU stages as run_epilogue runs them (truncate: CORE's, 0 for a DPU-only task).
Epilogue epilogue_of(const ConvTask& t, const Quirks& q, const Ew& ew, const int32_t* alu, const int16_t* mul, int truncate, int64_t mac_bound) {
  return Epilogue{
      truncate, t.core_round, q.bs_shift_rounding, q.out_cvt_rounding, t.bs, t.bn, ew, t.lut ? &*t.lut : nullptr, &q, alu, mul, t.scale, t.offset,
      t.shift,  mac_bound};
}

// The bytes the EW operand spans: per element an NC1HWC2 map, per channel one 16-byte atom a
// surface.
int64_t ew_operand_bytes(const ConvTask& t) { return (t.OC - 1) / 16 * t.ew.surface + (t.ew.per_channel ? 16 : t.OH * t.OW * 16); }

// The EW stage with its operand's bytes attached.
Result<Ew> attach_ew(const DeviceMemory& mem, const ConvTask& t) {
  Ew ew = t.ew;
  if (ew.on) {
    RKD_ASSIGN(auto eb, mem.read(ew.address, static_cast<size_t>(ew_operand_bytes(t))));
    ew.e = eb.data();
  }
  return ew;
}

}  // namespace

// A DPU-only task whose BS operands come from registers computes every output byte from its
// main input byte x and EW operand byte e alone: y = table[(x + 128) * 256 + (e + 128)]
// (table[x + 128] without EW), each entry the stage-by-stage definition's value. Empty when
// the task reads per-channel operands.
std::vector<uint8_t> detail::dpu_only_table(const ConvTask& t, const Quirks& q) {
  if (!t.dpu_only || t.bs_dma) return {};
  const int n = t.ew.on ? 256 : 1;
  std::vector<uint8_t> table(static_cast<size_t>(256 * n));
  for (int x = -128; x < 128; ++x) {
    int32_t v = apply_stage(t.bs, x, 0, 0, q.bs_shift_rounding);
    v = apply_stage(t.bn, v, 0, 0, q.bs_shift_rounding);
    for (int e = 0; e < n; ++e) {
      Ew ew = t.ew;
      ew.as_float = q.ew_float;
      int32_t w = t.ew.on ? ew_combine(ew, v, e - 128) : v;
      if (t.lut) w = apply_lut(*t.lut, w, q);
      const int64_t o = round_shift(static_cast<int64_t>(w) * t.scale, t.shift, q.out_cvt_rounding) + t.offset;
      table[static_cast<size_t>((x + 128) * n + e)] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp<int64_t>(o, -128, 127)));
    }
  }
  return table;
}

namespace {

// A DPU-only task: the DPU stages on the main input read by MRDMA; with `table`
// (dpu_only_table's) by look-up, else stage by stage (the definition).
Result<TaskStats> run_dpu_only(DeviceMemory& mem, const ConvTask& t, const Quirks& q, const std::vector<uint8_t>* table = nullptr) {
  if (table && !table->empty()) {
    RKD_ASSIGN(std::span<const uint8_t> x, mem.read(t.input, static_cast<size_t>(t.input_bytes)));
    RKD_ASSIGN(Ew ew, attach_ew(mem, t));
    // The output may overwrite an input (in place): such an input is read from a copy.
    std::vector<uint8_t> in_copy, e_copy;
    const uint8_t* xin = x.data();
    const uint8_t* ein = ew.on ? ew.e : nullptr;
    const uint64_t out0 = t.output, out1 = out0 + static_cast<uint64_t>(t.output_bytes);
    if (detail::overlap(t.input, static_cast<uint64_t>(t.input) + static_cast<uint64_t>(t.input_bytes), out0, out1)) {
      in_copy.assign(x.begin(), x.end());
      xin = in_copy.data();
    }
    if (ew.on && detail::overlap(ew.address, static_cast<uint64_t>(ew.address) + static_cast<uint64_t>(ew_operand_bytes(t)), out0, out1)) {
      e_copy.assign(ew.e, ew.e + ew_operand_bytes(t));
      ein = e_copy.data();
    }
    RKD_ASSIGN(auto y, mem.span(t.output, static_cast<size_t>(t.output_bytes)));
    const int64_t pixels = t.OH * t.OW, surface = pixels * 16, OCw = t.written();
    const uint8_t* tb = table->data();
    for (int64_t b = 0; b < (OCw + 15) / 16; ++b) {
      const int64_t lanes = std::min<int64_t>(16, OCw - 16 * b);
      const uint8_t* xi = xin + b * surface;
      uint8_t* yo = y.data() + b * t.out_surface;
      if (ew.on) {
        const uint8_t* ei = ein + b * ew.surface;
        for (int64_t p = 0; p < pixels; ++p)
          for (int64_t l = 0; l < lanes; ++l) {
            const size_t i = static_cast<size_t>(p * 16 + l);
            yo[i] = tb[(static_cast<size_t>(xi[i] ^ 0x80) << 8) | static_cast<size_t>(ei[ew.per_channel ? l : i] ^ 0x80)];
          }
      } else {
        for (int64_t p = 0; p < pixels; ++p)
          for (int64_t l = 0; l < lanes; ++l) yo[p * 16 + l] = tb[xi[p * 16 + l] ^ 0x80];
      }
    }
    TaskStats stats;
    stats.output_values = pixels * t.OC;
    return stats;
  }
  RKD_ASSIGN(std::span<const uint8_t> x, mem.read(t.input, static_cast<size_t>(t.input_bytes)));
  std::vector<int32_t> alu;
  std::vector<int16_t> mul;
  RKD_TRY(read_bs_operands(mem, t, alu, mul));
  RKD_ASSIGN(Ew ew, attach_ew(mem, t));
  // The output may overwrite the input (in place): run on a copy of it.
  const std::vector<uint8_t> in(x.begin(), x.end());
  RKD_ASSIGN(auto y, mem.span(t.output, static_cast<size_t>(t.output_bytes)));
  const int64_t pixels = t.OH * t.OW, surface = pixels * 16;
  const Epilogue ep = epilogue_of(t, q, ew, alu.data(), mul.data(), 0, 128);
  run_epilogue(ep, pixels, t.written(), t.out_surface, y.data(),
               [&](int64_t p, int64_t k) -> int64_t { return static_cast<int8_t>(in[static_cast<size_t>((k / 16) * surface + p * 16 + k % 16)]); });
  TaskStats stats;
  stats.output_values = pixels * t.OC;
  return stats;
}

Result<TaskStats> run_conv(DeviceMemory& mem, const ConvTask& t, const Quirks& q, SimCache::Chain* chain, size_t index) {
  if (t.dpu_only) return run_dpu_only(mem, t, q);
  RKD_ASSIGN(std::span<const uint8_t> x, mem.read(t.input, static_cast<size_t>(t.input_bytes)));
  RKD_ASSIGN(auto wb, mem.read(t.weights, static_cast<size_t>(t.weight_bytes)));
  std::vector<int32_t> alu;
  std::vector<int16_t> mul;
  RKD_TRY(read_bs_operands(mem, t, alu, mul));
  RKD_ASSIGN(auto y, mem.span(t.output, static_cast<size_t>(t.output_bytes)));
  RKD_ASSIGN(Ew ew, attach_ew(mem, t));
  const int64_t OCw = t.written(), pixels = t.OH * t.OW;
  TaskStats stats;
  stats.macs = pixels * OCw * t.KH * t.KW * (t.depthwise ? 1 : t.C_real);
  stats.padded_macs = pixels * t.OC * t.KH * t.KW * (t.depthwise ? 1 : t.C);
  stats.output_values = pixels * t.OC;
  // |x| <= 128 and |w + OW_OP| <= 128 where the prepared MAC runs (int8 operands).
  const int64_t taps = t.KH * t.KW * (t.depthwise ? 1 : t.C);
  const Epilogue ep = epilogue_of(t, q, ew, alu.data(), mul.data(), t.truncate, taps * 128 * 128);
  if (chain) {
    RKD_ASSIGN(std::optional<MacView> view, detail::chain_mac(*chain, mem, index));
    if (view) {
      const MacView v = *view;
      if (detail::common_epilogue(ep) && OCw <= t.stored()) {
        detail::run_common_epilogue(ep, pixels, OCw, t.out_surface, y.data(), v);
        return stats;
      }
      const int64_t stored = t.stored();
      run_epilogue(ep, pixels, OCw, t.out_surface, y.data(), [&](int64_t p, int64_t k) -> int64_t {
        return k < stored ? static_cast<int64_t>(v.acc[p * v.stride + k]) + v.wsum_scale * v.wsum[k] : 0;
      });
      return stats;
    }
  }
  const std::vector<int64_t> acc = loops_mac(t, x, wb);
  run_epilogue(ep, pixels, OCw, t.out_surface, y.data(), [&](int64_t p, int64_t k) { return acc[static_cast<size_t>(p * t.OC + k)]; });
  return stats;
}

}  // namespace

void detail::reference_epilogue(const Epilogue& e, int64_t pixels, int64_t OCw, int64_t out_surface, uint8_t* y, const MacView& v) {
  run_epilogue(e, pixels, OCw, out_surface, y,
               [&](int64_t p, int64_t k) -> int64_t { return static_cast<int64_t>(v.acc[p * v.stride + k]) + v.wsum_scale * v.wsum[k]; });
}

namespace {

// The LUT stage's configuration and the tables the task uploads (sim.h, stage 6b).
Result<detail::Lut> decode_lut(const Regs& r, const detail::LutUpload* up) {
  if (r.get(DPU_LUT_CFG_LUT_ROAD_SEL) != 0 || r.get(DPU_LUT_CFG_LUT_EXPAND_EN) != 0 || r.get(DPU_LUT_CFG_LUT_CAL_SEL) != 0 ||
      r.get(DPU_LUT_CFG_LUT_LO_LE_MUX) != 2) {
    return unsupported("DPU.LUT_CFG " + hex32(r.get(DPU_LUT_CFG)) +
                       ": only the configuration measured on a board (ROAD_SEL 0, EXPAND_EN 0, LO_LE_MUX 2, CAL_SEL 0) is simulated");
  }
  if (!up || !up->complete(0) || !up->complete(1)) {
    return unsupported(
        "DPU.EW_CFG enables the LUT but the task does not upload every entry of both tables (whether tables persist between tasks is "
        "unmeasured)");
  }
  detail::Lut l;
  l.table = up->entries;
  const Reg starts[2] = {DPU_LUT_LE_START, DPU_LUT_LO_START}, ends[2] = {DPU_LUT_LE_END, DPU_LUT_LO_END};
  const Field sel[2] = {DPU_LUT_INFO_LUT_LE_INDEX_SELECT, DPU_LUT_INFO_LUT_LO_INDEX_SELECT};
  const Field us[2] = {DPU_LUT_LE_SLOPE_SCALE_LUT_LE_SLOPE_UFLOW_SCALE, DPU_LUT_LO_SLOPE_SCALE_LUT_LO_SLOPE_UFLOW_SCALE};
  const Field os[2] = {DPU_LUT_LE_SLOPE_SCALE_LUT_LE_SLOPE_OFLOW_SCALE, DPU_LUT_LO_SLOPE_SCALE_LUT_LO_SLOPE_OFLOW_SCALE};
  const Field ush[2] = {DPU_LUT_LE_SLOPE_SHIFT_LUT_LE_SLOPE_UFLOW_SHIFT, DPU_LUT_LO_SLOPE_SHIFT_LUT_LO_SLOPE_UFLOW_SHIFT};
  const Field osh[2] = {DPU_LUT_LE_SLOPE_SHIFT_LUT_LE_SLOPE_OFLOW_SHIFT, DPU_LUT_LO_SLOPE_SHIFT_LUT_LO_SLOPE_OFLOW_SHIFT};
  for (int i = 0; i < 2; ++i) {
    l.start[i] = static_cast<int32_t>(r.get(starts[i]));
    l.end[i] = static_cast<int32_t>(r.get(ends[i]));
    l.select[i] = static_cast<int>(r.get(sel[i]));
    if (l.select[i] > 31) return unsupported("DPU.LUT_INFO index select " + std::to_string(l.select[i]) + " (above 31)");
    l.uflow_scale[i] = static_cast<int16_t>(r.get(us[i]));
    l.oflow_scale[i] = static_cast<int16_t>(r.get(os[i]));
    l.uflow_shift[i] = static_cast<int>(r.get(ush[i]));
    l.oflow_shift[i] = static_cast<int>(r.get(osh[i]));
  }
  l.hybrid_lo = r.get(DPU_LUT_CFG_LUT_HYBRID_PRIORITY) != 0;
  l.uflow_lo = r.get(DPU_LUT_CFG_LUT_UFLOW_PRIORITY) != 0;
  l.oflow_lo = r.get(DPU_LUT_CFG_LUT_OFLOW_PRIORITY) != 0;
  return l;
}

// The DPU's part of a task (BS, BN, EW, OUT_CVT, the output), after t's output cube (OW, OH,
// OC, OC_real) is set.
Status decode_dpu(const Regs& r, const Quirks& q, ConvTask& t, const detail::LutUpload* lut) {
  const int64_t OC = t.OC, OH = t.OH, OW = t.OW;
  if (r.get(DPU_DATA_FORMAT_OUT_PRECISION) != 0) return unsupported("DPU.DATA_FORMAT.OUT_PRECISION: only int8 output (int16 times out on hardware)");
  t.bs = bs_stage(r);
  t.bn = bn_stage(r);
  RKD_TRY(check_stage(t.bs, "DPU.BS", true));
  RKD_TRY(check_stage(t.bn, "DPU.BN", false));
  Ew& ew = t.ew;
  ew.on = r.get(DPU_EW_CFG_EW_BYPASS) == 0;
  if (ew.on && r.get(DPU_EW_CFG_EW_OP_BYPASS)) {
    // No operand: the stage is the LUT alone (stage 6b).
    ew.on = false;
    if (r.get(DPU_EW_CFG_EW_LUT_BYPASS) || !r.get(DPU_EW_CFG_EW_RELU_BYPASS) || r.get(DPU_EW_CFG_EW_RELUX_EN) || r.get(DPU_EW_CFG_EW_MUL_PRELU)) {
      return unsupported("DPU.EW_CFG " + hex32(r.get(DPU_EW_CFG)) +
                         ": with the EW operand bypassed only the LUT with the EW ReLU, ReLUX and PReLU off is simulated");
    }
    RKD_ASSIGN(t.lut, decode_lut(r, lut));
  } else if (ew.on) {
    const uint32_t mode = r.get(DPU_EW_CFG_EW_DATA_MODE);
    const uint32_t algo = r.get(DPU_EW_CFG_EW_ALU_ALGO);
    if (!r.get(DPU_EW_CFG_EW_OP_SRC) || (algo > 2 && algo != 4) || !r.get(DPU_EW_CFG_EW_LUT_BYPASS) || r.get(DPU_EW_CFG_EW_MUL_PRELU) ||
        r.get(DPU_EW_CFG_EW_RELUX_EN) || mode > 1 || r.get(DPU_EW_CFG_EDATA_SIZE) != 1) {
      return unsupported("DPU.EW_CFG " + hex32(r.get(DPU_EW_CFG)) +
                         ": only the max, min, add, minus or multiply of one int8 ERDMA operand per element or per channel (EW_OP_SRC 1, "
                         "EW_ALU_ALGO 0-2 or 4, or EW_OP_TYPE 1, LUT bypassed, EW_DATA_MODE 0 or 1, EDATA_SIZE 1) is simulated");
    }
    if (r.get(DPU_RDMA_RDMA_ERDMA_CFG_ERDMA_DATA_MODE) != mode)
      return invalid("DPU.EW_CFG.EW_DATA_MODE " + std::to_string(mode) + " but DPU_RDMA.RDMA_ERDMA_CFG.ERDMA_DATA_MODE " +
                     std::to_string(r.get(DPU_RDMA_RDMA_ERDMA_CFG_ERDMA_DATA_MODE)));
    ew.per_channel = mode == 0;
    ew.mul = r.get(DPU_EW_CFG_EW_OP_TYPE) != 0;
    ew.algo = r.get(DPU_EW_CFG_EW_ALU_ALGO);
    if (r.get(DPU_RDMA_RDMA_ERDMA_CFG_ERDMA_DISABLE))
      return invalid("DPU.EW_CFG adds an ERDMA operand but DPU_RDMA.RDMA_ERDMA_CFG.ERDMA_DISABLE is set");
    ew.cvt_bypass = r.get(DPU_EW_CFG_EW_OP_CVT_BYPASS) != 0;
    ew.relu = r.get(DPU_EW_CFG_EW_RELU_BYPASS) == 0;
    ew.as_float = q.ew_float;
    ew.offset = static_cast<int32_t>(r.get(DPU_EW_CVT_OFFSET_VALUE));
    ew.scale = r.get(DPU_EW_CVT_SCALE_VALUE_EW_OP_CVT_SCALE);
    ew.shift = static_cast<int>(r.get(DPU_EW_CVT_SCALE_VALUE_EW_OP_CVT_SHIFT));
    ew.surface = static_cast<int64_t>(r.get(DPU_RDMA_RDMA_EW_SURF_STRIDE_EW_SURF_STRIDE)) * 16;
    ew.address = r.get(DPU_RDMA_RDMA_EW_BASE_ADDR);
  }
  t.data_use = r.get(DPU_RDMA_RDMA_BRDMA_CFG_BRDMA_DATA_USE);
  t.bs_dma = !t.bs.bypass && ((!t.bs.alu_bypass && t.bs.alu_src) || (!t.bs.mul_bypass && t.bs.mul_src));
  if (t.bs_dma && t.data_use == 0) return invalid("DPU.BS_CFG reads operands by BRDMA but DPU_RDMA.RDMA_BRDMA_CFG.BRDMA_DATA_USE is 0");
  t.operands = r.get(DPU_RDMA_RDMA_BS_BASE_ADDR);
  // OUT_CVT.
  const uint32_t scale_bits = r.get(DPU_OUT_CVT_SCALE_OUT_CVT_SCALE);
  t.scale = q.out_cvt_scale_signed ? static_cast<int16_t>(scale_bits) : static_cast<int64_t>(scale_bits);
  t.shift = static_cast<int>(r.get(DPU_OUT_CVT_SHIFT_OUT_CVT_SHIFT));
  if (t.shift > 63) return unsupported("DPU.OUT_CVT_SHIFT " + std::to_string(t.shift) + " (above 63)");
  t.offset = static_cast<int32_t>(r.get(DPU_OUT_CVT_OFFSET));
  // Output.
  t.output = r.get(DPU_DST_BASE_ADDR);
  t.out_surface = static_cast<int64_t>(r.get(DPU_DST_SURF_STRIDE_DST_SURF_STRIDE)) * 16;
  if (t.out_surface < OH * OW * 16 && OC > 16) return invalid("DPU.DST_SURF_STRIDE is smaller than one output surface");
  t.output_bytes = (OC - 1) / 16 * t.out_surface + OH * OW * 16;
  if (ew.on && ew.surface < (ew.per_channel ? 16 : OH * OW * 16) && OC > 16)
    return invalid(std::string("DPU_RDMA.RDMA_EW_SURF_STRIDE is smaller than one ") + (ew.per_channel ? "16-channel atom" : "output surface"));
  return {};
}

// A DPU-only task: the output cube from the DPU's registers, the main input from MRDMA.
Result<ConvTask> decode_dpu_only(const Regs& r, const Quirks& q, const detail::LutUpload* lut) {
  ConvTask t;
  t.dpu_only = true;
  if (r.get(DPU_RDMA_RDMA_FEATURE_MODE_CFG_MRDMA_DISABLE))
    return invalid("DPU-only task: DPU_RDMA.RDMA_FEATURE_MODE_CFG.MRDMA_DISABLE is set (no main input)");
  if (!r.get(DPU_RDMA_RDMA_FEATURE_MODE_CFG_FLYING_MODE) || !r.get(DPU_FEATURE_MODE_CFG_FLYING_MODE)) {
    return unsupported(
        "DPU-only task: FLYING_MODE clear in DPU.FEATURE_MODE_CFG or DPU_RDMA.RDMA_FEATURE_MODE_CFG (only the measured setting, 1, is simulated)");
  }
  if (r.get(DPU_RDMA_RDMA_FEATURE_MODE_CFG_IN_PRECISION) != 0 || r.get(DPU_RDMA_RDMA_FEATURE_MODE_CFG_PROC_PRECISION) != 0 ||
      r.get(DPU_DATA_FORMAT_IN_PRECISION) != 0 || r.get(DPU_DATA_FORMAT_PROC_PRECISION) != 0) {
    return unsupported("DPU-only task: only int8 input and processing precision are simulated");
  }
  t.OW = r.get(DPU_DATA_CUBE_WIDTH_WIDTH) + 1;
  t.OH = r.get(DPU_DATA_CUBE_HEIGHT_HEIGHT) + 1;
  t.OC = r.get(DPU_DATA_CUBE_CHANNEL_CHANNEL) + 1;
  t.OC_real = r.get(DPU_DATA_CUBE_CHANNEL_ORIG_CHANNEL) + 1;
  if (r.get(DPU_RDMA_RDMA_DATA_CUBE_WIDTH_WIDTH) + 1 != static_cast<uint32_t>(t.OW) ||
      r.get(DPU_RDMA_RDMA_DATA_CUBE_HEIGHT_HEIGHT) + 1 != static_cast<uint32_t>(t.OH) ||
      r.get(DPU_RDMA_RDMA_DATA_CUBE_CHANNEL_CHANNEL) + 1 != static_cast<uint32_t>(t.OC)) {
    return invalid("DPU_RDMA.RDMA_DATA_CUBE_WIDTH/HEIGHT/CHANNEL disagree with DPU.DATA_CUBE_WIDTH/HEIGHT/CHANNEL");
  }
  t.input = r.get(DPU_RDMA_RDMA_SRC_BASE_ADDR);
  t.input_bytes = (t.OC + 15) / 16 * t.OH * t.OW * 16;
  RKD_TRY(decode_dpu(r, q, t, lut));
  return t;
}

// The int8 convolution task the registers `values` program, checked without reading memory.
Result<ConvTask> decode_conv(const detail::RegValues& values, const Quirks& q, const detail::LutUpload* lut) {
  const Regs r(values);
  ConvTask t;
  const uint32_t mode = r.get(CNA_CONV_CON1_CONV_MODE);
  if (mode != 0 && mode != 3) return unsupported("CNA.CONV_CON1.CONV_MODE " + std::to_string(mode) + " (0 direct, 3 depthwise)");
  t.depthwise = mode == 3;
  if (r.get(CNA_CONV_CON1_IN_PRECISION) != 0 || r.get(CNA_CONV_CON1_PROC_PRECISION) != 0) {
    return unsupported("CNA.CONV_CON1: only int8 input and processing precision are simulated");
  }
  if (r.get(CNA_CONV_CON3_ATROUS_X_DILATION) != 0 || r.get(CNA_CONV_CON3_ATROUS_Y_DILATION) != 0) {
    return unsupported("CNA.CONV_CON3 dilation (not simulated yet)");
  }
  t.W = r.get(CNA_DATA_SIZE0_DATAIN_WIDTH);
  t.H = r.get(CNA_DATA_SIZE0_DATAIN_HEIGHT);
  if (!q.width_is_line) std::swap(t.W, t.H);
  t.C = r.get(CNA_DATA_SIZE1_DATAIN_CHANNEL);
  t.C_real = r.get(CNA_DATA_SIZE1_DATAIN_CHANNEL_REAL) + 1;
  t.sx = r.get(CNA_CONV_CON3_CONV_X_STRIDE);
  t.sy = r.get(CNA_CONV_CON3_CONV_Y_STRIDE);
  t.pad_top = r.get(CNA_PAD_CON0_PAD_TOP);
  t.pad_left = r.get(CNA_PAD_CON0_PAD_LEFT);
  t.pad_value = static_cast<int8_t>(r.get(CNA_PAD_CON1) & 0xff);
  t.KH = r.get(CNA_WEIGHT_SIZE2_WEIGHT_HEIGHT);
  t.KW = r.get(CNA_WEIGHT_SIZE2_WEIGHT_WIDTH);
  t.kernels = r.get(CNA_WEIGHT_SIZE2_WEIGHT_KERNELS);
  t.OW = r.get(CORE_DATAOUT_SIZE_0_DATAOUT_WIDTH) + 1;
  t.OH = r.get(CORE_DATAOUT_SIZE_0_DATAOUT_HEIGHT) + 1;
  t.OC = r.get(DPU_DATA_CUBE_CHANNEL_CHANNEL) + 1;
  t.OC_real = r.get(DPU_DATA_CUBE_CHANNEL_ORIG_CHANNEL) + 1;
  const int64_t W = t.W, H = t.H, C = t.C, OC = t.OC, OH = t.OH, OW = t.OW;
  if (W < 1 || H < 1 || C < 1 || C % 16 != 0 || t.C_real > C) {
    return invalid("CNA.DATA_SIZE0/1: input " + std::to_string(C) + "x" + std::to_string(H) + "x" + std::to_string(W) +
                   " (channels must be a positive multiple of 16 holding the real ones)");
  }
  if (t.sx < 1 || t.sy < 1 || t.KH < 1 || t.KW < 1) return invalid("CNA: zero stride or kernel size");
  if (H < kRk3588.min_height) {
    return unsupported("CNA.DATA_SIZE0: input height " + std::to_string(H) + " (maps lower than " + std::to_string(kRk3588.min_height) +
                       " rows are broken on hardware)");
  }
  if (r.get(DPU_DATA_CUBE_WIDTH_WIDTH) + 1 != static_cast<uint32_t>(OW) || r.get(DPU_DATA_CUBE_HEIGHT_HEIGHT) + 1 != static_cast<uint32_t>(OH)) {
    return invalid("DPU.DATA_CUBE_WIDTH/HEIGHT disagree with CORE.DATAOUT_SIZE_0");
  }
  if (t.depthwise && OC > (C + 63) / 64 * 64) {
    return invalid("DPU.DATA_CUBE_CHANNEL: " + std::to_string(OC) + " output channels of a depthwise convolution over " + std::to_string(C));
  }
  // Input feature map.
  t.line = static_cast<int64_t>(r.get(CNA_DMA_CON1_LINE_STRIDE)) * 4;
  t.surface = (static_cast<int64_t>(r.get(CNA_DMA_CON2_SURF_STRIDE)) + 4 * W) * 16;
  if (t.line < 16 * W)
    return invalid("CNA.DMA_CON1.LINE_STRIDE " + std::to_string(t.line / 4) + " is shorter than a line of " + std::to_string(W) + " pixels");
  t.input = r.get(CNA_FEATURE_DATA_ADDR);
  t.input_bytes = (C / 16 - 1) * t.surface + (H - 1) * t.line + W * 16;
  // Weights.
  t.weights = r.get(CNA_DCOMP_ADDR0);
  const int64_t kk = t.KH * t.KW;
  t.weight_bytes = t.depthwise ? (C + 63) / 64 * 64 * kk : t.kernels * kk * C;
  if (static_cast<int64_t>(r.get(CNA_WEIGHT_SIZE0_WEIGHT_BYTES)) != t.weight_bytes) {
    return invalid("CNA.WEIGHT_SIZE0.WEIGHT_BYTES " + std::to_string(r.get(CNA_WEIGHT_SIZE0_WEIGHT_BYTES)) + " but the geometry needs " +
                   std::to_string(t.weight_bytes));
  }
  t.ow_op = r.get(DPU_BS_OW_CFG_OD_BYPASS) ? 0 : static_cast<int16_t>(r.get(DPU_BS_OW_OP_OW_OP));
  // CORE.
  t.truncate = static_cast<int>(r.get(CORE_CLIP_TRUNCATE_CLIP_TRUNCATE));
  t.core_round = r.get(CORE_CLIP_TRUNCATE_ROUND_TYPE) ? Rounding::half_up : Rounding::half_to_even;
  RKD_TRY(decode_dpu(r, q, t, lut));
  return t;
}

}  // namespace

Result<ConvTask> detail::decode_task(const RegValues& values, uint32_t enable_mask, const Quirks& q, const LutUpload* lut) {
  if (enable_mask == kDpuEnableMask) return decode_dpu_only(Regs(values), q, lut);
  return decode_conv(values, q, lut);
}

namespace {

// A PPU-only task (sim.h) as its registers describe it: sizes, window, strides in bytes.
struct PoolTask {
  int64_t W = 0, H = 0, C = 0, OW = 0, OH = 0, KW = 1, KH = 1, SW = 1, SH = 1;
  int64_t pad_left = 0, pad_top = 0, pad_right = 0, pad_bottom = 0;
  int32_t pad_value = 0;
  uint32_t input = 0, output = 0;
  int64_t line = 0, surface = 0, out_surface = 0;
  int64_t input_bytes = 0, output_bytes = 0;
};

// Decoded and checked from the registers alone (no memory read): what is not simulated is
// refused by register name.
Result<PoolTask> decode_pool(const Regs& r) {
  if (r.get(PPU_OPERATION_MODE_CFG_POOLING_METHOD) != 1)
    return unsupported("PPU.OPERATION_MODE_CFG.POOLING_METHOD " + std::to_string(r.get(PPU_OPERATION_MODE_CFG_POOLING_METHOD)) +
                       " (only 1, max pooling, is simulated)");
  if (r.get(PPU_OPERATION_MODE_CFG_FLYING_MODE) != 1)
    return unsupported("PPU.OPERATION_MODE_CFG.FLYING_MODE 0 (the input from the DPU on the fly is not simulated: PPU_RDMA reads it)");
  if (r.get(PPU_OPERATION_MODE_CFG_INDEX_EN) != 0) return unsupported("PPU.OPERATION_MODE_CFG.INDEX_EN (window positions) is not simulated");
  if (r.get(PPU_DATA_FORMAT_DPU_FLYIN) != 0) return unsupported("PPU.DATA_FORMAT.DPU_FLYIN is not simulated");
  if (r.get(PPU_DATA_FORMAT_PROC_PRECISION) != 0)
    return unsupported("PPU.DATA_FORMAT.PROC_PRECISION " + std::to_string(r.get(PPU_DATA_FORMAT_PROC_PRECISION)) + " (only 0, int8, is simulated)");
  if (r.get(PPU_RDMA_RDMA_DATA_FORMAT_IN_PRECISION) != static_cast<uint32_t>(kRk3588.ppu_rdma_int8_in_precision))
    return unsupported("PPU_RDMA.RDMA_DATA_FORMAT.IN_PRECISION " + std::to_string(r.get(PPU_RDMA_RDMA_DATA_FORMAT_IN_PRECISION)) +
                       " (the storage width; only " + std::to_string(kRk3588.ppu_rdma_int8_in_precision) + ", 8-bit, is simulated)");
  PoolTask t;
  t.W = r.get(PPU_DATA_CUBE_IN_WIDTH_CUBE_IN_WIDTH) + 1;
  t.H = r.get(PPU_DATA_CUBE_IN_HEIGHT_CUBE_IN_HEIGHT) + 1;
  t.C = r.get(PPU_DATA_CUBE_IN_CHANNEL_CUBE_IN_CHANNEL) + 1;
  t.OW = r.get(PPU_DATA_CUBE_OUT_WIDTH_CUBE_OUT_WIDTH) + 1;
  t.OH = r.get(PPU_DATA_CUBE_OUT_HEIGHT_CUBE_OUT_HEIGHT) + 1;
  if (r.get(PPU_RDMA_RDMA_CUBE_IN_WIDTH_CUBE_IN_WIDTH) + 1 != t.W || r.get(PPU_RDMA_RDMA_CUBE_IN_HEIGHT_CUBE_IN_HEIGHT) + 1 != t.H ||
      r.get(PPU_RDMA_RDMA_CUBE_IN_CHANNEL_CUBE_IN_CHANNEL) + 1 != t.C)
    return unsupported("PPU_RDMA.RDMA_CUBE_IN_* differ from PPU.DATA_CUBE_IN_* (not simulated)");
  if (r.get(PPU_DATA_CUBE_OUT_CHANNEL_CUBE_OUT_CHANNEL) + 1 != t.C)
    return unsupported("PPU.DATA_CUBE_OUT_CHANNEL differs from DATA_CUBE_IN_CHANNEL (not simulated)");
  if (t.C % 16 != 0) return unsupported("PPU.DATA_CUBE_IN_CHANNEL + 1 = " + std::to_string(t.C) + " is not a multiple of 16 (int8 surfaces)");
  t.KW = r.get(PPU_POOLING_KERNEL_CFG_KERNEL_WIDTH) + 1;
  t.KH = r.get(PPU_POOLING_KERNEL_CFG_KERNEL_HEIGHT) + 1;
  t.SW = r.get(PPU_POOLING_KERNEL_CFG_KERNEL_STRIDE_WIDTH) + 1;
  t.SH = r.get(PPU_POOLING_KERNEL_CFG_KERNEL_STRIDE_HEIGHT) + 1;
  t.pad_left = r.get(PPU_POOLING_PADDING_CFG_PAD_LEFT);
  t.pad_top = r.get(PPU_POOLING_PADDING_CFG_PAD_TOP);
  t.pad_right = r.get(PPU_POOLING_PADDING_CFG_PAD_RIGHT);
  t.pad_bottom = r.get(PPU_POOLING_PADDING_CFG_PAD_BOTTOM);
  t.pad_value = static_cast<int8_t>(r.get(PPU_PADDING_VALUE_1_CFG_PAD_VALUE_0) & 0xff);
  if (t.pad_left >= t.KW || t.pad_right >= t.KW || t.pad_top >= t.KH || t.pad_bottom >= t.KH)
    return unsupported("PPU.POOLING_PADDING_CFG: a pad of at least the kernel's size (windows without a cell of the map are not simulated)");
  const int64_t ow = (t.W + t.pad_left + t.pad_right - t.KW) / t.SW + 1, oh = (t.H + t.pad_top + t.pad_bottom - t.KH) / t.SH + 1;
  if (t.W + t.pad_left + t.pad_right < t.KW || t.H + t.pad_top + t.pad_bottom < t.KH || t.OW != ow || t.OH != oh)
    return unsupported("PPU.DATA_CUBE_OUT_WIDTH / _HEIGHT + 1 = " + std::to_string(t.OW) + " x " + std::to_string(t.OH) +
                       " where the windows that fit are " + std::to_string(ow) + " x " + std::to_string(oh) + " (only floor mode is simulated)");
  t.input = r.get(PPU_RDMA_RDMA_SRC_BASE_ADDR);
  t.line = static_cast<int64_t>(r.get(PPU_RDMA_RDMA_SRC_LINE_STRIDE) & ~0xfu);
  t.surface = static_cast<int64_t>(r.get(PPU_RDMA_RDMA_SRC_SURF_STRIDE) & ~0xfu);
  t.output = r.get(PPU_DST_BASE_ADDR) & ~0xfu;
  t.out_surface = static_cast<int64_t>(r.get(PPU_DST_SURF_STRIDE) & ~0xfu);
  const int64_t blocks = t.C / 16;
  if (t.line < t.W * 16 || (blocks > 1 && t.surface < t.line * t.H))
    return unsupported("PPU_RDMA.RDMA_SRC_LINE_STRIDE / _SURF_STRIDE smaller than a line / surface of the map (overlapping reads)");
  if (blocks > 1 && t.out_surface < t.OW * t.OH * 16)
    return unsupported("PPU.DST_SURF_STRIDE smaller than a surface of the output (overlapping writes)");
  t.input_bytes = (blocks - 1) * t.surface + (t.H - 1) * t.line + t.W * 16;
  t.output_bytes = (blocks - 1) * t.out_surface + t.OW * t.OH * 16;
  return t;
}

Result<TaskStats> run_pool(DeviceMemory& mem, const PoolTask& t, const Quirks& q) {
  RKD_ASSIGN(std::span<const uint8_t> xs, mem.read(t.input, static_cast<size_t>(t.input_bytes)));
  // The output may overlap the input: pool from a copy.
  const std::vector<uint8_t> x(xs.begin(), xs.end());
  RKD_ASSIGN(std::span<uint8_t> y, mem.span(t.output, static_cast<size_t>(t.output_bytes)));
  for (int64_t b = 0; b < t.C / 16; ++b) {
    for (int64_t oy = 0; oy < t.OH; ++oy) {
      for (int64_t ox = 0; ox < t.OW; ++ox) {
        std::array<int32_t, 16> m;
        m.fill(std::numeric_limits<int32_t>::min());
        for (int64_t ky = 0; ky < t.KH; ++ky) {
          for (int64_t kx = 0; kx < t.KW; ++kx) {
            const int64_t iy = oy * t.SH - t.pad_top + ky, ix = ox * t.SW - t.pad_left + kx;
            const bool inside = iy >= 0 && iy < t.H && ix >= 0 && ix < t.W;
            if (!inside && q.ppu_max_pad_ignored) continue;
            const uint8_t* cell = inside ? &x[static_cast<size_t>(b * t.surface + iy * t.line + ix * 16)] : nullptr;
            for (int k = 0; k < 16; ++k)
              m[static_cast<size_t>(k)] = std::max(m[static_cast<size_t>(k)], cell ? int32_t{static_cast<int8_t>(cell[k])} : t.pad_value);
          }
        }
        uint8_t* out = &y[static_cast<size_t>(b * t.out_surface + (oy * t.OW + ox) * 16)];
        for (int k = 0; k < 16; ++k) out[k] = static_cast<uint8_t>(static_cast<int8_t>(m[static_cast<size_t>(k)]));
      }
    }
  }
  TaskStats s;
  s.output_values = t.OW * t.OH * t.C;
  return s;
}

}  // namespace

namespace {

// Task `t` of the chain: its words at `address` decoded; next: where the trailer points (0 at
// the end) and how many words the next task has.
struct ReadTask {
  detail::ChainTask task;
  uint32_t next = 0;
  size_t next_words = 0;
};
// The tables the task's LUT_ACCESS_CFG / LUT_ACCESS_DATA writes upload, in order.
Status read_lut_upload(const regcmd::DecodedTask& d, detail::LutUpload& up) {
  const auto n = static_cast<size_t>(kRk3588.lut_entries);
  bool configured = false, writing = false;
  uint32_t table = 0, at = 0;
  for (const auto& [i, w] : d.writes) {
    if (w.offset == DPU_LUT_ACCESS_CFG.offset) {
      configured = true;
      writing = DPU_LUT_ACCESS_CFG_LUT_ACCESS_TYPE.get(w.value) != 0;
      table = DPU_LUT_ACCESS_CFG_LUT_TABLE_ID.get(w.value);
      at = DPU_LUT_ACCESS_CFG_LUT_ADDR.get(w.value);
    } else if (w.offset == DPU_LUT_ACCESS_DATA.offset) {
      if (!configured || !writing)
        return unsupported("DPU.LUT_ACCESS_DATA (word " + std::to_string(i) + ") without a LUT_ACCESS_CFG that selects a write");
      if (at >= n) return invalid("DPU.LUT_ACCESS_DATA (word " + std::to_string(i) + ") past the table's " + std::to_string(n) + " entries");
      if (up.entries[table].empty()) {
        up.entries[table].assign(n, 0);
        up.set[table].assign(n, false);
      }
      up.entries[table][at] = static_cast<int16_t>(w.value & 0xffff);
      up.set[table][at] = true;
      ++at;
    }
  }
  return {};
}

Result<ReadTask> read_task(const DeviceMemory& mem, uint32_t address, size_t words, size_t t) {
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
  if (d.enable_mask != kConvEnableMask && d.enable_mask != kDpuEnableMask && d.enable_mask != kPpuEnableMask) {
    return unsupported("task " + std::to_string(t) + ": enable mask " + hex32(d.enable_mask) + " (only convolutions, " + hex32(kConvEnableMask) +
                       ", DPU-only tasks, " + hex32(kDpuEnableMask) + ", and PPU-only tasks, " + hex32(kPpuEnableMask) + ", are simulated)");
  }
  ReadTask r;
  r.task.address = address;
  r.task.enable_mask = d.enable_mask;
  r.task.values = d.final_values();
  if (Status st = read_lut_upload(d, r.task.lut); !st.ok()) return st.error().with_context("task " + std::to_string(t) + " at " + hex32(address));
  if (!d.next_is_zero_word) {
    r.next = d.next_address;
    r.next_words = (static_cast<size_t>(d.next_amount) + 1) * 2;
  }
  return r;
}

std::string task_context(size_t t, uint32_t address) { return "task " + std::to_string(t) + " at " + hex32(address); }

// The definition: each task read, decoded and run in turn, its MAC on the loops.
Result<std::vector<TaskStats>> run_in_turn(DeviceMemory& mem, uint32_t address, size_t words, const Quirks& q, size_t max_tasks) {
  std::vector<TaskStats> stats;
  for (size_t t = 0; address != 0 && (max_tasks == 0 || t < max_tasks); ++t) {
    RKD_ASSIGN(ReadTask r, read_task(mem, address, words, t));
    auto st = [&]() -> Result<TaskStats> {
      if (r.task.enable_mask == kPpuEnableMask) {
        RKD_ASSIGN(PoolTask p, decode_pool(Regs(r.task.values)));
        return run_pool(mem, p, q);
      }
      RKD_ASSIGN(ConvTask c, detail::decode_task(r.task.values, r.task.enable_mask, q, &r.task.lut));
      return run_conv(mem, c, q, nullptr, 0);
    }();
    if (!st.ok()) return st.error().with_context(task_context(t, address));
    stats.push_back(*st);
    address = r.next;
    words = r.next_words;
  }
  return stats;
}

}  // namespace

// The chain's tasks as decoded from its command words (SimCache::decoded).
struct SimCache::Decoded {
  size_t start_words = 0, max_tasks = 0;
  Quirks quirks;
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> words;  // each task's command words
  std::vector<detail::ChainTask> tasks;
  std::vector<ConvTask> convs;
  bool dpu_only = false;                     // every task DPU-only (no MAC to prepare)
  std::vector<std::vector<uint8_t>> tables;  // per task: detail::dpu_only_table
};

namespace {

// The chain at `start` decoded (all tasks), or nullptr where decoding all of it first could
// differ from decoding each task when it runs - a task that does not decode, or one whose
// output overwrites command words: the caller then runs the chain in turn (the definition's
// errors, at the same task).
std::shared_ptr<SimCache::Decoded> decode_chain(const DeviceMemory& mem, uint32_t address, size_t words, const Quirks& q, size_t max_tasks) {
  auto d = std::make_shared<SimCache::Decoded>();
  d->start_words = words;
  d->max_tasks = max_tasks;
  d->quirks = q;
  for (size_t t = 0; address != 0 && (max_tasks == 0 || t < max_tasks); ++t) {
    auto r = read_task(mem, address, words, t);
    if (!r.ok() || r->task.enable_mask == kPpuEnableMask) return nullptr;  // pooling runs in turn
    auto c = detail::decode_task(r->task.values, r->task.enable_mask, q, &r->task.lut);
    if (!c.ok()) return nullptr;
    // A chain mixing convolutions and DPU-only tasks runs in turn (the MAC plan assumes convolutions).
    if (t > 0 && c->dpu_only != d->dpu_only) return nullptr;
    d->dpu_only = c->dpu_only;
    if (c->dpu_only) d->tables.push_back(detail::dpu_only_table(*c, q));
    auto bytes = mem.read(address, words * 8);
    d->words.emplace_back(address, std::vector<uint8_t>(bytes->begin(), bytes->end()));
    d->tasks.push_back(std::move(r->task));
    d->convs.push_back(*c);
    address = r->next;
    words = r->next_words;
  }
  for (const ConvTask& c : d->convs)
    for (const auto& [at, bytes] : d->words) {
      if (detail::overlap(c.output, static_cast<uint64_t>(c.output) + static_cast<uint64_t>(c.output_bytes), at,
                          static_cast<uint64_t>(at) + bytes.size())) {
        return nullptr;
      }
    }
  return d;
}

// The same command words as when `d` was decoded, with the same quirks.
bool same_words(const SimCache::Decoded& d, const DeviceMemory& mem, size_t words, const Quirks& q, size_t max_tasks) {
  if (d.start_words != words || d.max_tasks != max_tasks || !(d.quirks == q)) return false;
  for (const auto& [at, bytes] : d.words) {
    auto now = mem.read(at, bytes.size());
    if (!now.ok() || std::memcmp(now->data(), bytes.data(), bytes.size()) != 0) return false;
  }
  return true;
}

}  // namespace

Result<std::vector<TaskStats>> run(DeviceMemory& mem, uint32_t address, size_t words, const Quirks& q, SimCache* cache, size_t max_tasks) {
  if (!cache) return run_in_turn(mem, address, words, q, max_tasks);
  auto& slot = cache->decoded[address];
  const bool same = slot && same_words(*slot, mem, words, q, max_tasks);
  if (!same) slot = decode_chain(mem, address, words, q, max_tasks);
  if (!slot) return run_in_turn(mem, address, words, q, max_tasks);
  const std::vector<detail::ChainTask>& tasks = slot->tasks;
  const std::vector<ConvTask>& convs = slot->convs;
  if (slot->dpu_only) {
    std::vector<TaskStats> stats;
    for (size_t t = 0; t < tasks.size(); ++t) {
      auto st = run_dpu_only(mem, convs[t], q, &slot->tables[t]);
      if (!st.ok()) return st.error().with_context(task_context(t, tasks[t].address));
      stats.push_back(*st);
    }
    cache->last_tasks = tasks.size();
    cache->last_mac_runs = 0;
    return stats;
  }
  SimCache::Chain* chain = detail::plan_chain(*cache, mem, tasks, convs, same);
  if (chain) detail::new_run(*chain);
  std::vector<TaskStats> stats;
  for (size_t t = 0; t < tasks.size(); ++t) {
    auto st = run_conv(mem, convs[t], q, chain, t);
    if (!st.ok()) return st.error().with_context(task_context(t, tasks[t].address));
    stats.push_back(*st);
  }
  cache->last_tasks = tasks.size();
  cache->last_mac_runs = chain ? detail::mac_runs(*chain) : 0;
  return stats;
}

Result<std::vector<TaskWork>> chain_work(const DeviceMemory& mem, uint32_t address, size_t words, const Quirks& q) {
  std::vector<TaskWork> work;
  for (size_t t = 0; address != 0; ++t) {
    RKD_ASSIGN(ReadTask r, read_task(mem, address, words, t));
    TaskWork w;
    w.enable_mask = r.task.enable_mask;
    if (r.task.enable_mask == kPpuEnableMask) {
      auto p = decode_pool(Regs(r.task.values));
      if (!p.ok()) return p.error().with_context(task_context(t, address));
      w.read_bytes = p->input_bytes;
      w.write_bytes = p->output_bytes;
    } else {
      auto c = detail::decode_task(r.task.values, r.task.enable_mask, q, &r.task.lut);
      if (!c.ok()) return c.error().with_context(task_context(t, address));
      if (!c->dpu_only) w.padded_macs = c->OH * c->OW * c->OC * c->KH * c->KW * (c->depthwise ? 1 : c->C);
      w.read_bytes = c->input_bytes + c->weight_bytes + (c->ew.on ? (c->ew.per_channel ? c->OC : c->output_bytes) : 0);
      w.write_bytes = c->output_bytes;
    }
    work.push_back(w);
    address = r.next;
    words = r.next_words;
  }
  return work;
}

}  // namespace rkd::npu::sim
