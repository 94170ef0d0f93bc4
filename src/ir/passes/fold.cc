// dead-code-elimination, constant-folding and conv-bn-folding (fold.h).
#include "ir/passes/fold.h"

#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <unordered_set>

#include "ir/passes/shape_inference.h"

namespace rkd::ir {

Pass constant_folding_pass(NodeEvaluator eval, std::set<std::string> keep, std::string name) {
  return Pass{std::move(name), [eval, keep](Graph& g) -> Status {
                std::set<const Node*> folded;
                for (const auto& np : g.nodes()) {
                  Node& n = *np;
                  RKD_TRY(infer_node(n, g.opset));
                  if (keep.count(n.op_type)) continue;
                  bool all_const = !n.inputs.empty() || n.op_type == "Constant" || n.op_type == "ConstantOfShape";
                  std::vector<const Tensor*> in;
                  for (const Value* v : n.inputs) {
                    if (v && !v->constant) all_const = false;
                    in.push_back(v && v->constant ? &*v->constant : nullptr);
                  }
                  const bool shape_only = (n.op_type == "Shape" || n.op_type == "Size") && !n.inputs.empty() && static_shape(n.inputs[0]).has_value();
                  if (!all_const && !shape_only) continue;
                  bool small = true;
                  for (const Value* o : n.outputs) {
                    if (!o) continue;
                    auto s = static_shape(o);
                    if (!s || !o->dtype) {
                      small = false;
                      break;
                    }
                    auto bytes = checked_shape_bytes(*s, *o->dtype, o->name);
                    small = small && bytes.ok() && static_cast<int64_t>(*bytes) <= kMaxFoldedBytes;
                  }
                  if (!small) continue;
                  Tensor shape_dummy;
                  if (shape_only) {
                    // Shape/Size read only the input's shape: evaluate on an empty stand-in.
                    shape_dummy = Tensor::wrap(nullptr, 0, n.inputs[0]->dtype.value_or(DType::f32), *static_shape(n.inputs[0]));
                    in[0] = &shape_dummy;
                  }
                  auto out = eval(n, g.opset, in);
                  if (!out.ok()) {
                    if (out.error().kind == ErrorKind::unsupported) continue;  // left for the executor to report
                    return out.error().with_context(n.describe());
                  }
                  for (size_t i = 0; i < n.outputs.size(); ++i) {
                    if (n.outputs[i]) n.outputs[i]->constant = (*out)[i];
                  }
                  folded.insert(&n);
                }
                // Detach the folded outputs (they are constants now) and drop the nodes.
                for (const auto& np : g.nodes()) {
                  if (!folded.count(np.get())) continue;
                  for (Value*& o : np->outputs) {
                    if (o) o->producer = nullptr;
                    o = nullptr;
                  }
                }
                g.remove_nodes([&](const Node& n) { return folded.count(&n) > 0; });
                g.remove_unused_constants();
                return {};
              }};
}

Pass conv_bn_folding_pass() {
  return Pass{"conv-bn-folding", [](Graph& g) -> Status {
                std::set<const Node*> gone;
                for (const auto& np : g.nodes()) {
                  Node& bn = *np;
                  if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() < 5) continue;
                  Value* x = bn.inputs[0];
                  Node* conv = x ? x->producer : nullptr;
                  if (!conv || conv->op_type != "Conv" || x->consumers.size() != 1) continue;
                  if (std::find(g.outputs.begin(), g.outputs.end(), x) != g.outputs.end()) continue;
                  bool consts = conv->inputs.size() >= 2 && conv->inputs[1] && conv->inputs[1]->constant;
                  if (conv->inputs.size() > 2 && conv->inputs[2]) consts = consts && conv->inputs[2]->constant;
                  for (size_t i = 1; i < 5; ++i) consts = consts && bn.inputs[i] && bn.inputs[i]->constant;
                  auto training = bn.attr_int("training_mode", 0);
                  if (!consts || !training.ok() || *training != 0) continue;
                  if (bn.outputs.size() > 1) {
                    bool extra = false;
                    for (size_t i = 1; i < bn.outputs.size(); ++i) extra = extra || bn.outputs[i];
                    if (extra) continue;
                  }
                  RKD_ASSIGN(float eps, bn.attr_float("epsilon", 1e-5f));
                  const Tensor w = conv->inputs[1]->constant->contiguous();
                  if (w.dtype() != DType::f32) continue;
                  const int64_t oc = w.shape()[0];
                  const int64_t per = w.numel() / std::max<int64_t>(oc, 1);
                  auto vec = [&](const Value* v) {
                    std::vector<double> r(static_cast<size_t>(oc));
                    for (int64_t i = 0; i < oc; ++i) r[static_cast<size_t>(i)] = v->constant->get_as_double(i);
                    return r;
                  };
                  bool sizes_ok = true;
                  for (size_t i = 1; i < 5; ++i) sizes_ok = sizes_ok && bn.inputs[i]->constant->numel() == oc;
                  if (!sizes_ok) return invalid(bn.describe() + ": parameters must have one value per channel (" + std::to_string(oc) + ")");
                  const auto scale = vec(bn.inputs[1]), beta = vec(bn.inputs[2]), mean = vec(bn.inputs[3]), var = vec(bn.inputs[4]);
                  std::vector<double> bias(static_cast<size_t>(oc), 0.0);
                  if (conv->inputs.size() > 2 && conv->inputs[2]) bias = vec(conv->inputs[2]);
                  Tensor nw = Tensor::empty(DType::f32, w.shape());
                  Tensor nb = Tensor::empty(DType::f32, {oc});
                  for (int64_t o = 0; o < oc; ++o) {
                    const size_t u = static_cast<size_t>(o);
                    const double k = scale[u] / std::sqrt(var[u] + static_cast<double>(eps));
                    for (int64_t i = 0; i < per; ++i) {
                      nw.data<float>()[o * per + i] = static_cast<float>(static_cast<double>(w.data<float>()[o * per + i]) * k);
                    }
                    nb.data<float>()[o] = static_cast<float>((bias[u] - mean[u]) * k + beta[u]);
                  }
                  g.set_input(conv, 1, g.add_constant(conv->inputs[1]->name + "_bn", std::move(nw)));
                  g.set_input(conv, 2, g.add_constant(conv->name + "_bias_bn", std::move(nb)));
                  // The conv now produces the BN's output value (its name stays).
                  g.move_output(&bn, 0, conv, 0);
                  gone.insert(&bn);
                }
                g.remove_nodes([&](const Node& n) { return gone.count(&n) > 0; });
                g.remove_unused_constants();
                return {};
              }};
}

