// Lowering of element-wise operations on int8/uint8 maps to one DPU-only task each (no CNA, no
// CORE): the main input read by MRDMA, a second operand by ERDMA, the arithmetic of
// quant/int8.h's rknpu_out_cvt definitions:
//   Add        (rknpu_add_plan)        BS ALU -z_m and MUL K (register operands), the EW
//              converter (-z_e, S_e / 2^H_e) and add, OUT_CVT (S_o / 2^H_o, z_out);
//   Mul        (rknpu_mul_plan)        BS ALU -z_a (MUL bypassed), the EW converter at scale 1
//              (-z_b), the EW stage's integer multiply (EW_OP_TYPE 1), OUT_CVT (s_a s_b / s_out,
//              z_out). b per element, or one value per channel (squeeze-excite's [1, C, 1, 1];
//              a one-element b repeated over the channels) read in EW_DATA_MODE 0 from a
//              vector of align(C, 16) bytes with a 16-byte RDMA_EW_SURF_STRIDE [fp16 HW, int8 INF].
//   LeakyRelu  (rknpu_leaky_relu_plan) the same map read twice: BS -z_x and MUL K, the EW
//              converter (-z_x, K alpha) and max, OUT_CVT.
//   Concat     along channels, of parts quantized alike (qdq-to-qlinear makes such Concats
//              integer): one copy task per part (BS, EW bypassed, OUT_CVT x 1), writing
//              into the one output map at the part's first surface. Exact.
//   Split      along channels, the converse: one copy task per part, reading the one input
//              map from the part's first surface into the part's own map. Exact.
//   MaxPool    one PPU-only task (emit.h PpuPool): the maximum over each window of the map's
//              cells, pads below the kernel (padded cells hold the type's minimum, so that
//              either reading of the PPU's padding gives the maximum of the cells). Exact.
//   ChannelPad a Pad of the channels' end with one code (blazeface's and handdetect's channel
//              padding before a residual Add): one DPU-only task over the output's channels,
//              BS MUL 1 for the input's channels and 0 for the padding (per-channel BRDMA
//              operands), the EW stage adding a constant map that holds the pad code in the
//              padding channels and 0 elsewhere (converter x 1), OUT_CVT x 1. Exact.
//   Upsample2  nearest-neighbour x2 in height and width (a Resize that repeats each cell in a 2 x 2
//              block) as copy tasks scattering through DST_SURF_STRIDE (WDMA writes a task's
//              surface k at DST_BASE_ADDR + k DST_SURF_STRIDE): first the columns - the map's
//              cells, taken as the 16-channel surfaces of 1 x 1 cubes, written 2 cells apart at
//              +0 and at +1 cell into a [C, H, 2 W] map - then the lines of that map, taken as
//              the surfaces of 2 W x 1 cubes, written 2 lines apart at +0 and +1 line. At most
//              DATA_CUBE_CHANNEL's surfaces per task (8192 channels: 512 cells or lines).
//              Exact; a stride of 2 cells on a 1 x 1 cube is unmeasured [INF].
//              Edge: the same scatters into the padded map [C, 2 H + 2, 2 W + 2]: the
//              columns as above, then its lines written once, 1 cell in, 2 W + 2 cells apart;
//              the border columns from the input's first and last column, which PPU tasks
//              gather (1 x 1 max pools of 1 x 1 cubes: PPU_RDMA has line and surface strides,
//              MRDMA none) into every line's first and last cell; per 16-channel block its
//              lines twice from the output's line 1 on, and its first and last line (PPU
//              again) into the output's. Exact; PPU cubes of one line or one cell are
//              unmeasured [INF].
//   DepthToSpace2  DCR with blocksize 2 (the 1 x 1 convolution a 2 x 2 stride-2 ConvTranspose
//              becomes, quant/qlinear_pass.cc): the same interleaving from four groups of
//              channels - group (2 a + b) into row parity a, column parity b - the groups
//              starting at 16-channel surfaces. Exact.
//   Lut        any function of the input code (qdq-to-qlinear's QLinearLut: Sigmoid, SiLU,
//              HardSwish, ...): the DPU's lookup table with one entry per stored input value
//              (emit.h LutTable), BS and EW bypassed, OUT_CVT x 1. Exact wherever the
//              table's index and interpolation act as NVDLA's (docs/npu.md, "The LUT").
// Stored domain as for convolutions (uint8 - 128; the differences x - z are the same in both
// domains).
//
// Buffers, NC1HWC2 int8 with align(C, 16) channels: the main input with dense surfaces (H W
// 16 bytes: no MRDMA stride register exists [INF]); the EW operand with surfaces of
// max(H W, ew_surface_min_pixels) pixels (EW_SURF_STRIDE's floor [HW]) - for LeakyRelu the
// main input's own buffer when the two strides agree; a Mul's per-channel operand one 16-byte
// atom a surface; the output dense. The padding lanes
// hold 0 and their results carry no meaning.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "npu/lower/constraints.h"
#include "npu/lower/emit.h"
#include "npu/lower/lower.h"
#include "npu/memory.h"
#include "quant/int8.h"

