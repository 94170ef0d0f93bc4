// node_geometry.h: a node as npu/lower/constraints.h reads it.
#include <algorithm>

#include "ir/passes/shape_inference.h"
#include "npu/lower/node_geometry.h"

namespace rkd::npu::lower {

namespace {

bool is_8bit(const ir::Value* v) { return v && v->dtype && (*v->dtype == DType::i8 || *v->dtype == DType::u8); }

// A 2-D window's strides, dilations and pads (top, left, bottom, right; auto_pad resolved
// against the H x W map and the kernel).
struct Window {
  std::vector<int64_t> strides, dilations, pads;
};
Result<Window> window_of(const ir::Node& n, int64_t H, int64_t W, const std::vector<int64_t>& kernel) {
  Window w;
  RKD_ASSIGN(w.strides, n.attr_ints("strides", {1, 1}));
  RKD_ASSIGN(w.dilations, n.attr_ints("dilations", {1, 1}));
  RKD_ASSIGN(w.pads, n.attr_ints("pads", {0, 0, 0, 0}));
  RKD_ASSIGN(std::string auto_pad, n.attr_string("auto_pad", "NOTSET"));
  if (kernel.size() != 2 || w.strides.size() != 2 || w.dilations.size() != 2 || w.pads.size() != 4)
    return unsupported("a kernel, strides, dilations or pads of another rank");
  RKD_TRY(ir::resolve_auto_pad(auto_pad, ir::WindowGeometry{{H, W}, kernel, w.strides, w.dilations, {}, false}, w.pads));
  return w;
}

// The window's fields of a convolution or pooling geometry.
template <typename G>
void set_window(G& g, const Window& w) {
  g.stride_h = w.strides[0];
  g.stride_w = w.strides[1];
  g.dilation_h = w.dilations[0];
  g.dilation_w = w.dilations[1];
  g.pad_top = w.pads[0];
  g.pad_left = w.pads[1];
  g.pad_bottom = w.pads[2];
  g.pad_right = w.pads[3];
}

// The rows of a [..., P, C] tensor: P, every dimension but the last.
int64_t rows_of(const Shape& s) {
  int64_t P = 1;
  for (size_t d = 0; d + 1 < s.size(); ++d) P *= s[d];
  return P;
}

// More than one input or output scale (inputs 1 and 6 of a QLinearConv / QLinearMatMul).
bool per_axis_activations(const ir::Node& n) {
  for (size_t i : {size_t{1}, size_t{6}}) {
    const ir::Value* s = i < n.inputs.size() ? n.inputs[i] : nullptr;
    if (s && s->constant && s->constant->numel() != 1) return true;
  }
  return false;
}

// A binary op's B beside rows of C channels: one value per channel ([C], [1, .., C]) as the
// [1, C, 1, 1] the map rules read, one element as one element, anything else unchanged.
Shape rows_operand(const Shape& b, int64_t C) {
  int64_t inner = 1;
  for (size_t d = 0; d + 1 < b.size(); ++d) inner *= b[d];
  if (!b.empty() && b.back() == C && inner == 1) return Shape{1, C, 1, 1};
  return b;
}

}  // namespace

Result<npu::lower::ConvGeometry> npu_conv_geometry(const ir::Node& n) {
  const bool q = n.op_type == "QLinearConv" || n.op_type == "NpuConv";
  const size_t wi = q ? 3 : 1;
  const auto xs = ir::static_shape(n.inputs.empty() ? nullptr : n.inputs[0]);
  const auto ws = ir::static_shape(n.inputs.size() > wi ? n.inputs[wi] : nullptr);
  const auto ys = ir::static_shape(n.outputs.empty() ? nullptr : n.outputs[0]);
  if (!xs || !ys || xs->size() != 4 || ys->size() != 4) return unsupported("input or output is not a static [N, C, H, W]");
  if (!ws || ws->size() != 4) return unsupported("weights are not a 4-D tensor of static shape");
  npu::lower::ConvGeometry g;
  if (q && n.inputs[wi]->dtype) g.dtype = *n.inputs[wi]->dtype;
  g.batch = (*xs)[0];
  g.C = (*xs)[1];
  g.H = (*xs)[2];
  g.W = (*xs)[3];
  g.OC = (*ws)[0];
  g.KH = (*ws)[2];
  g.KW = (*ws)[3];
  RKD_ASSIGN(g.groups, n.attr_int("group", 1));
  RKD_ASSIGN(const Window w, window_of(n, g.H, g.W, {g.KH, g.KW}));
  set_window(g, w);
  g.per_axis_activations = q && per_axis_activations(n);
  return g;
}

bool weight_constant(const ir::Value* v) {
  if (v && !v->constant && v->producer && v->producer->op_type == "DequantizeLinear" && !v->producer->inputs.empty()) v = v->producer->inputs[0];
  return v && v->constant;
}

TokenMap npu_token_map(int64_t P) {
  int64_t w = 1;
  for (int64_t d = 1; d * d <= P; ++d)
    if (P % d == 0) w = d;
  return TokenMap{P / std::max<int64_t>(w, 1), w};
}

std::optional<npu::lower::ConvGeometry> npu_patch_embedding_as_1x1(const npu::lower::ConvGeometry& g) {
  const auto& lim = npu::lower::conv_limits();
  if (g.batch != 1 || g.groups != 1 || g.dilation_h != 1 || g.dilation_w != 1 || g.KH != g.stride_h || g.KW != g.stride_w) return std::nullopt;
  if (g.stride_h <= lim.max_stride_h && g.stride_w <= lim.max_stride_w) return std::nullopt;
  if (g.pad_top || g.pad_left || g.pad_bottom || g.pad_right || g.H % g.KH || g.W % g.KW) return std::nullopt;
  npu::lower::ConvGeometry o = g;
  o.C = g.C * g.KH * g.KW;
  o.H = g.H / g.KH;
  o.W = g.W / g.KW;
  o.KH = o.KW = o.stride_h = o.stride_w = 1;
  return o;
}

std::optional<MapView> npu_map_view(const Shape& s) {
  if (s.size() == 4) return MapView{s[0], s[1], s[2], s[3], false};
  if (s.size() < 2) return std::nullopt;
  const TokenMap m = npu_token_map(rows_of(s));
  return MapView{1, s.back(), m.H, m.W, true};
}

Result<npu::lower::ConvGeometry> npu_matmul_geometry(const ir::Node& n) {
  const bool q = n.op_type == "QLinearMatMul" || n.op_type == "NpuMatMul";
  const bool gemm = n.op_type == "Gemm";
  const size_t bi = q ? 3 : 1;
  const ir::Value* b = n.inputs.size() > bi ? n.inputs[bi] : nullptr;
  if (!weight_constant(b)) return unsupported("B is computed at run time (a product of two activations)");
  const auto as = ir::static_shape(n.inputs.empty() ? nullptr : n.inputs[0]);
  const auto bs = ir::static_shape(b);
  const auto ys = ir::static_shape(n.outputs.empty() ? nullptr : n.outputs[0]);
  if (!as || !ys || as->size() < 2) return unsupported("A is not a static tensor of rank 2 or more");
  if (!bs || bs->size() != 2) return unsupported("B is not a 2-D tensor of static shape");
  int64_t trans_b = 0;
  if (gemm) {
    RKD_ASSIGN(const int64_t trans_a, n.attr_int("transA", 0));
    RKD_ASSIGN(trans_b, n.attr_int("transB", 0));
    if (trans_a) return unsupported("transA 1");
  }
  const int64_t K = trans_b ? (*bs)[1] : (*bs)[0], N = trans_b ? (*bs)[0] : (*bs)[1];
  if (as->back() != K) return unsupported("A's last dimension is not B's rows");
  const TokenMap m = npu_token_map(rows_of(*as));
  npu::lower::ConvGeometry g;
  if (q && n.inputs[bi]->dtype) g.dtype = *n.inputs[bi]->dtype;
  g.C = K;
  g.H = m.H;
  g.W = m.W;
  g.OC = N;
  g.per_axis_activations = q && per_axis_activations(n);
  return g;
}

Result<npu::lower::PoolGeometry> npu_pool_geometry(const ir::Node& n) {
  const auto xs = ir::static_shape(n.inputs.empty() ? nullptr : n.inputs[0]);
  const auto ys = ir::static_shape(n.outputs.empty() ? nullptr : n.outputs[0]);
  if (!xs || !ys || xs->size() != 4 || ys->size() != 4) return unsupported("input is not a static [N, C, H, W] map");
  npu::lower::PoolGeometry g;
  if (is_8bit(n.inputs[0])) g.dtype = *n.inputs[0]->dtype;
  g.batch = (*xs)[0];
  g.C = (*xs)[1];
  g.H = (*xs)[2];
  g.W = (*xs)[3];
  g.OH = (*ys)[2];
  g.OW = (*ys)[3];
  RKD_ASSIGN(auto kernel, n.attr_ints("kernel_shape", {}));
  RKD_ASSIGN(int64_t storage, n.attr_int("storage_order", 0));
  RKD_ASSIGN(int64_t ceil_mode, n.attr_int("ceil_mode", 0));
  if (storage != 0) return unsupported("storage_order 1");
  RKD_ASSIGN(const Window w, window_of(n, g.H, g.W, kernel));
  g.KH = kernel[0];
  g.KW = kernel[1];
  set_window(g, w);
  g.ceil_mode = ceil_mode != 0;
  g.indices = n.outputs.size() > 1 && n.outputs[1];
  return g;
}

Result<npu::lower::EltwiseGeometry> npu_binary_geometry(const ir::Node& n) {
  // com.microsoft's (and rkdeploy's) QLinear binary ops: A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp.
  const bool q = n.domain == "rkdeploy" && n.inputs.size() >= 8;
  const size_t bi = q ? 3 : 1;
  auto as = ir::static_shape(n.inputs.empty() ? nullptr : n.inputs[0]);
  // A unary operation (a table) has one operand.
  auto bs = n.inputs.size() > bi ? ir::static_shape(n.inputs[bi]) : as;
  const auto ys = ir::static_shape(n.outputs.empty() ? nullptr : n.outputs[0]);
  // A float Mul's map is either operand (qdq-to-qlinear puts the output-shaped one first).
  if (!q && n.op_type == "Mul" && as && bs && ys && *as != *ys && *bs == *ys) std::swap(as, bs);
  const auto view = as ? npu_map_view(*as) : std::nullopt;
  if (!as || !bs || !ys || !view || *ys != *as) return unsupported("operands are not static maps or rows of the output's shape");
  npu::lower::EltwiseGeometry g;
  if (is_8bit(n.inputs[0])) g.dtype = *n.inputs[0]->dtype;
  g.batch = view->batch;
  g.C = view->C;
  g.H = view->H;
  g.W = view->W;
  g.broadcast = *as != *bs;
  g.per_channel_operand =
      view->rows ? npu::lower::per_channel_operand(Shape{1, view->C, 1, 1}, rows_operand(*bs, view->C)) : npu::lower::per_channel_operand(*as, *bs);
  if (q) {
    for (size_t i : {1u, 2u, 4u, 5u, 6u, 7u})
      g.per_axis_quantization = g.per_axis_quantization || (n.inputs[i] && n.inputs[i]->constant && n.inputs[i]->constant->numel() != 1);
  }
  return g;
}

Result<npu::lower::EltwiseGeometry> npu_parts_geometry(const ir::Node& n) {
  const bool concat = n.op_type == "Concat" || n.op_type == "NpuConcat";
  RKD_ASSIGN(int64_t axis, n.attr_int("axis", 0));
  if (axis != 1 && axis != -3) return unsupported("axis " + std::to_string(axis) + " (the NPU copies channel ranges only)");
  npu::lower::EltwiseGeometry g;
  std::vector<int64_t> parts;
  for (const ir::Value* v : concat ? n.inputs : n.outputs) {
    const auto s = ir::static_shape(v);
    if (!s || s->size() != 4) return unsupported(concat ? "a part is not a static [N, C, H, W] map" : "a part is not a static [N, C, H, W] map");
    if (!parts.empty() && ((*s)[0] != g.batch || (*s)[2] != g.H || (*s)[3] != g.W)) return unsupported("parts of different N, H or W");
    g.batch = (*s)[0];
    g.H = (*s)[2];
    g.W = (*s)[3];
    g.C += (*s)[1];
    parts.push_back((*s)[1]);
  }
  if (parts.empty()) return unsupported("no parts");
  if (is_8bit(concat ? n.inputs[0] : (n.inputs.empty() ? nullptr : n.inputs[0]))) g.dtype = *n.inputs[0]->dtype;
  g.unaligned_part_offset = npu::lower::unaligned_part_offset(parts);
  return g;
}

}  // namespace rkd::npu::lower
