// The one source of what the RK3588 NPU's lowerings take (convolutions, element-wise tasks),
// and why.
//
// Every limit is built from the hardware description (npu/arch: rk3588.json and the register
// field widths of rk3588_registers.json), never written as a literal elsewhere: the lowering
// (lower.h check_spec), the runtime's NPU placement (runtime/npu_conv.cc), `analyze`, and the
// planner's rk3588-rkdeploy profile (check "npu_conv", plan/target.cc) all read it.
//
// Contract:
//  - check_conv() lists every rule the geometry breaks, in the order of conv_rules(); an empty
//    list means the lowering accepts the geometry (the CBUF tiling can still refuse a shape
//    whose two smallest weight chunks do not fit, with its own message).
//  - A Violation says what was found ("stride 16x16"), the rule ("stride <= 7") and the reason
//    ("CNA.CONV_CON3.CONV_X_STRIDE and CONV_Y_STRIDE are 3-bit fields"), like Vela's checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace rkd::npu::lower {

// The limits, with the field or parameter each comes from.
struct ConvLimits {
  int64_t max_kernel_w, max_kernel_h;  // CNA.WEIGHT_SIZE2.WEIGHT_WIDTH / WEIGHT_HEIGHT
  int64_t max_stride_w, max_stride_h;  // CNA.CONV_CON3.CONV_X_STRIDE / CONV_Y_STRIDE
  int64_t max_pad_left, max_pad_top;   // CNA.PAD_CON0.PAD_LEFT / PAD_TOP
  int64_t max_width;                   // CNA.DATA_SIZE0.DATAIN_WIDTH (rows are sliced, the width is not)
  int64_t max_height;                  // rk3588.json size_field_max (13-bit size fields, row slices)
};
const ConvLimits& conv_limits();

// A convolution as the NPU sees it (before any packing).
struct ConvGeometry {
  DType dtype = DType::i8;  // of input, weights and output
  int64_t batch = 1, C = 0, H = 0, W = 0, OC = 0, KH = 1, KW = 1;
  int64_t stride_h = 1, stride_w = 1, pad_top = 0, pad_left = 0;
  int64_t pad_bottom = 0, pad_right = 0;  // not limited (the output size follows from them)
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;                 // 1 dense; C == OC == groups depthwise; else grouped
  bool per_axis_activations = false;  // more than one input or output scale
  bool per_channel_weight_zero_points = false;
  bool fused_lower_bound_other_than_relu = false;  // an activation minimum that is not ReLU's
  bool activation_after_residual = false;          // a clamp after a fused residual add
};

struct Violation {
  std::string found, rule, reason;
  std::string text() const;  // "found: rule (reason)"
};

// Every rule, in check order: {rule, reason} (docs, `rkdeploy analyze`, tests).
std::vector<std::pair<std::string, std::string>> conv_rules();
std::vector<Violation> check_conv(const ConvGeometry& g);
// The first violation as an "unsupported" Error prefixed with `what`, or OK.
Status conv_supported(const ConvGeometry& g, const std::string& what);

// An element-wise operation of two maps as the DPU sees it (a DPU-only task, eltwise.h).
struct EltwiseGeometry {
  DType dtype = DType::i8;
  int64_t batch = 1, C = 0, H = 0, W = 0;
  bool broadcast = false;              // the operands' shapes differ
  bool per_channel_operand = false;    // ... the second being one value per channel ([N, C, 1, 1]) or one element
  bool per_axis_quantization = false;  // more than one scale or zero point per operand
  bool fused_activation = false;       // an output range narrower than the type's
  // Concat, Split (one copy task per part), DepthToSpace (its four channel groups): the channel
  // offset of the first part that does not start at a multiple of 16 channels (0: every part
  // does; the first starts at 0).
  int64_t unaligned_part_offset = 0;
};
// Whether `operand` is what the EW stage reads per channel (EW_DATA_MODE 0) for the [N, C, H, W]
// `map`: one element, or one value per channel ([1, C, 1, 1], or [C, 1, 1] aligned right).
// EltwiseGeometry::per_channel_operand; the planner and the runtime's spec both ask this.
bool per_channel_operand(const std::vector<int64_t>& map, const std::vector<int64_t>& operand);
// EltwiseGeometry::unaligned_part_offset of a Concat (or Split) into parts of these channel counts.
int64_t unaligned_part_offset(const std::vector<int64_t>& parts);
std::vector<std::pair<std::string, std::string>> eltwise_rules();
std::vector<Violation> check_eltwise(const EltwiseGeometry& g);
Status eltwise_supported(const EltwiseGeometry& g, const std::string& what);

// A max pooling as the PPU sees it (a PPU-only task, eltwise.h lower_max_pool).
struct PoolGeometry {
  DType dtype = DType::i8;
  int64_t batch = 1, C = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t KH = 1, KW = 1, stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  bool ceil_mode = false;
  bool indices = false;  // MaxPool's second output
};
std::vector<std::pair<std::string, std::string>> pool_rules();
std::vector<Violation> check_pool(const PoolGeometry& g);
Status pool_supported(const PoolGeometry& g, const std::string& what);

}  // namespace rkd::npu::lower
