// Float graph -> QDQ graph (contract in qdq.h).
#include "quant/qdq.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "ir/op_info.h"
#include "ir/passes/shape_inference.h"

namespace rkd::quant {

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

bool is_float_activation(const Value* v) { return v && !v->constant && v->dtype == DType::f32; }

bool is_graph_output(const Graph& g, const Value* v) { return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end(); }

// Clip to [0, 6] with constant bounds, or Relu: a TFLite fused activation.
bool is_fused_activation(const Node& n) {
  if (!n.domain.empty()) return false;
  if (n.op_type == "Relu") return true;
  if (n.op_type != "Clip" || n.inputs.size() < 3) return false;
  const Value* lo = n.inputs[1];
  const Value* hi = n.inputs[2];
  return lo && hi && lo->constant && hi->constant && lo->constant->numel() == 1 && hi->constant->numel() == 1 &&
         lo->constant->get_as_double(0) == 0.0 && hi->constant->get_as_double(0) == 6.0;
}

bool same_scale_op(const Node& n) {
  if (!ir::op_has(n, ir::kSameScale)) return false;
  if (n.op_type == "Resize") return ir::resize_copies_elements(n);
  if (n.op_type == "Pad") {
    if (n.attr_string("mode", "constant").value_or("") != "constant") return false;
    return n.inputs.size() < 3 || !n.inputs[2] || (n.inputs[2]->constant && n.inputs[2]->constant->get_as_double(0) == 0.0);
  }
  return true;
}

struct UnionFind {
  std::map<Value*, Value*> parent;
  Value* find(Value* v) {
    auto it = parent.find(v);
    if (it == parent.end()) return parent[v] = v;
    if (it->second == v) return v;
    return it->second = find(it->second);
  }
  void unite(Value* a, Value* b) { parent[find(a)] = find(b); }
};

Tensor scalar_f32(float v) {
  Tensor t = Tensor::empty(DType::f32, {});
  t.data<float>()[0] = v;
  return t;
}
// A zero point of the quantized type (int8-domain value v; uint8 stores v + 128).
Tensor scalar_q(DType dt, int32_t v) {
  Tensor t = Tensor::empty(dt, {});
  if (dt == DType::u8) t.data<uint8_t>()[0] = static_cast<uint8_t>(v + 128);
  else t.data<int8_t>()[0] = static_cast<int8_t>(v);
  return t;
}

void copy_type(Value* to, const Value* from, DType dt) {
  to->dtype = dt;
  to->shape = from->shape;
}

// Adds DequantizeLinear(q, scale, zp[, axis]) -> a new float value named `name`.
Result<Value*> add_dequantize(Graph& g, const std::string& name, Value* q, Value* scale, Value* zp, int64_t axis, const Value* shape_from) {
  std::string out = name;
  for (int k = 1; g.find(out); ++k) out = name + "_" + std::to_string(k);
  RKD_ASSIGN(Node * dq, g.add_node(out + "/dequantize", "DequantizeLinear", "", {q, scale, zp}, {out}));
  if (axis >= 0) dq->attrs["axis"] = axis;
  copy_type(dq->outputs[0], shape_from, DType::f32);
  return dq->outputs[0];
}

// Symmetric int8 weights: scales per slice along `axis` (or one), values rounded half to even.
struct QuantizedWeights {
  Tensor q;
  std::vector<float> scales;
};

std::vector<float> weight_scales(const Tensor& w, int axis, bool per_channel) {
  const int64_t channels = per_channel ? w.dim(axis) : 1;
  std::vector<double> amax(static_cast<size_t>(channels), 0.0);
  int64_t inner = 1;
  for (int d = axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
  const float* p = w.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t c = per_channel ? (i / inner) % w.dim(axis) : 0;
    amax[static_cast<size_t>(c)] = std::max(amax[static_cast<size_t>(c)], std::fabs(static_cast<double>(p[i])));
  }
  std::vector<float> s(amax.size());
  for (size_t c = 0; c < s.size(); ++c) s[c] = amax[c] > 0 ? static_cast<float>(amax[c] / 127.0) : 1.f;
  return s;
}

Tensor quantize_weights(const Tensor& w, int axis, const std::vector<float>& s) {
  Tensor q = Tensor::empty(DType::i8, w.shape());
  int64_t inner = 1;
  for (int d = axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
  const float* p = w.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    const size_t c = s.size() == 1 ? 0 : static_cast<size_t>((i / inner) % w.dim(axis));
    q.data<int8_t>()[i] = static_cast<int8_t>(std::clamp(std::nearbyint(p[i] / s[c]), -127.f, 127.f));
  }
  return q;
}

// uint8 asymmetric per-tensor weights (QdqOptions::dtype u8).
struct U8Weights {
  Tensor q;
  float scale = 1;
  int32_t zero_point = 0;
};
U8Weights quantize_weights_u8(const Tensor& w, float min_scale) {
  const float* p = w.data<float>();
  double lo = 0, hi = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    lo = std::min(lo, static_cast<double>(p[i]));
    hi = std::max(hi, static_cast<double>(p[i]));
  }
  U8Weights r;
  r.scale = hi > lo ? std::max(static_cast<float>((hi - lo) / 255.0), min_scale) : std::max(1.f, min_scale);
  r.zero_point = static_cast<int32_t>(std::clamp(std::nearbyint(-lo / r.scale), 0.0, 255.0));
  r.q = Tensor::empty(DType::u8, w.shape());
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float v = std::nearbyint(p[i] / r.scale) + static_cast<float>(r.zero_point);
    r.q.data<uint8_t>()[i] = static_cast<uint8_t>(std::clamp(v, 0.f, 255.f));
  }
  return r;
}

