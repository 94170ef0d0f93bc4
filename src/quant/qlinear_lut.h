// Per-tensor QDQ sites computed on the integers, inside qdq-to-qlinear (qlinear.h). Every
// rewrite but the NPU-convention ones below is exact by construction: the tables are the
// executor's own DequantizeLinear, op and QuantizeLinear kernels (`eval`) run over all 256
// input codes. Under rknpu_out_cvt the LeakyRelu tables and the linear Resizes are the NPU's
// arithmetic instead (a float site's result differs where the converters round otherwise).
#pragma once

#include <set>

#include "ir/ir.h"
#include "ir/pass.h"

namespace rkd::quant {

// With DQ and Q per tensor (constant scale and zero point, 8-bit), Q the op's only reader:
//   DQ(x) -> U -> Q, U elementwise (Relu, LeakyRelu, Sigmoid, HardSwish, Clip, Mul by a
//     scalar, ...) with its other inputs constant scalars or DequantizeLinears of constant
//     scalars: rkdeploy.QLinearLut(x, table), table[c] = Q(U(DQ(c)));
//   DQ(x) -> MaxPool -> Q, every window holding an input element: MaxPool on the integers
//     (DQ and Q are non-decreasing, so they commute with max), then QLinearLut(Q o DQ)
//     unless DQ and Q quantize alike;
//   DQ(x) -> Pad(constant v) -> Q: Pad on QLinearLut(Q o DQ)(x) with the value Q(v);
//   under rknpu_out_cvt (or for the NPU: metadata rkdeploy.npu), DQ(x) ->
//     Resize -> Q with ir::resize_is_average2: a depthwise 2 x 2 stride-2 QLinearConv of
//     weights 1/4 on x; with ir::resize_is_bilinear2: a nearest x2 Resize of x, a Pad edge by 1
//     and a depthwise 3 x 3 QLinearConv of weights [1 2 1]^T [1 2 1] / 16 (with
//     ir::resize_is_asymmetric_bilinear2 the same, weights [0 1 1]^T [0 1 1] / 4) (the taps
//     exactly, the requantization the convention's: the NPU runs the convolutions as any other);
//     likewise DQ(x) -> AveragePool / GlobalAveragePool / ReduceMean over H, W -> Q: a depthwise
//     QLinearConv of weights 1 and weight scale 1 / (KH KW) over each window (AveragePool in
//     floor mode, no dilation, pads only with count_include_pad; ReduceMean without keepdims
//     then reshapes the integers) - the sums exact, one requantization where the PPU's
//     average would round twice (docs/npu.md, "Average pooling").
// Sites whose op the kernels cannot evaluate this way stay float.
Status lut_sites(ir::Graph& g, std::set<const ir::Node*>& gone, const ir::NodeEvaluator& eval);
// Q(Mul(DQ_a(u), DQ_b(v))), per tensor, one shape, u and v each x or a QLinearLut of x (SiLU
// as YOLO exports write it, x * Sigmoid(x), once lut_sites made the Sigmoid a table; hard-swish
// as TF.js writes it, (x / 6) * relu6(x + 3), once both factors are tables): a function of x's
// code alone, rkdeploy.QLinearLut(x, table), table[c] = Q(DQ_a(u(c)) * DQ_b(v(c))) by the
// executor's kernels.
Status mul_lut_sites(ir::Graph& g, std::set<const ir::Node*>& gone, const ir::NodeEvaluator& eval);
// rkdeploy.QLinearAdd of a map and a constant scalar (hard-swish's x + 3 as TF.js exports it):
// a function of the map's code alone, rkdeploy.QLinearLut(x, table), the table the
// QLinearAdd kernel's own output for each code (its convention, clamp and rounding).
Status constant_add_luts(ir::Graph& g, std::set<const ir::Node*>& gone, const ir::NodeEvaluator& eval);
// QLinearLut -> QLinearLut (the first read only by the second): one composed table.
Status compose_luts(ir::Graph& g, std::set<const ir::Node*>& gone);

}  // namespace rkd::quant
