#include "ir/op_info.h"

#include <algorithm>
#include <map>

#include "ir/passes/shape_inference.h"
#include "ir/passes/shape_inference_ctx.h"

namespace rkd::ir {

namespace {

using namespace detail;  // NOLINT: the shape functions

constexpr uint32_t P = kPointwise;
constexpr uint32_t F = kFloatOnly;
constexpr uint32_t kMover = kLayoutOnly | kCommutesWithDequantize | kSameScale;

}  // namespace

const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> t = {
      // Elementwise, one input.
      {"", "Relu", same_shape, P},
      {"", "LeakyRelu", same_shape, P | F},
      {"", "Sigmoid", same_shape, P | F},
      {"", "HardSigmoid", same_shape, P | F},
      {"", "HardSwish", same_shape, P | F},
      {"", "Tanh", same_shape, P | F},
      {"", "Erf", same_shape, P | F},
      {"", "Gelu", same_shape, P | F},
      {"", "Sqrt", same_shape, P | F},
      {"", "Exp", same_shape, P | F},
      {"", "Log", same_shape, P | F},
      {"", "Abs", same_shape, P},
      {"", "Neg", same_shape, P},
      {"", "Reciprocal", same_shape, P | F},
      {"", "Floor", same_shape, P | F},
      {"", "Ceil", same_shape, P | F},
      {"", "Round", same_shape, P | F},
      {"", "Sign", same_shape, P},
      {"", "Sin", same_shape, P | F},
      {"", "Cos", same_shape, P | F},
      {"", "Softplus", same_shape, P | F},
      {"", "Elu", same_shape, P | F},
      {"", "Selu", same_shape, P | F},
      {"", "Mish", same_shape, P | F},
      {"", "Clip", same_shape, P},
      {"", "Not", same_shape, 0},
      {"", "IsNaN", same_shape_bool, F},
      {"", "IsInf", same_shape_bool, F},
      // Elementwise, broadcasting.
      {"", "Add", broadcast_same_type, P | kAbsorbsActivation},
      {"", "Sub", broadcast_same_type, P},
      {"", "Mul", broadcast_same_type, P},
      {"", "Div", broadcast_same_type, P},
      {"", "Pow", broadcast_same_type, P},
      {"", "Min", broadcast_same_type, P},
      {"", "Max", broadcast_same_type, P},
      {"", "Sum", broadcast_same_type, P},
      {"", "Mean", broadcast_same_type, P},
      {"", "Mod", broadcast_same_type, P},
      {"", "PRelu", broadcast_same_type, P},
      {"", "Equal", broadcast_to_bool, 0},
      {"", "Less", broadcast_to_bool, 0},
      {"", "Greater", broadcast_to_bool, 0},
      {"", "LessOrEqual", broadcast_to_bool, 0},
      {"", "GreaterOrEqual", broadcast_to_bool, 0},
      {"", "And", broadcast_to_bool, 0},
      {"", "Or", broadcast_to_bool, 0},
      {"", "Xor", broadcast_to_bool, 0},
      {"", "Where", where, 0},
      {"", "Cast", cast, 0},
      // Normalization and along-an-axis ops.
      {"", "Softmax", same_shape, F},
      {"", "LogSoftmax", same_shape, F},
      {"", "CumSum", same_shape, 0},
      {"", "BatchNormalization", same_shape, F},
      {"", "InstanceNormalization", same_shape, F},
      {"", "LayerNormalization", layer_norm_op, F},
      {"", "Dropout", dropout, 0},
      // Layout and data movement.
      {"", "Identity", same_shape, kView | kLayoutOnly | kSameScale},
      {"", "Reshape", reshape, kView | kMover},
      {"", "Flatten", flatten, kView | kMover},
      {"", "Squeeze", squeeze, kView | kMover},
      {"", "Unsqueeze", unsqueeze, kView | kMover},
      {"", "Transpose", transpose, kMover},
      {"", "DepthToSpace", depth_to_space, kMover},
      {"", "Pad", pad, kCommutesWithDequantize | kSameScale},
      {"", "Concat", concat, kCommutesWithDequantize},
      {"", "Split", split, kCommutesWithDequantize | kSameScale},
      {"", "Slice", slice, kSameScale},
      {"", "Gather", gather, kSameScale},
      {"", "GatherND", gather_nd, 0},
      {"", "GatherElements", gather_elements, 0},
      {"", "ScatterND", same_shape, 0},
      {"", "ScatterElements", same_shape, 0},
      {"", "Expand", expand, 0},
      {"", "Tile", tile, 0},
      // Shapes, constants, index arithmetic.
      {"", "Shape", shape_op, kSelection},
      {"", "Size", size_op, kSelection},
      {"", "Range", range, kSelection},
      {"", "ConstantOfShape", constant_of_shape, 0},
      {"", "Constant", constant, 0},
      // Reductions and selection.
      {"", "ReduceSum", reduce_sum, 0},
      {"", "ReduceMean", reduce_opset18, 0},
      {"", "ReduceMax", reduce_opset18, 0},
      {"", "ReduceMin", reduce_opset18, 0},
      {"", "ReduceProd", reduce_opset18, 0},
      {"", "ReduceL2", reduce_opset18, 0},
      {"", "ReduceSumSquare", reduce_opset18, 0},
      {"", "ArgMax", arg_reduce, F | kSelection},
      {"", "ArgMin", arg_reduce, F | kSelection},
      {"", "TopK", topk, F | kSelection},
      {"", "NonMaxSuppression", nullptr, kSelection | kNoKernel},
      {"", "NonZero", nullptr, kSelection | kNoKernel},
      // Convolution, pooling, products, resampling.
      {"", "Conv", conv, F | kAbsorbsActivation},
      {"", "ConvTranspose", conv_transpose_op, F | kAbsorbsActivation},
      {"", "MaxPool", pool, kSameScale},
      {"", "AveragePool", pool, F},
      {"", "GlobalAveragePool", global_pool_op, F},
      {"", "GlobalMaxPool", global_pool_op, F},
      {"", "MatMul", matmul_op, F | kAbsorbsActivation},
      {"", "Gemm", gemm_op, F | kAbsorbsActivation},
      {"", "Einsum", einsum_op, F},
      {"", "Resize", resize_maybe_edge_padded, kSameScale | kCommutesWithDequantize},  // other modes: float only (the kernel says so)
      {"", "GridSample", grid_sample_op, F},
      // Quantized.
      {"", "QuantizeLinear", quantize_linear, 0},
      {"", "DequantizeLinear", dequantize_linear, 0},
      {"", "QLinearConv", qlinear_conv, 0},
      {"", "QLinearMatMul", qlinear_matmul, 0},
      // rkdeploy's own ops (runtime/ops_rkdeploy.cc has their kernels).
      {"rkdeploy", "MSDAPrepare", msda_prepare_shape, 0},
      {"rkdeploy", "MSDeformAttn", msda_attention_shape, 0},
      {"rkdeploy", "QLinearAdd", qlinear_binary, 0},
      {"rkdeploy", "QLinearMul", qlinear_binary, 0},
      {"rkdeploy", "QLinearSub", qlinear_binary, 0},
      {"rkdeploy", "QLinearMax", qlinear_binary, 0},
      {"rkdeploy", "QLinearMin", qlinear_binary, 0},
      {"rkdeploy", "QLinearTflite", qlinear_tflite, 0},
      {"rkdeploy", "QLinearLut", qlinear_lut, 0},
      {"rkdeploy", "NpuConv", qlinear_conv, kOnNpu},                // a QLinearConv on the NPU simulator
      {"rkdeploy", "NpuMatMul", qlinear_matmul, kOnNpu},            // a QLinearMatMul of constant B as a 1 x 1 convolution over its rows
      {"rkdeploy", "NpuAdd", qlinear_binary, kOnNpu},               // a QLinearAdd as a DPU-only task on the NPU simulator
      {"rkdeploy", "NpuMul", qlinear_binary, kOnNpu},               // a QLinearMul as a DPU-only task (the EW stage's multiply)
      {"rkdeploy", "NpuSub", qlinear_binary, kOnNpu},               // a QLinearSub as a DPU-only task (EW_ALU_ALGO 4)
      {"rkdeploy", "NpuMax", qlinear_binary, kOnNpu},               // a QLinearMax as a DPU-only task (EW_ALU_ALGO 0)
      {"rkdeploy", "NpuMin", qlinear_binary, kOnNpu},               // a QLinearMin as a DPU-only task (EW_ALU_ALGO 1)
      {"rkdeploy", "NpuLeakyRelu", qlinear_lut, kOnNpu},            // a LeakyRelu table as a DPU-only task on the NPU simulator
      {"rkdeploy", "NpuLut", qlinear_lut, kOnNpu},                  // any other table through the DPU's lookup table
      {"rkdeploy", "NpuMaxPool", pool, kOnNpu},                     // an integer MaxPool as a PPU task
      {"rkdeploy", "NpuPad", pad, kOnNpu},                          // an integer channel Pad as a DPU task
      {"rkdeploy", "NpuResize", resize_maybe_edge_padded, kOnNpu},  // an integer nearest x2 Resize as DPU copy tasks
      {"rkdeploy", "NpuDepthToSpace", depth_to_space, kOnNpu},      // an integer DepthToSpace (DCR, 2) as DPU copy tasks
      {"rkdeploy", "NpuConcat", concat, kOnNpu},                    // an integer channel Concat as DPU-only copy tasks
      {"rkdeploy", "NpuSplit", split, kOnNpu},                      // an integer channel Split as DPU-only copy tasks
  };
  return t;
}

