#include "runtime/npu_conv.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>

#include "ir/op_info.h"
#include "kernels/tensor_ops.h"
#include "ir/passes/shape_inference.h"
#include "npu/regcmd/regcmd.h"
#include "npu/lower/node_geometry.h"
#include "runtime/op_registry_detail.h"

namespace rkd::runtime {

namespace {

using ir::Node;
using ir::Value;
using npu::lower::ConvSpec;

const Tensor* constant_of(const Node& n, size_t i) {
  return i < n.inputs.size() && n.inputs[i] && n.inputs[i]->constant ? &*n.inputs[i]->constant : nullptr;
}

}  // namespace

namespace {

// The quantization every NPU convolution reads the same way from a QLinearConv's or
// QLinearMatMul's inputs (x 1-2, weight scale and zero point 4-5, y 6-7, int32 bias 8) and the
// fused activation's attributes (rkd_act_min / rkd_act_max).
Status read_quantization(const Node& n, ConvSpec& s) {
  const Tensor* ws = constant_of(n, 4);
  for (int64_t i = 0; i < ws->numel(); ++i) s.w_scales.push_back(static_cast<float>(ws->get_as_double(i)));
  if (const Tensor* wz = constant_of(n, 5)) {
    for (int64_t i = 0; i < wz->numel(); ++i) s.w_zero_points.push_back(static_cast<int32_t>(wz->get_as_double(i)));
  } else {
    s.w_zero_points = {0};
  }
  bool same = true;
  for (int32_t z : s.w_zero_points) same = same && z == s.w_zero_points[0];
  if (same) s.w_zero_points.resize(1);
  s.x_scale = static_cast<float>(constant_of(n, 1)->get_as_double(0));
  s.x_zero_point = static_cast<int32_t>(constant_of(n, 2)->get_as_double(0));
  s.y_scale = static_cast<float>(constant_of(n, 6)->get_as_double(0));
  s.y_zero_point = static_cast<int32_t>(constant_of(n, 7)->get_as_double(0));
  if (const Tensor* b = constant_of(n, 8)) {
    for (int64_t i = 0; i < b->numel(); ++i) s.bias.push_back(static_cast<int32_t>(b->get_as_double(i)));
  }
  const int32_t qmin = s.dtype == DType::i8 ? -128 : 0, qmax = s.dtype == DType::i8 ? 127 : 255;
  RKD_ASSIGN(int64_t amin, n.attr_int("rkd_act_min", qmin));
  RKD_ASSIGN(int64_t amax, n.attr_int("rkd_act_max", qmax));
  s.act_min = static_cast<int32_t>(std::max<int64_t>(amin, qmin));
  s.act_max = static_cast<int32_t>(std::min<int64_t>(amax, qmax));
  return {};
}

// The spec's geometry fields from the node's geometry (plan's npu_*_geometry).
ConvSpec spec_of_geometry(const npu::lower::ConvGeometry& g) {
  ConvSpec s;
  s.C = g.C;
  s.H = g.H;
  s.W = g.W;
  s.OC = g.OC;
  s.KH = g.KH;
  s.KW = g.KW;
  s.depthwise = g.groups != 1;
  s.stride_h = g.stride_h;
  s.stride_w = g.stride_w;
  s.pad_top = g.pad_top;
  s.pad_left = g.pad_left;
  s.pad_bottom = g.pad_bottom;
  s.pad_right = g.pad_right;
  return s;
}

Status constant_parameters(const Node& n) {
  for (size_t i : {1u, 2u, 4u, 6u, 7u}) {
    if (!constant_of(n, i)) return unsupported("scale or zero point " + std::to_string(i) + " is not a constant");
  }
  return {};
}

}  // namespace

bool npu_matmul_node(const Node& n) {
  return (n.op_type == "QLinearMatMul" && n.domain.empty()) || (n.op_type == "NpuMatMul" && n.domain == "rkdeploy");
}

Result<ConvSpec> npu_matmul_spec(const Node& n) {
  RKD_TRY(constant_parameters(n));
  const Tensor* b = constant_of(n, 3);
  if (!b || b->rank() != 2) return unsupported("B is not a constant 2-D tensor (a product of two activations)");
  RKD_ASSIGN(npu::lower::ConvGeometry geo, npu::lower::npu_matmul_geometry(n));
  RKD_TRY(npu::lower::conv_supported(geo, "npu lowering: "));
  ConvSpec s = spec_of_geometry(geo);
  s.dtype = b->dtype();
  if (!n.inputs[0]->dtype || *n.inputs[0]->dtype != s.dtype) return unsupported("A and B of different types");
  if (n.outputs[0]->static_numel().value_or(-1) != geo.H * geo.W * geo.OC) return unsupported("output of another size than A's rows x B's columns");
  // B [K, N] as the convolution's weights [N, K, 1, 1].
  Tensor bt = Tensor::empty(s.dtype, {s.OC, s.C});
  ops::transpose(*b, {1, 0}, bt);
  RKD_ASSIGN(s.weights, bt.reshape({s.OC, s.C, 1, 1}));
  RKD_TRY(read_quantization(n, s));
  RKD_TRY(npu::lower::check_spec(s));
  return s;
}

Result<ConvSpec> npu_conv_spec(const Node& n) {
  if (npu_matmul_node(n)) return npu_matmul_spec(n);
  const Tensor* w = constant_of(n, 3);
  RKD_TRY(constant_parameters(n));
  if (!w || w->rank() != 4) return unsupported("weights are not a constant 4-D tensor");
  // The node-level limits (batch, per-axis activations, dilation, groups) before the spec is
  // built; check_spec() reads the rest of constraints.h.
  RKD_ASSIGN(npu::lower::ConvGeometry geo, npu::lower::npu_conv_geometry(n));
  RKD_TRY(npu::lower::conv_supported(geo, "npu lowering: "));
  ConvSpec s = spec_of_geometry(geo);
  const auto ys = ir::static_shape(n.outputs[0]);
  if (s.OH() != (*ys)[2] || s.OW() != (*ys)[3]) return unsupported("output size does not follow from the padding");
  s.dtype = w->dtype();
  if (!n.inputs[0]->dtype || *n.inputs[0]->dtype != s.dtype) return unsupported("input and weights of different types");
  s.weights = w->contiguous();
  RKD_TRY(read_quantization(n, s));
  // A fused residual add (npu_placement_pass, --fuse-npu-add): inputs 9-11 are the Add's other operand
  // and its scale and zero point, 6-7 the Add's output parameters; rkd_conv_relu marks a
  // ReLU on the convolution before the add.
  RKD_ASSIGN(int64_t residual, n.attr_int("rkd_residual", 0));
  if (residual) {
    if (n.inputs.size() < 12 || !n.inputs[9] || !constant_of(n, 10) || !constant_of(n, 11)) return invalid("fused residual: inputs 9-11 missing");
    if (!n.inputs[9]->dtype || *n.inputs[9]->dtype != s.dtype) return unsupported("fused residual of another type");
    if (ir::static_shape(n.inputs[9]) != ys) return unsupported("fused residual of another shape than the output");
    RKD_ASSIGN(int64_t conv_relu, n.attr_int("rkd_conv_relu", 0));
    s.residual = true;
    s.conv_relu = conv_relu != 0;
    s.r_scale = static_cast<float>(constant_of(n, 10)->get_as_double(0));
    s.r_zero_point = static_cast<int32_t>(constant_of(n, 11)->get_as_double(0));
  }
  RKD_TRY(npu::lower::check_spec(s));
  return s;
}

Status npu_try_lower(const ConvSpec& spec, npu::lower::Strategy strategy) {
  npu::DeviceMemory mem;
  Tensor zero = Tensor::empty(spec.dtype, {1, spec.C, spec.H, spec.W});
  std::memset(zero.raw(), 0, zero.nbytes());
  RKD_ASSIGN(uint32_t in, npu::lower::place_input(mem, spec, zero));
  RKD_ASSIGN(npu::lower::Lowered l, npu::lower::lower_conv(spec, strategy, mem, in));
  RKD_ASSIGN(auto placed, npu::lower::place_regcmd(mem, l));
  (void)placed;
  return {};
}

namespace {

// The operands of an rkdeploy.QLinearAdd / QLinearMul (com.microsoft's inputs: A, A_scale,
// A_zp, B, B_scale, B_zp, C_scale, C_zp) as the NPU's element-wise task reads them: A a static
// [N, C, H, W] map of the output's shape, the parameters per-tensor constants, the NPU's
// arithmetic (rknpu_out_cvt); `g` the geometry but the operation's own fields.
struct BinaryOperands {
  npu::lower::MapShape map;
  quant::QBinaryParams q;
  Shape a, b;
  npu::lower::EltwiseGeometry g;
  // The spec's geometry with the node's own fields (batch, broadcast, per-axis parameters).
  npu::lower::EltwiseGeometry node_fields(npu::lower::EltwiseGeometry s) const {
    s.batch = g.batch;
    s.broadcast = g.broadcast;
    s.per_channel_operand = g.per_channel_operand;
    s.per_axis_quantization = g.per_axis_quantization;
    return s;
  }
  // B as the EW stage reads it: per element, or (broadcast one value per channel) per channel.
  npu::lower::BOperand b_operand() const {
    if (!g.broadcast || !g.per_channel_operand) return npu::lower::BOperand::map;
    int64_t nb = 1;
    for (int64_t d : b) nb *= d;
    return nb == 1 ? npu::lower::BOperand::scalar : npu::lower::BOperand::per_channel;
  }
};
Result<BinaryOperands> binary_operands(const Node& n) {
  if (n.inputs.size() < 8) return invalid(n.describe() + ": " + n.op_type + " needs 8 inputs");
  for (size_t i : {1u, 2u, 4u, 5u, 6u, 7u}) {
    if (!constant_of(n, i)) return unsupported("scale or zero point " + std::to_string(i) + " is not a constant");
  }
  const auto as = ir::static_shape(n.inputs[0]), bs = ir::static_shape(n.inputs[3]), ys = ir::static_shape(n.outputs[0]);
  const auto view = as ? npu::lower::npu_map_view(*as) : std::nullopt;
  if (!as || !bs || !ys || !view || *ys != *as) return unsupported("operands are not static maps or rows of the output's shape");
  if (!n.inputs[0]->dtype || !n.inputs[3]->dtype || *n.inputs[0]->dtype != *n.inputs[3]->dtype) return unsupported("operands of different types");
  BinaryOperands r;
  r.a = *as;
  r.b = *bs;
  r.map.dtype = *n.inputs[0]->dtype;
  r.map.C = view->C;
  r.map.H = view->H;
  r.map.W = view->W;
  quant::QBinaryParams& q = r.q;
  q.a_scale = static_cast<float>(constant_of(n, 1)->get_as_double(0));
  q.a_zero_point = static_cast<int32_t>(constant_of(n, 2)->get_as_double(0));
  q.b_scale = static_cast<float>(constant_of(n, 4)->get_as_double(0));
  q.b_zero_point = static_cast<int32_t>(constant_of(n, 5)->get_as_double(0));
  q.out_scale = static_cast<float>(constant_of(n, 6)->get_as_double(0));
  q.out_zero_point = static_cast<int32_t>(constant_of(n, 7)->get_as_double(0));
  q.act_min = npu::lower::qmin_of(r.map.dtype);
  q.act_max = npu::lower::qmax_of(r.map.dtype);
  q.convention = quant::Requant::rknpu_out_cvt;
  RKD_ASSIGN(r.g, npu::lower::npu_binary_geometry(n));
  return r;
}

}  // namespace

std::optional<quant::BinaryAlu> binary_alu_of(const Node& n) {
  if (n.domain != "rkdeploy") return std::nullopt;
  for (quant::BinaryAlu a : {quant::BinaryAlu::add, quant::BinaryAlu::sub, quant::BinaryAlu::max, quant::BinaryAlu::min}) {
    const std::string op = quant::to_string(a);
    if (n.op_type == "QLinear" + op || n.op_type == "Npu" + op) return a;
  }
  return std::nullopt;
}

Result<npu::lower::AddSpec> npu_add_spec(const Node& n) {
  RKD_ASSIGN(BinaryOperands o, binary_operands(n));
  npu::lower::AddSpec s;
  static_cast<npu::lower::MapShape&>(s) = o.map;
  s.q = o.q;
  s.alu = binary_alu_of(n).value_or(quant::BinaryAlu::add);
  s.b = o.b_operand();
  RKD_TRY(npu::lower::eltwise_supported(o.node_fields(npu::lower::geometry_of(s)), std::string("npu ") + quant::to_string(s.alu) + ": "));
  RKD_TRY(npu::lower::check_add(s));
  return s;
}

Result<npu::lower::MulSpec> npu_mul_spec(const Node& n) {
  RKD_ASSIGN(BinaryOperands o, binary_operands(n));
  npu::lower::MulSpec s;
  static_cast<npu::lower::MapShape&>(s) = o.map;
  s.q = o.q;
  s.b = o.b_operand();
  RKD_TRY(npu::lower::eltwise_supported(o.node_fields(npu::lower::geometry_of(s)), "npu Mul: "));
  RKD_TRY(npu::lower::check_mul(s));
  return s;
}

Result<npu::lower::LeakyReluSpec> npu_leaky_relu_spec(const Node& n) {
  RKD_ASSIGN(std::string op, n.attr_string("rkd_op", ""));
  if (op != "LeakyRelu") return unsupported("not a LeakyRelu table (other tables go through the DPU's LUT: npu_lut_spec)");
  const auto xs = ir::static_shape(n.inputs[0]), ys = ir::static_shape(n.outputs[0]);
  const auto view = xs ? npu::lower::npu_map_view(*xs) : std::nullopt;
  if (!xs || !ys || !view || *xs != *ys) return unsupported("input is not a static map or rows of the output's shape");
  if (!n.inputs[0]->dtype || !n.outputs[0]->dtype || *n.inputs[0]->dtype != *n.outputs[0]->dtype)
    return unsupported("input and output of different types");
  npu::lower::LeakyReluSpec s;
  s.dtype = *n.inputs[0]->dtype;
  s.C = view->C;
  s.H = view->H;
  s.W = view->W;
  RKD_ASSIGN(float alpha, n.attr_float("rkd_alpha", 0.01f));
  RKD_ASSIGN(float xsc, n.attr_float("rkd_x_scale", 0.f));
  RKD_ASSIGN(float ysc, n.attr_float("rkd_y_scale", 0.f));
  RKD_ASSIGN(int64_t xz, n.attr_int("rkd_x_zero_point", 0));
  RKD_ASSIGN(int64_t yz, n.attr_int("rkd_y_zero_point", 0));
  s.alpha = alpha;
  s.x_scale = xsc;
  s.y_scale = ysc;
  s.x_zero_point = static_cast<int32_t>(xz);
  s.y_zero_point = static_cast<int32_t>(yz);
  npu::lower::EltwiseGeometry g = npu::lower::geometry_of(s);
  g.batch = view->batch;
  RKD_TRY(npu::lower::eltwise_supported(g, "npu LeakyRelu: "));
  RKD_TRY(npu::lower::check_leaky_relu(s));
  return s;
}

Result<int> npu_leaky_relu_table_differences(const Node& n) {
  RKD_ASSIGN(npu::lower::LeakyReluSpec s, npu_leaky_relu_spec(n));
  if (n.inputs.size() < 2 || !n.inputs[1] || !n.inputs[1]->constant) return invalid(n.describe() + ": table missing");
  RKD_ASSIGN(Tensor npu, quant::rknpu_leaky_relu_table(s.dtype, s.x_scale, s.x_zero_point, s.y_scale, s.y_zero_point, s.alpha));
  const Tensor& t = *n.inputs[1]->constant;
  int d = 0;
  for (int64_t i = 0; i < 256; ++i) d += t.get_as_double(i) != npu.get_as_double(i);
  return d;
}

Result<npu::lower::LutSpec> npu_lut_spec(const Node& n) {
  const bool lut = n.domain == "rkdeploy" && (n.op_type == "QLinearLut" || n.op_type == "NpuLut");
  if (!lut || n.inputs.size() < 2 || n.outputs.empty()) return invalid(n.describe() + ": not a QLinearLut");
  const auto xs = ir::static_shape(n.inputs[0]), ys = ir::static_shape(n.outputs[0]);
  const auto view = xs ? npu::lower::npu_map_view(*xs) : std::nullopt;
  if (!xs || !ys || !view || *xs != *ys) return unsupported("input is not a static map or rows of the output's shape");
  if (!n.inputs[0]->dtype || !n.outputs[0]->dtype || *n.inputs[0]->dtype != *n.outputs[0]->dtype)
    return unsupported("input and output of different types");
  if (!n.inputs[1] || !n.inputs[1]->constant || n.inputs[1]->constant->numel() != 256)
    return invalid(n.describe() + ": the table is not a constant of 256 entries");
  const Tensor* table = &*n.inputs[1]->constant;
  npu::lower::LutSpec s;
  s.dtype = *n.inputs[0]->dtype;
  s.C = view->C;
  s.H = view->H;
  s.W = view->W;
  for (int64_t i = 0; i < 256; ++i) s.table.push_back(static_cast<int32_t>(table->get_as_double(i)));
  npu::lower::EltwiseGeometry g = npu::lower::geometry_of(s);
  g.batch = view->batch;
  RKD_TRY(npu::lower::eltwise_supported(g, "npu Lut: "));
  RKD_TRY(npu::lower::check_lut(s));
  return s;
}

bool npu_max_pool_candidate(const Node& n) {
  if (!((n.op_type == "MaxPool" && n.domain.empty()) || (n.op_type == "NpuMaxPool" && n.domain == "rkdeploy"))) return false;
  if (n.inputs.empty() || !n.inputs[0] || !n.inputs[0]->dtype) return false;
  return *n.inputs[0]->dtype == DType::i8 || *n.inputs[0]->dtype == DType::u8;
}

Result<npu::lower::MaxPoolSpec> npu_max_pool_spec(const Node& n) {
  if (!npu_max_pool_candidate(n) || n.outputs.empty() || !n.outputs[0]) return invalid(n.describe() + ": not a MaxPool of 8-bit integers");
  const auto xs = ir::static_shape(n.inputs[0]), ys = ir::static_shape(n.outputs[0]);
  if (!xs || !ys || xs->size() != 4 || ys->size() != 4) return unsupported("input is not a static [N, C, H, W] map");
  RKD_ASSIGN(npu::lower::PoolGeometry g, npu::lower::npu_pool_geometry(n));
  RKD_TRY(npu::lower::pool_supported(g, "npu MaxPool: "));
  npu::lower::MaxPoolSpec s;
  static_cast<npu::lower::MapShape&>(s) = npu::lower::MapShape{g.dtype, g.C, g.H, g.W};
  s.kernel_h = g.KH;
  s.kernel_w = g.KW;
  s.stride_h = g.stride_h;
  s.stride_w = g.stride_w;
  s.pad_top = g.pad_top;
  s.pad_left = g.pad_left;
  s.pad_bottom = g.pad_bottom;
  s.pad_right = g.pad_right;
  RKD_TRY(npu::lower::check_max_pool(s));
  const npu::lower::MapShape o = s.output();
  if ((*ys)[1] != g.C || o.H != g.OH || o.W != g.OW) return invalid(n.describe() + ": the output's shape is not the pooled map's");
  return s;
}

bool npu_channel_pad_candidate(const Node& n) {
  if (!((n.op_type == "Pad" && n.domain.empty()) || (n.op_type == "NpuPad" && n.domain == "rkdeploy"))) return false;
  if (n.inputs.empty() || !n.inputs[0] || !n.inputs[0]->dtype) return false;
  return *n.inputs[0]->dtype == DType::i8 || *n.inputs[0]->dtype == DType::u8;
}

Result<npu::lower::ChannelPadSpec> npu_channel_pad_spec(const Node& n) {
  if (!npu_channel_pad_candidate(n) || n.outputs.empty() || !n.outputs[0]) return invalid(n.describe() + ": not a Pad of 8-bit integers");
  const auto xs = ir::static_shape(n.inputs[0]), ys = ir::static_shape(n.outputs[0]);
  if (!xs || !ys || xs->size() != 4) return unsupported("input is not a static [N, C, H, W] map");
  RKD_ASSIGN(std::string mode, n.attr_string("mode", "constant"));
  if (mode != "constant") return unsupported("mode " + mode + " (only constant padding is lowered)");
  if (n.inputs.size() < 2 || !n.inputs[1] || !n.inputs[1]->constant || n.inputs[1]->constant->numel() != 8)
    return unsupported("pads are not a constant of 8 values");
  if (n.inputs.size() > 3 && n.inputs[3]) return unsupported("an axes input");
  const Tensor& pads = *n.inputs[1]->constant;
  for (int64_t i = 0; i < 8; ++i) {
    if (i != 5 && pads.get_as_double(i) != 0)
      return unsupported(
          "padding other than at the channels' end (spatial padding before a convolution folds into it; other padding is not "
          "lowered)");
  }
  if (pads.get_as_double(5) < 1) return unsupported("no channels added at the end (a Pad that removes or adds none is not lowered)");
  int32_t value = 0;
  if (n.inputs.size() > 2 && n.inputs[2]) {
    if (!n.inputs[2]->constant || n.inputs[2]->constant->numel() != 1) return unsupported("the value is not a constant scalar");
    value = static_cast<int32_t>(n.inputs[2]->constant->get_as_double(0));
  }
  npu::lower::ChannelPadSpec s;
  static_cast<npu::lower::MapShape&>(s) = npu::lower::MapShape{*n.inputs[0]->dtype, (*xs)[1], (*xs)[2], (*xs)[3]};
  s.pad_end = static_cast<int64_t>(pads.get_as_double(5));
  s.value = value;
  npu::lower::EltwiseGeometry g = npu::lower::geometry_of(s);
  g.batch = (*xs)[0];
  RKD_TRY(npu::lower::eltwise_supported(g, "npu channel Pad: "));
  RKD_TRY(npu::lower::check_channel_pad(s));
  const npu::lower::MapShape o = s.output();
  if (*ys != Shape{(*xs)[0], o.C, o.H, o.W}) return invalid(n.describe() + ": the output's shape is not the padded map's");
  return s;
}

bool npu_upsample2_candidate(const Node& n) {
  const bool resize = (n.op_type == "Resize" && n.domain.empty()) || (n.op_type == "NpuResize" && n.domain == "rkdeploy");
  if (!resize || n.inputs.empty() || !n.inputs[0] || !n.inputs[0]->dtype) return false;
  if (n.attr_string("mode", "nearest").value_or("") != "nearest") return false;
  return *n.inputs[0]->dtype == DType::i8 || *n.inputs[0]->dtype == DType::u8;
}

Result<npu::lower::Upsample2Spec> npu_upsample2_spec(const Node& n) {
  if (!npu_upsample2_candidate(n) || n.outputs.empty() || !n.outputs[0]) return invalid(n.describe() + ": not a nearest Resize of 8-bit integers");
  const auto xs = ir::static_shape(n.inputs[0]), ys0 = ir::static_shape(n.outputs[0]);
  if (!xs || !ys0 || xs->size() != 4 || ys0->size() != 4) return unsupported("input is not a static [N, C, H, W] map");
  // rkd_edge_pad: the placement's merge of the Pad edge by 1 that reads it (the output 2 cells larger).
  const bool edge = n.attr_int("rkd_edge_pad", 0).value_or(0) != 0;
  Shape ys_v = *ys0;
  if (edge) {
    ys_v[2] -= 2;
    ys_v[3] -= 2;
  }
  const std::optional<Shape> ys = ys_v;
  if ((*ys)[0] != (*xs)[0] || (*ys)[1] != (*xs)[1] || (*ys)[2] != 2 * (*xs)[2] || (*ys)[3] != 2 * (*xs)[3])
    return unsupported("not x2 in height and width (nearest x2 is lowered)");
  RKD_ASSIGN(ops::ResizeParams p, detail::resize_attrs(n));
  if (p.coordinate_transformation == "tf_crop_and_resize") return unsupported("coordinate_transformation_mode tf_crop_and_resize");
  // Opset 10's inputs are X, scales; later X, roi, scales[, sizes].
  const size_t scales_at = n.inputs.size() == 2 ? 1 : 2;
  const Value* scales = n.inputs.size() > scales_at ? n.inputs[scales_at] : nullptr;
  const Value* sizes = n.inputs.size() > 3 ? n.inputs[3] : nullptr;
  if ((scales && !scales->constant) || (sizes && !sizes->constant)) return unsupported("scales or sizes computed at run time");
  detail::resize_scales(p, *xs, *ys, scales ? &*scales->constant : nullptr, sizes ? &*sizes->constant : nullptr);
  for (size_t axis : {size_t{2}, size_t{3}}) {
    const std::vector<int64_t> src = ops::resize_nearest_sources(p, axis, (*xs)[axis], (*ys)[axis]);
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i] != static_cast<int64_t>(i / 2))
        return unsupported("output index " + std::to_string(i) + " along axis " + std::to_string(axis) + " copies input " + std::to_string(src[i]) +
                           ", not " + std::to_string(i / 2) + " (coordinate_transformation_mode " + p.coordinate_transformation + ", nearest_mode " +
                           p.nearest_mode + ": not a repetition of each cell)");
    }
  }
  npu::lower::Upsample2Spec s;
  static_cast<npu::lower::MapShape&>(s) = npu::lower::MapShape{*n.inputs[0]->dtype, (*xs)[1], (*xs)[2], (*xs)[3]};
  s.edge = edge;
  npu::lower::EltwiseGeometry g = npu::lower::geometry_of(s);
  g.batch = (*xs)[0];
  RKD_TRY(npu::lower::eltwise_supported(g, "npu Upsample2: "));
  RKD_TRY(npu::lower::check_upsample2(s));
  return s;
}

