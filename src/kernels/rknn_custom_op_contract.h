// The two operators rkdeploy gives the vendor runtime (RKNN) as custom operators - the node
// types `rkdeploy export --rknn-custom-op` writes, the plugin libraries implement
// (plugins/rknn) and rkdeploy's ONNX importer expands back - and their attributes. One place
// for names and codes: the export pass, the importer, the plugins and the Python class the
// vendor toolkit registers all read them from here (docs/rknn-custom-op.md).
//
// cstMSDeformAttn(value, locations, weights) -> out, deform_attn.h's operation:
//   value     float [B, T, nH, c]  the tokens of every level, level by level (T = sum H_l W_l)
//   locations float [B, Q, nH, P, 2]  (x, y) in [0, 1]; points level by level
//   weights   float [B, Q, nH, P]  attention weights, already soft-maxed
//   out       float [B, Q, nH * c]
//   attributes (ints): level_h, level_w (one per level), points (one per level),
//                      method (MsdaMethod as its code below).
// cstGridSample(input [N, C, H, W], grid [N, Ho, Wo, 2]) -> [N, C, Ho, Wo], grid_sample.h's
//   operation; attributes (ints): mode, padding_mode, align_corners, convention (the
//   unnormalisation's rounding: an ONNX GridSample node's is ONNX's, as the executor runs it).
// The vendor toolkit requires a custom operator's type to start with "cst" (its examples:
// cstSigmoid, cstSoftmax) and reads attributes as arrays of numbers; strings are avoided.
#pragma once

#include <cstdint>

namespace rkd::rknn_contract {

inline constexpr const char* kMsdaType = "cstMSDeformAttn";
inline constexpr const char* kGridSampleType = "cstGridSample";
inline constexpr int kVersion = 1;  // rknn_custom_op::version of both

// Attribute names.
inline constexpr const char* kLevelH = "level_h";
inline constexpr const char* kLevelW = "level_w";
inline constexpr const char* kPoints = "points";
inline constexpr const char* kMethod = "method";
inline constexpr const char* kMode = "mode";
inline constexpr const char* kPadding = "padding_mode";
inline constexpr const char* kAlignCorners = "align_corners";
inline constexpr const char* kConvention = "convention";

// Codes: method 0 default (bilinear), 1 discrete, 2 discrete_fixed (MsdaMethod's order);
// mode 0 bilinear, 1 nearest, 2 bicubic (GridSampleMode's order); padding_mode 0 zeros,
// 1 border, 2 reflection (GridSamplePadding's order); convention 0 pytorch, 1 onnx
// (GridSampleConvention's order).
inline constexpr int64_t kMethodCount = 3, kModeCount = 3, kPaddingCount = 3, kConventionCount = 2;

}  // namespace rkd::rknn_contract
