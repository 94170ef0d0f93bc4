// Stage 3 of the convolution lowering: the bytes the NPU reads. Feature maps in NC1HWC2,
// packed weights, the folded bias and the BS stage's operand blocks (layouts: facts
// rk3588-npu.md §3 and docs/npu.md). No registers and no device memory: the caller places the
// bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "npu/lower/spec.h"

namespace rkd::npu::lower {

// NC1HWC2 <-> channel planes. Channel j of a map lives in block j / 16 (at blocks + (j / 16)
// * surface), lane j % 16 of every 16-byte pixel. Every byte is XORed with `flip`
// (0x80 converts uint8 to the stored domain and back). Parallel over blocks and chunks of
// pixels on the math threads.
// Block bytes of pixels [0, pixels) from planes[j] (nullptr: `fill` in that lane).
void planes_to_blocks(const std::vector<const uint8_t*>& planes, int64_t pixels, uint8_t fill, uint8_t flip, uint8_t* blocks, int64_t surface);
// planes[j][i] = block byte of channel j, pixel i, for the planes that are not nullptr.
void blocks_to_planes(const uint8_t* blocks, int64_t surface, int64_t pixels, uint8_t flip, const std::vector<uint8_t*>& planes);

// OW_OP: w_s + OW_OP = w - z_w (0 for int8; 128 - z_w for uint8).
int32_t weight_offset(const ConvSpec& s);

// Packed weights of the kernels of output channels `channels` (for depthwise: a channel
// window, channel_window()).
//  dense:     kernels = align(n, 2); per 32-kernel group, per 32-channel input group, per tap,
//             per kernel, 32 (or fewer, at the end) channels; padded kernels 0, padded input
//             lanes -OW_OP.
//  depthwise: per 64 channels, per tap, 64 lanes; lanes past n -OW_OP.
struct PackedWeights {
  std::vector<uint8_t> bytes;
  int64_t kernels = 0;           // CNA.WEIGHT_SIZE2.WEIGHT_KERNELS
  int64_t bytes_per_kernel = 0;  // CNA.WEIGHT_SIZE1
};
PackedWeights pack_weights(const ConvSpec& s, const std::vector<int64_t>& channels);

// bias'[k] = bias[k] - z_x_s * sum_taps (w - z_w) for each of `channels`, in units of 2^truncate
// (rounded half up); unsupported naming the channel when it overflows int32.
Result<std::vector<int32_t>> fold_bias(const ConvSpec& s, const std::vector<int64_t>& channels, int truncate);

// Channels a convolution task writes for n output channels: 32-channel groups for a
// convolution, 64 for depthwise.
int64_t written_channels(const ConvSpec& s, int64_t n);

// The BS stage's per-channel operands, read by BRDMA.
enum class BsOperands {
  alu,        // one int32 ALU operand per channel (written channels x 4 bytes)
  alu_mul,    // 64-byte blocks of 8 channels: 8 int32 ALU operands, then at byte 48 8 int16 MUL
  registers,  // none read: one ALU and one MUL operand for all channels, in BS_ALU_CFG / BS_MUL_CFG
};
struct PackedOperands {
  std::vector<uint8_t> bytes;
  BsOperands layout = BsOperands::alu;
};
// `mul` empty: ALU only. Otherwise one multiplier per bias value.
PackedOperands pack_bs_operands(const std::vector<int32_t>& bias, const std::vector<int32_t>& mul, int64_t written);

}  // namespace rkd::npu::lower
