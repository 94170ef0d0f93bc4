// int8-channels-last (fusion.h): int8 activations stay [N, H, W, C] between the int8
// convolutions, as ONNX Runtime's NHWC transformer keeps them, instead of each QLinearConv
// converting its input from NCHW and its output back (two byte transposes per convolution).
//
// 1. Every CPU QLinearConv (2-D, static shapes, int8/uint8 input, not placed on the NPU
//    simulator) gets rkd_input_channels_last = rkd_output_channels_last = 1 and reads
//    Transpose(x, [0, 2, 3, 1]); its output value becomes the channels-last one, and
//    Transpose(y', [0, 3, 1, 2]) produces the original value (same name, same readers).
// 2. A Transpose to NCHW moves below a layout-free int8 node whose data inputs come from such
//    Transposes (or hold one element; see push_below for the others): Identity,
//    rkdeploy.QLinearAdd, QLinearSub, QLinearMax, QLinearMin and QLinearMul (same shapes or a
//    one-element operand), rkdeploy.QLinearLut.
// 3. Transpose([0, 2, 3, 1]) of Transpose([0, 3, 1, 2]) of a is a: its readers read a.
// 2 and 3 repeat until nothing changes; what stays is a Transpose where the layout really
// changes (a float op, an op with axes, a graph output).
// 4. A convolution whose input is still a Transpose to channels last reads the Transpose's
//    input (rkd_input_channels_last = 0), and one whose output only Transposes to NCHW read
//    writes NCHW itself (rkd_output_channels_last = 0): the kernel converts while it copies
//    into its padded buffer and out of its accumulators, which costs less than a Transpose
//    node's extra pass, so no convolution ends up converting more than it did without the pass.
// Values keep their names where they keep their layout; dead Transposes are left to the
// dead-code pass that follows.
#include "ir/passes/int8_layout.h"

#include <algorithm>

#include "ir/passes/shape_inference.h"

