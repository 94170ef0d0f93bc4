// Lowering of an int8/uint8 convolution to RK3588 NPU tasks: register files, packed weights
// and BS operand blocks placed in device memory, for every per-axis strategy.
//
// Arithmetic (facts: rk3588-npu.md §3). Stored features x_s = x (int8) or x - 128 (uint8);
// stored weights w_s likewise; OW_OP = 0 (int8) or 128 - z_w (uint8), so that w_s + OW_OP =
// w - z_w. Padded cells and input lanes hold z_x in the stored domain, padded weight lanes
// -OW_OP. Then the MAC gives sum x_s (w - z_w), and the BS ALU adds
//   bias'[k] = bias[k] - z_x_s * sum_taps (w - z_w)[k]
// so that acc + bias' is exactly the reference accumulator sum (x - z_x)(w - z_w) + bias.
// Requantization M_k = s_x s_w[k] / s_y is the strategy's:
//   per-tensor         one task, OUT_CVT from max_k M_k (what a naive lowering does);
//   group16            tasks of 16 channels by position, OUT_CVT from each group's largest M;
//   sorted-groups      channels sorted by M, groups of 16, outputs un-sorted;
//   per-channel        one task per output channel;
//   hybrid             group16, but a group whose M spread exceeds `hybrid_ratio` splits into
//                      per-channel tasks;
//   bs-multiplier      one task, BS MUL[k] = round(2^14 M_k / M_max) from BRDMA, shift 14,
//                      OUT_CVT from M_max (the vendor's scheme);
//   bs-multiplier-opt  one task; OUT_CVT encodes M_out = M_max 2^15 / 32767 first, then
//                      MUL[k] = round(M_k 2^(15 + SHIFT) / SCALE) absorbs the OUT_CVT scale's
//                      own rounding, so each channel's effective multiplier MUL[k] SCALE /
//                      2^(15 + SHIFT) is the nearest one the hardware can apply;
//   sorted-bs-multiplier  channels sorted by M into the fewest tasks whose spread is at most
//                      2^sorted_bs_spread_log2 (default 2^7: every MUL keeps at least 8
//                      significant bits, the error stays under half a step), each task
//                      bs-multiplier-opt. The default strategy.
// OUT_CVT: SCALE in [2^14, 2^15) (signed 16-bit register), SHIFT so that SCALE / 2^SHIFT is
// the multiplier rounded to 15 bits, OFFSET = z_y (int8) or z_y - 128 (uint8). A fused ReLU
// (act_min = z_y) is the BS ReLU (v >= 0 <=> y >= z_y); an upper bound below the type's
// maximum (ReLU6) is BS ReLUX at the largest v whose OUT_CVT result stays within it (exact:
// OUT_CVT is monotonic; computed with OUT_CVT's default half-to-even rounding).
//
// Layouts: NC1HWC2 features (C2 = 16); each task writes align32(max(n, 32)) channels (n =
// its output channels) to its own region, which gather_output compacts (the CPU's work).
// Axis convention: DATAIN_WIDTH = W, the line dimension; non-square maps are tested. Maps
// lower than 4 rows (broken on hardware) are stored with rows of the input zero point below
// them, which is the convolution's own zero padding.
// CBUF (12 banks of 32 KiB, plan_tiling): a channel group whose weights leave too few banks
// for the input is split into kernel chunks; an input taller than its data banks hold is cut
// into row slices, one task each, overlapping by KH - stride rows, each slice reading its rows
// of the whole map (full-map line and surface strides) and writing its output rows into the
// group's full-size output region. The int8 feature tile keeps one spare data bank [HW].
//
// Stages (lower_conv composes them; a new operation reuses the ones it needs):
//   constraints.h  what the NPU takes (check_spec reads it)
//   strategy.h     channels per task and their requantization (pure arithmetic)
//   tiling.h       channel windows, kernel chunks and row slices over the CBUF
//   pack.h         the bytes: NC1HWC2 features, packed weights, folded bias, BS operands
//   emit.h         one register emitter per block (CNA, CORE, DPU, DPU_RDMA)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "npu/lower/constraints.h"
#include "npu/lower/spec.h"
#include "npu/lower/strategy.h"
#include "npu/lower/tiling.h"
#include "npu/memory.h"
#include "npu/regcmd/regcmd.h"