Tensor vector_f32(const std::vector<float>& v) {
  Tensor t = Tensor::empty(DType::f32, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// A Concat whose inputs' calibrated ranges differ by more than kMixedRangeBits: one scale for
// all of them would leave the narrowest branch fewer than 256 / 2^kMixedRangeBits levels.
// When the Concat's output is a graph output, directly or through layout-only ops and Concats
// (the concatenation is among the model's last steps, free on the CPU), each input keeps its
// own parameters and the Concat and those ops run in float: their outputs are not quantized.
// Otherwise the shared scale stays (the readers need one int8 value) and the loss is
// reported. Either way the report names the node. Returns whether the Concat was split.
constexpr double kMixedRangeBits = 2.0;

bool split_mixed_concat(const Graph& g, const Node& n, const std::map<std::string, Range>& ranges, std::set<Value*>& act, QdqReport& rep) {
  // A float input that stays float (post-processing, --keep-float) would be quantized at the
  // other inputs' scale: CenterNet's [x0, y0, x1, y1, score, class] lost every score that way.
  // The Concat stays float, and so do the layout ops that only pass its value on.
  const bool float_input = std::any_of(n.inputs.begin(), n.inputs.end(), [&](Value* in) { return is_float_activation(in) && !act.count(in); });
  if (float_input) {
    for (Value* v = n.outputs[0]; v && act.erase(v);) {
      v = v->consumers.size() == 1 && ir::op_has(*v->consumers[0], ir::kLayoutOnly) && !v->consumers[0]->outputs.empty() ? v->consumers[0]->outputs[0]
                                                                                                                         : nullptr;
    }
    return true;
  }
  double lo = 0, hi = 0, narrowest = -1;
  std::string narrow_name;
  for (const Value* in : n.inputs) {
    if (!in || !act.count(const_cast<Value*>(in))) continue;
    const Range r = ranges.at(in->name);
    const double rlo = std::min(0.0, static_cast<double>(r.lo)), rhi = std::max(0.0, static_cast<double>(r.hi));
    lo = std::min(lo, rlo);
    hi = std::max(hi, rhi);
    if (narrowest < 0 || rhi - rlo < narrowest) {
      narrowest = rhi - rlo;
      narrow_name = in->name;
    }
  }
  if (narrowest <= 0 || hi - lo <= 0) return false;
  const double levels = 256.0 * narrowest / (hi - lo);
  if (levels >= 256.0 / std::exp2(kMixedRangeBits)) return false;
  char buf[512];
  // The Concat's value, followed through layout-only ops (Reshape, Transpose, ...) and further
  // Concats, each read once, up to a graph output: the model's last steps.
  std::vector<Value*> tail = {n.outputs[0]};
  auto passes_on = [](const Node& r) { return ir::op_has(r, ir::kLayoutOnly) || (r.op_type == "Concat" && r.domain.empty()); };
  while (!is_graph_output(g, tail.back()) && tail.back()->consumers.size() == 1 && passes_on(*tail.back()->consumers[0]) &&
         !tail.back()->consumers[0]->outputs.empty() && tail.back()->consumers[0]->outputs[0]) {
    tail.push_back(tail.back()->consumers[0]->outputs[0]);
  }
  const bool output = is_graph_output(g, tail.back());
  std::snprintf(buf, sizeof buf, "Concat '%s': one int8 scale over its inputs (range [%.4g, %.4g]) would leave input '%s' %.1f of 256 levels; %s",
                n.name.c_str(), lo, hi, narrow_name.c_str(), levels,
                output ? "each input quantized with its own parameters, the Concat (the model's last step) kept in float"
                       : "kept (its readers need one int8 value); --keep-float with this node's name keeps it in float");
  rep.warnings.emplace_back(buf);
  if (!output) return false;
  for (Value* v : tail) act.erase(v);
  ++rep.mixed_range_concats;
  return true;
}

// A Concat inside the model (its value does not reach a graph output through layout ops)
// whose narrowest input would keep fewer than 256 / 2^kCollapseBits levels under one scale
// (DEIMv2's encoder concatenates a map of range 0.004 with one of range 1.8: 1.3 levels) is
// kept in float, and so are the nodes that read its value (through layout-only ops): a
// reader's per-tensor int8 input would lose the narrow branch just the same. An Add or Sub of
// two activations alike, its output's range the scale's: a residual stream that adds a branch
// of a few of the sum's levels (DEIMv2's decoder: 6) loses the branch in the sum's int8 value.
// Each is named in a warning; returns them.
constexpr double kCollapseBits = 4.0;

std::set<const Node*> collapsing_joins(const Graph& g, const std::map<std::string, Range>& ranges, const std::set<Value*>& act, QdqReport& rep) {
  std::set<const Node*> kept;
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    const bool concat = n.op_type == "Concat", sum = n.op_type == "Add" || n.op_type == "Sub";
    if (!(concat || sum) || !n.domain.empty() || n.outputs.empty() || !act.count(n.outputs[0])) continue;
    double lo = 0, hi = 0, narrowest = -1;
    std::string narrow_name;
    bool all_act = true;
    int inputs = 0;
    for (const Value* in : n.inputs) {
      if (!in || in->constant) {
        all_act = all_act && concat;  // a sum with a constant operand is a shift, not two branches
        continue;
      }
      if (!act.count(const_cast<Value*>(in))) all_act = false;
      auto it = ranges.find(in->name);
      if (it == ranges.end()) continue;
      ++inputs;
      const double rlo = std::min(0.0, static_cast<double>(it->second.lo)), rhi = std::max(0.0, static_cast<double>(it->second.hi));
      lo = std::min(lo, rlo);
      hi = std::max(hi, rhi);
      if (narrowest < 0 || rhi - rlo < narrowest) {
        narrowest = rhi - rlo;
        narrow_name = in->name;
      }
    }
    if (sum) {
      auto it = ranges.find(n.outputs[0]->name);
      if (it == ranges.end() || inputs != 2) continue;
      lo = std::min(0.0, static_cast<double>(it->second.lo));
      hi = std::max(0.0, static_cast<double>(it->second.hi));
    }
    if (!all_act || narrowest <= 0 || hi - lo <= 0) continue;
    const double levels = 256.0 * narrowest / (hi - lo);
    if (levels >= 256.0 / std::exp2(kCollapseBits)) continue;
    // The readers, through layout-only ops; none may be a graph output (split_mixed_concat's case).
    std::vector<const Node*> readers;
    std::vector<const Value*> todo = {n.outputs[0]};
    bool output = false;
    while (!todo.empty()) {
      const Value* v = todo.back();
      todo.pop_back();
      output = output || is_graph_output(g, v);
      for (const Node* r : v->consumers) {
        if (ir::op_has(*r, ir::kLayoutOnly) && !r->outputs.empty() && r->outputs[0]) todo.push_back(r->outputs[0]);
        else readers.push_back(r);
      }
    }
    if (output) continue;
    std::string names;
    for (const Node* r : readers) names += (names.empty() ? "'" : ", '") + r->name + "'";
    char buf[512];
    std::snprintf(buf, sizeof buf, "%s '%s': one int8 scale over its %s (range [%.4g, %.4g]) would leave input '%s' %.1f of 256 levels; ",
                  n.op_type.c_str(), n.name.c_str(), concat ? "inputs" : "output", lo, hi, narrow_name.c_str(), levels);
    rep.warnings.push_back(std::string(buf) + "kept in float with its readers " + names);
    kept.insert(&n);
    kept.insert(readers.begin(), readers.end());
    rep.collapse_kept += 1 + static_cast<int>(readers.size());
  }
  return kept;
}

}  // namespace

