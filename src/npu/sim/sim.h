// A simulator of the RK3588 NPU's int8 convolution datapath. It executes regcmd buffers
// against simulated device memory - the bytes a board would get - reading every parameter
// from the registers the task programs, the way the hardware's front end does, never from
// the lowering that wrote them.
//
// Per task (CNA + CORE + DPU + DPU_RDMA enabled), stage by stage (facts: rk3588-npu.md §3):
//  1. CNA reads the input feature map (NC1HWC2, C2 = 16, int8) at CNA.FEATURE_DATA_ADDR:
//     element (c, h, w) at base + (c / 16) * surface + (h * W + w) * 16 + c % 16, line
//     16 * W bytes (DMA_CON1.LINE_STRIDE * 4), surface (DMA_CON2.SURF_STRIDE + 4 W) * 16
//     bytes. W = DATA_SIZE0.DATAIN_WIDTH is the line dimension (quirk axis_convention).
//     Cells outside the map (PAD_CON0 top/left, and past the right/bottom edge) hold
//     PAD_CON1.PAD_VALUE's low byte (signed).
//  2. MAC: acc = sum over taps x * (w + OW_OP), OW_OP = DPU.BS_OW_OP when
//     BS_OW_CFG.OD_BYPASS is clear, in 64 bits, then saturated to int32 (the 34-bit
//     accumulator rounded to 32 bits [SRC]).
//  3. CORE: a1 = sat32(round_shift(acc, CLIP_TRUNCATE)), rounding per ROUND_TYPE.
//  4. DPU BS: ALU adds BS_ALU_CFG or the per-channel int32 from BRDMA; MUL multiplies by
//     BS_MUL_CFG[31:16] or the per-channel int16 from BRDMA and shifts right by
//     BS_MUL_SHIFT_VALUE (non-negative products) or DATA_FORMAT.BS_MUL_SHIFT_VALUE_NEG
//     (negative ones), saturating to int32 (quirk bs_shift_rounding); ReLU / ReLUX.
//  5. BN: the same shape from registers (per-channel NRDMA operands are not simulated:
//     BN_ALU_SRC / BN_MUL_SRC set is reported as unsupported).
//  6. EW (EW_CFG.EW_BYPASS clear): the operand e (int8, ERDMA at
//     DPU_RDMA.RDMA_EW_BASE_ADDR, NC1HWC2, surface RDMA_EW_SURF_STRIDE * 16 bytes) converted
//     and added: quirk ew_mode integer (Mesa's converter, default): v = sat32(v +
//     round_half_up((e + EW_CVT_OFFSET) * EW_OP_CVT_SCALE / 2^EW_OP_CVT_SHIFT)); float: v =
//     sat32(round_half_even(float32(v) + float32(e + OFFSET) * float32(SCALE * 2^-SHIFT)));
//     EW_ALU_ALGO 0 / 1: v = max / min(v, the converted operand) instead (integer: the same
//     half-up conversion; float: the float32 product rounded half to even) [INF: measured
//     only at converter scale 1]; EW_OP_TYPE 1: v = sat32(v * the converted operand) (the
//     integer multiply, measured for int8 at converter scale 1 [HW]; float: the float32
//     product rounded half to even); then the EW ReLU unless bypassed. Simulated: one int8
//     ERDMA operand (EW_OP_SRC 1, EW_ALU_ALGO 0-2 or EW_OP_TYPE 1, LUT bypassed, EDATA_SIZE 1)
//     per element (EW_DATA_MODE 1) or per channel (EW_DATA_MODE 0: channel k's value at
//     byte (k / 16) * surface + k % 16, repeated over the pixels [HW for fp16 with a 16-byte
//     surface; int8 INF]); RDMA_ERDMA_CFG.ERDMA_DATA_MODE must say the same.
//  6b. LUT (EW_LUT_BYPASS clear, the EW operand bypassed: EW_OP_BYPASS set, the EW ReLU
//     bypassed) on v, NVDLA's SDP lookup [SRC: NVDLA's RTL, as soDLA's port of it; RK3588's
//     field layout is NVDLA's]: two tables, LE (id 0) and LO (id 1), of lut_entries signed
//     16-bit entries each, uploaded in the task by LUT_ACCESS_CFG (write, table id, address)
//     and one LUT_ACCESS_DATA per entry, the address advancing [HW]. Per table: d = v -
//     START; underflow when d < 0 (and at d = 0: quirk lut_start, NVDLA's compare is <=);
//     index i = d >> INDEX_SELECT, fraction r = d mod 2^INDEX_SELECT; overflow when i >=
//     entries - 1. A hit gives round((T[i] (2^sel - r) + T[i + 1] r) / 2^sel) (quirk
//     lut_interp_rounding, NVDLA's half away from zero), an underflow T[0] + round((v -
//     START) UFLOW_SCALE / 2^UFLOW_SHIFT), an overflow T[last] + round((v - END)
//     OFLOW_SCALE / 2^OFLOW_SHIFT), saturated to int32. Both tables hit: HYBRID_PRIORITY
//     picks LO; both under- (over-)flow: UFLOW_ (OFLOW_)PRIORITY picks LO; one hit: that
//     one; one under-, the other overflowing: LO [INF]. Simulated in the one configuration
//     measured on a board (fp16, allbilly/rk3588 examples/silu.py) with int8 processing:
//     LUT_CFG ROAD_SEL 0 (LE linear), EXPAND_EN 0, CAL_SEL 0, LO_LE_MUX 2, both tables
//     uploaded in the task (whether they persist between tasks is unmeasured).
//  A DPU-only task (enable mask 0x18): stages 4-7 on the int8 main input read by MRDMA at
//     DPU_RDMA.RDMA_SRC_BASE_ADDR, NC1HWC2 with dense surfaces (W H 16 bytes), instead of
//     CORE's output (no MAC, no CORE truncation); FLYING_MODE set in both feature-mode
//     registers, int8 precisions, as allbilly/rk3588's element-wise programs [HW].
//  A PPU-only task (enable mask 0x60: PPU, PPU_RDMA): pooling of an int8 NC1HWC2 map that
//     PPU_RDMA reads at RDMA_SRC_BASE_ADDR (FLYING_MODE 1; line and surface strides in bytes,
//     RDMA_SRC_LINE_STRIDE / _SURF_STRIDE), written NC1HWC2 with dense lines at PPU
//     DST_BASE_ADDR, surfaces DST_SURF_STRIDE bytes apart. Output (c, oy, ox) is the maximum
//     over the window rows oy * SH - PAD_TOP + [0, KH), columns ox * SW - PAD_LEFT + [0, KW)
//     (sizes, kernel and stride fields minus one) of the cells inside the map; a padded cell
//     counts as PADDING_VALUE_1_CFG's low byte (signed) instead when the quirk
//     ppu_max_padding says so. Simulated: POOLING_METHOD 1 (max), int8 (PROC_PRECISION 0;
//     PPU_RDMA's IN_PRECISION, the storage width, 1 for 8-bit), no INDEX_EN, no DPU_FLYIN, output sizes equal to the windows that fit
//     (floor mode), every window holding a cell of the map; allbilly/rk3588's board programs
//     (examples/pooling.py: max, min and average pooling, fp16 and int8, kernels and strides
//     up to 16, pads up to 7 [HW]).
//  7. OUT_CVT: y = sat_int8(round_shift(v * SCALE, SHIFT) + OFFSET), SCALE signed 16-bit
//     (quirk out_cvt_scale_signed), rounding quirk out_cvt_rounding; written NC1HWC2 at
//     DPU.DST_BASE_ADDR, surface DST_SURF_STRIDE * 16 bytes, DATA_CUBE_CHANNEL.ORIG_CHANNEL + 1
//     channels, DATA_CUBE_WIDTH/HEIGHT + 1 pixels. The padding channels up to CHANNEL + 1
//     hold padded kernels' results on hardware and carry no meaning: the simulator leaves
//     them or, in the rest of a partly used 16-channel group, writes meaningless values.
// Weights (CNA.DCOMP_ADDR0), direct convolution: oc1 (groups of 32 kernels) -> ic1 (groups
// of 32 input channels, the last 16 wide when the padded channel count leaves 16) -> kh ->
// kw -> oc2 -> ic2, WEIGHT_SIZE2.WEIGHT_KERNELS kernels of KH x KW x DATA_SIZE1.DATAIN_CHANNEL.
// Depthwise (CNA.CONV_CON1.CONV_MODE 3): [C / 64][KH][KW][64].
// BS operands (DPU_RDMA.RDMA_BS_BASE_ADDR): BRDMA_DATA_USE = 1 (ALU only): a dense int32 per
// channel; otherwise 64 bytes per 8 channels: eight int32 ALU operands, eight 16-bit CPEND,
// eight int16 MUL operands.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "npu/memory.h"

