// Shape functions of the "rkdeploy" domain: the ops rkdeploy's passes create (quant/qlinear_pass,
// quant/qlinear_lut, ir/passes/fusion, the runtime's NPU placement). The creator sets their
// outputs too; these functions derive the same types and shapes from the inputs and
// attributes, so that a graph read from outside (a compiled artifact) is checked like an
// imported one (see shape_inference.h: verify_declared_shapes).
#include <numeric>

#include "ir/op_info.h"
#include "ir/passes/shape_inference_ctx.h"

namespace rkd::ir::detail {

namespace {

bool is_8bit(std::optional<DType> t) { return t == DType::i8 || t == DType::u8; }

int64_t round_up8(int64_t x) { return (x + 7) / 8 * 8; }

bool same_dim(const Dim& a, const Dim& b) { return a.value == b.value && (a.is_static() || a.symbol == b.symbol); }

}  // namespace

// QLinearAdd / Mul / Sub / Max / Min (a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): a
// and b broadcast, the output of y_zp's type. The kernels read 8-bit codes.
Status qlinear_binary(const Ctx& c) {
  if (c.n.inputs.size() != 8) return c.bad("inputs are (a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp)");
  for (size_t i : {0, 3, 7}) {
    if (!c.in(i)) return c.bad("input " + std::to_string(i) + " is omitted");
    if (c.dtype(i) && !is_8bit(c.dtype(i))) return c.bad("input " + std::to_string(i) + " must be int8 or uint8");
  }
  const auto a = c.dims(0), b = c.dims(3);
  if (!a || !b) return {};
  RKD_ASSIGN(Dims y, broadcast(c, *a, *b));
  return c.set(0, c.dtype(7), y);
}

// QLinearLut (x, table): table[x], x's shape, the table's type (256 8-bit codes).
Status qlinear_lut(const Ctx& c) {
  if (c.n.inputs.size() != 2 || !c.in(0) || !c.in(1)) return c.bad("inputs are (x, table)");
  if (c.dtype(0) && !is_8bit(c.dtype(0))) return c.bad("input must be int8 or uint8");
  const Value* t = c.in(1);
  if (!t->constant || t->constant->numel() != 256 || !is_8bit(t->constant->dtype())) return c.bad("the table must be a constant of 256 8-bit codes");
  return c.set(0, t->constant->dtype(), c.dims(0));
}

// QLinearTflite: the TFLite integer kernel of attribute `op` over (q, scale, zero point) groups
// and the output's scale and zero point: op's own shape function over the groups' codes (the
// node's attributes are op's), the output of the output zero point's type. A bilinear Resize
// holds no sizes: its output height and width are the creator's (the kernel samples any size),
// checked to keep the input's batch and channels.
Status qlinear_tflite(const Ctx& c) {
  RKD_ASSIGN(std::string op, c.n.attr_string("op", ""));
  if (c.n.inputs.size() < 5 || (c.n.inputs.size() - 2) % 3 != 0) {
    return c.bad("inputs are (q, scale, zero point) groups and the output's scale and zero point");
  }
  const OpInfo* info = find_op("", op);
  if (!info || !info->shape) return c.bad("attribute 'op' names no operator with a shape function: '" + op + "'");
  const size_t groups = (c.n.inputs.size() - 2) / 3;
  for (size_t g = 0; g < groups; ++g) {
    if (!c.in(3 * g)) return c.bad("input " + std::to_string(3 * g) + " is omitted");
  }
  const Value* zp = c.n.inputs.back();
  if (!zp || (zp->dtype && !is_8bit(zp->dtype))) return c.bad("the output zero point must be int8 or uint8");
  if (op == "Resize") {
    const auto x = c.dims(0);
    const Value* o = c.n.outputs.empty() ? nullptr : c.n.outputs[0];
    if (!x || !o || !o->shape) return {};
    if (x->size() != 4 || o->shape->size() != 4 || !same_dim((*o->shape)[0], (*x)[0]) || !same_dim((*o->shape)[1], (*x)[1])) {
      return c.bad("a bilinear Resize keeps its input's rank 4, batch and channels");
    }
    for (int d = 2; d < 4; ++d) {
      const Dim& s = (*o->shape)[static_cast<size_t>(d)];
      if (!s.is_static() || s.value < 1 || s.value > (int64_t{1} << 20)) return c.bad("a bilinear Resize's output size must be 1 to 2^20");
    }
    return c.set(0, zp->dtype, o->shape);
  }
  Node twin;
  twin.name = c.n.name;
  twin.op_type = op;
  twin.attrs = c.n.attrs;
  for (size_t g = 0; g < groups; ++g) twin.inputs.push_back(c.n.inputs[3 * g]);
  std::vector<Value> outs(c.n.outputs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    outs[i].name = c.n.outputs[i] ? c.n.outputs[i]->name : "";
    twin.outputs.push_back(c.n.outputs[i] ? &outs[i] : nullptr);
  }
  if (Status s = info->shape(Ctx{twin, c.opset}); !s.ok()) return c.bad(op + ": " + s.error().message);
  for (size_t i = 0; i < outs.size(); ++i) RKD_TRY(c.set(i, zp->dtype, outs[i].shape));
  return {};
}

// A Resize the NPU placement merged with the Pad edge by 1 that read it (attribute rkd_edge_pad,
// runtime/npu_ops.cc merge_edge_pads): the Resize's output 2 cells larger in height and width.
// Any other Resize: its own shape function.
Status resize_maybe_edge_padded(const Ctx& c) {
  RKD_ASSIGN(int64_t edge, c.n.attr_int("rkd_edge_pad", 0));
  if (!edge) return resize_op(c);
  Node twin;
  twin.name = c.n.name;
  twin.op_type = "Resize";
  twin.attrs = c.n.attrs;
  twin.inputs = c.n.inputs;
  Value out;
  twin.outputs.push_back(&out);
  RKD_TRY(resize_op(Ctx{twin, c.opset}));
  if (!out.shape) return c.set(0, out.dtype, std::nullopt);
  Dims d = *out.shape;
  if (d.size() != 4) return c.bad("an edge-padded Resize needs a 4-D map");
  for (size_t i : {size_t{2}, size_t{3}})
    if (d[i].is_static()) d[i].value += 2;
  return c.set(0, out.dtype, d);
}

// MSDAPrepare (value tokens [B, T, nH, c], level_h, level_w): the prepared value layout
// [B, nH, T + 1, c rounded up to 8] (kernels/deform_attn.h), T the levels' sum of h x w.
Status msda_prepare_shape(const Ctx& c) {
  if (c.n.inputs.size() != 1 || !c.in(0)) return c.bad("one input: the value tokens [B, T, heads, head_dim]");
  if (c.dtype(0) && *c.dtype(0) != DType::f32) return c.bad("the value tokens must be float32");
  RKD_ASSIGN(auto hs, c.n.attr_ints("level_h", {}));
  RKD_ASSIGN(auto ws, c.n.attr_ints("level_w", {}));
  if (hs.empty() || hs.size() != ws.size()) return c.bad("level_h/level_w must have one value per level");
  int64_t tokens = 0;
  for (size_t i = 0; i < hs.size(); ++i) {
    if (hs[i] < 1 || ws[i] < 1 || hs[i] > (1 << 20) || ws[i] > (1 << 20)) return c.bad("level sizes must be 1 to 2^20");
    tokens += hs[i] * ws[i];
  }
  const auto v = c.dims(0);
  if (!v) return {};
  if (v->size() != 4) return c.bad("the value tokens must be [B, T, heads, head_dim], got " + dims_to_string(*v));
  const Dim& t = (*v)[1];
  if (t.is_static() && t.value != tokens) {
    return c.bad("the value holds " + std::to_string(t.value) + " tokens, the levels " + std::to_string(tokens));
  }
  const Dim& hd = (*v)[3];
  Dims out{(*v)[0], (*v)[2], Dim{tokens + 1, ""}, hd.is_static() ? Dim{round_up8(hd.value), ""} : Dim{}};
  return c.set(0, DType::f32, out);
}

// MSDeformAttn (prepared [B, nH, T + 1, hdp], locations [B, Q, nH, P, 2], weights [B, Q, nH, P];
// level_h, level_w, points (P = their sum), head_dim): [B, Q, nH x head_dim] float32.
Status msda_attention_shape(const Ctx& c) {
  if (c.n.inputs.size() != 3 || !c.in(0) || !c.in(1) || !c.in(2)) return c.bad("inputs are (prepared value, locations, weights)");
  for (size_t i = 0; i < 3; ++i) {
    if (c.dtype(i) && *c.dtype(i) != DType::f32) return c.bad("input " + std::to_string(i) + " must be float32");
  }
  RKD_ASSIGN(auto hs, c.n.attr_ints("level_h", {}));
  RKD_ASSIGN(auto ws, c.n.attr_ints("level_w", {}));
  RKD_ASSIGN(auto points, c.n.attr_ints("points", {}));
  RKD_ASSIGN(int64_t head_dim, c.n.attr_int("head_dim", 0));
  if (hs.empty() || hs.size() != ws.size()) return c.bad("level_h/level_w must have one value per level");
  if (points.size() != hs.size()) return c.bad("points must have one value per level");
  int64_t tokens = 0, total_points = 0;
  for (size_t i = 0; i < hs.size(); ++i) {
    if (hs[i] < 1 || ws[i] < 1 || hs[i] > (1 << 20) || ws[i] > (1 << 20)) return c.bad("level sizes must be 1 to 2^20");
    if (points[i] < 1 || points[i] > (1 << 16)) return c.bad("points per level must be 1 to 65536");
    tokens += hs[i] * ws[i];
    total_points += points[i];
  }
  const auto p = c.dims(0), loc = c.dims(1), w = c.dims(2);
  if (!p || !loc || !w) return {};
  if (p->size() != 4 || loc->size() != 5 || w->size() != 4) {
    return c.bad("shapes must be prepared [B, heads, T + 1, padded head_dim], locations [B, Q, heads, P, 2], weights [B, Q, heads, P]");
  }
  auto want = [&](const Dim& d, int64_t v, const std::string& what) -> Status {
    if (d.is_static() && d.value != v) return c.bad(what + " is " + std::to_string(d.value) + ", expected " + std::to_string(v));
    return {};
  };
  RKD_TRY(want((*p)[2], tokens + 1, "the prepared value's token count"));
  if (head_dim < 1 || ((*p)[3].is_static() && round_up8(head_dim) != (*p)[3].value)) {
    return c.bad("head_dim " + std::to_string(head_dim) + " does not fit the prepared value " + dims_to_string(*p));
  }
  RKD_TRY(want((*loc)[4], 2, "the locations' last dim"));
  RKD_TRY(want((*loc)[3], total_points, "the locations' point count"));
  RKD_TRY(want((*w)[3], total_points, "the weights' point count"));
  for (size_t d = 0; d < 3; ++d) {
    const Dim& a = d == 2 ? (*p)[1] : (*p)[0];
    if (d == 0) RKD_TRY(a.is_static() ? want((*loc)[0], a.value, "the locations' batch") : Status{});
    if (d == 2) RKD_TRY(a.is_static() ? want((*loc)[2], a.value, "the locations' head count") : Status{});
    if ((*loc)[d].is_static()) RKD_TRY(want((*w)[d], (*loc)[d].value, "the weights' dim " + std::to_string(d)));
  }
  const Dim heads = (*p)[1];
  return c.set(0, DType::f32, Dims{(*p)[0], (*loc)[1], heads.is_static() ? Dim{mul_sat(heads.value, head_dim), ""} : Dim{}});
}

}  // namespace rkd::ir::detail
