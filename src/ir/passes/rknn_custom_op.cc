// The vendor runtime's custom operators in the graph (contract in rknn_custom_op.h).
#include "ir/passes/rknn_custom_op.h"

#include "ir/passes/fold.h"
#include "kernels/deform_attn.h"
#include "kernels/grid_sample.h"
#include "kernels/rknn_custom_op_contract.h"

namespace rkd::ir {

namespace {

namespace contract = rkd::rknn_contract;

Result<int64_t> code(const Node& n, const char* key, int64_t count) {
  RKD_ASSIGN(int64_t v, n.attr_int(key, -1));
  if (v < 0 || v >= count) return invalid(n.describe() + ": attribute " + key + " = " + std::to_string(v) + " is not a known code");
  return v;
}

Status replace_msda(Graph& g, Node* n, std::vector<std::string>* report) {
  Value* prep = n->inputs.empty() ? nullptr : n->inputs[0];
  Node* pn = prep ? prep->producer : nullptr;
  if (!pn || pn->op_type != "MSDAPrepare" || n->inputs.size() != 3) {
    if (report) report->push_back(n->describe() + ": kept (its value is not an MSDAPrepare's)");
    return {};
  }
  RKD_ASSIGN(std::string m, n->attr_string("method", "default"));
  RKD_ASSIGN(MsdaMethod method, parse_msda_method(m));
  RKD_ASSIGN(Node * c, g.add_node(g.fresh_name(n->name + "/rknn"), contract::kMsdaType, "", {pn->inputs[0], n->inputs[1], n->inputs[2]},
                                  {g.fresh_name(n->outputs[0]->name + "/rknn")}));
  c->attrs[contract::kLevelH] = n->attrs.at("level_h");
  c->attrs[contract::kLevelW] = n->attrs.at("level_w");
  c->attrs[contract::kPoints] = n->attrs.at("points");
  c->attrs[contract::kMethod] = static_cast<int64_t>(method);
  c->outputs[0]->dtype = n->outputs[0]->dtype;
  c->outputs[0]->shape = n->outputs[0]->shape;
  g.move_output(n, 0, c, 0);
  if (report) report->push_back(n->describe() + " -> " + contract::kMsdaType + " (method " + m + ")");
  return {};
}

Status replace_grid_sample(Graph& g, Node* n, std::vector<std::string>* report) {
  const Value* x = n->inputs.empty() ? nullptr : n->inputs[0];
  if (!x || !x->shape || x->shape->size() != 4 || n->inputs.size() != 2) {
    if (report) report->push_back(n->describe() + ": kept (not a 2-D GridSample of known rank: the plugin samples 4-D inputs)");
    return {};
  }
  RKD_ASSIGN(std::string mode, n->attr_string("mode", "bilinear"));
  RKD_ASSIGN(std::string padding, n->attr_string("padding_mode", "zeros"));
  RKD_ASSIGN(int64_t align, n->attr_int("align_corners", 0));
  RKD_ASSIGN(GridSampleMode gm, parse_grid_sample_mode(mode));
  RKD_ASSIGN(GridSamplePadding gp, parse_grid_sample_padding(padding));
  RKD_ASSIGN(Node * c, g.add_node(g.fresh_name(n->name + "/rknn"), contract::kGridSampleType, "", {n->inputs[0], n->inputs[1]},
                                  {g.fresh_name(n->outputs[0]->name + "/rknn")}));
  c->attrs[contract::kMode] = static_cast<int64_t>(gm);
  c->attrs[contract::kPadding] = static_cast<int64_t>(gp);
  c->attrs[contract::kAlignCorners] = static_cast<int64_t>(align != 0);
  c->attrs[contract::kConvention] = static_cast<int64_t>(GridSampleConvention::onnx);  // an ONNX node's semantics
  c->outputs[0]->dtype = n->outputs[0]->dtype;
  c->outputs[0]->shape = n->outputs[0]->shape;
  g.move_output(n, 0, c, 0);
  if (report) report->push_back(n->describe() + " -> " + contract::kGridSampleType);
  return {};
}

Status expand_msda(Graph& g, Node* n) {
  if (n->inputs.size() != 3) return invalid(n->describe() + ": takes 3 inputs (value, locations, weights)");
  RKD_ASSIGN(auto hs, n->attr_ints(contract::kLevelH, {}));
  RKD_ASSIGN(auto ws, n->attr_ints(contract::kLevelW, {}));
  RKD_ASSIGN(auto points, n->attr_ints(contract::kPoints, {}));
  if (hs.empty() || hs.size() != ws.size() || hs.size() != points.size())
    return invalid(n->describe() + ": attributes level_h, level_w and points need one value per level");
  RKD_ASSIGN(int64_t method, code(*n, contract::kMethod, contract::kMethodCount));
  Value* value = n->inputs[0];
  if (!value->shape || value->shape->size() != 4 || !(*value->shape)[1].is_static() || !(*value->shape)[2].is_static() ||
      !(*value->shape)[3].is_static())
    return invalid(n->describe() + ": input value must be [B, T, heads, head_dim] with static T, heads and head_dim");
  const Dims& v = *value->shape;
  RKD_ASSIGN(Node * pn,
             g.add_node(g.fresh_name(n->name + "/msda_prepare"), "MSDAPrepare", "rkdeploy", {value}, {g.fresh_name(value->name + "/msda_prepared")}));
  pn->attrs["level_h"] = hs;
  pn->attrs["level_w"] = ws;
  pn->outputs[0]->dtype = DType::f32;
  pn->outputs[0]->shape = Dims{v[0], v[2], Dim{v[1].value + 1, ""}, Dim{(v[3].value + 7) / 8 * 8, ""}};
  RKD_ASSIGN(Node * fn, g.add_node(g.fresh_name(n->name + "/msda"), "MSDeformAttn", "rkdeploy", {pn->outputs[0], n->inputs[1], n->inputs[2]},
                                   {g.fresh_name(n->outputs[0]->name + "/msda")}));
  fn->attrs["level_h"] = hs;
  fn->attrs["level_w"] = ws;
  fn->attrs["points"] = points;
  fn->attrs["method"] = std::string(to_string(static_cast<MsdaMethod>(method)));
  fn->attrs["head_dim"] = v[3].value;
  fn->outputs[0]->dtype = n->outputs[0]->dtype;
  fn->outputs[0]->shape = n->outputs[0]->shape;
  g.move_output(n, 0, fn, 0);
  return {};
}

Status expand_grid_sample(Graph& g, Node* n) {
  if (n->inputs.size() != 2) return invalid(n->describe() + ": takes 2 inputs (input, grid)");
  RKD_ASSIGN(int64_t mode, code(*n, contract::kMode, contract::kModeCount));
  RKD_ASSIGN(int64_t padding, code(*n, contract::kPadding, contract::kPaddingCount));
  RKD_ASSIGN(int64_t align, code(*n, contract::kAlignCorners, 2));
  RKD_ASSIGN(int64_t convention, code(*n, contract::kConvention, contract::kConventionCount));
  if (convention != static_cast<int64_t>(GridSampleConvention::onnx))
    return unsupported(n->describe() + ": convention pytorch (an ONNX GridSample node has ONNX's; rkdeploy export writes that)");
  RKD_ASSIGN(Node * gn, g.add_node(g.fresh_name(n->name + "/grid_sample"), "GridSample", "", {n->inputs[0], n->inputs[1]},
                                   {g.fresh_name(n->outputs[0]->name + "/grid_sample")}));
  gn->attrs["mode"] = std::string(to_string(static_cast<GridSampleMode>(mode)));
  gn->attrs["padding_mode"] = std::string(to_string(static_cast<GridSamplePadding>(padding)));
  gn->attrs["align_corners"] = align;
  gn->outputs[0]->dtype = n->outputs[0]->dtype;
  gn->outputs[0]->shape = n->outputs[0]->shape;
  g.move_output(n, 0, gn, 0);
  return {};
}

// Runs `f` on every node of type `type` (a snapshot: f adds nodes), then restores topological order.
template <typename F>
Status rewrite(Graph& g, const std::string& type, const std::string& domain, F f) {
  std::vector<Node*> sites;
  for (const auto& n : g.nodes())
    if (n->op_type == type && n->domain == domain) sites.push_back(n.get());
  for (Node* n : sites) RKD_TRY(f(n));
  return g.sort_topologically();
}

}  // namespace

Pass to_rknn_custom_ops_pass(std::vector<std::string>* report) {
  return Pass{"to-rknn-custom-ops", [report](Graph& g) -> Status {
                RKD_TRY(rewrite(g, "MSDeformAttn", "rkdeploy", [&](Node* n) { return replace_msda(g, n, report); }));
                RKD_TRY(rewrite(g, "GridSample", "", [&](Node* n) { return replace_grid_sample(g, n, report); }));
                return dead_code_elimination_pass().run(g);  // the replaced nodes (and MSDAPrepare)
              }};
}

Pass from_rknn_custom_ops_pass() {
  return Pass{"from-rknn-custom-ops", [](Graph& g) -> Status {
                RKD_TRY(rewrite(g, contract::kMsdaType, "", [&](Node* n) { return expand_msda(g, n); }));
                RKD_TRY(rewrite(g, contract::kGridSampleType, "", [&](Node* n) { return expand_grid_sample(g, n); }));
                return dead_code_elimination_pass().run(g);  // the custom nodes replaced
              }};
}

}  // namespace rkd::ir