ir::Node* matmul_bias_add(const ir::Graph& g, const ir::Node& mm) {
  if (mm.op_type != "MatMul" || !mm.domain.empty() || mm.inputs.size() != 2 || !mm.inputs[1] || !mm.inputs[1]->constant) return nullptr;
  const Tensor& w = *mm.inputs[1]->constant;
  const Value* y = mm.outputs.empty() ? nullptr : mm.outputs[0];
  if (w.rank() != 2 || w.dtype() != DType::f32 || !y || y->consumers.size() != 1 || is_graph_output(g, y)) return nullptr;
  Node* a = y->consumers[0];
  if (a->op_type != "Add" || !a->domain.empty() || a->inputs.size() != 2) return nullptr;
  const Value* c = a->inputs[0] == y ? a->inputs[1] : a->inputs[1] == y ? a->inputs[0] : nullptr;
  if (!c || c == y || !c->constant || c->constant->dtype() != DType::f32 || c->constant->numel() != w.dim(1)) return nullptr;
  const Shape& cs = c->constant->shape();
  if (cs.empty() || cs.back() != w.dim(1)) return nullptr;
  return a;
}

bool keep_float_matches(const std::string& entry, const Node& n) {
  if (entry.empty()) return false;
  if (entry == n.name || entry == n.op_type) return true;
  if (entry.find_first_of("*?[") != std::string::npos) return ::fnmatch(entry.c_str(), n.name.c_str(), 0) == 0;
  return entry.back() == '/' && n.name.compare(0, entry.size(), entry) == 0;
}

