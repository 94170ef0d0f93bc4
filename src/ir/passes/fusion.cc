#include "ir/passes/fusion.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "ir/passes/shape_inference.h"

namespace rkd::ir {

namespace {

bool only_reader(const ir::Value* v, const ir::Node* n, const ir::Graph& g) {
  if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return false;
  for (const ir::Node* c : v->consumers) {
    if (c != n) return false;
  }
  return true;
}

}  // namespace

ir::Pass conv_activation_fusion_pass() {
  return ir::Pass{
      "conv-activation-fusion", [](ir::Graph& g) -> Status {
        std::set<const ir::Node*> gone;
        for (const auto& np : g.nodes()) {
          ir::Node* conv = np.get();
          if (conv->op_type != "Conv" || !conv->domain.empty() || conv->attrs.count("rkd_activation")) continue;
          ir::Value* y = conv->outputs[0];
          if (!y || std::find(g.outputs.begin(), g.outputs.end(), y) != g.outputs.end()) continue;
          std::vector<ir::Node*> readers;
          for (ir::Node* c : y->consumers) {
            if (std::find(readers.begin(), readers.end(), c) == readers.end()) readers.push_back(c);
          }
          ir::Node* last = nullptr;
          std::string act;
          if (readers.size() == 1 && readers[0]->op_type == "Relu" && readers[0]->domain.empty()) {
            last = readers[0];
            act = "relu";
          } else if (readers.size() == 2) {
            ir::Node* sig = readers[0]->op_type == "Sigmoid" ? readers[0] : readers[1];
            ir::Node* mul = sig == readers[0] ? readers[1] : readers[0];
            if (sig->op_type == "Sigmoid" && mul->op_type == "Mul" && sig->domain.empty() && mul->domain.empty() && sig->outputs[0] &&
                only_reader(sig->outputs[0], mul, g) && mul->inputs.size() == 2 &&
                ((mul->inputs[0] == y && mul->inputs[1] == sig->outputs[0]) || (mul->inputs[1] == y && mul->inputs[0] == sig->outputs[0]))) {
              last = mul;
              act = "silu";
              gone.insert(sig);
            }
          }
          if (!last) continue;
          // The conv takes over the activation's output value (its name stays).
          g.move_output(last, 0, conv, 0);
          conv->attrs["rkd_activation"] = act;
          gone.insert(last);
        }
        g.remove_nodes([&](const ir::Node& n) { return gone.count(&n) > 0; });
        return {};
      }};
}

namespace {

// A failed check: the reason is reported for near misses.
struct Miss {
  std::string reason;
};

std::vector<int64_t> perm_of(const Node* n) {
  auto p = n->attr_ints("perm", {});
  return p.ok() ? *p : std::vector<int64_t>{};
}

std::optional<double> scalar_of(const Value* v) {
  if (!v || !v->constant || v->constant->numel() != 1) return std::nullopt;
  return v->constant->get_as_double(0);
}

// The other operand of a binary node, given one of them.
Value* other_input(const Node* n, const Value* one) {
  if (n->inputs.size() != 2) return nullptr;
  return n->inputs[0] == one ? n->inputs[1] : (n->inputs[1] == one ? n->inputs[0] : nullptr);
}

int64_t axis_attr(const Node* n, int64_t rank, int64_t fallback) {
  auto a = n->attr_int("axis", fallback);
  const int64_t v = a.ok() ? *a : fallback;
  return v < 0 ? v + rank : v;
}

struct Site {
  Node* concat = nullptr;
  Value* value4 = nullptr;     // [B, T, nH, c]
  Value* locations = nullptr;  // [B, Q, nH, P, 2]
  Value* weights = nullptr;    // [B, Q, nH, P]
  Value* out = nullptr;        // [B, Q, nH*c]
  // The sum quantized before its Reshape and Transpose (its reader runs int8: the NPU's output
  // projection): the fused output is quantized alike (quantization commutes with the copies).
  Node* quantize = nullptr;
  std::vector<int64_t> hs, ws, points;
  std::string method;
  int64_t heads = 0, head_dim = 0;
};

// value_l [B*nH, c, h, w] -> (level start token, value4), checking the common value chain.
Result<std::pair<int64_t, Value*>> match_level_value(Value* vl, Value** chain_root) {
  Node* r = ir::produced_by(vl, "Reshape");
  if (!r) return Error{ErrorKind::invalid, "level value is not a Reshape"};
  Value* sliced = r->inputs[0];
  int64_t start = -1;
  Value* flat = nullptr;
  if (Node* sl = ir::produced_by(sliced, "Slice")) {
    auto st = ir::constant_ints(sl->inputs.size() > 1 ? sl->inputs[1] : nullptr);
    auto ax = ir::constant_ints(sl->inputs.size() > 3 ? sl->inputs[3] : nullptr);
    auto steps = ir::constant_ints(sl->inputs.size() > 4 ? sl->inputs[4] : nullptr);
    if (!st || st->size() != 1 || !ax || ax->size() != 1 || ((*ax)[0] != 2 && (*ax)[0] != -1) || (steps && (*steps)[0] != 1)) {
      return Error{ErrorKind::invalid, "level slice is not a contiguous slice of the token axis"};
    }
    start = (*st)[0];
    flat = sl->inputs[0];
  } else if (Node* sp = ir::produced_by(sliced, "Split")) {
    flat = sp->inputs[0];
    int64_t at = 0;
    for (Value* o : sp->outputs) {
      if (o == sliced) start = at;
      auto s2 = ir::static_shape(o);
      if (!s2) return Error{ErrorKind::invalid, "split output shape unknown"};
      at += s2->back();
    }
    if (axis_attr(sp, 3, 0) != 2) return Error{ErrorKind::invalid, "value split is not over the token axis"};
  } else {
    return Error{ErrorKind::invalid, "level value is not sliced from the token axis"};
  }
  Node* r3 = ir::produced_by(flat, "Reshape");
  Node* tr = r3 ? ir::produced_by(r3->inputs[0], "Transpose") : nullptr;
  if (!tr || perm_of(tr) != std::vector<int64_t>{0, 2, 3, 1}) {
    return Error{ErrorKind::invalid, "value is not Transpose(0,2,3,1) + Reshape of a [B,T,nH,c] tensor"};
  }
  Value* v4 = tr->inputs[0];
  if (*chain_root && *chain_root != v4) return Error{ErrorKind::invalid, "levels read different value tensors"};
  *chain_root = v4;
  return std::make_pair(start, v4);
}

// grid_l [B*nH, Q, P_l, 2] from the locations chain; `two_x_minus_one` for default.
Result<Value*> match_locations(Value* grid, bool default_method, Value** split_root) {
  Node* sp = ir::produced_by(grid, "Split");
  if (!sp || axis_attr(sp, 4, 0) != 2) return Error{ErrorKind::invalid, "grid is not split over the points axis"};
  if (*split_root && *split_root != sp->outputs[0]) return Error{ErrorKind::invalid, "levels use different grids"};
  *split_root = sp->outputs[0];
  Node* r = ir::produced_by(sp->inputs[0], "Reshape");
  Node* tr = r ? ir::produced_by(r->inputs[0], "Transpose") : nullptr;
  if (!tr || perm_of(tr) != std::vector<int64_t>{0, 2, 1, 3, 4}) {
    return Error{ErrorKind::invalid, "grid is not Transpose(0,2,1,3,4) + Reshape of [B,Q,nH,P,2] locations"};
  }
  Value* l = tr->inputs[0];
  if (!default_method) return l;
  Node* sub = ir::produced_by(l, "Sub");
  Node* mul = sub ? ir::produced_by(sub->inputs[0], "Mul") : nullptr;
  if (!sub || scalar_of(sub->inputs[1]) != 1.0 || !mul) {
    return Error{ErrorKind::invalid, "GridSample grid is not 2 * locations - 1"};
  }
  for (int i = 0; i < 2; ++i) {
    if (scalar_of(mul->inputs[static_cast<size_t>(i)]) == 2.0) return mul->inputs[static_cast<size_t>(1 - i)];
  }
  return Error{ErrorKind::invalid, "GridSample grid is not 2 * locations - 1"};
}

// Discrete per-level sample: returns (value_l, grid_l) and checks the integer coordinate chain.
Result<std::pair<Value*, Value*>> match_discrete_level(Value* sample, int64_t* clip_hi, std::vector<double>* scale_wh) {
  Node* r1 = ir::produced_by(sample, "Reshape");
  Node* t1 = r1 ? ir::produced_by(r1->inputs[0], "Transpose") : nullptr;
  Node* r2 = t1 ? ir::produced_by(t1->inputs[0], "Reshape") : nullptr;
  Node* g = r2 ? ir::produced_by(r2->inputs[0], "Gather") : nullptr;
  if (!g) return Error{ErrorKind::invalid, "sample is not Reshape/Transpose/Reshape of a Gather"};
  Node* fl = ir::produced_by(g->inputs[0], "Flatten");
  Node* tv = fl ? ir::produced_by(fl->inputs[0], "Transpose") : nullptr;
  if (!tv || perm_of(tv) != std::vector<int64_t>{0, 2, 3, 1}) {
    return Error{ErrorKind::invalid, "Gather does not read Flatten(Transpose(0,2,3,1)) of the level value"};
  }
  // The gather index may depend on constants and on exactly one Clip(Cast(Add(Mul(grid)))).
  std::vector<Value*> stack{g->inputs[1]};
  std::set<Value*> seen;
  Node* clip = nullptr;
  while (!stack.empty()) {
    Value* v = stack.back();
    stack.pop_back();
    if (!v || v->constant || !seen.insert(v).second) continue;
    Node* p = v->producer;
    if (!p) return Error{ErrorKind::invalid, "gather index reads a graph input"};
    if (p->op_type == "Clip") {
      if (clip && clip != p) return Error{ErrorKind::invalid, "gather index reads two coordinate chains"};
      clip = p;
      continue;
    }
    for (Value* in : p->inputs) stack.push_back(in);
  }
  if (!clip) return Error{ErrorKind::invalid, "gather index has no clamped coordinates"};
  auto lo = scalar_of(clip->inputs.size() > 1 ? clip->inputs[1] : nullptr);
  auto hi = scalar_of(clip->inputs.size() > 2 ? clip->inputs[2] : nullptr);
  if (lo != 0.0 || !hi) return Error{ErrorKind::invalid, "coordinates are not clamped to [0, constant]"};
  *clip_hi = static_cast<int64_t>(*hi);
  Node* cast = ir::produced_by(clip->inputs[0], "Cast");
  Node* add = cast ? ir::produced_by(cast->inputs[0], "Add") : nullptr;
  if (!cast || cast->attr_int("to", 0).value_or(0) != 7 || !add) {
    return Error{ErrorKind::invalid, "coordinates are not Cast(int64) of an Add"};
  }
  Node* mul = nullptr;
  for (int i = 0; i < 2; ++i) {
    if (scalar_of(add->inputs[static_cast<size_t>(i)]) == 0.5) mul = ir::produced_by(add->inputs[static_cast<size_t>(1 - i)], "Mul");
  }
  if (!mul) return Error{ErrorKind::invalid, "coordinates are not loc * [w, h] + 0.5"};
  Value* grid = nullptr;
  const Value* wh = nullptr;
  for (int i = 0; i < 2; ++i) {
    const Value* c = mul->inputs[static_cast<size_t>(i)];
    if (c && c->constant && c->constant->numel() == 2) {
      wh = c;
      grid = mul->inputs[static_cast<size_t>(1 - i)];
    }
  }
  if (!wh) return Error{ErrorKind::invalid, "coordinates are not loc * [w, h] + 0.5"};
  *scale_wh = {wh->constant->get_as_double(0), wh->constant->get_as_double(1)};
  return std::make_pair(tv->inputs[0], grid);
}

// v past the quantization of a value its copies carry, each the only reader: QuantizeLinear
// (per tensor; the first is kept in *q: the copies share its scale), DequantizeLinear and the
// name-giving Identities qdq-to-qlinear leaves.
Value* past_quantization(Value* v, Node** q) {
  while (v && v->consumers.size() == 1 && v->consumers[0]->domain.empty()) {
    Node* c = v->consumers[0];
    if (c->op_type == "QuantizeLinear") {
      if (c->inputs.size() < 2 || !c->inputs[1] || !c->inputs[1]->constant || c->inputs[1]->constant->numel() != 1) break;
      if (!*q) *q = c;
    } else if (c->op_type != "DequantizeLinear" && c->op_type != "Identity") {
      break;
    }
    v = c->outputs[0];
  }
  return v;
}

Result<Site> match_site(Node* concat) {
  Site s;
  s.concat = concat;
  Value* cat = concat->outputs[0];
  auto cshape = ir::static_shape(cat);
  if (!cshape || cshape->size() != 4) return Error{ErrorKind::invalid, "samples are not [B*nH, c, Q, P]"};
  if (axis_attr(concat, 4, 0) != 3) return Error{ErrorKind::invalid, "Concat is not over the points axis"};
  if (cat->consumers.size() != 1 || cat->consumers[0]->op_type != "Mul") {
    return Error{ErrorKind::invalid, "concatenated samples are not multiplied by the weights alone"};
  }
  Node* mul = cat->consumers[0];
  Value* aw = other_input(mul, cat);
  Node* awr = ir::produced_by(aw, "Reshape");
  Node* awt = awr ? ir::produced_by(awr->inputs[0], "Transpose") : nullptr;
  if (!awt || perm_of(awt) != std::vector<int64_t>{0, 2, 1, 3}) {
    return Error{ErrorKind::invalid, "weights are not Transpose(0,2,1,3) + Reshape of [B,Q,nH,P]"};
  }
  s.weights = awt->inputs[0];
  Value* prod = mul->outputs[0];
  if (prod->consumers.size() != 1 || prod->consumers[0]->op_type != "ReduceSum") {
    return Error{ErrorKind::invalid, "weighted samples are not summed by one ReduceSum"};
  }
  Node* rs = prod->consumers[0];
  auto axes = ir::constant_ints(rs->inputs.size() > 1 ? rs->inputs[1] : nullptr);
  if (!axes || axes->size() != 1 || ((*axes)[0] != -1 && (*axes)[0] != 3) || rs->attr_int("keepdims", 1).value_or(1) != 0) {
    return Error{ErrorKind::invalid, "ReduceSum is not over the points axis without keepdims"};
  }
  Value* red = rs->outputs[0];
  red = past_quantization(red, &s.quantize);
  if (red->consumers.size() != 1 || red->consumers[0]->op_type != "Reshape") {
    return Error{ErrorKind::invalid, "the sum is not reshaped to [B, nH*c, Q]"};
  }
  Value* r3 = past_quantization(red->consumers[0]->outputs[0], &s.quantize);
  if (r3->consumers.size() != 1 || r3->consumers[0]->op_type != "Transpose" || perm_of(r3->consumers[0]) != std::vector<int64_t>{0, 2, 1}) {
    return Error{ErrorKind::invalid, "the result is not transposed to [B, Q, nH*c]"};
  }
  s.out = r3->consumers[0]->outputs[0];
  Value* v4_root = nullptr;
  Value* split_root = nullptr;
  int64_t next_token = 0;
  bool any_grid = false, any_gather = false;
  for (Value* sample : concat->inputs) {
    Value* vl = nullptr;
    Value* grid = nullptr;
    if (Node* gs = ir::produced_by(sample, "GridSample")) {
      any_grid = true;
      if (gs->attr_string("mode", "bilinear").value_or("") != "bilinear" || gs->attr_string("padding_mode", "zeros").value_or("") != "zeros" ||
          gs->attr_int("align_corners", 0).value_or(1) != 0) {
        return Error{ErrorKind::invalid, gs->describe() + " is not bilinear/zeros/align_corners=0"};
      }
      vl = gs->inputs[0];
      grid = gs->inputs[1];
    } else {
      any_gather = true;
      int64_t hi = 0;
      std::vector<double> wh;
      RKD_ASSIGN(auto pair, match_discrete_level(sample, &hi, &wh));
      vl = pair.first;
      grid = pair.second;
      auto ls = ir::static_shape(vl);
      if (!ls || ls->size() != 4) return Error{ErrorKind::invalid, "level value shape unknown"};
      if (wh[0] != static_cast<double>((*ls)[3]) || wh[1] != static_cast<double>((*ls)[2])) {
        return Error{ErrorKind::invalid, "coordinates are scaled by [" + std::to_string(wh[0]) + ", " + std::to_string(wh[1]) +
                                             "], not the level's [w, h] = [" + std::to_string((*ls)[3]) + ", " + std::to_string((*ls)[2]) + "]"};
      }
      if (hi != (*ls)[2] - 1) {
        return Error{ErrorKind::invalid, "coordinates are clamped to " + std::to_string(hi) + ", not H-1 = " + std::to_string((*ls)[2] - 1) +
                                             " (only the historical discrete form is fused)"};
      }
    }
    auto ls = ir::static_shape(vl);
    auto gsz = ir::static_shape(grid);
    if (!ls || ls->size() != 4 || !gsz || gsz->size() != 4) return Error{ErrorKind::invalid, "level shapes unknown"};
    RKD_ASSIGN(auto lv, match_level_value(vl, &v4_root));
    if (lv.first != next_token) return Error{ErrorKind::invalid, "levels are not in token order"};
    next_token += (*ls)[2] * (*ls)[3];
    RKD_ASSIGN(Value * loc, match_locations(grid, any_grid, &split_root));
    if (s.locations && s.locations != loc) return Error{ErrorKind::invalid, "levels use different locations"};
    s.locations = loc;
    s.hs.push_back((*ls)[2]);
    s.ws.push_back((*ls)[3]);
    s.points.push_back((*gsz)[2]);
  }
  if (any_grid && any_gather) return Error{ErrorKind::invalid, "levels mix GridSample and Gather sampling"};
  s.method = any_grid ? "default" : "discrete";
  s.value4 = v4_root;
  auto v4 = ir::static_shape(s.value4);
  auto loc = ir::static_shape(s.locations);
  auto w = ir::static_shape(s.weights);
  auto o = ir::static_shape(s.out);
  if (!v4 || v4->size() != 4 || !loc || loc->size() != 5 || !w || w->size() != 4 || !o || o->size() != 3) {
    return Error{ErrorKind::invalid, "value/locations/weights shapes are not static [B,T,nH,c]/[B,Q,nH,P,2]/[B,Q,nH,P]"};
  }
  if ((*v4)[1] != next_token) return Error{ErrorKind::invalid, "level sizes do not add up to the value's tokens"};
  int64_t total_points = 0;
  for (int64_t p : s.points) total_points += p;
  if ((*loc)[3] != total_points || (*w)[3] != total_points || (*loc)[2] != (*v4)[2] || (*w)[2] != (*v4)[2]) {
    return Error{ErrorKind::invalid, "points or heads of locations/weights do not match the levels"};
  }
  s.heads = (*v4)[2];
  s.head_dim = (*v4)[3];
  if ((*o)[2] != s.heads * s.head_dim) return Error{ErrorKind::invalid, "output width is not nH*c"};
  return s;
}

std::string site_text(const Site& s) {
  std::string lv;
  for (size_t i = 0; i < s.hs.size(); ++i) {
    if (i) lv += ',';
    lv += std::to_string(s.hs[i]);
    lv += 'x';
    lv += std::to_string(s.ws[i]);
  }
  std::string pts;
  for (size_t i = 0; i < s.points.size(); ++i) {
    if (i) pts += ',';
    pts += std::to_string(s.points[i]);
  }
  return s.concat->describe() + ": " + s.method + " sampling, levels " + lv + ", points " + pts + ", " + std::to_string(s.heads) + " heads x " +
         std::to_string(s.head_dim);
}

}  // namespace

ir::Pass deform_attn_fusion_pass(FusionReport* report) {
  return ir::Pass{
      "deform-attn-fusion", [report](ir::Graph& g) -> Status {
        std::vector<Node*> candidates;
        for (const auto& np : g.nodes()) {
          Node* n = np.get();
          if (n->op_type != "Concat" || n->inputs.empty() || !n->outputs[0]) continue;
          bool sampled = true;
          for (Value* v : n->inputs) {
            sampled =
                sampled && v && v->producer &&
                (v->producer->op_type == "GridSample" ||
                 (v->producer->op_type == "Reshape" && ir::produced_by(v->producer->inputs[0], "Transpose") &&
                  ir::produced_by(ir::produced_by(v->producer->inputs[0], "Transpose")->inputs[0], "Reshape") &&
                  ir::produced_by(ir::produced_by(ir::produced_by(v->producer->inputs[0], "Transpose")->inputs[0], "Reshape")->inputs[0], "Gather")));
          }
          if (sampled) candidates.push_back(n);
        }
        // value source + geometry -> prepared value (layers reading the same memory share it)
        std::map<std::tuple<Value*, std::vector<int64_t>, std::vector<int64_t>, int64_t>, Value*> prepared;
        std::vector<std::unique_ptr<Node>> unused;
        for (Node* c : candidates) {
          auto site = match_site(c);
          if (!site.ok()) {
            if (report) report->not_fused.push_back(c->describe() + ": " + site.error().message);
            continue;
          }
          const Site& s = *site;
          // One preparation per value tensor: layers reshaping the same memory share it.
          Value* src = s.value4;
          if (Node* r = ir::produced_by(s.value4, "Reshape")) src = r->inputs[0];
          const auto key = std::make_tuple(src, s.hs, s.ws, s.heads);
          Value* prep = prepared.count(key) ? prepared[key] : nullptr;
          if (!prep) {
            RKD_ASSIGN(Node * pn,
                       g.add_node(s.concat->name + "/msda_prepare", "MSDAPrepare", "rkdeploy", {s.value4}, {s.value4->name + "/msda_prepared"}));
            pn->attrs["level_h"] = s.hs;
            pn->attrs["level_w"] = s.ws;
            auto v4 = *ir::static_shape(s.value4);
            const int64_t hdp = (s.head_dim + 7) / 8 * 8;
            pn->outputs[0]->dtype = DType::f32;
            pn->outputs[0]->shape = ir::Dims{ir::Dim{v4[0], ""}, ir::Dim{s.heads, ""}, ir::Dim{v4[1] + 1, ""}, ir::Dim{hdp, ""}};
            prep = pn->outputs[0];
            prepared[key] = prep;
          }
          // The fused node takes over the site's output value (its name stays).
          RKD_ASSIGN(Node * fn,
                     g.add_node(s.concat->name + "/msda", "MSDeformAttn", "rkdeploy", {prep, s.locations, s.weights}, {s.out->name + "/fused"}));
          if (s.quantize) {
            // [B, Q, nH*c] float, then quantized as the sum was.
            fn->outputs[0]->dtype = DType::f32;
            fn->outputs[0]->shape = s.out->shape;
            std::vector<Value*> qin(s.quantize->inputs.begin(), s.quantize->inputs.end());
            qin[0] = fn->outputs[0];
            RKD_ASSIGN(Node * qn, g.add_node(s.quantize->name + "/fused", "QuantizeLinear", "", qin, {s.out->name + "/fused_q"}));
            qn->attrs = s.quantize->attrs;
            qn->outputs[0]->dtype = s.quantize->outputs[0]->dtype;
            qn->outputs[0]->shape = s.out->shape;
            Node* last = qn;
            if (s.out->dtype == DType::f32) {
              // The QDQ graph (before qdq-to-qlinear): the site's output is the dequantized value.
              std::vector<Value*> din{qn->outputs[0], s.quantize->inputs[1]};
              if (s.quantize->inputs.size() > 2) din.push_back(s.quantize->inputs[2]);
              RKD_ASSIGN(last, g.add_node(s.quantize->name + "/fused_dq", "DequantizeLinear", "", din, {s.out->name + "/fused_dq"}));
            }
            g.move_output(s.out->producer, 0, last, 0);
          } else {
            g.move_output(s.out->producer, 0, fn, 0);
          }
          fn->attrs["level_h"] = s.hs;
          fn->attrs["level_w"] = s.ws;
          fn->attrs["points"] = s.points;
          fn->attrs["method"] = s.method;
          fn->attrs["head_dim"] = s.head_dim;
          if (report) {
            ++report->fused_sites;
            report->fused.push_back(site_text(s));
          }
        }
        if (prepared.empty()) return {};
        // New nodes were appended: restore topological order (a fused node must come
        // after its inputs' producers and before its output's readers).
        return g.sort_topologically();
      }};
}

}  // namespace rkd::ir