namespace rkd::ir {

namespace {

const std::vector<int64_t> kToChannelsLast{0, 2, 3, 1}, kToChannelsFirst{0, 3, 1, 2};

ir::Dims permuted(const ir::Dims& d, const std::vector<int64_t>& perm) {
  ir::Dims o;
  for (int64_t p : perm) o.push_back(d[static_cast<size_t>(p)]);
  return o;
}

bool is_int8_4d(const Value* v) {
  const auto s = v ? ir::static_shape(v) : std::nullopt;
  return s && s->size() == 4 && v->dtype && (*v->dtype == DType::i8 || *v->dtype == DType::u8);
}

// v's producer when it is Transpose(perm), else nullptr.
Node* transpose_producing(const Value* v, const std::vector<int64_t>& perm) {
  Node* t = v ? ir::produced_by(v, "Transpose") : nullptr;
  if (!t) return nullptr;
  auto p = t->attr_ints("perm", {});
  return p.ok() && *p == perm ? t : nullptr;
}

// Transpose(v, perm) as a new node; its output gets the permuted shape.
Result<Value*> add_transpose(Graph& g, Value* v, const std::vector<int64_t>& perm, const std::string& suffix) {
  RKD_ASSIGN(Node * t, g.add_node(v->name + suffix, "Transpose", "", {v}, {g.fresh_name(v->name + suffix)}));
  t->attrs["perm"] = perm;
  Value* o = t->outputs[0];
  o->dtype = v->dtype;
  o->shape = permuted(*v->shape, perm);
  return o;
}

// Node n's output 0 becomes channels last: the value is renamed and given the NHWC shape, and
// a Transpose to NCHW produces a value with the old name, which every former reader reads.
Status output_channels_last(Graph& g, Node* n) {
  Value* y = n->outputs[0];
  const std::string name = y->name;
  const ir::Dims nchw = *y->shape;
  RKD_TRY(g.rename_value(y, g.fresh_name(name + "#nhwc")));
  y->shape = permuted(nchw, kToChannelsLast);
  RKD_ASSIGN(Node * t, g.add_node(name + "#nchw", "Transpose", "", {y}, {name}));
  t->attrs["perm"] = kToChannelsFirst;
  Value* z = t->outputs[0];
  z->dtype = y->dtype;
  z->shape = nchw;
  g.replace_uses(y, z);  // every reader, the Transpose too ...
  g.set_input(t, 0, y);  // ... which reads y again
  return {};
}

Status convert_convolutions(Graph& g) {
  std::vector<Node*> convs;
  for (const auto& n : g.nodes()) {
    if (n->op_type == "QLinearConv" && n->domain.empty() && !n->attrs.count("rkd_input_channels_last") && !n->inputs.empty() &&
        is_int8_4d(n->inputs[0]) && !n->outputs.empty() && is_int8_4d(n->outputs[0])) {
      convs.push_back(n.get());
    }
  }
  for (Node* n : convs) {
    RKD_ASSIGN(Value * xt, add_transpose(g, n->inputs[0], kToChannelsLast, "#nhwc"));
    g.set_input(n, 0, xt);
    n->attrs["rkd_input_channels_last"] = int64_t{1};
    n->attrs["rkd_output_channels_last"] = int64_t{1};
    RKD_TRY(output_channels_last(g, n));
  }
  return {};
}

// The data inputs of a layout-free int8 node (those whose layout follows the output's), or
// empty when n is not one.
std::vector<size_t> layout_free_inputs(const Node& n) {
  if (n.domain.empty() && n.op_type == "Identity") return {0};
  if (n.domain != "rkdeploy") return {};
  if (n.op_type == "QLinearLut") return {0};
  if (n.op_type == "QLinearAdd" || n.op_type == "QLinearMul" || n.op_type == "QLinearSub" || n.op_type == "QLinearMax" || n.op_type == "QLinearMin")
    return {0, 3};
  return {};
}

// Step 2 at n; true when it moved the Transposes. A data input that is neither from such a
// Transpose nor one element gets a Transpose to channels last of its own, when at least as
// many inputs come from Transposes: the count does not grow, and the Transpose below n can
// cancel with its readers' (a residual Add whose other operand comes from a MaxPool).
Result<bool> push_below(Graph& g, Node* n) {
  const std::vector<size_t> data = layout_free_inputs(*n);
  if (data.empty() || n->outputs.empty() || !is_int8_4d(n->outputs[0])) return false;
  const auto out_shape = ir::static_shape(n->outputs[0]);
  std::vector<std::pair<size_t, Value*>> moved;  // input index, its channels-last source
  std::vector<size_t> other;                     // inputs to transpose here
  for (size_t i : data) {
    Value* v = i < n->inputs.size() ? n->inputs[i] : nullptr;
    if (!v) return false;
    const auto numel = v->static_numel();
    if (numel && *numel == 1) continue;                                    // a one-element operand broadcasts in either layout
    if (ir::static_shape(v) != out_shape || !is_int8_4d(v)) return false;  // no broadcasting across the layout change
    if (Node* t = transpose_producing(v, kToChannelsFirst)) {
      moved.emplace_back(i, t->inputs[0]);
    } else {
      other.push_back(i);
    }
  }
  if (moved.empty() || moved.size() < other.size()) return false;
  for (const auto& [i, src] : moved) g.set_input(n, i, src);
  for (size_t i : other) {
    RKD_ASSIGN(Value * t, add_transpose(g, n->inputs[i], kToChannelsLast, "#nhwc"));
    g.set_input(n, i, t);
  }
  RKD_TRY(output_channels_last(g, n));
  return true;
}

// Step 3 at a Transpose t; true when its readers now read the channels-last source.
bool cancel(Graph& g, Node* t) {
  if (t->op_type != "Transpose" || !t->domain.empty() || t->outputs.empty() || !t->outputs[0] || t->outputs[0]->consumers.empty()) return false;
  auto p = t->attr_ints("perm", {});
  if (!p.ok() || *p != kToChannelsLast) return false;
  Node* u = transpose_producing(t->inputs[0], kToChannelsFirst);
  if (!u) return false;
  Value* y = t->outputs[0];
  if (std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end()) return false;  // a graph output keeps its name
  g.replace_uses(y, u->inputs[0]);
  return true;
}

// Step 4 at a converted convolution n.
Status absorb(Graph& g, Node* n) {
  if (Node* t = transpose_producing(n->inputs[0], kToChannelsLast)) {
    g.set_input(n, 0, t->inputs[0]);
    n->attrs["rkd_input_channels_last"] = int64_t{0};
  }
  Value* y = n->outputs[0];
  if (y->consumers.empty() || std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end()) return {};
  for (const Node* r : y->consumers) {
    if (r->op_type != "Transpose" || !r->domain.empty() || r->attr_ints("perm", {}).value_or(std::vector<int64_t>{}) != kToChannelsFirst) return {};
  }
  // y takes the name and the readers of the first Transpose's output (the others' readers too).
  const std::vector<Node*> ts = y->consumers;
  for (size_t i = 1; i < ts.size(); ++i) {
    if (std::find(g.outputs.begin(), g.outputs.end(), ts[i]->outputs[0]) != g.outputs.end()) return {};  // its name must stay
  }
  Value* z = ts[0]->outputs[0];
  for (size_t i = 1; i < ts.size(); ++i) g.replace_uses(ts[i]->outputs[0], z);
  const std::string name = z->name;
  RKD_TRY(g.rename_value(z, g.fresh_name(name + "#unused")));
  RKD_TRY(g.rename_value(y, name));
  y->shape = z->shape;
  g.replace_uses(z, y);
  n->attrs["rkd_output_channels_last"] = int64_t{0};
  return {};
}

}  // namespace

ir::Pass int8_channels_last_pass() {
  return ir::Pass{"int8-channels-last", [](Graph& g) -> Status {
                    RKD_TRY(convert_convolutions(g));
                    for (bool changed = true; changed;) {
                      changed = false;
                      std::vector<Node*> nodes;
                      for (const auto& n : g.nodes()) nodes.push_back(n.get());
                      for (Node* n : nodes) {
                        RKD_ASSIGN(bool pushed, push_below(g, n));
                        changed = changed || pushed;
                      }
                      for (Node* n : nodes) changed = cancel(g, n) || changed;
                    }
                    for (const auto& n : g.nodes()) {
                      if (n->op_type == "QLinearConv" && n->attrs.count("rkd_input_channels_last")) RKD_TRY(absorb(g, n.get()));
                    }
                    return g.sort_topologically();
                  }};
}

}  // namespace rkd::ir