bool npu_depth_to_space_candidate(const Node& n) {
  const bool d2s = (n.op_type == "DepthToSpace" && n.domain.empty()) || (n.op_type == "NpuDepthToSpace" && n.domain == "rkdeploy");
  if (!d2s || n.inputs.empty() || !n.inputs[0] || !n.inputs[0]->dtype) return false;
  return *n.inputs[0]->dtype == DType::i8 || *n.inputs[0]->dtype == DType::u8;
}

Result<npu::lower::DepthToSpace2Spec> npu_depth_to_space_spec(const Node& n) {
  if (!npu_depth_to_space_candidate(n) || n.outputs.empty() || !n.outputs[0]) return invalid(n.describe() + ": not a DepthToSpace of 8-bit integers");
  const auto xs = ir::static_shape(n.inputs[0]), ys = ir::static_shape(n.outputs[0]);
  if (!xs || !ys || xs->size() != 4 || ys->size() != 4) return unsupported("input is not a static [N, C, H, W] map");
  RKD_ASSIGN(int64_t b, n.attr_int("blocksize", 0));
  RKD_ASSIGN(std::string mode, n.attr_string("mode", "DCR"));
  if (b != 2) return unsupported("blocksize " + std::to_string(b) + " (2 is lowered)");
  if (mode != "DCR") return unsupported("mode " + mode + " (DCR is lowered)");
  npu::lower::DepthToSpace2Spec s;
  static_cast<npu::lower::MapShape&>(s) = npu::lower::MapShape{*n.inputs[0]->dtype, (*xs)[1], (*xs)[2], (*xs)[3]};
  npu::lower::EltwiseGeometry g = npu::lower::geometry_of(s);
  g.batch = (*xs)[0];
  RKD_TRY(npu::lower::eltwise_supported(g, "npu DepthToSpace: "));
  RKD_TRY(npu::lower::check_depth_to_space2(s));
  const npu::lower::MapShape o = s.output();
  if (*ys != Shape{(*xs)[0], o.C, o.H, o.W}) return invalid(n.describe() + ": the output's shape is not DepthToSpace's");
  return s;
}