const OpInfo* find_op(std::string_view domain, std::string_view op_type) {
  static const std::map<std::pair<std::string_view, std::string_view>, const OpInfo*> index = [] {
    std::map<std::pair<std::string_view, std::string_view>, const OpInfo*> m;
    for (const OpInfo& op : op_table()) m[{op.domain, op.op_type}] = &op;
    return m;
  }();
  if (domain == "ai.onnx") domain = "";
  auto it = index.find({domain, op_type});
  return it == index.end() ? nullptr : it->second;
}

bool op_has(const Node& n, uint32_t traits) {
  const OpInfo* op = find_op(n);
  return op && op->has(traits);
}

bool resize_copies_elements(const Node& n) {
  return n.domain.empty() && n.op_type == "Resize" && n.attr_string("mode", "nearest").value_or("") == "nearest" &&
         n.attr_string("coordinate_transformation_mode", "half_pixel").value_or("") != "tf_crop_and_resize";
}

namespace {

// A linear Resize of a static [N, C, H, W] map by 2 (up) or 1/2 (down) in height and width with
// half-pixel (or, `asymmetric`, asymmetric) coordinates: the taps resize_is_bilinear2 /
// resize_is_average2 / resize_is_asymmetric_bilinear2 describe.
bool linear_by_2(const Node& n, bool up, bool asymmetric = false) {
  // rkdeploy.NpuResize: the runtime's placed form, a Resize's inputs and attributes.
  const bool resize = (n.domain.empty() && n.op_type == "Resize") || (n.domain == "rkdeploy" && n.op_type == "NpuResize");
  if (!resize || n.inputs.empty() || n.outputs.empty()) return false;
  const std::string ct = n.attr_string("coordinate_transformation_mode", "half_pixel").value_or("");
  if (n.attr_string("mode", "nearest").value_or("") != "linear" || n.attr_int("antialias", 0).value_or(1) != 0 || n.attrs.count("axes") ||
      (asymmetric ? ct != "asymmetric" : (ct != "half_pixel" && ct != "pytorch_half_pixel" && ct != "half_pixel_symmetric")))
    return false;
  const auto xs = static_shape(n.inputs[0]), ys = static_shape(n.outputs[0]);
  if (!xs || !ys || xs->size() != 4 || ys->size() != 4) return false;
  for (size_t a = 0; a < 4; ++a) {
    const int64_t f = a < 2 ? 1 : 2;
    if (up ? (*ys)[a] != f * (*xs)[a] : (*xs)[a] != f * (*ys)[a]) return false;
    if (!up && a >= 2 && (*ys)[a] < 2 && ct == "pytorch_half_pixel") return false;  // a length-1 output samples input 0
  }
  // Opset 10: X, scales; later X, roi, scales[, sizes]. Given scales are the taps' own.
  const Value* scales = n.inputs.size() == 2 ? n.inputs[1] : (n.inputs.size() > 2 ? n.inputs[2] : nullptr);
  if (scales && !scales->constant) return false;
  if (scales && scales->constant->numel() > 0) {
    if (scales->constant->numel() != 4) return false;
    for (int64_t a = 0; a < 4; ++a)
      if (scales->constant->get_as_double(a) != (a < 2 ? 1.0 : (up ? 2.0 : 0.5))) return false;
  }
  const Value* sizes = n.inputs.size() > 3 ? n.inputs[3] : nullptr;
  return !sizes || sizes->constant;
}

}  // namespace

