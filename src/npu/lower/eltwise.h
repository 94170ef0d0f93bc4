// Lowering of an element-wise Add of two int8/uint8 maps to one DPU-only task (no CNA, no
// CORE): the main input read by MRDMA, the other by ERDMA, quant::rknpu_add_plan's arithmetic
// (quant/int8.h): BS ALU -z_m and MUL K (register operands), the EW converter (-z_e, S_e /
// 2^H_e), OUT_CVT (S_o / 2^H_o, z_out). Stored domain as for convolutions (uint8 - 128; the
// differences x - z are the same in both domains).
//
// Buffers, NC1HWC2 int8 with align(C, 16) channels: the main input with dense surfaces (H W
// 16 bytes: no MRDMA stride register exists [INF]); the EW operand with surfaces of
// max(H W, ew_surface_min_pixels) pixels (EW_SURF_STRIDE's floor [HW]); the output dense.
// The padding lanes hold 0 and their results carry no meaning.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "npu/lower/constraints.h"
#include "npu/lower/lower.h"
#include "npu/memory.h"
#include "quant/int8.h"

namespace rkd::npu::lower {

struct AddSpec {
  DType dtype = DType::i8;  // of both operands and the output
  int64_t C = 0, H = 0, W = 0;
  quant::QBinaryParams q;  // scales and zero points (act_min / act_max: the type's range)
};
EltwiseGeometry geometry_of(const AddSpec& s);
// Malformed specs (invalid), then constraints.h's eltwise rules and the converters' ranges
// (unsupported).
Status check_add(const AddSpec& s);

struct LoweredAdd {
  std::vector<regcmd::Task> tasks;
  std::vector<Buffer> buffers;
  quant::RknpuAdd plan;
  uint32_t main_address = 0, ew_address = 0, output_address = 0;
  int64_t main_surface_bytes = 0, ew_surface_bytes = 0, output_surface_bytes = 0;
};
// Allocates the three maps in `mem` and emits the task.
Result<LoweredAdd> lower_add(const AddSpec& s, DeviceMemory& mem);
// Writes a and b ([1, C, H, W] of s.dtype) where the task reads them (the larger-scale one as
// the main input).
Status write_add_inputs(DeviceMemory& mem, const AddSpec& s, const LoweredAdd& l, const Tensor& a, const Tensor& b);
// The output into y ([1, C, H, W] of s.dtype, contiguous).
Status gather_add_output(const DeviceMemory& mem, const AddSpec& s, const LoweredAdd& l, Tensor& y);

}  // namespace rkd::npu::lower