Status check_keep_float(const Graph& g, const std::set<std::string>& keep_float, const Graph* before_folding) {
  for (const std::string& e : keep_float) {
    if (std::any_of(g.nodes().begin(), g.nodes().end(), [&](const auto& n) { return keep_float_matches(e, *n); })) continue;
    const std::string what = "quantize: --keep-float '" + e + "': ";
    if (before_folding) {
      for (const auto& n : before_folding->nodes()) {
        if (n->name != e) continue;
        for (const Value* o : n->outputs) {
          const Value* now = o ? g.find(o->name) : nullptr;
          if (now && now->producer) {
            return invalid(what + "node '" + e + "' (" + n->op_type + ") was folded by rkdeploy's passes: its output '" + o->name +
                           "' is computed by " + now->producer->describe() + " now; --keep-float '" + now->producer->name + "' keeps that in float");
          }
        }
        return invalid(what + "node '" + e + "' (" + n->op_type +
                       ") was folded away by rkdeploy's passes (constant folding, BatchNorm folding or dead-code elimination): nothing of it "
                       "runs to keep in float");
      }
    }
    return invalid(what +
                   "the model has no node and no op type of that name, and no node name matches it as a pattern (a glob such as "
                   "'*/attn/*', or a prefix ending in '/')");
  }
  return {};
}