namespace rkd::npu::lower {

// A [1, C, H, W] map of one int8/uint8 type.

// A binary operation's second operand b: the map's shape, one value per channel ([1, C, 1, 1]),
// or one element (read as one value per channel: EW_DATA_MODE 0).
enum class BOperand { map, per_channel, scalar };
// y = a + b, or a - b, max(a, b), min(a, b) (alu): quant::rknpu_binary_plan's task; a is the map.
struct AddSpec : MapShape {
  quant::QBinaryParams q;  // scales and zero points (act_min / act_max: the type's range)
  quant::BinaryAlu alu = quant::BinaryAlu::add;
  BOperand b = BOperand::map;
};
// y = a b; a is the map (MapShape), b of its shape or broadcast.
struct MulSpec : MapShape {
  using Operand = BOperand;
  quant::QBinaryParams q;  // act_min / act_max: the type's range
  Operand b = Operand::map;
};
struct LeakyReluSpec : MapShape {
  double x_scale = 1, y_scale = 1, alpha = 0.01;
  int32_t x_zero_point = 0, y_zero_point = 0;
};
// The parts' channel counts; the output's C is their sum.
struct ConcatSpec : MapShape {
  std::vector<int64_t> parts;
};
// The input's C (MapShape) and the parts' channel counts, which add up to it.
struct SplitSpec : ConcatSpec {};
// y = table[x's code] (256 output codes of the map's type, index: the input code for uint8,
// code + 128 for int8).
struct LutSpec : MapShape {
  std::vector<int32_t> table;
};
// y[c, oy, ox] = max of x over rows oy * stride_h - pad_top + [0, kernel_h), columns alike,
// inside the map (floor mode); MapShape is the input.
struct MaxPoolSpec : MapShape {
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  MapShape output() const;
};
PoolGeometry geometry_of(const MaxPoolSpec& s);
// y = x with `pad_end` channels of `value` (a code of the map's type) after its C channels.
struct ChannelPadSpec : MapShape {
  int64_t pad_end = 0;
  int32_t value = 0;
  MapShape output() const;
};
EltwiseGeometry geometry_of(const ChannelPadSpec& s);
// y[c, 2 i + a, 2 j + b] = x[c, i, j] for a, b in {0, 1}; with `edge`, that map edge-padded
// by one cell: y [C, 2 H + 2, 2 W + 2], y[c, u, v] = x[c, clamp((u - 1) / 2), clamp((v - 1) / 2)]
// (floor division; the first half of a bilinear x2, quant/qlinear_lut.h). MapShape is the input.
struct Upsample2Spec : MapShape {
  bool edge = false;
  MapShape output() const;
};
EltwiseGeometry geometry_of(const Upsample2Spec& s);  // the output's (the widest cube the tasks write)
// y[c, 2 i + a, 2 j + b] = x[(2 a + b) C / 4 + c, i, j]; MapShape is the input.
struct DepthToSpace2Spec : MapShape {
  MapShape output() const;
};
EltwiseGeometry geometry_of(const DepthToSpace2Spec& s);  // the output's
EltwiseGeometry geometry_of(const AddSpec& s);
EltwiseGeometry geometry_of(const MulSpec& s);
EltwiseGeometry geometry_of(const ConcatSpec& s);
EltwiseGeometry geometry_of(const LeakyReluSpec& s);
EltwiseGeometry geometry_of(const LutSpec& s);
// Malformed specs (invalid), then constraints.h's eltwise rules and the converters' ranges
// (unsupported).
Status check_add(const AddSpec& s);
Status check_mul(const MulSpec& s);
Status check_leaky_relu(const LeakyReluSpec& s);
Status check_concat(const ConcatSpec& s);
Status check_split(const SplitSpec& s);
Status check_lut(const LutSpec& s);
Status check_max_pool(const MaxPoolSpec& s);
Status check_channel_pad(const ChannelPadSpec& s);
Status check_upsample2(const Upsample2Spec& s);
Status check_depth_to_space2(const DepthToSpace2Spec& s);

// Device-memory chaining: entry i, when set, is the address where data input i already is
// (another task's output, in the layout the lowering would allocate: check with chainable()
// against a lowering without it); the lowering reads it there and allocates nothing for it.
// Data inputs in the node's order: Add and Mul a, b; Concat its parts; the others x.
using InputsAt = std::vector<std::optional<uint32_t>>;

struct LoweredEltwise {
  std::vector<regcmd::Task> tasks;
  std::vector<Buffer> buffers;
  bool b_is_main = false;  // Add: b is read by MRDMA (its scale is the larger)
  uint32_t main_address = 0, ew_address = 0, output_address = 0;
  std::vector<uint32_t> part_addresses;  // Concat: each part's input (task i reads part i); Split: each part's output
  int64_t main_surface_bytes = 0, ew_surface_bytes = 0, output_surface_bytes = 0;
  // Per data input, the buffers that hold it (a LeakyRelu's x twice when the strides differ);
  // per output, its map (a Split: one per part).
  std::vector<std::vector<DeviceMap>> input_maps;
  std::vector<DeviceMap> output_maps;
};
// Allocate the maps in `mem` (the inputs `at` says are chained excepted) and emit the task.
Result<LoweredEltwise> lower_add(const AddSpec& s, DeviceMemory& mem, const InputsAt& at = {});
Result<LoweredEltwise> lower_mul(const MulSpec& s, DeviceMemory& mem, const InputsAt& at = {});
Result<LoweredEltwise> lower_leaky_relu(const LeakyReluSpec& s, DeviceMemory& mem, const InputsAt& at = {});
Result<LoweredEltwise> lower_concat(const ConcatSpec& s, DeviceMemory& mem, const InputsAt& at = {});
Result<LoweredEltwise> lower_split(const SplitSpec& s, DeviceMemory& mem, const InputsAt& at = {});
Result<LoweredEltwise> lower_lut(const LutSpec& s, DeviceMemory& mem, const InputsAt& at = {});
Result<LoweredEltwise> lower_max_pool(const MaxPoolSpec& s, DeviceMemory& mem, const InputsAt& at = {});
Result<LoweredEltwise> lower_channel_pad(const ChannelPadSpec& s, DeviceMemory& mem, const InputsAt& at = {});
Result<LoweredEltwise> lower_upsample2(const Upsample2Spec& s, DeviceMemory& mem, const InputsAt& at = {});
Result<LoweredEltwise> lower_depth_to_space2(const DepthToSpace2Spec& s, DeviceMemory& mem, const InputsAt& at = {});
// The lookup table a LutSpec's task uploads (stored domain, arch lut_entries entries).
Result<LutTable> lut_table_of(const LutSpec& s);
// Write the operands ([1, C, H, W] of s.dtype) where the task reads them (Add: the
// larger-scale one as the main input): each op's data inputs by write_eltwise_input.
Status write_add_inputs(DeviceMemory& mem, const AddSpec& s, const LoweredEltwise& l, const Tensor& a, const Tensor& b);
// a [1, C, H, W]; b [1, C, H, W], [1, C, 1, 1] or one element, as s.b says.
Status write_mul_inputs(DeviceMemory& mem, const MulSpec& s, const LoweredEltwise& l, const Tensor& a, const Tensor& b);
Status write_leaky_relu_input(DeviceMemory& mem, const LeakyReluSpec& s, const LoweredEltwise& l, const Tensor& x);
Status write_lut_input(DeviceMemory& mem, const LutSpec& s, const LoweredEltwise& l, const Tensor& x);
Status write_max_pool_input(DeviceMemory& mem, const MaxPoolSpec& s, const LoweredEltwise& l, const Tensor& x);
Status write_channel_pad_input(DeviceMemory& mem, const ChannelPadSpec& s, const LoweredEltwise& l, const Tensor& x);
Status write_upsample2_input(DeviceMemory& mem, const Upsample2Spec& s, const LoweredEltwise& l, const Tensor& x);
Status write_depth_to_space2_input(DeviceMemory& mem, const DepthToSpace2Spec& s, const LoweredEltwise& l, const Tensor& x);
// The parts, [1, parts[i], H, W] each.
Status write_concat_inputs(DeviceMemory& mem, const ConcatSpec& s, const LoweredEltwise& l, const std::vector<const Tensor*>& parts);
// The input, [1, C, H, W].
Status write_split_input(DeviceMemory& mem, const SplitSpec& s, const LoweredEltwise& l, const Tensor& x);
// Data input i (a tensor of input_maps[i]'s shape; a one-element tensor fills every channel of
// a per-channel map) into every buffer that holds it but chained ones.
Status write_eltwise_input(DeviceMemory& mem, const LoweredEltwise& l, size_t i, const Tensor& x);
// Output i into y (a contiguous tensor of output_maps[i]'s shape).
Status read_eltwise_output(const DeviceMemory& mem, const LoweredEltwise& l, size_t i, Tensor& y);
// The output into y ([1, C, H, W] of s.dtype, contiguous; a MaxPool's, a channel Pad's and an
// Upsample2's and a DepthToSpace2's: s.output()).
Status gather_eltwise_output(const DeviceMemory& mem, const MapShape& s, const LoweredEltwise& l, Tensor& y);
// A Split's parts into ys ([1, parts[i], H, W] of s.dtype, contiguous, one per part).
Status gather_split_outputs(const DeviceMemory& mem, const SplitSpec& s, const LoweredEltwise& l, std::vector<Tensor>& ys);

}  // namespace rkd::npu::lower
