// Stage 4 of the lowering: register emission, one function per block. Each takes what its
// block does, in the block's own terms (addresses, cube sizes, stage switches), and writes the
// fields of a task's register file; none knows about ConvSpec or strategies, so a new
// operation describes its blocks and reuses these. Field encodings (minus-one sizes, stride
// units, the bypass bits) live here and nowhere else. Register names: the generated map
// (npu/arch, from Mesa's register database); facts rk3588-npu.md §2-§3.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/result.h"
#include "npu/lower/pack.h"
#include "npu/lower/spec.h"
#include "npu/regcmd/regcmd.h"
#include "quant/requant.h"

namespace rkd::npu::lower {

// CNA: fetches a stored NC1HWC2 int8 map and packed weights into the CBUF and convolves.
struct CnaConv {
  bool depthwise = false;  // CONV_MODE 3 (else direct convolution, 0)
  int64_t stride_x = 1, stride_y = 1;
  // The whole stored map (line and surface strides) and the rows this task reads, starting at
  // feature_address (the first row's address in the first channel block).
  int64_t map_width = 0, map_height = 0;
  uint32_t feature_address = 0;
  int64_t in_rows = 0;
  int64_t in_channels = 16;      // stored (a multiple of 16)
  int64_t in_channels_real = 1;  // channels that carry data
  int64_t pad_top = 0, pad_left = 0;
  int32_t pad_value = 0;  // stored domain: the input zero point
  int64_t out_width = 0, out_rows = 0;
  uint32_t weight_address = 0;
  int64_t weight_bytes = 0, weight_bytes_per_kernel = 0;
  int64_t kernel_w = 1, kernel_h = 1, kernels = 0;
  int64_t data_banks = 0, weight_banks = 0;  // CBUF split
  bool weight_reuse = false;                 // the weights are still in the CBUF from the previous task
};
Status emit_cna(regcmd::RegisterFile& r, const CnaConv& c);

// CORE: the MAC array's output cube, handed to the DPU on the fly.
struct CoreConv {
  bool depthwise = false;
  int64_t out_width = 0, out_rows = 0, channels = 0;  // channels written
  int truncate = 0;                                   // accumulator bits dropped (half to even)
};
Status emit_core(regcmd::RegisterFile& r, const CoreConv& c);

// DPU: the output cube through BS (ALU, MUL, ReLU, ReLUX), OW, EW and OUT_CVT, written by
// WDMA at dst_address. Its operands come through DPU_RDMA (emit_dpu_rdma reads the same
// description): BS operands by BRDMA, an EW operand by ERDMA.
struct BsStage {
  uint32_t operand_address = 0;  // per-channel ALU (and MUL) operands, PackedOperands
  BsOperands layout = BsOperands::alu;
  int mul_shift = 0;      // with BsOperands::alu_mul or registers
  int32_t alu_value = 0;  // with BsOperands::registers: the ALU's operand
  int16_t mul_value = 0;  // with BsOperands::registers: the MUL's operand (0: MUL bypassed)
  bool relu = false;
  std::optional<int32_t> relux;  // compare value of BS ReLUX
  int32_t ow_op = 0;             // BS_OW_OP (weight offset; 0 bypasses)
};
// EW: combines a second int8 NC1HWC2 map (one byte per element, or one per channel), after
// its operand converter, with the value: add (EW_ALU_ALGO 2), max (0) or min (1; these two
// with EW_EQUAL_EN set, as the vendor's captures do [HW]), or multiply (EW_OP_TYPE 1).
struct EwOperand {
  uint32_t address = 0;        // this task's first row
  int64_t surface_pixels = 0;  // the map's surface stride (at least 12: EW_SURF_STRIDE's floor [HW])
  int32_t offset = 0;          // EW_CVT_OFFSET (minus the operand's stored zero point)
  quant::Multiplier15 cvt;     // EW_OP_CVT scale and shift
  int alu_algo = 2;            // EW_ALU_ALGO (0 max, 1 min, 2 add, 4 minus: main - operand [HW]) unless mul
  bool mul = false;            // EW_OP_TYPE 1: the integer multiply [HW at converter scale 1]
  // EW_DATA_MODE 0: one value per channel, channel k at byte (k / 16) * 16 surface_pixels + k % 16
  // (surface_pixels 1: a vector of align(C, 16) bytes) [HW for fp16; int8 INF]; else 1, per element.
  bool per_channel = false;
};
// The DPU's lookup table, after the EW stage with its operand bypassed: both tables (LE and
// LO) hold `entries` (arch lut_entries of them), linear from `start` with index select 0, so
// integer input v in [start, start + entries - 1] reads entry v - start with interpolation
// fraction 0; the under- and overflow slopes are 0 (the first and the last entry beyond the
// range). LUT_CFG as allbilly/rk3588's measured fp16 program: LO_LE_MUX 2, hybrid and
// overflow priority 1 [HW]. The output is the entry itself whichever table the hardware picks
// and whether the start counts as an underflow (docs/npu.md, "The LUT").
struct LutTable {
  int32_t start = -128;
  std::vector<int16_t> entries;
};
// The upload of a table into both of the DPU's tables: per table LUT_ACCESS_CFG (write,
// table id, address 0), then one LUT_ACCESS_DATA per entry (the address advancing [HW]),
// negative entries sign-extended into the register's upper half as the measured program
// writes them.
Result<std::vector<regcmd::Word>> lut_upload(const LutTable& t);

struct DpuTask {
  // A DPU-only task (enable mask kDpuEnableMask): the main input, NC1HWC2 int8 with dense
  // surfaces (width x rows x 16 bytes; no stride register exists for it [INF]), read by MRDMA
  // at this address in flying mode, burst 15, output mode 2 (allbilly/rk3588's element-wise
  // programs [HW]). Unset: the main input is the CORE's output cube (a convolution).
  std::optional<uint32_t> input_address;
  uint32_t dst_address = 0;
  int64_t dst_surface_pixels = 0;  // DST_SURF_STRIDE (pixels of the whole output map)
  int64_t width = 0, rows = 0;
  int64_t channels = 0;       // written
  int64_t orig_channels = 0;  // that carry results
  BsStage bs;
  std::optional<EwOperand> ew;
  std::optional<LutTable> lut;  // not with an EW operand
  int32_t out_offset = 0;       // OUT_CVT offset (stored output zero point)
  OutCvt out_cvt;
};
// PPU: max pooling of an int8 NC1HWC2 map (16-channel surfaces) that PPU_RDMA reads from
// memory (FLYING_MODE 1), written with dense lines at dst_address: the PPU and PPU_RDMA
// registers of allbilly/rk3588's board programs (examples/pooling.py [HW]) with int8
// precision. A PPU-only task (enable mask kPpuEnableMask) signals completion through the
// PPU's interrupts, which mainline's rocket driver does not wait for (facts §6): the
// device back end has to follow it with a DPU task or keep pooling on the CPU.
struct PpuPool {
  uint32_t src_address = 0, dst_address = 0;    // 16-byte aligned
  int64_t width = 0, height = 0, channels = 0;  // the input; channels stored (a multiple of 16)
  int64_t src_line_bytes = 0, src_surface_bytes = 0, dst_surface_bytes = 0;
  int64_t out_width = 0, out_height = 0;
  int64_t kernel_w = 1, kernel_h = 1, stride_w = 1, stride_h = 1;
  int64_t pad_left = 0, pad_top = 0, pad_right = 0, pad_bottom = 0;
  int32_t pad_value = -128;  // PADDING_VALUE_1_CFG (stored domain)
};
Status emit_ppu(regcmd::RegisterFile& r, const PpuPool& p);

Status emit_dpu(regcmd::RegisterFile& r, const DpuTask& d);
Status emit_dpu_rdma(regcmd::RegisterFile& r, const DpuTask& d);

}  // namespace rkd::npu::lower
