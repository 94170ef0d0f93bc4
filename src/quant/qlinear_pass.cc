// qdq-to-qlinear (qlinear.h): QDQ sites to integer operators (their kernels:
// src/runtime/op_registry_int8.cc and op_registry_rkdeploy.cc).
#include "quant/qlinear.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include "ir/op_info.h"
#include "ir/passes/shape_inference.h"
#include "quant/int8.h"
#include "quant/int8_tflite.h"
#include "quant/qlinear_lut.h"

namespace rkd::quant {

namespace {

using ir::Node;
using ir::Value;

// x = DequantizeLinear(q, scale, zp) with constant scale (and zero point).
struct Dq {
  Value* q = nullptr;
  Value* scale = nullptr;
  Value* zp = nullptr;
};
std::optional<Dq> dequantized(Value* v) {
  Node* d = ir::produced_by(v, "DequantizeLinear");
  if (!d || d->inputs.size() < 2 || !d->inputs[1] || !d->inputs[1]->constant) return std::nullopt;
  if (d->inputs.size() > 2 && d->inputs[2] && !d->inputs[2]->constant) return std::nullopt;
  return Dq{d->inputs[0], d->inputs[1], d->inputs.size() > 2 ? d->inputs[2] : nullptr};
}
bool per_tensor(const Value* scale) { return scale && scale->constant && scale->constant->numel() == 1; }

// The op's output y, read only by QuantizeLinear (per-tensor, constant zero point) directly or
// through one Relu or Clip(lo, hi) with constant bounds (a fused activation).
struct QuantizedOutput {
  Node* q = nullptr;
  Node* act = nullptr;  // the Relu or Clip, or nullptr
  Node* identity = nullptr;
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  float scale = 1;
  int32_t zero_point = 0, qmin = -128, qmax = 127;
};
std::optional<QuantizedOutput> quantized_output(const ir::Graph& g, Value* y) {
  auto single_reader = [&](Value* v, const char* type) -> Node* {
    if (!v || v->consumers.size() != 1 || v->consumers[0]->op_type != type || !v->consumers[0]->domain.empty()) return nullptr;
    return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end() ? nullptr : v->consumers[0];
  };
  QuantizedOutput r;
  if (Node* id = single_reader(y, "Identity")) {  // a name-giving Identity
    r.identity = id;
    y = id->outputs[0];
  }
  Node* relu = single_reader(y, "Relu");
  Node* clip = relu ? nullptr : single_reader(y, "Clip");
  if (relu) r.lo = 0;
  if (clip) {
    const bool bounds = clip->inputs.size() >= 3 && clip->inputs[1] && clip->inputs[2] && clip->inputs[1]->constant && clip->inputs[2]->constant &&
                        clip->inputs[1]->constant->numel() == 1 && clip->inputs[2]->constant->numel() == 1;
    if (!bounds) return std::nullopt;
    r.lo = clip->inputs[1]->constant->get_as_double(0);
    r.hi = clip->inputs[2]->constant->get_as_double(0);
  }
  r.act = relu ? relu : clip;
  r.q = r.act ? single_reader(r.act->outputs[0], "QuantizeLinear") : single_reader(y, "QuantizeLinear");
  if (!r.q || r.q->inputs.size() < 3 || !per_tensor(r.q->inputs[1]) || !r.q->inputs[2] || !r.q->inputs[2]->constant ||
      r.q->inputs[2]->constant->numel() != 1) {
    return std::nullopt;
  }
  auto range = quant::quantized_range(r.q->inputs[2]->constant->dtype());
  if (!range.ok()) return std::nullopt;
  r.qmin = range->first;
  r.qmax = range->second;
  r.scale = static_cast<float>(r.q->inputs[1]->constant->get_as_double(0));
  r.zero_point = static_cast<int32_t>(r.q->inputs[2]->constant->get_as_double(0));
  return r;
}

// ONNX Runtime's ReluQuantFusion: the activation is the output saturation itself when the
// zero point is the type's minimum and any upper bound lies at or above the largest value.
bool activation_is_saturation(const QuantizedOutput& o) {
  if (!o.act) return true;
  if (o.lo != 0 || o.zero_point != o.qmin) return false;
  return !std::isfinite(o.hi) || std::nearbyint(o.hi / o.scale) + o.qmin >= o.qmax;
}

// TFLite's CalculateActivationRangeQuantized: the fused activation's bounds in output units,
// zero_point + round_half_away(bound / scale), within the type's range.
std::pair<int32_t, int32_t> tflite_activation_range(const QuantizedOutput& o) {
  int32_t lo = o.qmin, hi = o.qmax;
  auto quantize = [&](double v) { return o.zero_point + static_cast<int32_t>(std::round(static_cast<float>(v) / o.scale)); };
  if (std::isfinite(o.lo)) lo = std::max(lo, quantize(o.lo));
  if (std::isfinite(o.hi)) hi = std::min(hi, quantize(o.hi));
  return {lo, hi};
}

// Which inputs of a TFLite-form op are quantized tensors (the rest: constant parameters).
std::optional<std::vector<size_t>> tflite_quantized_inputs(const Node& n) {
  static const std::set<std::string> unary = {"Sigmoid",    "Tanh",   "HardSwish",   "LeakyRelu", "Softmax",
                                              "ReduceMean", "Resize", "AveragePool", "MaxPool"};
  if (!n.domain.empty()) return std::nullopt;
  if (unary.count(n.op_type)) return std::vector<size_t>{0};
  if (n.op_type == "Add" || n.op_type == "Sub" || n.op_type == "Mul") return std::vector<size_t>{0, 1};
  if (n.op_type == "Concat") {
    std::vector<size_t> all;
    for (size_t i = 0; i < n.inputs.size(); ++i) all.push_back(i);
    return all;
  }
  return std::nullopt;
}

// A TFLite-form op whose attributes the integer kernels implement (others stay float).
bool tflite_supported(const Node& n, const std::vector<Dq>& ins, const QuantizedOutput& o) {
  const auto xs = ir::static_shape(ins[0].q);
  const auto ys = ir::static_shape(o.q->outputs[0]);
  if (!xs || !ys) return false;
  const bool fused_act = n.op_type == "Add" || n.op_type == "Sub" || n.op_type == "Mul" || n.op_type == "AveragePool" || n.op_type == "MaxPool";
  if (o.act && !fused_act) return false;
  if (n.op_type == "Softmax")
    return n.attr_int("axis", -1).value_or(0) == -1 || n.attr_int("axis", -1).value_or(0) == static_cast<int64_t>(xs->size()) - 1;
  if (n.op_type == "Resize") {
    return xs->size() == 4 && n.attr_string("mode", "nearest").value_or("") == "linear" &&
           std::set<std::string>{"half_pixel", "align_corners", "asymmetric"}.count(
               n.attr_string("coordinate_transformation_mode", "half_pixel").value_or(""));
  }
  if (n.op_type == "AveragePool" || n.op_type == "MaxPool") {
    const std::string ap = n.attr_string("auto_pad", "NOTSET").value_or("");
    return xs->size() == 4 && n.attr_int("ceil_mode", 0).value_or(1) == 0 && (ap == "NOTSET" || ap == "SAME_UPPER" || ap == "VALID") &&
           n.attr_int("count_include_pad", 0).value_or(1) == 0 &&
           n.attr_ints("dilations", {1, 1}).value_or(std::vector<int64_t>{}) == std::vector<int64_t>{1, 1};
  }
  if (n.op_type == "Add" || n.op_type == "Sub" || n.op_type == "Mul") {
    const auto bs = ir::static_shape(ins[1].q);
    int64_t nb = 1;
    for (int64_t d : bs.value_or(Shape{})) nb *= d;
    return bs && *xs == *ys && (*bs == *xs || nb == 1);
  }
  return true;
}

// Data movement commutes with a per-tensor DequantizeLinear: T(DQ(q)) = DQ(T(q)) exactly
// for Reshape, Transpose, Flatten, Squeeze, Unsqueeze, a nearest Resize, and Pad (edge,
// reflect, or constant 0, which is the zero point on the integer side). Moving T to the integer side lets the
// op after it see DequantizeLinear directly (e.g. a FULLY_CONNECTED on a 4-D tensor, flattened
// first) and moves 4x fewer bytes. A QuantizeLinear of a DequantizeLinear with the same
// scale, zero point and type returns the integers unchanged (round((q - z) s / s) + z = q:
// the float error is far below half a step), so that pair is dropped.
Status commute_data_movement(ir::Graph& g, std::set<const Node*>& gone) {
  std::vector<Node*> nodes;
  for (const auto& np : g.nodes()) nodes.push_back(np.get());
  for (Node* t : nodes) {
    if (!ir::op_has(*t, ir::kCommutesWithDequantize) || t->inputs.empty() || t->outputs.empty()) continue;
    if (t->op_type == "Resize" && !ir::resize_copies_elements(*t)) continue;
    // The data inputs' per-tensor dequantizes; a Concat's alike (scale, zero point, type), so
    // that one DequantizeLinear of the joined integers is exact.
    const size_t data_inputs = t->op_type == "Concat" ? t->inputs.size() : 1;
    auto zp_of = [](const Dq& d) { return d.zp && d.zp->constant ? d.zp->constant->get_as_double(0) : 0.0; };
    std::vector<Dq> dqs;
    for (size_t i = 0; i < data_inputs; ++i) {
      auto di = dequantized(t->inputs[i]);
      if (!di || !per_tensor(di->scale) || !di->q->dtype || (di->zp && di->zp->constant->numel() != 1)) break;
      if (i > 0 && (di->q->dtype != dqs[0].q->dtype || zp_of(*di) != zp_of(dqs[0]) ||
                    static_cast<float>(di->scale->constant->get_as_double(0)) != static_cast<float>(dqs[0].scale->constant->get_as_double(0))))
        break;
      dqs.push_back(*di);
    }
    if (dqs.size() != data_inputs) continue;
    const Dq* dq = &dqs[0];
    bool shaped = true;
    for (const Value* o : t->outputs) shaped = shaped && o && o->shape;
    if (!shaped) continue;
    std::vector<Value*> ins = t->inputs;
    for (size_t i = 0; i < data_inputs; ++i) ins[i] = dqs[i].q;
    double zp = 0;
    if (t->op_type == "Pad") {
      RKD_ASSIGN(std::string mode, t->attr_string("mode", "constant"));
      if (mode != "constant" && mode != "edge" && mode != "reflect") continue;
      if (mode == "constant") {
        // The real pad value must be 0: the integer side pads with the zero point.
        RKD_ASSIGN(float attr_value, t->attr_float("value", 0.f));
        const bool input_value = ins.size() > 2 && ins[2];
        if (attr_value != 0.f || (input_value && (!ins[2]->constant || ins[2]->constant->numel() != 1 || ins[2]->constant->get_as_double(0) != 0.0)))
          continue;
        zp = zp_of(*dq);
        if (g.opset >= 11) {
          Tensor z = Tensor::empty(*dq->q->dtype, {});
          if (*dq->q->dtype == DType::i8) z.data<int8_t>()[0] = static_cast<int8_t>(zp);
          else if (*dq->q->dtype == DType::u8) z.data<uint8_t>()[0] = static_cast<uint8_t>(zp);
          else continue;
          if (ins.size() < 3) ins.resize(3, nullptr);
          ins[2] = g.add_constant(t->name + "/zero_point", std::move(z));
        }
      }
    }
    std::vector<std::string> outs;
    for (const Value* o : t->outputs) outs.push_back(g.fresh_name(o->name + "/int"));
    RKD_ASSIGN(Node * tq, g.add_node(t->name + "/int", t->op_type, "", ins, outs));
    tq->attrs = t->attrs;
    if (t->op_type == "Pad" && g.opset < 11 && zp != 0) tq->attrs["value"] = static_cast<float>(zp);
    for (size_t k = 0; k < t->outputs.size(); ++k) {
      tq->outputs[k]->dtype = dq->q->dtype;
      tq->outputs[k]->shape = t->outputs[k]->shape;
      std::vector<Value*> dins{tq->outputs[k], dq->scale};
      if (dq->zp) dins.push_back(dq->zp);
      RKD_ASSIGN(Node * nd, g.add_node(t->name + "/dq" + (k ? std::to_string(k) : std::string()), "DequantizeLinear", "", dins,
                                       {g.fresh_name(t->outputs[k]->name + "/dq")}));
      nd->outputs[0]->dtype = DType::f32;
      nd->outputs[0]->shape = t->outputs[k]->shape;
      g.move_output(t, k, nd, 0);
    }
    gone.insert(t);
  }
  // add_node appends to the node list: walk a snapshot of it.
  nodes.clear();
  for (const auto& np : g.nodes()) nodes.push_back(np.get());
  for (Node* q : nodes) {
    if (gone.count(q) || q->op_type != "QuantizeLinear" || !q->domain.empty() || q->inputs.size() < 3 || !q->inputs[2]) continue;
    // Through a name-giving float Identity that only this Q reads (a graph output's): DQ ->
    // Identity -> Q is the integers as well; the float Identity is left dead.
    Value* src = q->inputs[0];
    if (Node* id0 = ir::produced_by(src, "Identity"); id0 && id0->domain.empty() && id0->inputs.size() == 1 && id0->inputs[0] &&
                                                      src->consumers.size() == 1 &&
                                                      std::find(g.outputs.begin(), g.outputs.end(), src) == g.outputs.end())
      src = id0->inputs[0];
    auto dq = dequantized(src);
    if (!dq || !dq->zp || !per_tensor(dq->scale) || !per_tensor(q->inputs[1]) || !q->inputs[2]->constant) continue;
    const Tensor& z1 = *dq->zp->constant;
    const Tensor& z2 = *q->inputs[2]->constant;
    if (z1.dtype() != z2.dtype() || z1.numel() != 1 || z2.numel() != 1 || z1.get_as_double(0) != z2.get_as_double(0)) continue;
    if (static_cast<float>(dq->scale->constant->get_as_double(0)) != static_cast<float>(q->inputs[1]->constant->get_as_double(0))) continue;
    // The Q's output keeps its name: an Identity of the integers produces it.
    RKD_ASSIGN(Node * id, g.add_node(q->name + "/same", "Identity", "", {dq->q}, {g.fresh_name(q->outputs[0]->name + "/same")}));
    id->outputs[0]->dtype = dq->q->dtype;
    id->outputs[0]->shape = q->outputs[0]->shape;
    g.move_output(q, 0, id, 0);
    gone.insert(q);
  }
  return {};
}

// A ConvTranspose with a 2 x 2 kernel, stride 2 and no padding (handdetect's upsampling) adds
// exactly one tap to each output cell: y[o, 2 i + a, 2 j + b] = b[o] + sum_c x[c, i, j]
// w[c, o, a, b]. That is a 1 x 1 convolution with 4 OC outputs (output (2 a + b) OC + o has
// the weights w[:, o, a, b], o's weight scale and bias) followed by DepthToSpace (DCR, 2), the
// same accumulator per output, so the same requantization: the DQ -> ConvTranspose -> Q site
// becomes DQ -> Conv -> Q -> DQ -> DepthToSpace -> Q with the output's parameters, which the
// rest of the pass makes a QLinearConv and an integer DepthToSpace (the last Q/DQ pair drops).
// Weights int8/uint8 constant [IC, OC, 2, 2], per tensor or per output channel (axis 1); the
// bias an int32 constant; group 1, unit dilations, no output padding.
Status convtranspose_as_conv(ir::Graph& g, std::set<const Node*>& gone) {
  std::vector<Node*> sites;
  for (const auto& np : g.nodes()) {
    if (ir::conv_transpose_is_2x2_stride2(*np)) sites.push_back(np.get());
  }
  for (Node* t : sites) {
    if (t->outputs.size() != 1) continue;
    auto o = quantized_output(g, t->outputs[0]);
    auto dx = dequantized(t->inputs[0]);
    Node* wdq = ir::produced_by(t->inputs[1], "DequantizeLinear");
    auto dw = dequantized(t->inputs[1]);
    if (!o || !dx || !per_tensor(dx->scale) || !dx->zp || !dw || !wdq || !dw->q->constant) continue;
    const Tensor& w = *dw->q->constant;
    if ((w.dtype() != DType::i8 && w.dtype() != DType::u8) || w.rank() != 4 || w.dim(2) != 2 || w.dim(3) != 2) continue;
    const int64_t IC = w.dim(0), OC = w.dim(1);
    const Tensor& ws = *dw->scale->constant;
    const bool per_channel = ws.numel() != 1;
    if (per_channel && (ws.numel() != OC || wdq->attr_int("axis", 1).value_or(0) != 1)) continue;
    if (dw->zp && dw->zp->constant->numel() != ws.numel()) continue;
    std::optional<Dq> db;
    if (t->inputs.size() > 2 && t->inputs[2]) {
      db = dequantized(t->inputs[2]);
      if (!db || !db->q->constant || db->q->constant->dtype() != DType::i32 || db->q->constant->numel() != OC || db->scale->constant->numel() != OC ||
          (db->zp && db->zp->constant->numel() != OC))
        continue;
    }
    // Output (2 a + b) OC + o of the 1 x 1 convolution: weights w[:, o, a, b].
    Tensor w2 = Tensor::empty(w.dtype(), {4 * OC, IC, 1, 1});
    const Tensor wc = w.contiguous();
    const auto* src = static_cast<const uint8_t*>(wc.raw());
    auto* dst = static_cast<uint8_t*>(w2.raw());
    for (int64_t ab = 0; ab < 4; ++ab)
      for (int64_t oc = 0; oc < OC; ++oc)
        for (int64_t c = 0; c < IC; ++c) dst[(ab * OC + oc) * IC + c] = src[(c * OC + oc) * 4 + ab];
    // A per-channel parameter (weight scale and zero point, bias and its scale) repeated for the
    // four groups; per-tensor ones stay.
    auto tiled = [&](const Tensor& v) {
      if (v.numel() == 1) return v;
      Tensor r = Tensor::empty(v.dtype(), {4 * v.numel()});
      const Tensor vc = v.contiguous();
      const size_t bytes = static_cast<size_t>(v.numel()) * dtype_size(v.dtype());
      for (int k = 0; k < 4; ++k) std::memcpy(static_cast<uint8_t*>(r.raw()) + k * bytes, vc.raw(), bytes);
      return r;
    };
    auto dq_of = [&](const std::string& base, Tensor q, const Tensor& scale, const Value* zp) -> Result<Value*> {
      std::vector<Value*> ins{g.add_constant(base + "/q", std::move(q)), g.add_constant(base + "/scale", tiled(scale))};
      if (zp) ins.push_back(g.add_constant(base + "/zero_point", tiled(*zp->constant)));
      RKD_ASSIGN(Node * d, g.add_node(base + "/dq", "DequantizeLinear", "", ins, {g.fresh_name(base + "/dq")}));
      d->attrs["axis"] = int64_t{0};
      d->outputs[0]->dtype = DType::f32;
      return d->outputs[0];
    };
    const std::string base = t->name + "/as_conv";
    RKD_ASSIGN(Value * wv, dq_of(base + "/weights", std::move(w2), ws, dw->zp));
    wv->shape = ir::to_dims({4 * OC, IC, 1, 1});
    std::vector<Value*> cin{t->inputs[0], wv};
    if (db) {
      RKD_ASSIGN(Value * bv, dq_of(base + "/bias", tiled(*db->q->constant), *db->scale->constant, db->zp));
      bv->shape = ir::to_dims({4 * OC});
      cin.push_back(bv);
    }
    const auto xs = ir::static_shape(t->inputs[0]);
    if (!xs || xs->size() != 4) continue;
    RKD_ASSIGN(Node * conv, g.add_node(base, "Conv", "", cin, {g.fresh_name(base)}));
    conv->attrs["kernel_shape"] = std::vector<int64_t>{1, 1};
    conv->outputs[0]->dtype = DType::f32;
    conv->outputs[0]->shape = ir::to_dims({(*xs)[0], 4 * OC, (*xs)[2], (*xs)[3]});
    Value* v = conv->outputs[0];
    if (o->act) {  // the fused activation moves with the accumulator
      std::vector<Value*> ain = o->act->inputs;
      ain[0] = v;
      RKD_ASSIGN(Node * act, g.add_node(base + "/act", o->act->op_type, "", ain, {g.fresh_name(base + "/act")}));
      act->attrs = o->act->attrs;
      act->outputs[0]->dtype = DType::f32;
      act->outputs[0]->shape = v->shape;
      v = act->outputs[0];
    }
    Node* q = o->q;
    RKD_ASSIGN(Node * q2, g.add_node(base + "/quantize", "QuantizeLinear", "", {v, q->inputs[1], q->inputs[2]}, {g.fresh_name(base + "/q")}));
    q2->outputs[0]->dtype = q->inputs[2]->constant->dtype();
    q2->outputs[0]->shape = v->shape;
    RKD_ASSIGN(Node * dq2,
               g.add_node(base + "/dequantize", "DequantizeLinear", "", {q2->outputs[0], q->inputs[1], q->inputs[2]}, {g.fresh_name(base + "/dq")}));
    dq2->outputs[0]->dtype = DType::f32;
    dq2->outputs[0]->shape = v->shape;
    RKD_ASSIGN(Node * d2s, g.add_node(base + "/depth_to_space", "DepthToSpace", "", {dq2->outputs[0]}, {g.fresh_name(base + "/depth_to_space")}));
    d2s->attrs["blocksize"] = int64_t{2};
    d2s->attrs["mode"] = std::string("DCR");
    d2s->outputs[0]->dtype = DType::f32;
    d2s->outputs[0]->shape = t->outputs[0]->shape;
    g.set_input(q, 0, d2s->outputs[0]);
    gone.insert(t);
    if (o->act) gone.insert(o->act);
    if (o->identity) gone.insert(o->identity);
  }
  return {};
}

// An integer Pad that only feeds a QLinearConv and pads H and W with the convolution's input
// zero point is the convolution's own padding (QLinearConv pads with x_zero_point): folded
// into its pads, exactly. Likewise a Pad with the type's minimum before an integer MaxPool
// (a PadV2 of -inf, quantized): the maximum over a window that holds a cell of the map does
// not change with cells of the minimum, so the padding joins the MaxPool's own where every
// window still holds a cell (pads below the kernel).
Status fold_pad_into_window(ir::Graph& g, std::set<const Node*>& gone) {
  for (const auto& np : g.nodes()) {
    Node* c = np.get();
    if (gone.count(c) || !c->domain.empty() || c->inputs.empty() || !c->inputs[0]) continue;
    // The pad value that folds: the convolution's input zero point, the MaxPool's type minimum.
    std::optional<double> fold_value;
    const bool max_pool = c->op_type == "MaxPool" && c->inputs[0]->dtype &&
                          (*c->inputs[0]->dtype == DType::i8 || *c->inputs[0]->dtype == DType::u8) && (c->outputs.size() < 2 || !c->outputs[1]);
    if (c->op_type == "QLinearConv" && c->inputs.size() >= 3 && c->inputs[2] && c->inputs[2]->constant) {
      fold_value = c->inputs[2]->constant->get_as_double(0);
    } else if (max_pool) {
      fold_value = *c->inputs[0]->dtype == DType::i8 ? -128.0 : 0.0;
    } else {
      continue;
    }
    // Through the Identity a dropped DequantizeLinear -> QuantizeLinear pair leaves.
    // (Readers whose outputs nobody reads - the DequantizeLinear the commutation left - do
    // not count: dead-code elimination removes them.)
    auto is_output = [&](const Value* v) { return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end(); };
    auto live = [&](const Node* r) {
      for (const Value* o : r->outputs) {
        if (o && (!o->consumers.empty() || is_output(o))) return true;
      }
      return false;
    };
    auto sole_reader = [&](const Value* v) { return std::count_if(v->consumers.begin(), v->consumers.end(), live) == 1 && !is_output(v); };
    Node* id = ir::produced_by(c->inputs[0], "Identity");
    const Value* padded = id && id->domain.empty() && sole_reader(c->inputs[0]) ? id->inputs[0] : c->inputs[0];
    Node* p = ir::produced_by(padded, "Pad");
    if (!p || gone.count(p) || !p->domain.empty() || !sole_reader(padded) || !sole_reader(c->inputs[0])) continue;
    RKD_ASSIGN(std::string mode, p->attr_string("mode", "constant"));
    RKD_ASSIGN(std::string auto_pad, c->attr_string("auto_pad", "NOTSET"));
    // VALID is pads 0; SAME_* depend on the input size and stay as they are.
    if (mode != "constant" || (auto_pad != "NOTSET" && auto_pad != "VALID") || (p->inputs.size() > 3 && p->inputs[3])) continue;
    std::vector<int64_t> pads;
    double value = 0;
    if (g.opset >= 11) {
      if (p->inputs.size() < 2 || !p->inputs[1] || !p->inputs[1]->constant) continue;
      const Tensor& t = *p->inputs[1]->constant;
      for (int64_t i = 0; i < t.numel(); ++i) pads.push_back(static_cast<int64_t>(t.get_as_double(i)));
      if (p->inputs.size() > 2 && p->inputs[2]) {
        if (!p->inputs[2]->constant || p->inputs[2]->constant->numel() != 1) continue;
        value = p->inputs[2]->constant->get_as_double(0);
      }
    } else {
      RKD_ASSIGN(pads, p->attr_ints("pads", {}));
      RKD_ASSIGN(float v, p->attr_float("value", 0.f));
      value = v;
    }
    if (pads.size() != 8 || value != *fold_value) continue;
    // [n, c, h, w] begins then ends: only H and W, never negative.
    if (pads[0] || pads[1] || pads[4] || pads[5] || pads[2] < 0 || pads[3] < 0 || pads[6] < 0 || pads[7] < 0) continue;
    RKD_ASSIGN(auto cp, c->attr_ints("pads", {0, 0, 0, 0}));
    if (auto_pad == "VALID") cp = {0, 0, 0, 0};
    if (cp.size() != 4) continue;
    const std::vector<int64_t> folded{cp[0] + pads[2], cp[1] + pads[3], cp[2] + pads[6], cp[3] + pads[7]};
    if (max_pool) {
      RKD_ASSIGN(auto k, c->attr_ints("kernel_shape", {}));
      RKD_ASSIGN(int64_t ceil_mode, c->attr_int("ceil_mode", 0));
      if (k.size() != 2 || ceil_mode != 0 || folded[0] >= k[0] || folded[2] >= k[0] || folded[1] >= k[1] || folded[3] >= k[1]) continue;
    }
    c->attrs["auto_pad"] = std::string("NOTSET");
    c->attrs["pads"] = folded;
    const bool through_identity = padded != c->inputs[0];
    // The dead readers go with the Pad (and the Identity).
    auto drop_dead_readers = [&](const Value* v) {
      for (const Node* r : v->consumers) {
        if (!live(r)) gone.insert(r);
      }
    };
    drop_dead_readers(padded);
    if (through_identity) drop_dead_readers(c->inputs[0]);
    g.set_input(c, 0, p->inputs[0]);
    gone.insert(p);
    if (through_identity) gone.insert(id);
  }
  return {};
}

// A QLinear node computing op (ONNX graphs: Add or Mul) replaces op and its QuantizeLinear
// (and fused activation, name-giving Identity): the node produces the QuantizeLinear's output.
void replace_quantized(ir::Graph& g, Node* op, const QuantizedOutput& o, Node* ql, std::set<const Node*>& gone) {
  ql->outputs[0]->dtype = o.q->inputs[2]->constant->dtype();
  ql->outputs[0]->shape = o.q->outputs[0]->shape;
  g.move_output(o.q, 0, ql, 0);
  gone.insert(o.q);
  gone.insert(op);
  if (o.act) gone.insert(o.act);
  if (o.identity) gone.insert(o.identity);
}

// ONNX graphs: DequantizeLinear x2 -> Add, Sub, Max, Min or Mul -> QuantizeLinear as
// rkdeploy.QLinearAdd / QLinearSub / QLinearMax / QLinearMin / QLinearMul (inputs as
// com.microsoft's: A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp), ONNX Runtime's
// arithmetic (quant/int8.h onnx_float: its QLinearAdd / QLinearMul, and for the others the
// float32 DequantizeLinear -> op -> QuantizeLinear it runs) or the graph's convention
// (rkd_requant). A of the output's shape, B broadcasting to it one way (one value per
// channel: squeeze-excite, a per-channel bias); a Mul's operands are swapped when only the
// second has the output's shape. nullptr: the pattern does not apply.
Result<Node*> onnx_binary(ir::Graph& g, const Node& op, std::vector<Dq> ins, const QuantizedOutput& o, const std::string& requant) {
  auto sa = ir::static_shape(ins[0].q), sb = ir::static_shape(ins[1].q);
  const auto sy = ir::static_shape(o.q->outputs[0]);
  if (!sa || !sb || !sy || !activation_is_saturation(o)) return nullptr;
  const bool mul = op.op_type == "Mul";
  if (mul && *sa != *sy && *sb == *sy) {
    std::swap(ins[0], ins[1]);
    std::swap(sa, sb);
  }
  if (*sa != *sy || sb->size() > sa->size()) return nullptr;
  for (size_t d = 0; d < sb->size(); ++d) {
    const int64_t bd = (*sb)[d], ad = (*sa)[sa->size() - sb->size() + d];
    if (bd != 1 && bd != ad) return nullptr;
  }
  std::vector<Value*> args;
  for (const Dq& d : ins) args.insert(args.end(), {d.q, d.scale, d.zp});
  args.insert(args.end(), {o.q->inputs[1], o.q->inputs[2]});
  RKD_ASSIGN(Node * ql,
             g.add_node(op.name + "/qlinear", "QLinear" + op.op_type, "rkdeploy", args, {g.fresh_name(o.q->outputs[0]->name + "/qlinear")}));
  if (!requant.empty()) ql->attrs["rkd_requant"] = requant;
  return ql;
}

Status onnx_muls(ir::Graph& g, std::set<const Node*>& gone, const std::string& requant) {
  std::vector<Node*> muls;
  for (const auto& np : g.nodes()) {
    if (np->op_type == "Mul" && np->domain.empty() && np->inputs.size() == 2 && np->outputs.size() == 1 && !gone.count(np.get()))
      muls.push_back(np.get());
  }
  for (Node* op : muls) {
    auto o = quantized_output(g, op->outputs[0]);
    if (!o) continue;
    std::vector<Dq> ins;
    for (Value* v : op->inputs) {
      auto d = dequantized(v);
      if (!d || !per_tensor(d->scale) || !d->zp || !d->q->dtype || *d->q->dtype != o->q->inputs[2]->constant->dtype()) break;
      ins.push_back(*d);
    }
    if (ins.size() != 2) continue;
    RKD_ASSIGN(Node * ql, onnx_binary(g, *op, ins, *o, requant));
    if (ql) replace_quantized(g, op, *o, ql, gone);
  }
  return {};
}

}  // namespace

ir::Pass qdq_to_qlinear_pass(ir::NodeEvaluator eval) {
  return ir::Pass{
      "qdq-to-qlinear", [eval](ir::Graph& g) -> Status {
        std::set<const Node*> gone;
        // Removes the replaced nodes and restores topological order.
        auto flush = [&]() -> Status {
          if (gone.empty()) return {};
          g.remove_nodes([&](const Node& n) { return gone.count(&n) > 0; });
          gone.clear();
          return g.sort_topologically();
        };
        RKD_TRY(convtranspose_as_conv(g, gone));
        RKD_TRY(flush());
        RKD_TRY(commute_data_movement(g, gone));
        RKD_TRY(flush());
        auto requant = g.metadata.find("rkdeploy.requant");
        const bool tflite = requant != g.metadata.end() && requant->second.rfind("tflite_", 0) == 0;
        std::vector<Node*> ops, others;
        for (const auto& np : g.nodes()) {
          if ((np->op_type == "Conv" || np->op_type == "MatMul" || np->op_type == "Gemm") && np->domain.empty()) ops.push_back(np.get());
          else others.push_back(np.get());
        }
        // TFLite-form ops (graphs imported from TFLite): every input dequantized per
        // tensor -> op -> [fused Relu/Clip] -> QuantizeLinear becomes
        // rkdeploy.QLinearTflite (quant/int8.h, quant/int8_tflite.h). ONNX graphs:
        // DequantizeLinear x2 -> Add / Sub / Max / Min -> QuantizeLinear becomes
        // rkdeploy.QLinearAdd / ... (onnx_binary) with ONNX Runtime's arithmetic
        // (quant/int8.h, onnx_float), or the NPU's when the graph's convention is rknpu_out_cvt.
        for (Node* op : others) {
          const bool binary = op->domain.empty() && op->inputs.size() == 2 &&
                              (op->op_type == "Add" || op->op_type == "Sub" || op->op_type == "Max" || op->op_type == "Min");
          auto which =
              tflite ? tflite_quantized_inputs(*op) : (binary ? std::optional<std::vector<size_t>>(std::vector<size_t>{0, 1}) : std::nullopt);
          if (!which || which->empty() || op->outputs.empty()) continue;
          auto o = quantized_output(g, op->outputs[0]);
          if (!o) continue;
          std::vector<Dq> ins;
          for (size_t i : *which) {
            auto d = i < op->inputs.size() ? dequantized(op->inputs[i]) : std::nullopt;
            if (!d || !per_tensor(d->scale) || !d->zp || !d->q->dtype) break;
            if (*d->q->dtype != o->q->inputs[2]->constant->dtype()) break;
            ins.push_back(*d);
          }
          if (ins.size() != which->size()) continue;
          std::vector<Value*> args;
          for (const Dq& d : ins) args.insert(args.end(), {d.q, d.scale, d.zp});
          args.insert(args.end(), {o->q->inputs[1], o->q->inputs[2]});
          Node* ql = nullptr;
          if (tflite) {
            if (!tflite_supported(*op, ins, *o)) continue;
            RKD_ASSIGN(ql, g.add_node(op->name + "/qlinear", "QLinearTflite", "rkdeploy", args, {g.fresh_name(o->q->outputs[0]->name + "/qlinear")}));
            ql->attrs = op->attrs;
            ql->attrs["op"] = op->op_type;
            ql->attrs["rkd_requant"] = requant->second;
            const auto [lo, hi] = tflite_activation_range(*o);
            ql->attrs["act_min"] = int64_t{lo};
            ql->attrs["act_max"] = int64_t{hi};
          } else {
            RKD_ASSIGN(ql, onnx_binary(g, *op, ins, *o, requant != g.metadata.end() ? requant->second : std::string()));
            if (!ql) continue;
          }
          replace_quantized(g, op, *o, ql, gone);
        }
        for (Node* op : ops) {
          const bool conv = op->op_type == "Conv";
          const bool gemm = op->op_type == "Gemm";
          // Gemm: Y = A B (+ C) of a 2-D A, alpha = beta = 1 (B transposed or not: QLinearMatMul's
          // B is [K, N]).
          int64_t trans_b = 0;
          if (gemm) {
            RKD_ASSIGN(const double alpha, op->attr_float("alpha", 1.0));
            RKD_ASSIGN(const double beta, op->attr_float("beta", 1.0));
            RKD_ASSIGN(const int64_t trans_a, op->attr_int("transA", 0));
            RKD_ASSIGN(trans_b, op->attr_int("transB", 0));
            const auto as = op->inputs.empty() ? std::nullopt : ir::static_shape(op->inputs[0]);
            if (alpha != 1.0 || beta != 1.0 || trans_a != 0 || !as || as->size() != 2) continue;
          }
          // MatMul + Add(DequantizeLinear(int32 bias)), either operand: a fully connected layer
          // (TFLite's FULLY_CONNECTED as imported, PyTorch's Linear on 3-D inputs as quantize
          // writes it); the bias joins QLinearMatMul.
          Node* bias_add = nullptr;
          size_t bias_add_input = 1;
          if (op->op_type == "MatMul" && op->outputs[0]->consumers.size() == 1 && op->outputs[0]->consumers[0]->op_type == "Add" &&
              op->outputs[0]->consumers[0]->domain.empty() && std::find(g.outputs.begin(), g.outputs.end(), op->outputs[0]) == g.outputs.end()) {
            Node* a = op->outputs[0]->consumers[0];
            if (a->inputs.size() == 2 && a->inputs[0] != a->inputs[1]) {
              bias_add_input = a->inputs[0] == op->outputs[0] ? 1 : 0;
              auto db = dequantized(a->inputs[bias_add_input]);
              if (db && db->q->constant && db->q->constant->dtype() == DType::i32) bias_add = a;
            }
          }
          auto o = quantized_output(g, bias_add ? bias_add->outputs[0] : op->outputs[0]);
          // ONNX: only an activation that is the output saturation itself; TFLite:
          // any fused Relu/Relu6 range, clamped after requantization as TFLite does.
          if (!o || (!tflite && !activation_is_saturation(*o))) continue;
          Node* qy = o->q;
          auto dx = dequantized(op->inputs[0]);
          auto dw = op->inputs.size() > 1 ? dequantized(op->inputs[1]) : std::nullopt;
          if (!dx || !dw || !per_tensor(dx->scale) || !dx->zp) continue;
          if (!dw->q->constant) continue;
          Value* bias_q = nullptr;
          Value* bias_in = (conv || gemm) && op->inputs.size() > 2 ? op->inputs[2] : bias_add ? bias_add->inputs[bias_add_input] : nullptr;
          if (bias_in) {
            auto db = dequantized(bias_in);
            if (!db || !db->q->constant || db->q->constant->dtype() != DType::i32) continue;
            // The bias scale must be x_s * w_s (per channel), zero point 0.
            bool ok = true;
            const Tensor& bs = *db->scale->constant;
            const Tensor& ws = *dw->scale->constant;
            const double xs = dx->scale->constant->get_as_double(0);
            for (int64_t c = 0; c < bs.numel() && ok; ++c) {
              const double want = static_cast<double>(static_cast<float>(xs * ws.get_as_double(ws.numel() == 1 ? 0 : c)));
              ok = std::fabs(bs.get_as_double(c) - want) <= 1e-6 * want;
            }
            if (db->zp) {
              for (int64_t c = 0; c < db->zp->constant->numel() && ok; ++c) ok = db->zp->constant->get_as_double(c) == 0;
            }
            if (!ok) continue;
            bias_q = db->q;
          }
          // QLinearMatMul's B [K, N]: a Gemm's transposed B as a transposed constant (its scales
          // and zero points per N either way).
          Value* w_q = dw->q;
          if (gemm && trans_b) {
            const Tensor& bt = *dw->q->constant;
            if (bt.rank() != 2 || dtype_size(bt.dtype()) != 1) continue;
            if (!per_tensor(dw->scale) && dw->scale->constant->numel() != bt.dim(0)) continue;
            Tensor t = Tensor::empty(bt.dtype(), {bt.dim(1), bt.dim(0)});
            const Tensor bc = bt.contiguous();
            const auto* src = static_cast<const uint8_t*>(bc.raw());
            auto* dst = static_cast<uint8_t*>(t.raw());
            for (int64_t n = 0; n < bt.dim(0); ++n)
              for (int64_t k = 0; k < bt.dim(1); ++k) dst[k * bt.dim(0) + n] = src[n * bt.dim(1) + k];
            w_q = g.add_constant(dw->q->name + "/transposed", std::move(t));
          } else if (!conv && !per_tensor(dw->scale) && dw->scale->constant->numel() != ir::static_shape(dw->q).value_or(Shape{0}).back()) {
            continue;
          }
          Value* w_zp = dw->zp;
          if (!w_zp) {
            Tensor z = Tensor::empty(dw->q->constant->dtype(), {1});
            w_zp = g.add_constant(op->name + "/w_zero_point", z);
          }
          std::vector<Value*> ins{dx->q, dx->scale, dx->zp, w_q, dw->scale, w_zp, qy->inputs[1], qy->inputs[2]};
          if (bias_q) ins.push_back(bias_q);
          RKD_ASSIGN(Node * ql, g.add_node(op->name + "/qlinear", conv ? "QLinearConv" : "QLinearMatMul", "", ins,
                                           {g.fresh_name(qy->outputs[0]->name + "/qlinear")}));
          if (conv) {
            for (const char* a : {"strides", "dilations", "pads", "group", "auto_pad", "kernel_shape"}) {
              if (op->attrs.count(a)) ql->attrs[a] = op->attrs.at(a);
            }
          }
          if (requant != g.metadata.end()) ql->attrs["rkd_requant"] = requant->second;
          if (tflite && o->act) {
            const auto [lo, hi] = tflite_activation_range(*o);
            ql->attrs["rkd_act_min"] = int64_t{lo};
            ql->attrs["rkd_act_max"] = int64_t{hi};
          }
          // The QLinear node produces the QuantizeLinear's output value (its name stays).
          g.move_output(qy, 0, ql, 0);
          gone.insert(qy);
          gone.insert(op);
          if (o->act) gone.insert(o->act);
          if (o->identity) gone.insert(o->identity);
          if (bias_add) gone.insert(bias_add);
        }
        RKD_TRY(flush());
        if (!tflite) {
          RKD_TRY(lut_sites(g, gone, eval));
          RKD_TRY(flush());
          RKD_TRY(constant_add_luts(g, gone, eval));
          RKD_TRY(flush());
          RKD_TRY(mul_lut_sites(g, gone, eval));
          RKD_TRY(flush());
          RKD_TRY(compose_luts(g, gone));
          RKD_TRY(flush());
          // The Muls no table took (x Sigmoid(x), hard-swish's products are tables now).
          RKD_TRY(onnx_muls(g, gone, requant != g.metadata.end() ? requant->second : std::string()));
          RKD_TRY(flush());
        }
        RKD_TRY(fold_pad_into_window(g, gone));
        return flush();
      }};
}

}  // namespace rkd::quant