namespace rkd::npu::lower {

// One task's output region: channel j of the region is original output channel channels[j]
// (-1: computed but discarded, e.g. the rest of a depthwise task's 16-channel window).
struct OutputRegion {
  uint32_t address = 0;
  int64_t surface_bytes = 0;
  std::vector<int64_t> channels;
  int64_t stored_channels = 0;         // the channels it stores (a multiple of 16; channels.size() <= it, the rest discarded)
  uint32_t residual_address = 0;       // with a residual: its channels in this region's order, NC1HWC2
  int64_t residual_surface_bytes = 0;  // max(OH * OW, 12) * 16 (EW_SURF_STRIDE's floor)
};

// What a buffer the lowering placed holds: scratch maps are device-only (written and read by
// the node's own tasks).
enum class BufferKind { input, weights, operands, residual, scratch, output };
// "input", "weights", "operands", "residual", "scratch", "output": compile's manifest names and file suffixes.
const char* buffer_kind_name(BufferKind k);

// A buffer the lowering placed in device memory.
struct Buffer {
  BufferKind kind = BufferKind::input;
  size_t task = 0;
  uint32_t address = 0;
  size_t bytes = 0;
};

// What one task computes: its output region, rows and CBUF split.
struct TaskInfo {
  size_t region = 0;  // index into Lowered::outputs
  Slice slice;
  int64_t data_banks = 0, weight_banks = 0;
};

struct Lowered {
  std::vector<regcmd::Task> tasks;
  std::vector<TaskInfo> task_info;    // one per task
  std::vector<Buffer> buffers;        // Buffer::task: the first task reading or writing it
  std::vector<OutputRegion> outputs;  // one per channel group; its row slices share it
  uint32_t input_address = 0;
  int64_t OH = 0, OW = 0;
  size_t weight_bytes = 0, operand_bytes = 0;
  int64_t row_slices = 1;  // the most row slices of any channel group (1: no tiling)
};

// The limits every strategy's lowering shares (register field widths, types, the fused
// activation forms): an unsupported Error naming the limit, or ok. lower_conv() checks it
// first; callers check it to keep a convolution on the CPU before they lower anything.
Status check_spec(const ConvSpec& s);
// The spec as constraints.h reads it.
ConvGeometry geometry_of(const ConvSpec& s);

// Places the input (NCHW [1, C, H, W] of spec.dtype) in `mem` as NC1HWC2 with the stored
// domain's padding lanes; returns its address.
Result<uint32_t> place_input(DeviceMemory& mem, const ConvSpec& spec, const Tensor& x);
// Writes x over an input placed earlier at `address` (the padding lanes and rows again too).
Status write_input(DeviceMemory& mem, uint32_t address, const ConvSpec& spec, const Tensor& x);
// Lowers the convolution reading its input at `input_address`; weights, operands and
// outputs are allocated in `mem`.
Result<Lowered> lower_conv(const ConvSpec& spec, Strategy strategy, DeviceMemory& mem, uint32_t input_address, const LowerOptions& opt = {});
// The lowered tasks' chained register commands, placed in `mem` after everything else.
struct PlacedRegcmd {
  uint32_t address = 0;                 // the first task's words
  std::vector<regcmd::TaskSpan> spans;  // per task
  std::vector<uint64_t> words;
};
Result<PlacedRegcmd> place_regcmd(DeviceMemory& mem, const Lowered& l);
Result<PlacedRegcmd> place_regcmd(DeviceMemory& mem, const std::vector<regcmd::Task>& tasks);

// With a residual: writes r ([1, OC, OH, OW] of spec.dtype) into every region's residual
// buffer, NC1HWC2 in the region's channel order (the CPU's work on a board, as compaction).
Status write_residual(DeviceMemory& mem, const ConvSpec& spec, const Lowered& l, const Tensor& r);

// The input as lower_conv reads it (place_input's layout: stored_height(s) rows a surface,
// stored_channels(C) channels) at `address`.
DeviceMap conv_input_map(const ConvSpec& spec, uint32_t address);
// lower_conv places the regions one after the other: one NC1HWC2 map of their stored channels
// (map.shape.C = map.channels), stored channel j holding output channel channels[j] (-1: a
// padding lane or a channel another window keeps). None if the regions are not laid out so.
struct RegionsMap {
  DeviceMap map;
  std::vector<int64_t> channels;
};
std::optional<RegionsMap> regions_map(const ConvSpec& spec, const Lowered& l);
// The output as one map, when the regions hold every output channel in order (one task group,
// or groups of in-order channel ranges: per-tensor weights, a CBUF split, the bs-multiplier
// strategies' single task); else none (the host compacts the regions, gather_output, or a
// compaction convolution does on the NPU).
std::optional<DeviceMap> conv_output_map(const ConvSpec& spec, const Lowered& l);
// The compaction of a convolution whose regions hold its channels out of order (the sorted and
// grouped strategies): a 1 x 1 convolution reading the regions as one map (regions_map) with a
// 0/1 permutation matrix as per-tensor weights (scale 1, zero point 0) and the producer's
// output quantization as its input's and output's: y = OUT_CVT((x - z) * 1) + z = x exactly
// (OUT_CVT's multiplier 1 is 2^14 / 2^14), every channel in order. None when the output is in
// order already, the regions are not one map, or it has fewer rows than a convolution reads
// (arch min_height).
std::optional<ConvSpec> compaction_spec(const ConvSpec& spec, const Lowered& l);
// A dense convolution reading a producer's regions map (regions_map: input channel j holds the
// producer's channel channels[j], -1 none) instead of its compacted output: the same
// convolution with C = channels.size() input channels, weights permuted to match and the
// weight zero point (a zero factor) on the lanes that hold nothing. Its accumulators are the
// original's exactly: every tap's (x - z_x)(w - z_w) appears once, the others are 0.
Result<ConvSpec> permuted_input(const ConvSpec& spec, const std::vector<int64_t>& channels);

// The output [1, OC, OH, OW] in spec.dtype, compacted from the tasks' regions.
Result<Tensor> gather_output(const DeviceMemory& mem, const ConvSpec& spec, const Lowered& l);
// The same into y ([1, OC, OH, OW] of spec.dtype, contiguous).
Status gather_output_into(const DeviceMemory& mem, const ConvSpec& spec, const Lowered& l, Tensor& y);

}  // namespace rkd::npu::lower
