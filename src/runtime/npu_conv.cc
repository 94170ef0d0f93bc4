#include "runtime/npu_conv.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>

#include "ir/op_info.h"
#include "ir/passes/shape_inference.h"
#include "npu/regcmd/regcmd.h"
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

Result<ConvSpec> npu_conv_spec(const Node& n) {
  const auto xs = ir::static_shape(n.inputs[0]);
  const auto ys = ir::static_shape(n.outputs[0]);
  const Tensor* w = constant_of(n, 3);
  for (size_t i : {1u, 2u, 4u, 6u, 7u}) {
    if (!constant_of(n, i)) return unsupported("scale or zero point " + std::to_string(i) + " is not a constant");
  }
  if (!xs || !ys || xs->size() != 4 || ys->size() != 4) return unsupported("input or output is not a static [N, C, H, W]");
  if (!w || w->rank() != 4) return unsupported("weights are not a constant 4-D tensor");
  RKD_ASSIGN(auto dil, n.attr_ints("dilations", {1, 1}));
  RKD_ASSIGN(int64_t group, n.attr_int("group", 1));
  ConvSpec s;
  s.C = (*xs)[1];
  s.H = (*xs)[2];
  s.W = (*xs)[3];
  s.OC = w->dim(0);
  s.KH = w->dim(2);
  s.KW = w->dim(3);
  // The node-level limits (batch, per-axis activations, dilation, groups) before the spec is
  // built; check_spec() reads the rest of constraints.h.
  npu::lower::ConvGeometry geo;
  geo.dtype = w->dtype();
  geo.batch = (*xs)[0];
  geo.C = s.C;
  geo.H = s.H;
  geo.W = s.W;
  geo.OC = s.OC;
  geo.KH = s.KH;
  geo.KW = s.KW;
  geo.per_axis_activations = constant_of(n, 1)->numel() != 1 || constant_of(n, 6)->numel() != 1;
  if (dil.size() != 2) return unsupported("dilations of another rank");
  geo.dilation_h = dil[0];
  geo.dilation_w = dil[1];
  geo.groups = group;
  RKD_TRY(npu::lower::conv_supported(geo, "npu lowering: "));
  s.depthwise = group != 1;
  RKD_ASSIGN(auto strides, n.attr_ints("strides", {1, 1}));
  s.stride_h = strides.at(0);
  s.stride_w = strides.at(1);
  RKD_ASSIGN(std::string auto_pad, n.attr_string("auto_pad", "NOTSET"));
  const int64_t OH = (*ys)[2], OW = (*ys)[3];
  RKD_ASSIGN(auto pads, n.attr_ints("pads", {0, 0, 0, 0}));
  if (pads.size() != 4 || strides.size() != 2) return unsupported("pads or strides of another rank");
  RKD_TRY(ir::resolve_auto_pad(auto_pad, ir::WindowGeometry{{s.H, s.W}, {s.KH, s.KW}, strides, dil, {}, false}, pads));
  s.pad_top = pads[0];
  s.pad_left = pads[1];
  s.pad_bottom = pads[2];
  s.pad_right = pads[3];
  if (s.OH() != OH || s.OW() != OW) return unsupported("output size does not follow from the padding");
  s.dtype = w->dtype();
  if (!n.inputs[0]->dtype || *n.inputs[0]->dtype != s.dtype) return unsupported("input and weights of different types");
  s.weights = w->contiguous();
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
  // A fused residual add (npu_sim_placement_pass): inputs 9-11 are the Add's other operand
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

// QLinearConv -> QLinearAdd (rkdeploy's, from qdq-to-qlinear) where the convolution's output
// is read by the Add alone: one QLinearConv with the residual fused (npu_conv_spec's inputs
// 9-11), when the lowering can express it. Returns the fused node or nullptr.
Node* fuse_residual_add(ir::Graph& g, Node* n) {
  Value* y = n->outputs[0];
  if (!y || y->consumers.size() != 1 || std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end()) return nullptr;
  Node* a = y->consumers[0];
  if (a->op_type != "QLinearAdd" || a->domain != "rkdeploy" || a->inputs.size() < 8) return nullptr;
  const size_t other = a->inputs[0] == y ? 3 : a->inputs[3] == y ? 0 : 99;
  if (other == 99 || a->inputs[other] == y || !a->inputs[other] || a->inputs[other]->constant) return nullptr;
  for (size_t i : {1u, 2u, 4u, 5u, 6u, 7u}) {
    if (!a->inputs[i] || !a->inputs[i]->constant || a->inputs[i]->constant->numel() != 1) return nullptr;
  }
  auto conv = npu_conv_spec(*n);
  if (!conv.ok()) return nullptr;
  const int32_t qmin = conv->dtype == DType::i8 ? -128 : 0, qmax = conv->dtype == DType::i8 ? 127 : 255;
  // The convolution's own activation: none, or a ReLU (its lower bound at its zero point).
  if (conv->act_max != qmax || (conv->act_min != qmin && conv->act_min != conv->y_zero_point)) return nullptr;
  // The Add's operands as its inputs 0-2 (a) and 3-5 (b): the convolution's scale must be
  // the one the Add reads it with.
  const size_t mine = other == 3 ? 0 : 3;
  if (a->inputs[mine + 1]->constant->get_as_double(0) != static_cast<double>(conv->y_scale) ||
      a->inputs[mine + 2]->constant->get_as_double(0) != static_cast<double>(conv->y_zero_point)) {
    return nullptr;
  }
  std::vector<Value*> ins(n->inputs.begin(), n->inputs.end());
  ins.resize(12, nullptr);
  ins[6] = a->inputs[6];
  ins[7] = a->inputs[7];
  ins[9] = a->inputs[other];
  ins[10] = a->inputs[other + 1];
  ins[11] = a->inputs[other + 2];
  const std::string out = g.fresh_name(y->name + "/npu_add");
  auto f = g.add_node(n->name + "/with_add", "QLinearConv", "", ins, {out});
  if (!f.ok()) return nullptr;
  Node* fused = *f;
  fused->attrs = n->attrs;
  fused->attrs["rkd_residual"] = int64_t{1};
  fused->attrs["rkd_conv_relu"] = int64_t{conv->act_min != qmin ? 1 : 0};
  fused->attrs["rkd_act_min"] = int64_t{qmin};
  fused->attrs["rkd_act_max"] = int64_t{qmax};
  fused->outputs[0]->dtype = a->outputs[0]->dtype;
  fused->outputs[0]->shape = a->outputs[0]->shape;
  // Only if the lowering accepts it (e.g. the EW converter's range): otherwise undo.
  if (!npu_conv_spec(*fused).ok()) {
    g.remove_nodes([fused](const Node& x) { return &x == fused; });
    return nullptr;
  }
  g.move_output(a, 0, fused, 0);
  g.remove_nodes([n, a](const Node& x) { return &x == n || &x == a; });
  return fused;
}

}  // namespace

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
  if (!as || !bs || !ys || as->size() != 4 || *ys != *as) return unsupported("operands are not static [N, C, H, W] maps of the output's shape");
  if (!n.inputs[0]->dtype || !n.inputs[3]->dtype || *n.inputs[0]->dtype != *n.inputs[3]->dtype) return unsupported("operands of different types");
  BinaryOperands r;
  r.a = *as;
  r.b = *bs;
  r.map.dtype = *n.inputs[0]->dtype;
  r.map.C = (*as)[1];
  r.map.H = (*as)[2];
  r.map.W = (*as)[3];
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
  r.g.batch = (*as)[0];
  r.g.broadcast = *bs != *as;
  r.g.per_channel_operand = npu::lower::per_channel_operand(*as, *bs);
  for (size_t i : {1u, 2u, 4u, 5u, 6u, 7u}) r.g.per_axis_quantization = r.g.per_axis_quantization || constant_of(n, i)->numel() != 1;
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
  if (!xs || !ys || xs->size() != 4 || *xs != *ys) return unsupported("input is not a static [N, C, H, W] map of the output's shape");
  if (!n.inputs[0]->dtype || !n.outputs[0]->dtype || *n.inputs[0]->dtype != *n.outputs[0]->dtype)
    return unsupported("input and output of different types");
  npu::lower::LeakyReluSpec s;
  s.dtype = *n.inputs[0]->dtype;
  s.C = (*xs)[1];
  s.H = (*xs)[2];
  s.W = (*xs)[3];
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
  g.batch = (*xs)[0];
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
  if (!xs || !ys || xs->size() != 4 || *xs != *ys) return unsupported("input is not a static [N, C, H, W] map of the output's shape");
  if (!n.inputs[0]->dtype || !n.outputs[0]->dtype || *n.inputs[0]->dtype != *n.outputs[0]->dtype)
    return unsupported("input and output of different types");
  if (!n.inputs[1] || !n.inputs[1]->constant || n.inputs[1]->constant->numel() != 256)
    return invalid(n.describe() + ": the table is not a constant of 256 entries");
  const Tensor* table = &*n.inputs[1]->constant;
  npu::lower::LutSpec s;
  s.dtype = *n.inputs[0]->dtype;
  s.C = (*xs)[1];
  s.H = (*xs)[2];
  s.W = (*xs)[3];
  for (int64_t i = 0; i < 256; ++i) s.table.push_back(static_cast<int32_t>(table->get_as_double(i)));
  npu::lower::EltwiseGeometry g = npu::lower::geometry_of(s);
  g.batch = (*xs)[0];
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
  RKD_ASSIGN(ops::PoolParams p, detail::pool_params(n, *xs));
  RKD_ASSIGN(int64_t ceil_mode, n.attr_int("ceil_mode", 0));
  npu::lower::PoolGeometry g;
  g.dtype = *n.inputs[0]->dtype;
  g.batch = (*xs)[0];
  g.C = (*xs)[1];
  g.H = (*xs)[2];
  g.W = (*xs)[3];
  g.OH = (*ys)[2];
  g.OW = (*ys)[3];
  g.KH = p.kernel[0];
  g.KW = p.kernel[1];
  g.stride_h = p.strides[0];
  g.stride_w = p.strides[1];
  g.pad_top = p.pads[0];
  g.pad_left = p.pads[1];
  g.pad_bottom = p.pads[2];
  g.pad_right = p.pads[3];
  g.dilation_h = p.dilations[0];
  g.dilation_w = p.dilations[1];
  g.ceil_mode = ceil_mode != 0;
  g.indices = n.outputs.size() > 1 && n.outputs[1];
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