bool resize_is_bilinear2(const Node& n) { return linear_by_2(n, true); }
bool resize_is_average2(const Node& n) { return linear_by_2(n, false); }
bool resize_is_asymmetric_bilinear2(const Node& n) { return linear_by_2(n, true, true); }

std::optional<AverageWindow> average_window(const Node& n) {
  if (!n.domain.empty() || n.inputs.empty()) return std::nullopt;
  const auto xs = ir::static_shape(n.inputs[0]);
  if (!xs || xs->size() != 4) return std::nullopt;
  AverageWindow w;
  // The whole map: one output (stride 1).
  if (n.op_type == "GlobalAveragePool") {
    w.kh = (*xs)[2];
    w.kw = (*xs)[3];
    return w;
  }
  if (n.op_type == "ReduceMean") {
    // The axes: an input from opset 18, an attribute before.
    std::vector<int64_t> axes;
    if (n.inputs.size() > 1 && n.inputs[1]) {
      if (!n.inputs[1]->constant) return std::nullopt;
      for (int64_t i = 0; i < n.inputs[1]->constant->numel(); ++i) axes.push_back(static_cast<int64_t>(n.inputs[1]->constant->get_as_double(i)));
    } else {
      auto a = n.attr_ints("axes", {});
      if (!a.ok()) return std::nullopt;
      axes = *a;
    }
    for (int64_t& a : axes) a = a < 0 ? a + 4 : a;
    std::sort(axes.begin(), axes.end());
    if (axes != std::vector<int64_t>{2, 3}) return std::nullopt;
    w.kh = (*xs)[2];
    w.kw = (*xs)[3];
    return w;
  }
  if (n.op_type != "AveragePool") return std::nullopt;
  auto k = n.attr_ints("kernel_shape", {});
  auto s = n.attr_ints("strides", {1, 1});
  auto p = n.attr_ints("pads", {0, 0, 0, 0});
  auto d = n.attr_ints("dilations", {1, 1});
  auto c = n.attr_int("ceil_mode", 0);
  auto cip = n.attr_int("count_include_pad", 0);
  auto a = n.attr_string("auto_pad", "NOTSET");
  if (!k.ok() || !s.ok() || !p.ok() || !d.ok() || !c.ok() || !cip.ok() || !a.ok()) return std::nullopt;
  if (k->size() != 2 || s->size() != 2 || p->size() != 4 || *c != 0 || *d != std::vector<int64_t>{1, 1}) return std::nullopt;
  std::vector<int64_t> pads = *p;
  if (*a != "NOTSET") {
    if (!ir::resolve_auto_pad(*a, ir::WindowGeometry{{(*xs)[2], (*xs)[3]}, *k, *s, {1, 1}, {}, false}, pads).ok()) return std::nullopt;
  }
  const bool padded = std::any_of(pads.begin(), pads.end(), [](int64_t v) { return v != 0; });
  if (padded && *cip == 0) return std::nullopt;
  for (size_t i = 0; i < 4; ++i)
    if (pads[i] < 0 || pads[i] >= (*k)[i % 2]) return std::nullopt;
  w.kh = (*k)[0];
  w.kw = (*k)[1];
  // A window as tall (wide) as the padded map has one output whatever its stride: stride 1.
  w.sh = (*xs)[2] + pads[0] + pads[2] == w.kh ? 1 : (*s)[0];
  w.sw = (*xs)[3] + pads[1] + pads[3] == w.kw ? 1 : (*s)[1];
  w.pads = pads;
  return w;
}