namespace rkd::npu::sim {

enum class Rounding { half_to_even, half_away, half_up, truncate };
const char* rounding_name(Rounding r);

// Behaviours the public sources leave uncertain, each a named knob with the best-supported
// default (`rkdeploy help sim` lists them with their sources).
struct Quirks {
  Rounding out_cvt_rounding = Rounding::half_to_even;  // TRM; measured on RK3576 [HW], not on RK3588
  Rounding bs_shift_rounding = Rounding::half_up;      // unmeasured on RK3588 [knob]
  bool out_cvt_scale_signed = true;                    // 0x8000 flips the sign on RK3576 [HW]
  bool width_is_line = true;                           // DATAIN_WIDTH is the contiguous dimension [HW]; false: Mesa's swap
  bool ew_float = false;                               // EW add: integer converter (Mesa) or float32 (another report) [knob]
  bool lut_start_underflows = true;                    // LUT: v == START is an underflow (NVDLA's <=) or index 0 [knob]
  Rounding lut_interp_rounding = Rounding::half_away;  // LUT interpolation and slopes: NVDLA's rounding [knob]
  bool ppu_max_pad_ignored = true;                     // PPU max pooling: padded cells ignored, or PADDING_VALUE [knob]
  bool operator==(const Quirks&) const = default;
};

struct KnobInfo {
  const char* name;
  const char* values;
  const char* default_value;
  const char* source;
};
std::vector<KnobInfo> knob_list();
// Sets a knob by name ("out_cvt_rounding=half_away"); an error names the knob and its values.
Status set_knob(Quirks& q, const std::string& assignment);
// The knobs whose value differs from the default, as ';'-separated NAME=VALUE assignments in
// knob_list() order (empty: every default), and back: quirks_from_assignments(knob_assignments(q)) == q.
std::string knob_assignments(const Quirks& q);
Result<Quirks> quirks_from_assignments(const std::string& assignments);

struct TaskStats {
  int64_t macs = 0;           // multiply-accumulates of real (not padded) channels
  int64_t padded_macs = 0;    // those the array performs: written channels x padded input channels
  int64_t output_values = 0;  // int8 values written
};

// What one task asks of the hardware, from its registers alone (no data read): the MACs the
// array performs (padded channels included; 0 for a DPU-only or PPU task), the bytes its DMAs
// read (input map, weights, the EW operand map) and write (output map), its enable mask.
struct TaskWork {
  int64_t padded_macs = 0;
  int64_t read_bytes = 0, write_bytes = 0;
  uint32_t enable_mask = 0;
};
// Every task of the chain at regcmd_address (first_task_words: the first task's command
// words), decoded as run() decodes them; an error names the task that does not decode.
Result<std::vector<TaskWork>> chain_work(const DeviceMemory& mem, uint32_t regcmd_address, size_t first_task_words, const Quirks& q = {});

// What the simulator prepares per chain of tasks and reuses across runs of the same buffer:
// the MACs as oneDNN's exact int8 accumulation (where the CPU has VNNI and w + OW_OP fits
// int8), one oneDNN convolution for each group of tasks that read one input map (the channel
// groups and row slices of one lowered convolution: their union computed once, each task
// reading its rows and kernels). Rebuilt whenever a task's registers or weight bytes change;
// a group is formed only where the registers prove it exact (see fast.cc).
class SimCache {
 public:
  SimCache();
  ~SimCache();
  struct Chain;
  std::map<uint32_t, std::shared_ptr<Chain>> chains;  // by the chain's first task address
  // The chain's tasks as last decoded, reused while its command words and the quirks are
  // the same bytes and values.
  struct Decoded;
  std::map<uint32_t, std::shared_ptr<Decoded>> decoded;
  // The last run: tasks executed, and oneDNN convolutions computed for them.
  size_t last_tasks = 0, last_mac_runs = 0;
};

// Executes the chain at `regcmd_address`..: each task's registers decoded from the words,
// run, outputs written into `mem`. The words are read from `mem`, following the trailers.
// With a cache, the MACs run on oneDNN (bit-exact by construction: the same integer sums),
// the chain decoded before it runs; without, each task is decoded and run in turn on the
// simulator's own loops (the definition).
// max_tasks > 0: at most that many tasks, whatever the last one's trailer says (a kernel that
// kicks each task alone, TASK_NUMBER 1, as mainline's rocket driver: max_tasks 1).
Result<std::vector<TaskStats>> run(DeviceMemory& mem, uint32_t regcmd_address, size_t first_task_words, const Quirks& q, SimCache* cache = nullptr,
                                   size_t max_tasks = 0);

// Rounded arithmetic right shift, exact in 64 bits (shift in [0, 63]).
inline int64_t round_shift(int64_t v, int shift, Rounding r) {
  if (shift <= 0) return v;
  const int64_t floor_q = v >> shift;                   // arithmetic shift: floor(v / 2^shift)
  const int64_t rem = v & ((int64_t{1} << shift) - 1);  // in [0, 2^shift)
  const int64_t half = int64_t{1} << (shift - 1);
  switch (r) {
    case Rounding::truncate: return floor_q;
    case Rounding::half_up: return floor_q + (rem >= half ? 1 : 0);
    case Rounding::half_away: return rem > half || (rem == half && v >= 0) ? floor_q + 1 : floor_q;
    case Rounding::half_to_even: return rem > half || (rem == half && (floor_q & 1)) ? floor_q + 1 : floor_q;
  }
  return floor_q;
}

}  // namespace rkd::npu::sim
