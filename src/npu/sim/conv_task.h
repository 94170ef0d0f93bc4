// Internal to the simulator: one convolution task as its registers describe it, and the
// pieces of its datapath that the prepared (fast) path in fast.cc shares with the
// stage-by-stage definition in sim.cc. Not part of the public interface.
#pragma once

#include <limits>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "core/result.h"
#include "npu/memory.h"
#include "npu/sim/sim.h"

namespace rkd::npu::sim::detail {

using RegValues = std::map<uint16_t, uint32_t>;

// One BS or BN stage's configuration (the two share a register layout).
struct Stage {
  bool bypass, alu_bypass, mul_bypass, prelu, relu_bypass, relux;
  bool alu_src, mul_src;
  uint32_t alu_algo;
  int32_t alu_operand;
  int16_t mul_operand;
  int shift_pos, shift_neg;
  int32_t relux_value;
};

// The EW stage's operand add (sim.h, stage 6). `e` is set when the task runs.
// v saturated to int32 (the DPU's stages between them).
inline int32_t sat32(int64_t v) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
}

struct Ew {
  bool on = false, cvt_bypass = false, relu = false, as_float = false;
  bool mul = false;          // EW_OP_TYPE 1: multiply (algo unused)
  bool per_channel = false;  // EW_DATA_MODE 0: one operand value per channel
  uint32_t algo = 2;         // EW_ALU_ALGO: 0 max, 1 min, 2 add, 4 minus (main - operand)
  int64_t offset = 0, scale = 1, surface = 0;
  int shift = 0;
  uint32_t address = 0;
  const uint8_t* e = nullptr;
};

// The lookup tables a task uploads (LUT_ACCESS_CFG / LUT_ACCESS_DATA writes, in order):
// table 0 LE, 1 LO; `set` marks the entries written.
struct LutUpload {
  std::array<std::vector<int16_t>, 2> entries;
  std::array<std::vector<bool>, 2> set;
  bool complete(int t) const {
    return !set[t].empty() && std::all_of(set[t].begin(), set[t].end(), [](bool b) { return b; });
  }
};

// The LUT stage (sim.h, stage 6b) as the registers configure it, with the uploaded tables.
struct Lut {
  std::array<std::vector<int16_t>, 2> table;
  std::array<int64_t, 2> start{}, end{}, uflow_scale{}, oflow_scale{};
  std::array<int, 2> select{}, uflow_shift{}, oflow_shift{};
  bool hybrid_lo = false, uflow_lo = false, oflow_lo = false;
};
// The stage on v (int8 processing: v is the EW stage's int32).
int32_t apply_lut(const Lut& l, int32_t v, const Quirks& q);

// A convolution task decoded and checked from its registers alone: geometry, device
// addresses and byte counts of what it reads and writes, and the epilogue's parameters.
struct ConvTask {
  // A DPU-only task (enable mask kDpuEnableMask): no CNA or CORE; the "accumulator" of pixel
  // p, channel k is the int8 main input read by MRDMA at input + (k / 16) * OW * OH * 16 +
  // p * 16 + k % 16 (dense surfaces), and the DPU stages run on it as on a convolution's.
  bool dpu_only = false;
  bool depthwise = false;
  int64_t W = 0, H = 0, C = 0, C_real = 0, sx = 1, sy = 1, pad_top = 0, pad_left = 0, KH = 1, KW = 1, kernels = 0;
  int64_t OW = 0, OH = 0, OC = 0, OC_real = 0;
  int32_t pad_value = 0, ow_op = 0;
  int64_t line = 0, surface = 0;    // input strides in bytes
  uint32_t input = 0, weights = 0;  // device addresses
  int64_t input_bytes = 0, weight_bytes = 0;
  int truncate = 0;
  Rounding core_round = Rounding::half_to_even;
  Stage bs{}, bn{};
  Ew ew;
  std::optional<Lut> lut;  // the LUT stage after EW (its operand bypassed)
  uint32_t data_use = 0, operands = 0;
  bool bs_dma = false;
  int64_t scale = 1, offset = 0;
  int shift = 0;
  uint32_t output = 0;
  int64_t out_surface = 0, output_bytes = 0;