namespace {

// A float Conv's or group-1 ConvTranspose's output channels (from its constant weights), else 0.
int64_t output_channels(const Node& conv) {
  if (conv.inputs.size() < 2 || !conv.inputs[1] || !conv.inputs[1]->constant) return 0;
  const Tensor& w = *conv.inputs[1]->constant;
  if (w.rank() < 2) return 0;
  if (conv.op_type == "Conv") return w.dim(0);
  if (conv.op_type == "ConvTranspose" && conv.attr_int("group", 1).value_or(0) == 1) return w.dim(1);
  return 0;
}

// The per-channel values of constant `c` added to a conv output of rank `rank` with `oc`
// channels on axis 1, or nullopt when the Add would broadcast another way.
std::optional<std::vector<double>> per_channel_addend(const Tensor& c, size_t rank, int64_t oc) {
  if (c.dtype() != DType::f32 || static_cast<size_t>(c.rank()) > rank) return std::nullopt;
  const size_t lead = rank - static_cast<size_t>(c.rank());  // dims of the output the constant does not have
  int64_t n = 1;
  for (int i = 0; i < c.rank(); ++i) {
    const int64_t d = c.dim(i);
    if (d == 1) continue;
    if (lead + static_cast<size_t>(i) != 1 || d != oc) return std::nullopt;
    n = d;
  }
  std::vector<double> v(static_cast<size_t>(oc));
  for (int64_t k = 0; k < oc; ++k) v[static_cast<size_t>(k)] = c.get_as_double(n == 1 ? 0 : k);
  return v;
}

// Every `op` node (Add or Mul) that reads a float Conv's or group-1 ConvTranspose's output, that
// output's only reader and not a graph output, and a float32 constant of one value per output
// channel (or one value): `fold` rewrites the convolution's weights and bias with those values
// (false: it cannot, the node stays), and the convolution then produces the op's value.
Status fold_channel_constants(Graph& g, const char* op, const std::function<bool(Graph&, Node&, const std::vector<double>&, bool)>& fold) {
  std::set<const Node*> gone;
  for (const auto& np : g.nodes()) {
    Node& n = *np;
    if (n.op_type != op || !n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1) continue;
    for (size_t side = 0; side < 2; ++side) {
      Value* x = n.inputs[side];
      const Value* other = n.inputs[1 - side];
      Node* conv = x ? x->producer : nullptr;
      if (!conv || !conv->domain.empty() || !other || !other->constant) continue;
      if (x->consumers.size() != 1 || std::find(g.outputs.begin(), g.outputs.end(), x) != g.outputs.end()) continue;
      if (x->dtype != DType::f32 || !x->shape || x->shape->size() < 3) continue;
      const bool has_bias = conv->inputs.size() > 2 && conv->inputs[2];
      if (has_bias && !conv->inputs[2]->constant) continue;
      const int64_t oc = output_channels(*conv);
      auto c = oc > 0 ? per_channel_addend(*other->constant, x->shape->size(), oc) : std::nullopt;
      if (!c || !fold(g, *conv, *c, has_bias)) continue;
      g.move_output(&n, 0, conv, 0);  // the conv now produces the op's value
      gone.insert(&n);
      break;
    }
  }
  g.remove_nodes([&](const Node& m) { return gone.count(&m) > 0; });
  g.remove_unused_constants();
  return {};
}

}  // namespace

