// Stage 2 of the convolution lowering: fitting the strategy's tasks to the CBUF (12 banks of
// 32 KiB). Channel windows (a depthwise task reads the 16-channel blocks of its outputs),
// kernel chunks (a task whose weights leave too few banks for one row slice is split into
// consecutive chunks of kernels) and row slices (an input taller than its data banks hold is
// cut into slices, one task each, overlapping by KH - stride rows). Any operation that reads
// a feature map through the CNA reuses plan_tiling.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "npu/lower/spec.h"
#include "npu/lower/strategy.h"

namespace rkd::npu::lower {

// Row-slice tiling of one task's input over the CBUF.
struct TileGeometry {
  int64_t C = 16;        // stored input channels (a multiple of 16)
  int64_t H = 4, W = 1;  // stored rows (>= 4) and width
  int64_t KH = 1, stride_h = 1, pad_top = 0, OH = 1;
  int64_t weight_bytes = 0;
  int64_t element_bytes = 1;  // 1 int8; 2 fp16 (to compare with fp16 captures)
  int64_t spare_banks = 1;    // data banks kept free (the int8 feature tile needs one [HW])
};
struct Slice {
  int64_t in_row0 = 0, in_rows = 0;    // input rows read (DATAIN_HEIGHT), from in_row0
  int64_t out_row0 = 0, out_rows = 0;  // output rows written
  int64_t pad_top = 0;                 // zero-point rows above in_row0 (first slice only)
};
struct Tiling {
  int64_t data_banks = 0, weight_banks = 0;  // CBUF_CON0
  std::vector<Slice> slices;
};
// One slice when the stored map fits the banks the weights leave (data banks: what the map
// needs plus the spare; weight banks: the rest). Otherwise the weights keep
// ceil(bytes / bank) banks, the input gets the others, and the output rows are cut greedily
// into slices whose input rows fit (minus the spare), as the vendor's single-core runs do;
// the last slice borrows rows when it would read fewer than 4. Errors when a single output
// row's input does not fit.
Result<Tiling> plan_tiling(const TileGeometry& g);

// A dense convolution's tasks with every task whose kernels (with the fewest input rows a
// slice needs) overflow the CBUF split into consecutive chunks of kernels: 32-kernel steps
// whose weights fit the banks the input leaves (at most 7 banks kept for the input, as Mesa
// splits). Unsupported when not even two kernels fit. A depthwise task reads only its own
// channels: one whose channel window (its weights and fewest input rows) overflows is split
// by ranges of the channel axis, the largest multiple of 64 channels whose window fits
// (unsupported when not even 64 do).
Result<std::vector<TaskPlan>> split_kernels(const ConvSpec& s, std::vector<TaskPlan> plans);

// What one task reads and computes. For a dense convolution: the plan as given, every input
// channel. For depthwise (input channel j feeds output channel j): the plan widened to the
// contiguous window of 16-channel blocks its channels lie in, the channels outside the plan
// computed but discarded.
struct ChannelWindow {
  TaskPlan plan;               // channels: what the task computes, in region order
  std::vector<int64_t> keep;   // region channel j -> original output channel (-1: discarded)
  uint32_t input_address = 0;  // the first input block the task reads
  int64_t in_channels = 0;     // real input channels read (DATAIN_CHANNEL_REAL + 1)
};
ChannelWindow channel_window(const ConvSpec& s, const TaskPlan& p, uint32_t input_address);

// The task's row slices over its stored input (plan_tiling), or one slice with all but one
// bank for data when tiling is off (LowerOptions::cbuf_tiling).
Result<Tiling> conv_tiling(const ConvSpec& s, int64_t stored_in_channels, int64_t weight_bytes, bool cbuf_tiling);

}  // namespace rkd::npu::lower