Result<npu::lower::ConcatSpec> npu_concat_spec(const Node& n) {
  const bool concat = (n.op_type == "Concat" && n.domain.empty()) || (n.op_type == "NpuConcat" && n.domain == "rkdeploy");
  if (!concat || n.inputs.empty() || n.outputs.empty()) return invalid(n.describe() + ": not a Concat");
  const auto ys = ir::static_shape(n.outputs[0]);
  if (!ys || ys->size() != 4) return unsupported("output is not a static [N, C, H, W] map");
  RKD_ASSIGN(int64_t axis, n.attr_int("axis", 0));
  if (axis != 1 && axis != -3) return unsupported("axis " + std::to_string(axis) + " (the NPU concatenates channels only)");
  npu::lower::ConcatSpec s;
  if (!n.inputs[0] || !n.inputs[0]->dtype) return unsupported("an input without a type");
  s.dtype = *n.inputs[0]->dtype;
  s.H = (*ys)[2];
  s.W = (*ys)[3];
  for (const Value* in : n.inputs) {
    const auto xs = ir::static_shape(in);
    if (!in || in->constant) return unsupported("a constant part");
    if (!xs || xs->size() != 4 || (*xs)[0] != (*ys)[0] || (*xs)[2] != s.H || (*xs)[3] != s.W)
      return unsupported("a part is not a static map of the output's N, H, W");
    if (!in->dtype || *in->dtype != s.dtype) return unsupported("parts of different types");
    s.parts.push_back((*xs)[1]);
    s.C += (*xs)[1];
  }
  npu::lower::EltwiseGeometry g = npu::lower::geometry_of(s);
  g.batch = (*ys)[0];
  RKD_TRY(npu::lower::eltwise_supported(g, "npu Concat: "));
  RKD_TRY(npu::lower::check_concat(s));
  return s;
}

