// The vocabulary of the convolution lowering's stages (lower.h has the arithmetic):
// the convolution as the lowering takes it (ConvSpec), the per-axis strategy, the options,
// and the OUT_CVT encoding.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "npu/arch/arch.h"

namespace rkd::npu::lower {

enum class Strategy { per_tensor, group16, sorted_groups, per_channel, hybrid, bs_multiplier, bs_multiplier_opt, sorted_bs_multiplier };
// The strategy with at most one step of error and the most exact values at the fewest tasks
// on the five real detectors (docs/npu.md): sorted-bs-multiplier.
inline constexpr Strategy kDefaultStrategy = Strategy::sorted_bs_multiplier;

// A [1, C, H, W] map of one int8/uint8 type.
struct MapShape {
  DType dtype = DType::i8;
  int64_t C = 0, H = 0, W = 0;
};

// A map in device memory as a task reads or writes it: NC1HWC2 int8 (the stored domain) at
// `address`, `channels` stored (a multiple of 16; lanes past shape.C carry no meaning) in
// surfaces `surface_bytes` apart; `shape` is the tensor the host sees ([1, C, H, W]).
// `chained`: an input another task's output already holds (the host does not write it).
struct DeviceMap {
  uint32_t address = 0;
  int64_t surface_bytes = 0, channels = 0;
  MapShape shape;
  bool chained = false;
  // The map holds a [..., P, C] tensor's rows (a matrix product's token map), not a
  // [1, C, H, W] tensor: only a reader that views its input so reads it in place.
  bool rows = false;
};
// Whether a task can read `want` (the layout it would allocate for an input) from `have`
// (another task's output): the same tensor seen the same way (rows or map), surfaces and at
// least the channels it reads.
bool chainable(const DeviceMap& have, const DeviceMap& want);

struct ConvSpec {
  int64_t C = 0, H = 0, W = 0, OC = 0, KH = 1, KW = 1;
  int64_t stride_h = 1, stride_w = 1, pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool depthwise = false;              // groups == C == OC
  DType dtype = DType::i8;             // of input, weights and output: i8 or u8
  Tensor weights;                      // [OC, C (1 if depthwise), KH, KW], dtype
  std::vector<int32_t> w_zero_points;  // one (per tensor) or OC
  std::vector<float> w_scales;         // one (per tensor) or OC
  std::vector<int32_t> bias;           // OC (empty: none)
  float x_scale = 1, y_scale = 1;
  int32_t x_zero_point = 0, y_zero_point = 0;
  int32_t act_min = -128, act_max = 127;  // fused activation range in output units
  // Fused residual add (an Add of the convolution's output and another map, in the DPU's EW
  // stage): y = requantize(conv + residual) with y_scale / y_zero_point the Add's output
  // parameters and one rounding; the residual is [1, OC, OH, OW] of dtype with r_scale /
  // r_zero_point. conv_relu: a ReLU on the convolution before the add (the BS ReLU); act_min /
  // act_max must then be the type's range (no activation after the add).
  bool residual = false;
  float r_scale = 1;
  int32_t r_zero_point = 0;
  bool conv_relu = false;
  int64_t OH() const { return (H + pad_top + pad_bottom - KH) / stride_h + 1; }
  int64_t OW() const { return (W + pad_left + pad_right - KW) / stride_w + 1; }
};

struct LowerOptions {
  double hybrid_ratio = 1.0 + 1.0 / 1024;  // hybrid: split groups whose max/min M exceeds this
  // sorted-bs-multiplier: spread per task <= 2^this. The default is the widest the one-step bound
  // allows with a margin: a channel at ratio r of its task's largest multiplier is off by at most
  // |y| 2^-16 / r steps, and |y| <= 256 for an 8-bit output, so 2^7 keeps that <= 1/2 step
  // (docs/npu.md, "Strategies and their error bounds").
  int sorted_bs_spread_log2 = 7;
  // false: no kernel chunks or row slices, whatever the CBUF holds (not for hardware: the
  // simulator does not model CBUF capacity, so tests compare tiled and whole lowerings).
  bool cbuf_tiling = true;
};

// OUT_CVT encoding of a positive multiplier: SCALE in [2^14, 2^15), SHIFT with
// SCALE / 2^SHIFT = m rounded to 15 significant bits.
struct OutCvt {
  int32_t scale = 0;
  int32_t shift = 0;
};

// The stored layout every stage shares. Features are NC1HWC2 int8 (C2 = 16): uint8 values are
// kept minus 128 (the stored domain); maps shorter than the hardware's minimum height (4 rows:
// lower ones are broken [HW]) are stored with rows of the input zero point below them.
// Layout units (arch/rk3588.json).
inline constexpr int64_t kC2 = arch::kRk3588.feature_c2_int8;  // channels per NC1HWC2 block = bytes per int8 pixel
static_assert(kC2 == arch::kRk3588.feature_atomic_bytes);
inline constexpr int64_t kInputChannelAlign = arch::kRk3588.input_channel_alignment;
inline constexpr int64_t kOutputChannelAlign = arch::kRk3588.output_channel_alignment;
inline constexpr int64_t kDepthwiseOutputChannelAlign = arch::kRk3588.depthwise_output_channel_alignment;
inline constexpr int64_t kDepthwiseWeightLanes = arch::kRk3588.depthwise_weight_atomic_channels;
inline constexpr int64_t kWeightInputGroup = arch::kRk3588.weight_input_group;
inline constexpr int64_t kWeightOutputGroup = arch::kRk3588.weight_output_group;
inline constexpr int64_t kBsBlockBytes = arch::kRk3588.bs_operand_bytes_per_8_channels;

inline int64_t align(int64_t v, int64_t a) { return (v + a - 1) / a * a; }
inline int32_t stored(int32_t v, DType t) { return t == DType::u8 ? v - 128 : v; }
// The range of an int8 or uint8 value (the lowerings refuse other types first).
inline int32_t qmin_of(DType t) { return t == DType::i8 ? -128 : 0; }
inline int32_t qmax_of(DType t) { return t == DType::i8 ? 127 : 255; }
inline int64_t stored_height(const ConvSpec& s) { return std::max<int64_t>(s.H, arch::kRk3588.min_height); }
inline int64_t stored_channels(int64_t c) { return align(std::max<int64_t>(c, kInputChannelAlign), kInputChannelAlign); }
// Bytes of the stored input map.
inline int64_t input_bytes(const ConvSpec& s) { return stored_channels(s.C) / kC2 * stored_height(s) * s.W * kC2; }

}  // namespace rkd::npu::lower