bool conv_transpose_is_2x2_stride2(const Node& n) {
  if (!n.domain.empty() || n.op_type != "ConvTranspose" || n.inputs.size() < 2) return false;
  const auto ws = static_shape(n.inputs[1]);
  if (!ws || ws->size() != 4 || (*ws)[2] != 2 || (*ws)[3] != 2) return false;
  auto ints = [&](const char* a, std::vector<int64_t> d) { return n.attr_ints(a, d).value_or(std::vector<int64_t>{-1}); };
  return ints("strides", {1, 1}) == std::vector<int64_t>{2, 2} && ints("pads", {0, 0, 0, 0}) == std::vector<int64_t>{0, 0, 0, 0} &&
         ints("dilations", {1, 1}) == std::vector<int64_t>{1, 1} && ints("output_padding", {0, 0}) == std::vector<int64_t>{0, 0} &&
         n.attr_int("group", 1).value_or(0) == 1 && !n.attrs.count("output_shape") && n.attr_string("auto_pad", "NOTSET").value_or("") == "NOTSET";
}

std::vector<std::string> op_types_with(uint32_t traits, std::string_view domain) {
  std::vector<std::string> v;
  for (const OpInfo& op : op_table()) {
    if (op.domain == domain && op.has(traits)) v.emplace_back(op.op_type);
  }
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace rkd::ir
