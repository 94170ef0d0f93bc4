// Fusion passes that produce rkdeploy's own ops (domain "rkdeploy"), and their kernels.
//
// conv-activation-fusion: Conv followed by Relu, or by the SiLU pair Sigmoid(y) and
// Mul(y, Sigmoid(y)), where the conv output has no other reader, becomes one Conv with
// the attribute rkd_activation = "relu" | "silu" (oneDNN post-op, applied after the bias).
#pragma once

#include "ir/pass.h"
#include "runtime/executor.h"
#include "runtime/op_registry.h"

namespace rkd::runtime {

ir::Pass conv_activation_fusion_pass();

// deform-attn-fusion: recognises the sampling subgraph of D-FINE/DEIM decoders
// (deformable_attention_core_func_v2) as PyTorch exports it and replaces it by
//   prepared = rkdeploy.MSDAPrepare(value)            - once per distinct value tensor
//   out      = rkdeploy.MSDeformAttn(prepared, locations, weights)
// with the kernels of src/kernels/deform_attn.h. Recognised forms, per site:
//   value      Reshape [B,T,nH,c] -> Transpose(0,2,3,1) -> Reshape [B*nH,c,T] -> one Slice
//              (or Split) per level, in token order -> Reshape [B*nH,c,h,w];
//   locations  L [B,Q,nH,P,2] -> (default: Mul 2, Sub 1) -> Transpose(0,2,1,3,4) ->
//              Reshape [B*nH,Q,P,2] -> Split over the points axis by level;
//   weights    W [B,Q,nH,P] -> Transpose(0,2,1,3) -> Reshape [B*nH,1,Q,P];
//   per level  default:  GridSample(bilinear, zeros, align_corners=0);
//              discrete: Mul [w,h] -> Add 0.5 -> Cast int64 -> Clip(0, h-1) -> (index
//              arithmetic on constants only) -> Gather from Flatten(Transpose(0,2,3,1)(value_l))
//              -> Reshape/Transpose/Reshape to [B*nH,c,Q,P_l];
//   tail       Concat(levels, -1) * weights -> ReduceSum(-1) -> Reshape [B,nH*c,Q] ->
//              Transpose(0,2,1).
// A site that looks similar (a Concat of GridSample or Gather samples) but fails a check
// is left as it is and reported with the check that failed.
ir::Pass deform_attn_fusion_pass(FusionReport* report);

// qdq-to-qlinear: the QDQ form of a quantized Conv or MatMul -
//   DequantizeLinear(x_q) and DequantizeLinear(w_q) [and DequantizeLinear(b_q int32)] ->
//   Conv / MatMul -> QuantizeLinear(y)
// where the float result is read only by that QuantizeLinear, becomes QLinearConv /
// QLinearMatMul on the integer tensors, as ONNX Runtime's QDQ transformer does, so that the
// result is computed in integers (requant.h onnx_float) instead of in float32 between a
// dequantize and a quantize. The bias must be int32 with zero point 0 and scale x_s * w_s
// (checked: otherwise the site stays float). Sites that do not match stay as they are.
// ONNX graphs: DequantizeLinear x2 -> Add [-> Relu] -> QuantizeLinear becomes
// rkdeploy.QLinearAdd (ONNX Runtime's arithmetic, quant/int8.h onnx_float).
// Graphs imported from TFLite (metadata rkdeploy.requant = tflite_*): Conv/MatMul requantize
// with TFLite's rounding, and every per-tensor QDQ site of Sigmoid, Tanh, HardSwish,
// LeakyRelu, Softmax (last axis), ReduceMean, Resize (linear), AveragePool, MaxPool, Add, Sub,
// Mul and Concat - inputs dequantized, the op, an optional fused Relu/Clip, QuantizeLinear -
// becomes rkdeploy.QLinearTflite(op = the op type) on TFLite's integer kernels
// (quant/int8.h, quant/int8_tflite.h), the fused activation as TFLite's clamp range.
ir::Pass qdq_to_qlinear_pass();

// int8-channels-last (int8_layout_pass.cc): the CPU QLinearConvs take and give [N, H, W, C]
// (attributes rkd_input_channels_last, rkd_output_channels_last), Transposes inserted around
// them, moved below layout-free int8 ops (Identity, QLinearAdd, QLinearLut) and cancelled in
// pairs; a Transpose left next to a convolution goes into the convolution's own conversion.
// Chains of int8 convolutions convert layouts only at their ends. Outputs are unchanged bit
// for bit.
ir::Pass int8_channels_last_pass();

}  // namespace rkd::runtime