  // Kernels whose weights are stored (the rest of the written channels see 0 + OW_OP).
  int64_t stored() const { return depthwise ? std::min(OC, C) : std::min(OC, kernels); }
  // Channels CORE..OUT_CVT compute and write (DATA_CUBE_CHANNEL.ORIG_CHANNEL + 1).
  int64_t written() const { return std::min(OC, OC_real); }
  // Byte offset of weight (kernel oc < stored(), input channel ic, tap ky, kx) in the packed
  // weights (sim.h: the direct and depthwise layouts).
  size_t weight_index(int64_t oc, int64_t ic, int64_t ky, int64_t kx) const {
    const int64_t kk = KH * KW;
    if (depthwise) return static_cast<size_t>((oc / 64) * kk * 64 + (ky * KW + kx) * 64 + oc % 64);
    const int64_t oc1 = oc / 32, goc = std::min<int64_t>(32, kernels - 32 * oc1);
    const int64_t ic1 = ic / 32, gic = std::min<int64_t>(32, C - 32 * ic1);
    return static_cast<size_t>(oc1 * 32 * kk * C + ic1 * goc * kk * 32 + ((ky * KW + kx) * goc + oc % 32) * gic + ic % 32);
  }
};

// The task the registers program: a convolution (enable mask kConvEnableMask) or a DPU-only
// task (kDpuEnableMask); checked without reading memory. `lut`: the tables the task uploads.
Result<ConvTask> decode_task(const RegValues& regs, uint32_t enable_mask, const Quirks& q, const LutUpload* lut = nullptr);

// A DPU-only task with register BS operands as a look-up table of its output byte by main
// input byte x and EW operand byte e: table[(x + 128) * 256 + (e + 128)], or table[x + 128]
// without EW; every entry the stage-by-stage definition's value under q. Empty for a task
// reading per-channel operands (sim.cc uses it on the cached path).
std::vector<uint8_t> dpu_only_table(const ConvTask& t, const Quirks& q);

struct Epilogue {
  int truncate;
  Rounding core_round, bs_round, out_round;
  Stage bs, bn;
  Ew ew;
  const Lut* lut;  // the LUT stage, or nullptr
  const Quirks* quirks;
  const int32_t* alu;
  const int16_t* mul;
  int64_t scale, offset;
  int shift;
  int64_t mac_bound;  // |MAC| <= mac_bound for every accumulator (taps x 128 x 128 on the prepared path)
};

// run_epilogue's configuration for every lowering (CORE truncate half to even, BS ALU add
// and optional MUL from BRDMA, ReLU/ReLUX, BN bypassed, the EW add in its integer form,
// default roundings: BS shift half up, OUT_CVT half to even, operands in the ranges where
// int32 x 16-bit products are exact), which run_common_epilogue computes on SIMD lanes
// (epilogue_simd.cc).
bool common_epilogue(const Epilogue& e);

// A task's MAC results in a prepared (shared) accumulator buffer: the MAC of pixel p,
// kernel k is acc[p * stride + k] + wsum_scale * wsum[k] (oneDNN's sum of (x + 128) (w +
// OW_OP), wsum the sum of a kernel's w + OW_OP, wsum_scale -128). `avail`: int32 values
// readable from acc.
struct MacView {
  const int32_t* acc;
  int64_t stride, avail;
  const int64_t* wsum;
  int64_t wsum_scale;
};

// The task's output pixels [0, pixels), channels [0, OCw), with the common epilogue (pixel
// ranges on the math threads).
void run_common_epilogue(const Epilogue& e, int64_t pixels, int64_t OCw, int64_t out_surface, uint8_t* y, const MacView& v);

// The definition (sim.cc, stage by stage) on the same inputs, all pixels: for tests of the
// SIMD epilogue.
void reference_epilogue(const Epilogue& e, int64_t pixels, int64_t OCw, int64_t out_surface, uint8_t* y, const MacView& v);

// Whether the byte ranges [a0, a1) and [b0, b1) share a byte.
inline bool overlap(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) { return a0 < b1 && b0 < a1; }

// One task of a chain as read from device memory.
struct ChainTask {
  uint32_t address = 0;
  uint32_t enable_mask = 0;
  RegValues values;
  LutUpload lut;
};

// The cache's plan for a chain, rebuilt when a task's registers or weight bytes change:
// tasks whose MACs one oneDNN convolution computes exactly are grouped (channel groups and
// row slices over one input map). Returns nullptr when the chain cannot use it.
// same_tasks: the tasks are those of the previous call for this chain (decoded from the same
// words), so only the weight bytes need comparing.
SimCache::Chain* plan_chain(SimCache& cache, DeviceMemory& mem, const std::vector<ChainTask>& tasks, const std::vector<ConvTask>& convs,
                            bool same_tasks);
// Task i's MAC view, computing its group's convolution once per run (new_run() starts one);
// nullopt: the task computes its MAC on the simulator's loops.
Result<std::optional<MacView>> chain_mac(SimCache::Chain& chain, DeviceMemory& mem, size_t i);
void new_run(SimCache::Chain& chain);
// oneDNN convolutions computed since new_run().
size_t mac_runs(const SimCache::Chain& chain);

}  // namespace rkd::npu::sim::detail
