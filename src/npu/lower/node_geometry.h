// A node as npu/lower/constraints.h reads it: the one translation from a graph node to the NPU's
// geometry, read by the runtime's NPU operation table (its specs) and by the planner's profile
// checks npu_conv_geometry, npu_pool_geometry and npu_eltwise_geometry (plan.h). Float nodes (a
// QDQ graph's Conv, Add, ...) and their integer forms alike; an error says what is not a map.
// Its own library (rkd_npu_geometry): the embeddable runtime links it without the planner.
#pragma once

#include <optional>

#include "core/result.h"
#include "core/tensor.h"
#include "ir/ir.h"
#include "npu/lower/constraints.h"

namespace rkd::npu::lower {

// Conv / QLinearConv / NpuConv: the window resolved (auto_pad), the four pads.
Result<npu::lower::ConvGeometry> npu_conv_geometry(const ir::Node& n);
// A weight: a constant, or the DequantizeLinear of one (a QDQ graph's weight).
bool weight_constant(const ir::Value* v);
// The map a matrix product's rows are on the NPU: the P rows of a [..., P, C] operand (every
// dimension but the last) as an H x W map of C channels, H * W = P with W the largest divisor
// of P not above its square root (so H >= W; a prime P is P x 1). Every producer and reader
// of a value folds it alike, so an NPU node reads another's rows in place.
struct TokenMap {
  int64_t H = 0, W = 0;
};
TokenMap npu_token_map(int64_t P);
// How the NPU operation table sees a tensor of this static shape: a rank-4 [N, C, H, W] as that
// map; any other rank of 2 or more as rows [..., P, C] (a matrix product's operands and
// results: tokens) in the token map of P = the product of all but the last dimension (rows);
// none for rank 0 or 1.
struct MapView {
  int64_t batch = 1, C = 0, H = 0, W = 0;
  bool rows = false;
};
std::optional<MapView> npu_map_view(const Shape& s);
// A patch embedding (a ViT's first layer): kernel = stride past the CNA's stride fields, no
// padding or dilation, one group, batch 1, H and W multiples of the kernel. The runtime lowers
// it as a space-to-depth on the CPU and the 1 x 1 convolution returned here (C KH KW input
// channels over the H/KH x W/KW map); none for any other convolution.
std::optional<npu::lower::ConvGeometry> npu_patch_embedding_as_1x1(const npu::lower::ConvGeometry& g);
// MatMul / Gemm / QLinearMatMul / NpuMatMul with a constant 2-D B [K, N] (Gemm: transB read,
// transA 0): the 1 x 1 convolution of N output channels over A's rows as the token map of K
// channels (batch 1); an error when B is computed at run time (a product of two activations)
// or A is not a static tensor of rank 2 or more.
Result<npu::lower::ConvGeometry> npu_matmul_geometry(const ir::Node& n);
// MaxPool (float or integer): window, output size, ceil_mode, the indices output.
Result<npu::lower::PoolGeometry> npu_pool_geometry(const ir::Node& n);
// Add / Sub / Max / Min / Mul or their QLinear / Npu forms (B input 3), or a unary op on one map:
// A of the output's shape (a Mul's operands swapped where only B has it, as qdq-to-qlinear does),
// B broadcast or not; A as npu_map_view sees it (a map, or rows whose channels are the last
// dimension: B per channel is then one value per last-dimension index).
Result<npu::lower::EltwiseGeometry> npu_binary_geometry(const ir::Node& n);
// Concat / Split along the channels: the parts (a Concat's inputs, a Split's outputs).
Result<npu::lower::EltwiseGeometry> npu_parts_geometry(const ir::Node& n);

}  // namespace rkd::npu::lower