namespace {

// A plain ONNX `op` whose first input is int8/uint8.
bool integer_onnx_op(const Node& n, const char* op) {
  if (n.op_type != op || !n.domain.empty() || n.inputs.empty() || !n.inputs[0] || !n.inputs[0]->dtype) return false;
  return *n.inputs[0]->dtype == DType::i8 || *n.inputs[0]->dtype == DType::u8;
}

}  // namespace

bool npu_concat_candidate(const Node& n) { return integer_onnx_op(n, "Concat"); }

Result<npu::lower::SplitSpec> npu_split_spec(const Node& n) {
  const bool split = (n.op_type == "Split" && n.domain.empty()) || (n.op_type == "NpuSplit" && n.domain == "rkdeploy");
  if (!split || n.inputs.empty() || n.outputs.empty()) return invalid(n.describe() + ": not a Split");
  const auto xs = ir::static_shape(n.inputs[0]);
  if (!xs || xs->size() != 4) return unsupported("input is not a static [N, C, H, W] map");
  RKD_ASSIGN(int64_t axis, n.attr_int("axis", 0));
  if (axis != 1 && axis != -3) return unsupported("axis " + std::to_string(axis) + " (the NPU splits channels only)");
  npu::lower::SplitSpec s;
  if (!n.inputs[0]->dtype) return unsupported("an input without a type");
  s.dtype = *n.inputs[0]->dtype;
  s.C = (*xs)[1];
  s.H = (*xs)[2];
  s.W = (*xs)[3];
  for (const Value* out : n.outputs) {
    const auto ys = out ? ir::static_shape(out) : std::nullopt;
    if (!ys || ys->size() != 4 || (*ys)[0] != (*xs)[0] || (*ys)[2] != s.H || (*ys)[3] != s.W)
      return unsupported("a part is not a static map of the input's N, H, W");
    s.parts.push_back((*ys)[1]);
  }
  npu::lower::EltwiseGeometry g = npu::lower::geometry_of(s);
  g.batch = (*xs)[0];
  RKD_TRY(npu::lower::eltwise_supported(g, "npu Split: "));
  RKD_TRY(npu::lower::check_split(s));
  return s;
}

bool npu_split_candidate(const Node& n) { return integer_onnx_op(n, "Split"); }

}  // namespace rkd::runtime