Result<QdqReport> insert_qdq(Graph& g, const std::map<std::string, Range>& ranges, const QdqOptions& opt) {
  QdqReport rep;
  if (opt.dtype != DType::i8 && opt.dtype != DType::u8) return invalid("quantize: int8 or uint8 only");
  if (opt.dtype == DType::u8 && opt.per_channel) return invalid("quantize: uint8 weights are per tensor (TFLite's uint8 scheme)");
  // 1. The activations to quantize, in node order.
  std::vector<Value*> order;
  std::set<Value*> act;
  auto consider = [&](Value* v) {
    if (is_float_activation(v) && ranges.count(v->name) && act.insert(v).second) order.push_back(v);
  };
  for (Value* v : g.inputs) consider(v);
  for (const auto& n : g.nodes()) {
    for (Value* v : n->inputs) consider(v);
  }
  for (Value* v : g.outputs) consider(v);
  for (Value* v : std::vector<Value*>(order)) {
    const Node* p = v->producer;
    if (!p || is_graph_output(g, v) || v->consumers.size() != 1 || !is_fused_activation(*v->consumers[0])) continue;
    if (ir::op_has(*p, ir::kAbsorbsActivation)) {
      act.erase(v);
      ++rep.fused_activations;
    }
  }
  // A MatMul's bias Add (matmul_bias_add): the product is not quantized before the bias.
  std::map<const Node*, Node*> bias_adds;
  for (const auto& n : g.nodes()) {
    if (Node* a = matmul_bias_add(g, *n)) {
      if (act.erase(n->outputs[0])) bias_adds[n.get()] = a;
    }
  }
  // --keep-float: the named nodes (by name or op type) compute in float. Their outputs are
  // not quantized, they read their inputs unquantized, and an input that only they read is
  // not quantized at all. Collapsing Concats and their readers join them.
  std::set<const Node*> kept = collapsing_joins(g, ranges, act, rep);
  std::set<const Node*> whole_kept;  // kept by keep_float or a collapsing Concat, not only as a target's CPU node
  // Sampling coordinates and selection scores stay float: the nodes that exist only to compute
  // a GridSample's grid (a deformable attention's offsets, scaled and added to its reference
  // points) or a TopK's input (a DETR's query selection over the encoder's scores), back to and
  // including the layer that computes them from the features. An int8 coordinate would move
  // every sample by up to half a step of a scale that spans the whole map; an int8 score ties
  // the candidates a selection must rank.
  {
    std::set<const Node*> grid;
    const auto& nodes = g.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      const Node* p = it->get();
      bool only_grid = false, other = false;
      for (const Value* o : p->outputs) {
        for (const Node* r : o ? o->consumers : std::vector<Node*>{}) {
          if (r->op_type == "Shape" || r->op_type == "Size") continue;  // reads no value
          const bool grid_input = r->domain.empty() && ((r->op_type == "GridSample" && r->inputs.size() > 1 && r->inputs[1] == o) ||
                                                        (r->op_type == "TopK" && !r->inputs.empty() && r->inputs[0] == o));
          const bool weighted = r->op_type == "Conv" || r->op_type == "ConvTranspose" || r->op_type == "MatMul" || r->op_type == "Gemm";
          const bool inner = grid.count(r) && !weighted;
          if (grid_input || inner) only_grid = true;
          else other = true;
        }
        if (o && is_graph_output(g, o)) other = true;
      }
      if (only_grid && !other) grid.insert(p);
    }
    for (const Node* p : grid) {
      kept.insert(p);
      whole_kept.insert(p);
      for (Value* o : p->outputs) act.erase(o);
    }
    rep.float_selection = static_cast<int>(grid.size());
  }
  // A DETR decoder - every node that reads a TopK's selection, directly or through others: the
  // queries gathered from the encoder's memory and refined layer by layer into the boxes and
  // scores - computes in float. Its few hundred rows carry every detection and per-tensor int8
  // through its layers compounds (docs/quantization.md has the measurement); its share of the
  // MACs is small.
  {
    std::set<const Node*> decoder;
    std::vector<const Value*> todo;
    for (const auto& n : g.nodes())
      if (n->op_type == "TopK" && n->domain.empty())
        for (const Value* o : n->outputs)
          if (o) todo.push_back(o);
    while (!todo.empty()) {
      const Value* v = todo.back();
      todo.pop_back();
      for (const Node* r : v->consumers) {
        if (!decoder.insert(r).second) continue;
        for (const Value* o : r->outputs)
          if (o) todo.push_back(o);
      }
    }
    for (const Node* p : decoder) {
      if (kept.insert(p).second) ++rep.float_decoder;
      whole_kept.insert(p);
      for (Value* o : p->outputs) act.erase(o);
    }
  }
  rep.kept_float = 0;
  {
    RKD_TRY(check_keep_float(g, opt.keep_float));
    for (const auto& n : g.nodes()) {
      const bool cpu = opt.cpu_nodes.count(n->name) > 0;
      const bool named = std::any_of(opt.keep_float.begin(), opt.keep_float.end(), [&](const std::string& e) { return keep_float_matches(e, *n); });
      if (!kept.count(n.get()) && !named && !cpu) continue;
      const bool whole = kept.count(n.get()) || named;
      if (whole) whole_kept.insert(n.get());
      kept.insert(n.get());
      for (Value* o : n->outputs)
        if (whole || is_graph_output(g, o)) act.erase(o);
    }
    // A target's CPU node's output is quantized only for a quantized reader: one reached
    // through the copies that carry it (Reshape, Transpose, ...) that is neither kept nor a copy.
    std::function<bool(const Value*)> feeds_quantized = [&](const Value* v) {
      if (!v) return false;
      for (const Node* r : v->consumers) {
        if (kept.count(r)) continue;
        if (!same_scale_op(*r)) return true;
        for (const Value* o : r->outputs)
          if (feeds_quantized(o)) return true;
      }
      return false;
    };
    for (const auto& n : g.nodes()) {
      if (!kept.count(n.get()) || whole_kept.count(n.get())) continue;
      for (Value* o : n->outputs)
        if (!feeds_quantized(o)) act.erase(o);
    }
    // A value computed by a quantized node (through the copies that carry it) and read only by
    // a target's CPU nodes stays quantized: the quantized node writes int8.
    auto from_quantized_node = [&](const Value* v) {
      const Node* p = v->producer;
      while (p && same_scale_op(*p) && !kept.count(p) && !p->inputs.empty() && p->inputs[0]) p = p->inputs[0]->producer;
      return p && !kept.count(p);
    };
    for (Value* v : std::vector<Value*>(order)) {
      if (v->consumers.empty() || is_graph_output(g, v)) continue;
      if (!std::all_of(v->consumers.begin(), v->consumers.end(), [&](const Node* r) { return kept.count(r) > 0; })) continue;
      const bool cpu_readers =
          std::all_of(v->consumers.begin(), v->consumers.end(), [&](const Node* r) { return opt.cpu_nodes.count(r->name) && !whole_kept.count(r); });
      if (!cpu_readers || !from_quantized_node(v)) act.erase(v);
    }
    rep.kept_float = static_cast<int>(kept.size()) - rep.collapse_kept - rep.float_selection - rep.float_decoder;
  }
  // float_outputs: each graph output, back through the layout-only ops that carry it, to the
  // node that computes it, stays float (that node reads int8 inputs and writes float).
  if (opt.float_outputs) {
    for (Value* out : g.outputs) {
      for (Value* v = out; v && act.count(v);) {
        act.erase(v);
        const Node* p = v->producer;
        v = p && ir::op_has(*p, ir::kLayoutOnly) && !p->inputs.empty() ? p->inputs[0] : nullptr;
      }
    }
  }
  // Post-processing stays float: values made by index/selection ops (TopK, ArgMax, a Cast
  // from integers, ...) and everything computed only from such values and constants
  // (box decoding from indices). Quantizing them would put index-derived coordinates on an
  // int8 grid: no TFLite or RKNN deployment runs that part on the int8 path.
  {
    std::set<const Value*> post;
    for (const auto& n : g.nodes()) {
      bool from_post = false, from_compute = false;
      for (const Value* v : n->inputs) {
        if (!v || v->constant) continue;
        // Integers computed by nodes are index arithmetic; an integer graph input (an image
        // given as int32) is data.
        const bool index = v->producer && (!v->dtype || !dtype_is_float(*v->dtype));
        if (post.count(v) || index) from_post = true;
        else from_compute = true;
      }
      const Value* in0 = n->inputs.empty() ? nullptr : n->inputs[0];
      const bool cast_from_int = n->op_type == "Cast" && in0 && in0->producer && in0->dtype && !dtype_is_float(*in0->dtype);
      if (ir::op_has(*n, ir::kSelection) || cast_from_int || (from_post && !from_compute)) {
        for (const Value* o : n->outputs) {
          if (o) post.insert(o);
        }
      }
    }
    for (const Value* v : post) act.erase(const_cast<Value*>(v));
  }
  // A copy (MaxPool, Reshape, Transpose, ...) of a value that stays float stays float: quantized
  // on its own it would no longer equal its input (CenterNet finds its peaks where the heatmap
  // equals its max-pooled copy).
  for (const auto& n : g.nodes()) {
    if (!same_scale_op(*n) || n->inputs.empty() || !is_float_activation(n->inputs[0]) || act.count(n->inputs[0])) continue;
    for (Value* o : n->outputs) act.erase(o);
  }
  order.erase(std::remove_if(order.begin(), order.end(), [&](Value* v) { return !act.count(v); }), order.end());

  // 2. Groups that share one scale, and their parameters. A Concat of branches whose ranges
  // differ widely (a detector's boxes in pixels beside its class probabilities) is not one
  // group: see split_mixed_concat.
  UnionFind uf;
  for (Value* v : order) uf.find(v);
  for (const auto& n : g.nodes()) {
    if (n->op_type == "Concat" && n->domain.empty()) {
      Value* out = n->outputs[0];
      if (!act.count(out)) continue;
      if (split_mixed_concat(g, *n, ranges, act, rep)) continue;
      for (Value* in : n->inputs) {
        if (act.count(in)) uf.unite(in, out);
      }
    } else if (same_scale_op(*n) && !n->inputs.empty() && act.count(n->inputs[0])) {
      for (Value* out : n->outputs) {
        if (out && act.count(out)) uf.unite(n->inputs[0], out);
      }
    }
  }
  order.erase(std::remove_if(order.begin(), order.end(), [&](Value* v) { return !act.count(v); }), order.end());
  std::map<Value*, Range> group_range;
  std::map<Value*, int> group_size;
  for (Value* v : order) {
    Value* root = uf.find(v);
    const Range r = ranges.at(v->name);
    auto it = group_range.find(root);
    if (it == group_range.end()) {
      group_range[root] = r;
    } else {
      it->second.lo = std::min(it->second.lo, r.lo);
      it->second.hi = std::max(it->second.hi, r.hi);
    }
    group_size[root]++;
  }
  for (const auto& [root, k] : group_size) rep.shared_groups += k > 1;
  std::map<Value*, QParams> params;
  for (Value* v : order) {
    Value* root = uf.find(v);
    QParams p = params_for_range(group_range.at(root), opt.symmetric_activations);
    const Node* prod = v->producer;
    if (prod && prod->domain.empty() && group_size.at(root) == 1) {
      if (prod->op_type == "Sigmoid" || prod->op_type == "Softmax") p = QParams{1.f / 256.f, -128};
      if (prod->op_type == "Tanh") p = QParams{1.f / 128.f, 0};
    }
    params[v] = p;
  }

  // 3. QuantizeLinear -> DequantizeLinear after every quantized activation.
  std::map<Value*, Value*> dequantized;  // original value -> its /dq value
  for (Value* v : order) {
    const QParams p = params.at(v);
    const std::vector<Node*> readers = v->consumers;
    const bool output = is_graph_output(g, v);
    const std::string name = v->name;
    Value* scale = g.add_constant(name + "/scale", scalar_f32(p.scale));
    Value* zp = g.add_constant(name + "/zero_point", scalar_q(opt.dtype, p.zero_point));
    RKD_ASSIGN(Node * q, g.add_node(name + "/quantize", "QuantizeLinear", "", {v, scale, zp}, {name + "/q"}));
    copy_type(q->outputs[0], v, opt.dtype);
    RKD_ASSIGN(Value * dq, add_dequantize(g, name + "/dq", q->outputs[0], scale, zp, -1, v));
    // Nodes kept in float read the float value; a target's CPU node reads what the quantized
    // producer writes (the dequantized value), as it will on the device.
    for (Node* r : readers) {
      if (whole_kept.count(r)) continue;
      for (size_t i = 0; i < r->inputs.size(); ++i) {
        if (r->inputs[i] == v) g.set_input(r, i, dq);
      }
    }
    if (output) {
      std::replace(g.outputs.begin(), g.outputs.end(), v, dq);
      RKD_TRY(g.rename_value(v, name + "/float"));
      RKD_TRY(g.rename_value(dq, name));
    }
    dequantized[v] = dq;
    ++rep.activations;
  }
  auto input_params = [&](Node* n) -> std::optional<QParams> {
    Value* x = n->inputs.empty() ? nullptr : n->inputs[0];
    for (const auto& [orig, dq] : dequantized) {
      if (dq == x) return params.at(orig);
    }
    return std::nullopt;
  };

  // 4. Weights and biases.
  std::vector<Node*> nodes;
  for (const auto& n : g.nodes()) nodes.push_back(n.get());
  for (Node* n : nodes) {
    if (!n->domain.empty() || kept.count(n)) continue;
    const std::string& op = n->op_type;
    if (op != "Conv" && op != "ConvTranspose" && op != "MatMul" && op != "Gemm") continue;
    if (n->inputs.size() < 2 || !n->inputs[1] || !n->inputs[1]->constant || n->inputs[1]->constant->dtype() != DType::f32) continue;
    const Tensor w = n->inputs[1]->constant->contiguous();
    int axis = 0;
    bool per_channel = opt.per_channel;
    if (op == "ConvTranspose") {
      axis = 1;
      RKD_ASSIGN(int64_t group, n->attr_int("group", 1));
      if (group != 1) per_channel = false;
    } else if (op == "MatMul") {
      if (w.rank() != 2) per_channel = false;
      axis = 1;
    } else if (op == "Gemm") {
      RKD_ASSIGN(int64_t tb, n->attr_int("transB", 0));
      axis = tb ? 0 : 1;
    }
    std::vector<float> ws = opt.dtype == DType::u8 ? std::vector<float>{quantize_weights_u8(w, 0.f).scale} : weight_scales(w, axis, per_channel);
    const auto xp = input_params(n);
    // The bias: a Conv's or Gemm's input 2, or a MatMul's Add's constant (matmul_bias_add).
    Node* bias_node = n;
    size_t bias_input = 2;
    if (op == "MatMul") {
      auto it = bias_adds.find(n);
      bias_node = it != bias_adds.end() && !kept.count(it->second) ? it->second : nullptr;
      if (bias_node) bias_input = bias_node->inputs[0] == n->outputs[0] ? 1 : 0;
    }
    const Value* bias_in = bias_node && bias_node->inputs.size() > bias_input ? bias_node->inputs[bias_input] : nullptr;
    const bool has_bias = bias_in && bias_in->constant && bias_in->constant->dtype() == DType::f32 && xp && bias_in->constant->numel() == w.dim(axis);
    Tensor b;
    if (has_bias) {
      b = bias_in->constant->contiguous();
      // The int32 accumulator holds the bias plus up to `taps` products of at most 255 * 255
      // (quant/int8.h): the bias keeps that headroom.
      const double taps = static_cast<double>(w.numel() / std::max<int64_t>(w.dim(axis), 1));
      const double limit = std::max(2147483647.0 - taps * 65025.0, 1.0);
      for (int64_t c = 0; c < b.numel(); ++c) {
        const size_t k = ws.size() == 1 ? 0 : static_cast<size_t>(c);
        const double need = std::fabs(static_cast<double>(b.data<float>()[c])) / (static_cast<double>(xp->scale) * limit);
        if (need > ws[k]) {
          ws[k] = static_cast<float>(need * (1 + 1e-6));
          ++rep.bias_rescaled;
        }
      }
    }
    const std::string base = n->inputs[1]->name;
    Value* qv = nullptr;
    Value* zv = nullptr;
    if (opt.dtype == DType::u8) {
      // Asymmetric uint8 per tensor; the scale never below what the bias headroom asked for.
      U8Weights u = quantize_weights_u8(w, ws[0]);
      ws[0] = u.scale;
      Tensor zt = Tensor::empty(DType::u8, {});
      zt.data<uint8_t>()[0] = static_cast<uint8_t>(u.zero_point);
      qv = g.add_constant(base + "/q", std::move(u.q));
      zv = g.add_constant(base + "/zero_point", std::move(zt));
    } else {
      Tensor zt = Tensor::empty(DType::i8, ws.size() == 1 ? Shape{} : Shape{static_cast<int64_t>(ws.size())});
      std::fill(zt.data<int8_t>(), zt.data<int8_t>() + zt.numel(), int8_t{0});
      qv = g.add_constant(base + "/q", quantize_weights(w, axis, ws));
      zv = g.add_constant(base + "/zero_point", std::move(zt));
    }
    Value* sv = g.add_constant(base + "/scale", ws.size() == 1 ? scalar_f32(ws[0]) : vector_f32(ws));
    RKD_ASSIGN(Value * wdq, add_dequantize(g, base + "/dq", qv, sv, zv, ws.size() == 1 ? -1 : axis, n->inputs[1]));
    g.set_input(n, 1, wdq);
    ++rep.weights;
    if (has_bias) {
      const int64_t cb = b.numel();
      Tensor qb = Tensor::empty(DType::i32, b.shape());  // a MatMul's Add may hold it as [1, ..., N]
      std::vector<float> bs(static_cast<size_t>(cb));
      for (int64_t c = 0; c < cb; ++c) {
        const float s = static_cast<float>(static_cast<double>(xp->scale) * ws[ws.size() == 1 ? 0 : static_cast<size_t>(c)]);
        bs[static_cast<size_t>(c)] = s;
        const double v = std::nearbyint(static_cast<double>(b.data<float>()[c]) / s);
        qb.data<int32_t>()[c] = static_cast<int32_t>(std::clamp(v, -2147483647.0, 2147483647.0));
      }
      const std::string bbase = bias_in->name;
      Value* qbv = g.add_constant(bbase + "/q", std::move(qb));
      Value* bsv = g.add_constant(bbase + "/scale", vector_f32(bs));
      Tensor bz = Tensor::empty(DType::i32, {cb});
      std::fill(bz.data<int32_t>(), bz.data<int32_t>() + cb, 0);
      Value* bzv = g.add_constant(bbase + "/zero_point", std::move(bz));
      RKD_ASSIGN(Value * bdq, add_dequantize(g, bbase + "/dq", qbv, bsv, bzv, static_cast<int64_t>(b.rank()) - 1, bias_in));
      g.set_input(bias_node, bias_input, bdq);
      ++rep.biases;
    }
  }

  // 5. Float constant operands of elementwise ops and Concat: int8 per tensor.
  static const std::set<std::string> elementwise = {"Add", "Sub", "Mul", "Div", "Concat", "Max", "Min"};
  for (Node* n : nodes) {
    if (!n->domain.empty() || !elementwise.count(n->op_type) || kept.count(n)) continue;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      Value* c = n->inputs[i];
      if (!c || !c->constant || c->constant->dtype() != DType::f32) continue;
      TensorStats st;
      st.observe_minmax(*c->constant);
      const QParams p = params_for_range({st.min(), st.max()}, opt.symmetric_activations);
      const Tensor f = c->constant->contiguous();
      Tensor q = Tensor::empty(opt.dtype, f.shape());
      for (int64_t k = 0; k < f.numel(); ++k) {
        const float v = std::clamp(std::nearbyint(f.data<float>()[k] / p.scale) + static_cast<float>(p.zero_point), -128.f, 127.f);
        if (opt.dtype == DType::u8) q.data<uint8_t>()[k] = static_cast<uint8_t>(static_cast<int32_t>(v) + 128);
        else q.data<int8_t>()[k] = static_cast<int8_t>(v);
      }
      Value* qv = g.add_constant(c->name + "/q", std::move(q));
      Value* sv = g.add_constant(c->name + "/scale", scalar_f32(p.scale));
      Value* zv = g.add_constant(c->name + "/zero_point", scalar_q(opt.dtype, p.zero_point));
      RKD_ASSIGN(Value * dq, add_dequantize(g, c->name + "/dq", qv, sv, zv, -1, c));
      g.set_input(n, i, dq);
      ++rep.weights;
    }
  }
  g.remove_unused_constants();
  RKD_TRY(g.sort_topologically());
  RKD_TRY(g.validate());
  return rep;
}

}  // namespace rkd::quant