Pass conv_bias_folding_pass() {
  return Pass{"conv-bias-folding", [](Graph& g) -> Status {
                return fold_channel_constants(g, "Add", [](Graph& gr, Node& conv, const std::vector<double>& c, bool has_bias) {
                  const auto oc = static_cast<int64_t>(c.size());
                  Tensor nb = Tensor::empty(DType::f32, {oc});
                  for (int64_t k = 0; k < oc; ++k) {
                    const double b = has_bias ? conv.inputs[2]->constant->get_as_double(k) : 0.0;
                    nb.data<float>()[k] = static_cast<float>(b + c[static_cast<size_t>(k)]);
                  }
                  if (conv.inputs.size() < 3) conv.inputs.resize(3, nullptr);
                  gr.set_input(&conv, 2, gr.add_constant(conv.name + "_bias_add", std::move(nb)));
                  return true;
                });
              }};
}

Pass conv_scale_folding_pass() {
  return Pass{"conv-scale-folding", [](Graph& g) -> Status {
                return fold_channel_constants(g, "Mul", [](Graph& gr, Node& conv, const std::vector<double>& m, bool has_bias) {
                  if (conv.inputs[1]->constant->dtype() != DType::f32) return false;
                  const auto oc = static_cast<int64_t>(m.size());
                  const Tensor w = conv.inputs[1]->constant->contiguous();
                  Tensor nw = Tensor::empty(DType::f32, w.shape());
                  // Element i of the weights belongs to output channel (i / per_oc) % oc: a Conv's
                  // [OC, ...] (per_oc the rest), a ConvTranspose's [IC, OC, ...] (per_oc the kernel).
                  const int64_t per_oc = conv.op_type == "Conv" ? w.numel() / oc : w.numel() / (w.dim(0) * w.dim(1));
                  for (int64_t i = 0; i < w.numel(); ++i) {
                    nw.data<float>()[i] = static_cast<float>(static_cast<double>(w.data<float>()[i]) * m[static_cast<size_t>((i / per_oc) % oc)]);
                  }
                  gr.set_input(&conv, 1, gr.add_constant(conv.inputs[1]->name + "_scaled", std::move(nw)));
                  if (has_bias) {
                    Tensor nb = Tensor::empty(DType::f32, {oc});
                    for (int64_t k = 0; k < oc; ++k)
                      nb.data<float>()[k] = static_cast<float>(conv.inputs[2]->constant->get_as_double(k) * m[static_cast<size_t>(k)]);
                    gr.set_input(&conv, 2, gr.add_constant(conv.name + "_bias_scaled", std::move(nb)));
                  }
                  return true;
                });
              }};
}

Pass dead_code_elimination_pass() {
  return Pass{"dead-code-elimination", [](Graph& g) -> Status {
                // Walk backwards from the graph outputs; a node is live when any output is.
                std::unordered_set<const Value*> live_values(g.outputs.begin(), g.outputs.end());
                std::unordered_set<const Node*> live_nodes;
                for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
                  const Node* n = it->get();
                  bool live = false;
                  for (const Value* o : n->outputs) live = live || (o && live_values.count(o));
                  if (!live) continue;
                  live_nodes.insert(n);
                  for (const Value* i : n->inputs) {
                    if (i) live_values.insert(i);
                  }
                }
                g.remove_nodes([&](const Node& n) { return !live_nodes.count(&n); });
                g.remove_unused_constants();
                return {};
              }};
}

}  // namespace rkd::ir
