// The NPU placement's graph rewrites (npu_rewrites.h).
#include "runtime/npu_rewrites.h"

#include <algorithm>

#include "npu/lower/eltwise.h"
#include "npu/lower/node_geometry.h"
#include "runtime/npu_conv.h"

namespace rkd::runtime {

using ir::Node;
using ir::Value;
namespace L = npu::lower;

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
  const int32_t qmin = L::qmin_of(conv->dtype), qmax = L::qmax_of(conv->dtype);
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

// The space-to-depth - Reshape [1, C, H/KH, KH, W/KW, KW], Transpose to [1, C, KH, KW, H/KH,
// W/KW], Reshape [1, C KH KW, H/KH, W/KW] - puts tap (c, ky, kx) in channel c KH KW + ky KW + kx,
// where the weights reshaped to [OC, C KH KW, 1, 1] hold it.
Status patch_embeddings_as_1x1(ir::Graph& g) {
  std::vector<Node*> sites;
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    if (n.op_type != "QLinearConv" || !n.domain.empty() || n.inputs.size() < 8 || !n.inputs[3] || !n.inputs[3]->constant ||
        n.attrs.count("rkd_residual"))
      continue;
    auto geo = npu::lower::npu_conv_geometry(n);
    if (geo.ok() && npu::lower::npu_patch_embedding_as_1x1(*geo)) sites.push_back(np.get());
  }
  for (Node* n : sites) {
    const auto geo = *npu::lower::npu_conv_geometry(*n);
    const int64_t C = geo.C, KH = geo.KH, KW = geo.KW, OH = geo.H / KH, OW = geo.W / KW;
    const DType t = *n->inputs[0]->dtype;
    auto shape_const = [&](const std::string& base, const Shape& s) {
      Tensor v = Tensor::empty(DType::i64, {static_cast<int64_t>(s.size())});
      for (size_t i = 0; i < s.size(); ++i) v.data<int64_t>()[i] = s[i];
      return g.add_constant(n->name + "/" + base, std::move(v));
    };
    auto value = [&](Value* v, const Shape& s) {
      v->dtype = t;
      v->shape = ir::Dims{};
      for (int64_t d : s) v->shape->push_back(ir::Dim{d, ""});
      return v;
    };
    const Shape s6{1, C, OH, KH, OW, KW}, st{1, C, KH, KW, OH, OW}, s4{1, C * KH * KW, OH, OW};
    RKD_ASSIGN(Node * r1, g.add_node(n->name + "/space_to_depth/reshape", "Reshape", "", {n->inputs[0], shape_const("s6", s6)},
                                     {g.fresh_name(n->name + "/space_to_depth/blocks")}));
    value(r1->outputs[0], s6);
    RKD_ASSIGN(Node * tr, g.add_node(n->name + "/space_to_depth/transpose", "Transpose", "", {r1->outputs[0]},
                                     {g.fresh_name(n->name + "/space_to_depth/taps")}));
    tr->attrs["perm"] = std::vector<int64_t>{0, 1, 3, 5, 2, 4};
    value(tr->outputs[0], st);
    RKD_ASSIGN(Node * r2, g.add_node(n->name + "/space_to_depth", "Reshape", "", {tr->outputs[0], shape_const("s4", s4)},
                                     {g.fresh_name(n->name + "/space_to_depth/output")}));
    value(r2->outputs[0], s4);
    RKD_ASSIGN(Tensor w, n->inputs[3]->constant->contiguous().reshape({geo.OC, C * KH * KW, 1, 1}));
    std::vector<Value*> ins(n->inputs.begin(), n->inputs.end());
    ins[0] = r2->outputs[0];
    ins[3] = g.add_constant(n->inputs[3]->name + "/as_1x1", w);
    RKD_ASSIGN(Node * c, g.add_node(n->name + "/as_1x1", "QLinearConv", "", ins, {g.fresh_name(n->outputs[0]->name + "/as_1x1")}));
    c->attrs = n->attrs;
    c->attrs["kernel_shape"] = std::vector<int64_t>{1, 1};
    c->attrs["strides"] = std::vector<int64_t>{1, 1};
    c->attrs["pads"] = std::vector<int64_t>{0, 0, 0, 0};
    c->attrs.erase("auto_pad");
    c->outputs[0]->dtype = n->outputs[0]->dtype;
    c->outputs[0]->shape = n->outputs[0]->shape;
    g.move_output(n, 0, c, 0);
    g.remove_nodes([n](const Node& x) { return &x == n; });
  }
  if (!sites.empty()) RKD_TRY(g.sort_topologically());
  return {};
}

}  // namespace rkd::runtime
