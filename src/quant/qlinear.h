// The QDQ -> integer rewrite (qlinear_pass.cc, qlinear_lut.cc).
#pragma once

#include "ir/pass.h"

namespace rkd::quant {

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
// Per-tensor pointwise, MaxPool and Pad sites become integer tables (qlinear_lut.h), their
// tables computed by `eval` (the executor's kernels, injected as constant folding gets them).
ir::Pass qdq_to_qlinear_pass(ir::NodeEvaluator eval);

}  // namespace rkd::quant