namespace {

// Whether a node placed on the NPU produces one of n's inputs or reads one of its outputs,
// looking through the Identities a dropped DequantizeLinear -> QuantizeLinear pair leaves.
bool next_to_npu_node(const Node& n) {
  auto on_npu = [](const Node* m) { return m && ir::op_has(*m, ir::kOnNpu); };
  for (const Value* v : n.inputs) {
    const Node* p = v ? v->producer : nullptr;
    while (p && p->op_type == "Identity" && p->domain.empty() && !p->inputs.empty() && p->inputs[0]) p = p->inputs[0]->producer;
    if (on_npu(p)) return true;
  }
  std::vector<const Value*> todo(n.outputs.begin(), n.outputs.end());
  while (!todo.empty()) {
    const Value* v = todo.back();
    todo.pop_back();
    if (!v) continue;
    for (const Node* r : v->consumers) {
      if (on_npu(r)) return true;
      if (r->op_type == "Identity" && r->domain.empty()) {
        for (const Value* o : r->outputs) todo.push_back(o);
      }
    }
  }
  return false;
}

// The Pad (mode edge, by 1 cell on each side of height and width, nothing else) that is the
// only reader of n's output, or nullptr.
Node* edge_pad_reader(const ir::Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || !n.outputs[0] || n.outputs[0]->consumers.size() != 1) return nullptr;
  if (std::find(g.outputs.begin(), g.outputs.end(), n.outputs[0]) != g.outputs.end()) return nullptr;
  Node* p = n.outputs[0]->consumers[0];
  if (p->op_type != "Pad" || !p->domain.empty() || p->inputs.size() < 2 || p->inputs[0] != n.outputs[0] || !p->inputs[1] || !p->inputs[1]->constant)
    return nullptr;
  if (p->attr_string("mode", "constant").value_or("") != "edge" || (p->inputs.size() > 3 && p->inputs[3])) return nullptr;
  const Tensor& pads = *p->inputs[1]->constant;
  const int64_t want[8] = {0, 0, 1, 1, 0, 0, 1, 1};
  if (pads.numel() != 8) return nullptr;
  for (int64_t i = 0; i < 8; ++i)
    if (pads.get_as_double(i) != static_cast<double>(want[i])) return nullptr;
  return p;
}

}  // namespace

