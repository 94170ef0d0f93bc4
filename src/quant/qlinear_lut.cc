// Table and integer-side rewrites of per-tensor QDQ sites (qlinear_lut.h).
#include "quant/qlinear_lut.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <optional>

#include "ir/op_info.h"
#include "ir/passes/shape_inference.h"
#include "quant/int8.h"

namespace rkd::quant {

using ir::Node;
using ir::Value;

namespace {

bool is_int8(DType t) { return t == DType::i8 || t == DType::u8; }

// A per-tensor DequantizeLinear producing v (constant scale and zero point, 8-bit input).
Node* per_tensor_dq(const Value* v) {
  Node* d = ir::produced_by(v, "DequantizeLinear");
  if (!d || !d->domain.empty() || d->inputs.size() < 3 || !d->inputs[1] || !d->inputs[2]) return nullptr;
  const Value* q = d->inputs[0];
  if (!q || !q->dtype || !is_int8(*q->dtype)) return nullptr;
  if (!d->inputs[1]->constant || d->inputs[1]->constant->numel() != 1 || !d->inputs[2]->constant || d->inputs[2]->constant->numel() != 1)
    return nullptr;
  return d;
}

// The per-tensor QuantizeLinear (constant scale and 8-bit zero point) that is v's only
// reader, v not being a graph output.
Node* sole_per_tensor_q(const ir::Graph& g, const Value* v) {
  if (v->consumers.size() != 1 || std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return nullptr;
  Node* q = v->consumers[0];
  if (q->op_type != "QuantizeLinear" || !q->domain.empty() || q->inputs.size() < 3 || q->inputs[0] != v || !q->inputs[1] || !q->inputs[2])
    return nullptr;
  if (!q->inputs[1]->constant || q->inputs[1]->constant->numel() != 1 || !q->inputs[2]->constant || q->inputs[2]->constant->numel() != 1)
    return nullptr;
  if (!is_int8(q->inputs[2]->constant->dtype())) return nullptr;
  return q;
}

// `proto` (its op, attributes and constant inputs) evaluated by the executor's kernel on the
// tensors `given` in place of those inputs (of one shape, or scalars broadcast against it), in
// a scratch graph whose output has the largest one's shape.
Result<Tensor> run_with(const ir::NodeEvaluator& eval, const Node& proto, int64_t opset, const std::map<size_t, const Tensor*>& given,
                        DType out_dtype) {
  ir::Graph t;
  t.opset = opset;
  std::vector<Value*> ins;
  std::vector<const Tensor*> args;
  const Tensor* largest = given.begin()->second;
  for (const auto& [i, tv] : given)
    if (tv->numel() > largest->numel()) largest = tv;
  const Tensor& x = *largest;
  for (size_t i = 0; i < proto.inputs.size(); ++i) {
    const Value* v = proto.inputs[i];
    if (auto it = given.find(i); it != given.end()) {
      std::string name = "x";
      name += std::to_string(i);  // (not "x" + ...: GCC 12's -Wrestrict false positive at -O3)
      RKD_ASSIGN(Value * xv, t.add_value(name));
      xv->dtype = it->second->dtype();
      xv->shape = ir::to_dims(it->second->shape());
      ins.push_back(xv);
    } else if (!v) {
      ins.push_back(nullptr);
    } else if (v->constant) {
      ins.push_back(t.add_constant("c", *v->constant));
    } else {
      return invalid(proto.describe() + ": input " + std::to_string(i) + " is not constant");
    }
  }
  RKD_ASSIGN(Node * n, t.add_node(proto.name, proto.op_type, proto.domain, ins, {"y"}));
  n->attrs = proto.attrs;
  n->outputs[0]->dtype = out_dtype;
  n->outputs[0]->shape = ir::to_dims(x.shape());
  for (size_t i = 0; i < ins.size(); ++i) {
    auto it = given.find(i);
    args.push_back(it != given.end() ? it->second : ins[i] ? &*ins[i]->constant : nullptr);
  }
  RKD_ASSIGN(std::vector<Tensor> out, eval(*n, opset, args));
  return std::move(out[0]);
}

// run_with on x in place of input `vary`.
Result<Tensor> run_like(const ir::NodeEvaluator& eval, const Node& proto, int64_t opset, size_t vary, const Tensor& x, DType out_dtype) {
  return run_with(eval, proto, opset, {{vary, &x}}, out_dtype);
}

// All codes of an 8-bit type in increasing order: the table's index.
Tensor all_codes(DType t) {
  Tensor c = Tensor::empty(t, {256});
  for (int i = 0; i < 256; ++i) {
    if (t == DType::i8) c.data<int8_t>()[i] = static_cast<int8_t>(i - 128);
    else c.data<uint8_t>()[i] = static_cast<uint8_t>(i);
  }
  return c;
}

// The table of q(op(dq(code))) for every code, computed by the executor's own kernels; op
// may be null (q(dq(code))).
Result<Tensor> site_table(const ir::NodeEvaluator& eval, const Node& dq, const Node* op, size_t vary, const Node& q, int64_t opset,
                          const std::map<size_t, Tensor>& dequantized = {}) {
  const DType in_t = *dq.inputs[0]->dtype;
  RKD_ASSIGN(Tensor f, run_like(eval, dq, opset, 0, all_codes(in_t), DType::f32));
  if (op) {
    std::map<size_t, const Tensor*> given{{vary, &f}};
    for (const auto& [i, t] : dequantized) given[i] = &t;
    RKD_ASSIGN(Tensor g, run_with(eval, *op, opset, given, DType::f32));
    f = std::move(g);
  }
  return run_like(eval, q, opset, 0, f, q.inputs[2]->constant->dtype());
}

// v as a float constant when a per-tensor DequantizeLinear makes it from a constant scalar (a
// quantized constant operand, as TF.js exports write hard-swish's 3 and 1/6), by the
// executor's own DequantizeLinear.
std::optional<Tensor> dequantized_scalar(const ir::NodeEvaluator& eval, const Value* v, int64_t opset) {
  const Node* d = per_tensor_dq(v);
  if (!d || !d->inputs[0]->constant || d->inputs[0]->constant->numel() != 1) return std::nullopt;
  auto f = run_like(eval, *d, opset, 0, *d->inputs[0]->constant, DType::f32);
  if (!f.ok()) return std::nullopt;
  return std::move(*f);
}

bool same_quantization(const Node& dq, const Node& q) {
  const Tensor& z1 = *dq.inputs[2]->constant;
  const Tensor& z2 = *q.inputs[2]->constant;
  return z1.dtype() == z2.dtype() && z1.get_as_double(0) == z2.get_as_double(0) &&
         static_cast<float>(dq.inputs[1]->constant->get_as_double(0)) == static_cast<float>(q.inputs[1]->constant->get_as_double(0));
}

// rkdeploy.QLinearLut(x, table): a new value named after `like`, of like's shape and the
// table's type.
Result<Node*> add_lut(ir::Graph& g, const std::string& name, Value* x, Tensor table, const Value& like) {
  const DType t = table.dtype();
  Value* tv = g.add_constant(name + "/table", std::move(table));
  RKD_ASSIGN(Node * lut, g.add_node(name + "/lut", "QLinearLut", "rkdeploy", {x, tv}, {g.fresh_name(like.name + "/lut")}));
  lut->outputs[0]->dtype = t;
  lut->outputs[0]->shape = like.shape;
  return lut;
}

// The attributes a LeakyRelu's table carries for the NPU lowering (runtime/npu_conv.h reads
// them), in this order: the op, alpha, x scale and zero point, y scale and zero point.
constexpr const char* kLeakyReluMarks[] = {"rkd_op", "rkd_alpha", "rkd_x_scale", "rkd_x_zero_point", "rkd_y_scale", "rkd_y_zero_point"};

// A LeakyRelu between per-tensor DequantizeLinear and QuantizeLinear of one type: its
// parameters as the NPU lowering reads them.
struct LeakySite {
  double x_scale, y_scale, alpha;
  int32_t x_zp, y_zp;
};
std::optional<LeakySite> leaky_site(const Node& op, const Node& dq, const Node& q) {
  if (op.op_type != "LeakyRelu" || !op.domain.empty() || !dq.inputs[2] || !dq.inputs[2]->constant || !q.inputs[2] || !q.inputs[2]->constant) {
    return std::nullopt;
  }
  if (dq.inputs[2]->constant->dtype() != q.inputs[2]->constant->dtype()) return std::nullopt;
  auto alpha = op.attr_float("alpha", 0.01f);
  if (!alpha.ok()) return std::nullopt;
  return LeakySite{static_cast<double>(static_cast<float>(dq.inputs[1]->constant->get_as_double(0))),
                   static_cast<double>(static_cast<float>(q.inputs[1]->constant->get_as_double(0))), static_cast<double>(*alpha),
                   static_cast<int32_t>(dq.inputs[2]->constant->get_as_double(0)), static_cast<int32_t>(q.inputs[2]->constant->get_as_double(0))};
}

// The DequantizeLinear d becomes dead when op was its only reader (for one input or several).
void drop_if_sole(Node* d, const Node* op, std::set<const Node*>& gone) {
  const auto& cs = d->outputs[0]->consumers;
  if (!cs.empty() && std::all_of(cs.begin(), cs.end(), [&](const Node* c) { return c == op; })) gone.insert(d);
}

// MaxPool windows that always hold an input element (pads below the kernel, floor mode,
// no dilation, no Indices output): the max of the integers is the integer of the max.
bool integer_max_pool(const Node& n) {
  if (n.outputs.size() > 1 && n.outputs[1]) return false;
  auto k = n.attr_ints("kernel_shape", {});
  auto p = n.attr_ints("pads", {});
  auto d = n.attr_ints("dilations", {});
  auto c = n.attr_int("ceil_mode", 0);
  auto a = n.attr_string("auto_pad", "NOTSET");
  if (!k.ok() || !p.ok() || !d.ok() || !c.ok() || !a.ok() || *c != 0 || k->size() != 2) return false;
  // SAME_* pads at most kernel - 1 in all (ceil(in / s) - 1) * s <= in - 1.
  if (*a != "NOTSET" && *a != "VALID" && *a != "SAME_UPPER" && *a != "SAME_LOWER") return false;
  for (int64_t v : *d)
    if (v != 1) return false;
  for (size_t i = 0; i < p->size(); ++i)
    if ((*p)[i] < 0 || (*p)[i] >= (*k)[i % k->size()]) return false;
  return true;
}

// A depthwise QLinearConv of C channels on the codes src (quantized as dq's input), integer
// weights tap(y, x) (zero point 0) with one weight scale, no bias, requantized to q's output
// parameters with the convention `requant` (empty: the graph's): the NPU's form of a fixed blend.
struct DepthwiseBlend {
  int64_t C = 0, kh = 1, kw = 1, sh = 1, sw = 1;
  std::vector<int64_t> pads{0, 0, 0, 0};
  float w_scale = 1;
  std::function<int(int64_t, int64_t)> tap;
};
Result<Node*> add_depthwise_blend(ir::Graph& g, const Node& op, Value* src, const Node& dq, const Node& q, const DepthwiseBlend& b,
                                  const std::string& requant) {
  const DType t = *dq.inputs[0]->dtype;
  Tensor w = Tensor::empty(t, {b.C, 1, b.kh, b.kw});
  auto* wb = static_cast<uint8_t*>(w.raw());
  for (int64_t c = 0; c < b.C; ++c)
    for (int64_t y = 0; y < b.kh; ++y)
      for (int64_t x = 0; x < b.kw; ++x) wb[(c * b.kh + y) * b.kw + x] = static_cast<uint8_t>(b.tap(y, x));
  Tensor ws = Tensor::empty(DType::f32, {1});
  ws.data<float>()[0] = b.w_scale;
  Tensor wz = Tensor::empty(t, {1});
  std::memset(wz.raw(), 0, wz.nbytes());
  std::vector<Value*> ins{src,
                          dq.inputs[1],
                          dq.inputs[2],
                          g.add_constant(op.name + "/blend_weights", std::move(w)),
                          g.add_constant(op.name + "/blend_w_scale", std::move(ws)),
                          g.add_constant(op.name + "/blend_w_zero_point", std::move(wz)),
                          q.inputs[1],
                          q.inputs[2]};
  RKD_ASSIGN(Node * cv, g.add_node(op.name + "/blend", "QLinearConv", "", ins, {g.fresh_name(op.outputs[0]->name + "/blend")}));
  cv->attrs["group"] = b.C;
  cv->attrs["kernel_shape"] = std::vector<int64_t>{b.kh, b.kw};
  cv->attrs["strides"] = std::vector<int64_t>{b.sh, b.sw};
  cv->attrs["pads"] = b.pads;
  if (!requant.empty()) cv->attrs["rkd_requant"] = requant;
  cv->outputs[0]->dtype = q.inputs[2]->constant->dtype();
  cv->outputs[0]->shape = op.outputs[0]->shape;
  return cv;
}

}  // namespace

Status lut_sites(ir::Graph& g, std::set<const Node*>& gone, const ir::NodeEvaluator& eval) {
  const auto requant = g.metadata.find("rkdeploy.requant");
  const bool npu_convention = requant != g.metadata.end() && requant->second == "rknpu_out_cvt";
  std::vector<Node*> nodes;
  for (const auto& np : g.nodes()) nodes.push_back(np.get());
  for (Node* op : nodes) {
    if (gone.count(op) || !op->domain.empty() || op->outputs.size() != 1 || !op->outputs[0]) continue;
    const bool unary = ir::op_has(*op, ir::kPointwise);
    const bool maxpool = op->op_type == "MaxPool";
    const bool pad = op->op_type == "Pad";
    // The NPU's own forms: in its convention, and in any graph compiled for its simulator.
    const bool npu_form = npu_convention || g.metadata.count("rkdeploy.npu");
    const bool asymmetric2 = npu_form && ir::resize_is_asymmetric_bilinear2(*op);
    const bool bilinear2 = (npu_form && ir::resize_is_bilinear2(*op)) || asymmetric2;
    const bool average2 = npu_form && ir::resize_is_average2(*op);
    const std::optional<ir::AverageWindow> average = npu_form ? ir::average_window(*op) : std::nullopt;
    if (!unary && !maxpool && !pad && !bilinear2 && !average2 && !average) continue;
    // The one varying input, from a per-tensor DequantizeLinear; the rest constant (or, for a
    // pointwise op, dequantized constant scalars).
    size_t vary = op->inputs.size();
    bool ok = true;
    std::map<size_t, Tensor> dequantized;
    for (size_t i = 0; i < op->inputs.size() && ok; ++i) {
      const Value* v = op->inputs[i];
      if (!v || v->constant) continue;
      if (unary) {
        if (auto c = dequantized_scalar(eval, v, g.opset)) {
          dequantized.emplace(i, std::move(*c));
          continue;
        }
      }
      if (vary != op->inputs.size()) ok = false;
      vary = i;
    }
    if (!ok || vary == op->inputs.size() || (!unary && vary != 0)) continue;
    Node* dq = per_tensor_dq(op->inputs[vary]);
    Node* q = sole_per_tensor_q(g, op->outputs[0]);
    if (!dq || !q || gone.count(dq) || gone.count(q)) continue;
    const auto xs = ir::static_shape(op->inputs[vary]);
    const auto ys = ir::static_shape(op->outputs[0]);
    if (!xs || !ys) continue;
    const DType in_t = *dq->inputs[0]->dtype;
    if (unary) {
      // Same shape in and out, every constant a scalar: a function of the value alone.
      if (*xs != *ys) continue;
      for (const Value* v : op->inputs) ok = ok && (!v || !v->constant || v->constant->numel() == 1);
      if (!ok) continue;
      auto table = site_table(eval, *dq, op, vary, *q, g.opset, dequantized);
      if (!table.ok()) continue;  // an op the kernels cannot run in this form stays float
      // A LeakyRelu keeps what the NPU lowering needs (rkd_op, rkd_alpha, the scales and zero
      // points); under rknpu_out_cvt its table is the NPU's arithmetic (quant/int8.h).
      std::optional<LeakySite> leaky = leaky_site(*op, *dq, *q);
      if (leaky && npu_convention) {
        auto t = rknpu_leaky_relu_table(in_t, leaky->x_scale, leaky->x_zp, leaky->y_scale, leaky->y_zp, leaky->alpha);
        if (t.ok() && t->dtype() == table->dtype()) table = std::move(t);
      }
      RKD_ASSIGN(Node * lut, add_lut(g, op->name, dq->inputs[0], std::move(*table), *q->outputs[0]));
      if (leaky) {
        const ir::Attribute values[] = {std::string("LeakyRelu"), static_cast<float>(leaky->alpha),   static_cast<float>(leaky->x_scale),
                                        int64_t{leaky->x_zp},     static_cast<float>(leaky->y_scale), int64_t{leaky->y_zp}};
        for (size_t i = 0; i < std::size(kLeakyReluMarks); ++i) lut->attrs[kLeakyReluMarks[i]] = values[i];
      }
      g.move_output(q, 0, lut, 0);
    } else if (maxpool) {
      if (!integer_max_pool(*op)) continue;
      RKD_ASSIGN(Node * mp, g.add_node(op->name + "/int", "MaxPool", "", {dq->inputs[0]}, {g.fresh_name(op->outputs[0]->name + "/int")}));
      mp->attrs = op->attrs;
      mp->outputs[0]->dtype = in_t;
      mp->outputs[0]->shape = op->outputs[0]->shape;
      if (same_quantization(*dq, *q)) {
        g.move_output(q, 0, mp, 0);
      } else {
        auto table = site_table(eval, *dq, nullptr, 0, *q, g.opset);
        if (!table.ok()) return table.error();
        RKD_ASSIGN(Node * lut, add_lut(g, op->name, mp->outputs[0], std::move(*table), *q->outputs[0]));
        g.move_output(q, 0, lut, 0);
      }
    } else if (average2 || bilinear2) {
      // The blend as a depthwise QLinearConv on the codes (the NPU's form: it runs as any
      // convolution): by 1/2, 2 x 2 stride 2, weights 1 / 4; by 2, 3 x 3 over the nearest x2
      // map edge-padded by 1 (a Resize copying codes, a Pad edge), weights [1 2 1]^T [1 2 1] /
      // 16 (half-pixel) or [0 1 1]^T [0 1 1] / 4 (asymmetric). The taps are the Resize's
      // exactly; the requantization is the convention's.
      const int64_t C = (*xs)[1], K = average2 ? 2 : 3;
      Value* src = dq->inputs[0];
      if (bilinear2) {
        std::vector<Value*> ins = op->inputs;
        ins[0] = src;
        RKD_ASSIGN(Node * up, g.add_node(op->name + "/nearest", "Resize", "", ins, {g.fresh_name(op->outputs[0]->name + "/nearest")}));
        up->attrs["mode"] = std::string("nearest");
        up->attrs["coordinate_transformation_mode"] = std::string("asymmetric");
        up->attrs["nearest_mode"] = std::string("floor");
        up->outputs[0]->dtype = in_t;
        up->outputs[0]->shape = op->outputs[0]->shape;
        Tensor pads = Tensor::empty(DType::i64, {8});
        const int64_t pv[8] = {0, 0, 1, 1, 0, 0, 1, 1};
        std::memcpy(pads.raw(), pv, sizeof pv);
        RKD_ASSIGN(Node * pd, g.add_node(op->name + "/edge", "Pad", "", {up->outputs[0], g.add_constant(op->name + "/edge_pads", std::move(pads))},
                                         {g.fresh_name(op->outputs[0]->name + "/edge")}));
        pd->attrs["mode"] = std::string("edge");
        pd->outputs[0]->dtype = in_t;
        pd->outputs[0]->shape = ir::Dims{ir::Dim{(*ys)[0], ""}, ir::Dim{C, ""}, ir::Dim{(*ys)[2] + 2, ""}, ir::Dim{(*ys)[3] + 2, ""}};
        src = pd->outputs[0];
      }
      // Half-pixel: [1 2 1]^T [1 2 1] / 16 around the nearest cell; asymmetric: the mean of the
      // nearest cell and its neighbours below and to the right, [0 1 1]^T [0 1 1] / 4.
      const int k3[3] = {1, 2, 1}, a3[3] = {0, 1, 1};
      DepthwiseBlend b{
          C, K, K, average2 ? 2 : 1, average2 ? 2 : 1, {0, 0, 0, 0}, average2 || asymmetric2 ? 0.25f : 0.0625f, [&](int64_t y, int64_t x) {
            return average2 ? 1 : asymmetric2 ? a3[y] * a3[x] : k3[y] * k3[x];
          }};
      RKD_ASSIGN(Node * cv, add_depthwise_blend(g, *op, src, *dq, *q, b, requant != g.metadata.end() ? requant->second : std::string()));
      g.move_output(q, 0, cv, 0);
    } else if (average) {
      // The mean over each window as a depthwise QLinearConv of weights 1 and weight scale
      // 1 / (KH KW) (float32) on the codes: the sums exact, one requantization (the NPU's form;
      // quant/qlinear_lut.h).
      DepthwiseBlend b{(*xs)[1],
                       average->kh,
                       average->kw,
                       average->sh,
                       average->sw,
                       average->pads,
                       1.f / static_cast<float>(average->kh * average->kw),
                       [](int64_t, int64_t) { return 1; }};
      RKD_ASSIGN(Node * cv, add_depthwise_blend(g, *op, dq->inputs[0], *dq, *q, b, requant != g.metadata.end() ? requant->second : std::string()));
      cv->outputs[0]->shape =
          ir::Dims{ir::Dim{(*xs)[0], ""}, ir::Dim{(*xs)[1], ""}, ir::Dim{((*xs)[2] + b.pads[0] + b.pads[2] - b.kh) / b.sh + 1, ""},
                   ir::Dim{((*xs)[3] + b.pads[1] + b.pads[3] - b.kw) / b.sw + 1, ""}};
      if (ir::static_shape(cv->outputs[0]) == ys) {
        g.move_output(q, 0, cv, 0);
      } else {
        // ReduceMean without keepdims: the same integers reshaped.
        Tensor shape = Tensor::empty(DType::i64, {static_cast<int64_t>(ys->size())});
        for (size_t i = 0; i < ys->size(); ++i) shape.data<int64_t>()[i] = (*ys)[i];
        RKD_ASSIGN(Node * rs,
                   g.add_node(op->name + "/reshape", "Reshape", "", {cv->outputs[0], g.add_constant(op->name + "/shape", std::move(shape))},
                              {g.fresh_name(op->outputs[0]->name + "/reshape")}));
        rs->outputs[0]->dtype = cv->outputs[0]->dtype;
        rs->outputs[0]->shape = op->outputs[0]->shape;
        g.move_output(q, 0, rs, 0);
      }
    } else {
      // Constant Pad: q(pad(dq(x), v)) = pad(q(dq(x)), q(v)) elementwise.
      auto mode = op->attr_string("mode", "constant");
      if (!mode.ok() || *mode != "constant" || g.opset < 11 || op->inputs.size() < 2 || !op->inputs[1] || !op->inputs[1]->constant) continue;
      if (op->inputs.size() > 3 && op->inputs[3]) continue;
      const Tensor& pads = *op->inputs[1]->constant;
      for (int64_t i = 0; i < pads.numel(); ++i) ok = ok && pads.get_as_double(i) >= 0;
      const bool has_value = op->inputs.size() > 2 && op->inputs[2];
      if (!ok || (has_value && (!op->inputs[2]->constant || op->inputs[2]->constant->numel() != 1))) continue;
      Tensor v = Tensor::empty(DType::f32, {1});
      v.data<float>()[0] = 0.f;
      if (has_value) v.data<float>()[0] = static_cast<float>(op->inputs[2]->constant->get_as_double(0));
      RKD_ASSIGN(Tensor qv, run_like(eval, *q, g.opset, 0, v, q->inputs[2]->constant->dtype()));
      Value* src = dq->inputs[0];
      if (!same_quantization(*dq, *q)) {
        auto table = site_table(eval, *dq, nullptr, 0, *q, g.opset);
        if (!table.ok()) return table.error();
        RKD_ASSIGN(Node * lut, add_lut(g, op->name, src, std::move(*table), *op->inputs[0]));
        src = lut->outputs[0];
      }
      RKD_ASSIGN(Tensor qv0, qv.reshape({}));
      Value* value = g.add_constant(op->name + "/int_value", std::move(qv0));
      RKD_ASSIGN(Node * p, g.add_node(op->name + "/int", "Pad", "", {src, op->inputs[1], value}, {g.fresh_name(op->outputs[0]->name + "/int")}));
      p->attrs = op->attrs;
      p->outputs[0]->dtype = q->inputs[2]->constant->dtype();
      p->outputs[0]->shape = op->outputs[0]->shape;
      g.move_output(q, 0, p, 0);
    }
    gone.insert(q);
    gone.insert(op);
    drop_if_sole(dq, op, gone);
  }
  return {};
}

Status mul_lut_sites(ir::Graph& g, std::set<const Node*>& gone, const ir::NodeEvaluator& eval) {
  std::vector<Node*> muls;
  for (const auto& np : g.nodes()) {
    if (np->op_type == "Mul" && np->domain.empty() && np->inputs.size() == 2 && np->outputs.size() == 1) muls.push_back(np.get());
  }
  // v as a function of one map: the live QLinearLut (256 entries) making it, or none (v itself).
  struct Factor {
    Value* x;
    Node* lut;
  };
  auto factor_of = [&](Value* v) -> Factor {
    Node* l = v ? v->producer : nullptr;
    if (!l || gone.count(l) || l->op_type != "QLinearLut" || l->domain != "rkdeploy" || l->inputs.size() < 2 || !l->inputs[1] ||
        !l->inputs[1]->constant || l->inputs[1]->constant->numel() != 256)
      return {v, nullptr};
    return {l->inputs[0], l};
  };
  for (Node* op : muls) {
    if (gone.count(op)) continue;
    Node* da = per_tensor_dq(op->inputs[0]);
    Node* db = per_tensor_dq(op->inputs[1]);
    Node* q = sole_per_tensor_q(g, op->outputs[0]);
    if (!da || !db || !q || gone.count(da) || gone.count(db) || gone.count(q)) continue;
    const auto as = ir::static_shape(op->inputs[0]), bs = ir::static_shape(op->inputs[1]), ys = ir::static_shape(op->outputs[0]);
    if (!as || !bs || !ys || *as != *bs || *as != *ys) continue;
    // x: the map both factors are functions of (each the map itself or a table of it).
    Value* xa = da->inputs[0];
    Value* xb = db->inputs[0];
    Factor fa{xa, nullptr}, fb{xb, nullptr};
    if (xa != xb) {
      const Factor ta = factor_of(xa), tb = factor_of(xb);
      if (tb.x == xa) fb = tb;
      else if (ta.x == xb) fa = ta;
      else if (ta.lut && tb.lut && ta.x == tb.x) fa = ta, fb = tb;
      else continue;
    }
    Value* x = fa.lut ? fa.x : xa;
    const Tensor cx = all_codes(*x->dtype);
    // Each factor's code for each code of x.
    const Tensor ca = fa.lut ? *fa.lut->inputs[1]->constant : cx;
    const Tensor cb = fb.lut ? *fb.lut->inputs[1]->constant : cx;
    auto table = [&]() -> Result<Tensor> {
      RKD_ASSIGN(Tensor fva, run_like(eval, *da, g.opset, 0, ca, DType::f32));
      RKD_ASSIGN(Tensor fvb, run_like(eval, *db, g.opset, 0, cb, DType::f32));
      RKD_ASSIGN(Tensor fm, run_with(eval, *op, g.opset, {{0, &fva}, {1, &fvb}}, DType::f32));
      return run_like(eval, *q, g.opset, 0, fm, q->inputs[2]->constant->dtype());
    }();
    if (!table.ok()) continue;  // a Mul the kernels cannot run in this form stays float
    RKD_ASSIGN(Node * nl, add_lut(g, op->name, x, std::move(*table), *q->outputs[0]));
    g.move_output(q, 0, nl, 0);
    gone.insert(q);
    gone.insert(op);
    for (Node* d : {da, db}) drop_if_sole(d, op, gone);
    // A factor's table read only by its DequantizeLinear, now gone, goes too.
    for (const auto& [lut, reader] : {std::pair{fa.lut, da}, std::pair{fb.lut, db}}) {
      if (lut && !gone.count(lut) && gone.count(reader) && lut->outputs[0]->consumers.size() == 1 &&
          std::find(g.outputs.begin(), g.outputs.end(), lut->outputs[0]) == g.outputs.end())
        gone.insert(lut);
    }
  }
  return {};
}

Status constant_add_luts(ir::Graph& g, std::set<const Node*>& gone, const ir::NodeEvaluator& eval) {
  for (const auto& np : g.nodes()) {
    Node* op = np.get();
    if (gone.count(op) || op->op_type != "QLinearAdd" || op->domain != "rkdeploy" || op->inputs.size() < 8 || op->outputs.size() != 1) continue;
    const Value* a = op->inputs[0];
    const Value* b = op->inputs[3];
    if (!a || !b || a->constant.has_value() == b->constant.has_value()) continue;
    const size_t vary = a->constant ? 3 : 0;
    const Value* c = a->constant ? a : b;
    Value* x = op->inputs[vary];
    if (c->constant->numel() != 1 || !x->dtype || !is_int8(*x->dtype) || !op->outputs[0]->dtype) continue;
    bool params = true;
    for (size_t i : {1u, 2u, 4u, 5u, 6u, 7u}) params = params && op->inputs[i] && op->inputs[i]->constant;
    if (!params) continue;
    const Tensor codes = all_codes(*x->dtype);
    auto table = run_with(eval, *op, g.opset, {{vary, &codes}}, *op->outputs[0]->dtype);
    if (!table.ok()) continue;  // an Add the kernel cannot run in this form stays as it is
    RKD_ASSIGN(Node * lut, add_lut(g, op->name, x, std::move(*table), *op->outputs[0]));
    g.move_output(op, 0, lut, 0);
    gone.insert(op);
  }
  return {};
}

Status compose_luts(ir::Graph& g, std::set<const Node*>& gone) {
  for (const auto& np : g.nodes()) {
    Node* b = np.get();
    if (gone.count(b) || b->op_type != "QLinearLut" || b->domain != "rkdeploy") continue;
    Node* a = b->inputs[0]->producer;
    if (!a || gone.count(a) || a->op_type != "QLinearLut" || a->domain != "rkdeploy") continue;
    if (a->outputs[0]->consumers.size() != 1 || std::find(g.outputs.begin(), g.outputs.end(), a->outputs[0]) != g.outputs.end()) continue;
    const Tensor& ta = *a->inputs[1]->constant;
    const Tensor& tb = *b->inputs[1]->constant;
    Tensor t = Tensor::empty(tb.dtype(), {256});
    const auto* pa = static_cast<const uint8_t*>(ta.raw());
    const auto* pb = static_cast<const uint8_t*>(tb.raw());
    const uint8_t flip = ta.dtype() == DType::i8 ? 0x80 : 0;  // a's output code -> b's index
    for (int i = 0; i < 256; ++i) static_cast<uint8_t*>(t.raw())[i] = pb[pa[i] ^ flip];
    Value* tv = g.add_constant(b->name + "/composed", std::move(t));
    g.set_input(b, 0, a->inputs[0]);
    g.set_input(b, 1, tv);
    // The composed table is no longer the LeakyRelu the NPU lowering reads from the marks.
    for (const char* k : kLeakyReluMarks) b->attrs.erase(k);
    gone.insert(a);
  }
  return {};
}

}  // namespace rkd::quant