ir::Pass npu_sim_placement_pass(const std::string& strategy, const std::vector<std::string>& knobs, bool fuse_add, FusionReport* report,
                                bool ppu_only_tasks) {
  std::string joined;
  for (const std::string& k : knobs) joined += (joined.empty() ? "" : ";") + k;
  return ir::Pass{"npu-sim-placement", [strategy, joined, fuse_add, report, ppu_only_tasks](ir::Graph& g) -> Status {
                    RKD_ASSIGN(npu::lower::Strategy st, npu::lower::parse_strategy(strategy));
                    std::vector<Node*> convs;
                    for (const auto& np : g.nodes()) {
                      if (np->op_type == "QLinearConv" && np->domain.empty()) convs.push_back(np.get());
                    }
                    bool fused_any = false;
                    for (Node* n : convs) {
                      auto spec = npu_conv_spec(*n);
                      Status lowerable = spec.ok() ? npu_try_lower(*spec, st) : Status(spec.error());
                      if (!lowerable.ok()) {
                        if (report) report->npu_cpu_convs.push_back(n->name + ": " + lowerable.error().message);
                        continue;
                      }
                      if (Node* f = fuse_add ? fuse_residual_add(g, n) : nullptr) {
                        n = f;
                        fused_any = true;
                        if (report) ++report->npu_fused_adds;
                      }
                      n->attrs["rkd_sim_strategy"] = strategy;
                      n->attrs["rkd_sim_knobs"] = joined;
                      n->domain = "rkdeploy";
                      n->op_type = "NpuConv";
                      if (report) ++report->npu_sim_convs;
                    }
                    if (fused_any) RKD_TRY(g.sort_topologically());
                    // An element-wise node the lowering takes (`lowerable` OK) becomes rkdeploy.`op`
                    // and counts in `placed`; else its reason goes to `on_cpu`.
                    auto place = [&](Node* n, const Status& lowerable, const char* op, int FusionReport::*placed,
                                     std::vector<std::string> FusionReport::*on_cpu) {
                      if (!lowerable.ok()) {
                        if (report) (report->*on_cpu).push_back(n->name + ": " + lowerable.error().message);
                        return;
                      }
                      n->attrs["rkd_sim_knobs"] = joined;
                      n->domain = "rkdeploy";
                      n->op_type = op;
                      if (report) ++(report->*placed);
                    };
                    for (const auto& np : g.nodes()) {
                      Node* n = np.get();
                      const auto alu = n->op_type.rfind("QLinear", 0) == 0 ? binary_alu_of(*n) : std::nullopt;
                      if (!alu) continue;
                      auto spec = npu_add_spec(*n);
                      const std::string op = std::string("Npu") + quant::to_string(*alu);
                      const bool add = *alu == quant::BinaryAlu::add;
                      place(n, spec.ok() ? Status() : Status(spec.error()), op.c_str(),
                            add ? &FusionReport::npu_sim_adds : &FusionReport::npu_sim_alus,
                            add ? &FusionReport::npu_cpu_adds : &FusionReport::npu_cpu_alus);
                    }
                    for (const auto& np : g.nodes()) {
                      Node* n = np.get();
                      if (n->op_type != "QLinearMul" || n->domain != "rkdeploy") continue;
                      auto spec = npu_mul_spec(*n);
                      place(n, spec.ok() ? Status() : Status(spec.error()), "NpuMul", &FusionReport::npu_sim_muls, &FusionReport::npu_cpu_muls);
                    }
                    // A LeakyRelu table as the EW stage's max where that is the table (its
                    // arithmetic is the reference's: rknpu_out_cvt); else, and for every other
                    // table, the LUT below, which reproduces any table exactly.
                    for (const auto& np : g.nodes()) {
                      Node* n = np.get();
                      if (n->op_type != "QLinearLut" || n->domain != "rkdeploy" || !n->attrs.count("rkd_op")) continue;
                      auto d = npu_leaky_relu_table_differences(*n);
                      if (!d.ok() || (*d > 0 && npu_lut_spec(*n).ok())) continue;
                      n->attrs["rkd_sim_knobs"] = joined;
                      n->op_type = "NpuLeakyRelu";
                      if (report) {
                        ++report->npu_sim_leaky_relus;
                        report->npu_leaky_relu_table_differences = std::max(report->npu_leaky_relu_table_differences, *d);
                      }
                    }
                    // Every other table through the LUT, next to an NPU node (as a Concat: one
                    // between CPU nodes only would add two device switches).
                    for (const auto& np : g.nodes()) {
                      Node* n = np.get();
                      if (n->op_type != "QLinearLut" || n->domain != "rkdeploy") continue;
                      auto spec = npu_lut_spec(*n);
                      Status lowerable = spec.ok() ? Status() : Status(spec.error());
                      if (lowerable.ok() && !next_to_npu_node(*n)) lowerable = unsupported("its producer and every reader run on the CPU");
                      place(n, lowerable, "NpuLut", &FusionReport::npu_sim_luts, &FusionReport::npu_cpu_luts);
                    }
                    // Max pooling on the PPU, next to an NPU node (as the copies below).
                    for (const auto& np : g.nodes()) {
                      Node* n = np.get();
                      if (!npu_max_pool_candidate(*n)) continue;
                      auto spec = npu_max_pool_spec(*n);
                      Status lowerable = spec.ok() ? Status() : Status(spec.error());
                      if (lowerable.ok() && !next_to_npu_node(*n)) lowerable = unsupported("its producer and every reader run on the CPU");
                      if (lowerable.ok() && !ppu_only_tasks)
                        lowerable = unsupported(
                            "a PPU-only task: mainline's rocket driver learns of a task's end only through the DPU's "
                            "interrupt, so it would never complete (docs/device.md)");
                      place(n, lowerable, "NpuMaxPool", &FusionReport::npu_sim_pools, &FusionReport::npu_cpu_pools);
                    }
                    // A nearest x2 Resize read only by a Pad edge by 1 on height and width (qdq-to-qlinear's
                    // bilinear x2: the depthwise convolution after them blends): one NpuResize writing
                    // the padded map, where the lowering takes it.
                    std::vector<std::pair<Node*, Node*>> edges;
                    for (const auto& np : g.nodes()) {
                      // (Its edge copies are PPU-only tasks: not on a mainline device.)
                      if (Node* pad = edge_pad_reader(g, *np); ppu_only_tasks && pad && npu_upsample2_candidate(*np))
                        edges.emplace_back(np.get(), pad);
                    }
                    for (auto [n, pad] : edges) {
                      auto e = g.add_node(n->name + "/edge", "Resize", "", n->inputs, {g.fresh_name(pad->outputs[0]->name + "/npu")});
                      if (!e.ok()) return e.error();
                      Node* m = *e;
                      m->attrs = n->attrs;
                      m->attrs["rkd_edge_pad"] = int64_t{1};
                      m->outputs[0]->dtype = pad->outputs[0]->dtype;
                      m->outputs[0]->shape = pad->outputs[0]->shape;
                      if (!npu_upsample2_spec(*m).ok()) {
                        g.remove_nodes([m](const Node& x) { return &x == m; });
                        continue;
                      }
                      g.move_output(pad, 0, m, 0);
                      g.remove_nodes([resize = n, p = pad](const Node& x) { return &x == resize || &x == p; });  // clang 14: no captured bindings
                    }
                    if (!edges.empty()) RKD_TRY(g.sort_topologically());
                    for (const auto& np : g.nodes()) {
                      Node* n = np.get();
                      if (!npu_channel_pad_candidate(*n)) continue;
                      auto spec = npu_channel_pad_spec(*n);
                      Status lowerable = spec.ok() ? Status() : Status(spec.error());
                      if (lowerable.ok() && !next_to_npu_node(*n)) lowerable = unsupported("its producer and every reader run on the CPU");
                      place(n, lowerable, "NpuPad", &FusionReport::npu_sim_pads, &FusionReport::npu_cpu_pads);
                    }
                    for (const auto& np : g.nodes()) {
                      Node* n = np.get();
                      if (!npu_upsample2_candidate(*n)) continue;
                      auto spec = npu_upsample2_spec(*n);
                      Status lowerable = spec.ok() ? Status() : Status(spec.error());
                      if (lowerable.ok() && !next_to_npu_node(*n)) lowerable = unsupported("its producer and every reader run on the CPU");
                      place(n, lowerable, "NpuResize", &FusionReport::npu_sim_resizes, &FusionReport::npu_cpu_resizes);
                      if (report && lowerable.ok() && spec->edge) ++report->npu_sim_edge_resizes;
                    }
                    for (const auto& np : g.nodes()) {
                      Node* n = np.get();
                      if (!npu_depth_to_space_candidate(*n)) continue;
                      auto spec = npu_depth_to_space_spec(*n);
                      Status lowerable = spec.ok() ? Status() : Status(spec.error());
                      if (lowerable.ok() && !next_to_npu_node(*n)) lowerable = unsupported("its producer and every reader run on the CPU");
                      place(n, lowerable, "NpuDepthToSpace", &FusionReport::npu_sim_depth_to_spaces, &FusionReport::npu_cpu_depth_to_spaces);
                    }
                    // Splits before Concats: a Concat of a placed Split's parts has it as neighbour.
                    for (const auto& np : g.nodes()) {
                      Node* n = np.get();
                      if (!npu_split_candidate(*n)) continue;
                      auto spec = npu_split_spec(*n);
                      Status lowerable = spec.ok() ? Status() : Status(spec.error());
                      if (lowerable.ok() && !next_to_npu_node(*n)) lowerable = unsupported("its producer and every reader run on the CPU");
                      place(n, lowerable, "NpuSplit", &FusionReport::npu_sim_splits, &FusionReport::npu_cpu_splits);
                    }
                    for (const auto& np : g.nodes()) {
                      Node* n = np.get();
                      if (!npu_concat_candidate(*n)) continue;
                      auto spec = npu_concat_spec(*n);
                      Status lowerable = spec.ok() ? Status() : Status(spec.error());
                      // A copy between CPU nodes only would add two device switches (and the
                      // maps' round trips) for no arithmetic: it stays with its neighbours.
                      if (lowerable.ok() && !next_to_npu_node(*n)) lowerable = unsupported("every part's producer and every reader run on the CPU");
                      place(n, lowerable, "NpuConcat", &FusionReport::npu_sim_concats, &FusionReport::npu_cpu_concats);
                    }
                    return {};
                  }};
}

}  // namespace rkd::runtime
