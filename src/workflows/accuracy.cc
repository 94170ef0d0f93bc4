// Per-layer accuracy analysis (contract in accuracy.h).
#include "workflows/accuracy.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/json_style.h"
#include "core/progress.h"
#include "core/html.h"
#include "ir/op_info.h"
#include "runtime/executor.h"
#include "runtime/op_registry.h"
#include "workflows/quantize.h"

namespace rkd::workflows {

using namespace runtime;  // NOLINT: the layer below (executor, model loading, detector pre- and post-processing)

LayerError compare(const Tensor& ref0, const Tensor& q0, double scale) {
  const Tensor ref = ref0.contiguous(), q = q0.contiguous();
  LayerError e;
  double dot = 0, ff = 0, qq = 0, dd = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double a = ref.get_as_double(i), b = q.get_as_double(i);
    if (!std::isfinite(a)) continue;  // e.g. -inf padding before a max pool: no error to measure
    dot += a * b;
    ff += a * a;
    qq += b * b;
    dd += (a - b) * (a - b);
    e.max_abs = std::max(e.max_abs, std::fabs(a - b));
  }
  e.cosine = ff == 0 && qq == 0 ? 1.0 : (ff == 0 || qq == 0 ? 0.0 : dot / std::sqrt(ff * qq));
  e.euclidean = ff > 0 ? std::sqrt(dd / ff) : std::sqrt(dd);
  e.lsb = scale > 0 ? e.max_abs / scale : 0;
  return e;
}

using ir::Node;
using ir::Value;

std::vector<QdqSite> qdq_sites(ir::Graph& qdq) {
  std::vector<QdqSite> sites;
  for (const auto& np : qdq.nodes()) {
    Node* q = np.get();
    if (q->op_type != "QuantizeLinear" || !q->domain.empty() || q->inputs.size() < 3 || !q->inputs[1] || !q->inputs[1]->constant || !q->inputs[2] ||
        !q->inputs[2]->constant || q->inputs[1]->constant->numel() != 1) {
      continue;
    }
    Value* dq = nullptr;
    for (Node* c : q->outputs[0]->consumers) {
      if (c->op_type == "DequantizeLinear") dq = c->outputs[0];
    }
    if (!dq) continue;
    std::string name = q->inputs[0]->name;
    if (name.size() > 6 && name.compare(name.size() - 6, 6, "/float") == 0) name.resize(name.size() - 6);
    sites.push_back({q, dq, name, q->inputs[1]->constant->get_as_double(0), static_cast<int64_t>(q->inputs[2]->constant->get_as_double(0)),
                     q->inputs[2]->constant->dtype()});
  }
  return sites;
}

namespace {

// QuantizeLinear then DequantizeLinear of x with a per-tensor scale and zero point.
Tensor fake_quant(const Tensor& x0, double scale, int64_t zp, DType qtype) {
  const Tensor x = x0.contiguous();
  Tensor out = Tensor::empty(DType::f32, x.shape());
  const float s = static_cast<float>(scale);
  const float lo = qtype == DType::u8 ? 0.f : -128.f, hi = qtype == DType::u8 ? 255.f : 127.f;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float q = std::clamp(std::nearbyint(x.data<float>()[i] / s) + static_cast<float>(zp), lo, hi);
    out.data<float>()[i] = (q - static_cast<float>(zp)) * s;
  }
  return out;
}

}  // namespace

Result<AccuracyReport> analyze_accuracy(const std::string& float_model, const std::string& quant_model, const std::map<std::string, Tensor>& inputs,
                                        int threads) {
  AccuracyReport rep;
  rep.float_model = float_model;
  rep.quant_model = quant_model;
  // The quantized model first: its sites say which values the comparison reads. Both models
  // then run once with an observer that keeps only those (every other value is overwritten in
  // the executor's arena as usual).
  RKD_ASSIGN(auto qg, load_portable(quant_model));
  const size_t model_outputs = qg->outputs.size();
  RKD_TRY(check_graph_inputs(*qg, inputs));

  // The quantized activations, in graph order.
  std::vector<QdqSite> sites = qdq_sites(*qg);
  // Float values read: each site's value and its producer's inputs (by the float model's names).
  std::set<std::string> float_needed, quant_needed;
  for (const QdqSite& s : sites) {
    float_needed.insert(s.name);
    quant_needed.insert(s.dq->name);
    if (const Node* p = s.quantize->inputs[0]->producer) {
      for (const Value* v : p->inputs) {
        if (!v || v->constant) continue;
        const Node* d = ir::produced_by(const_cast<Value*>(v), "DequantizeLinear");
        std::string n = d && !d->inputs.empty() && d->inputs[0]->producer && d->inputs[0]->producer->op_type == "QuantizeLinear"
                            ? d->inputs[0]->producer->inputs[0]->name
                            : v->name;
        if (n.size() > 6 && n.compare(n.size() - 6, 6, "/float") == 0) n.resize(n.size() - 6);
        float_needed.insert(n);
      }
    }
  }
  // Each graph output, and the inputs of a Concat it is (through layout-only ops): the float
  // model's name and the quantized model's value.
  struct OutputPlan {
    std::string name;
    std::vector<std::pair<std::string, std::string>> branches;  // (float name, quantized value name)
  };
  std::map<const Value*, const QdqSite*> site_of;
  for (const QdqSite& s : sites) site_of[s.dq] = &s;
  std::vector<OutputPlan> out_plans;
  for (size_t k = 0; k < model_outputs; ++k) {
    const Value* o = qg->outputs[k];
    OutputPlan op{o->name, {}};
    float_needed.insert(o->name);
    quant_needed.insert(o->name);
    const Value* v = o;
    // Back through a DequantizeLinear/QuantizeLinear pair and layout-only ops to a Concat.
    for (int guard = 0; v && v->producer && guard < 64; ++guard) {
      const Node* p = v->producer;
      if (p->op_type == "Concat" && p->domain.empty()) {
        for (const Value* in : p->inputs) {
          if (!in || in->constant) continue;
          auto it = site_of.find(in);
          const std::string fname = it != site_of.end() ? it->second->name : in->name;
          op.branches.emplace_back(fname, in->name);
          float_needed.insert(fname);
          quant_needed.insert(in->name);
        }
        break;
      }
      const bool qdq = (p->op_type == "DequantizeLinear" || p->op_type == "QuantizeLinear") && p->domain.empty();
      if (!qdq && !ir::op_has(*p, ir::kLayoutOnly)) break;
      v = p->inputs.empty() ? nullptr : p->inputs[0];
    }
    out_plans.push_back(std::move(op));
  }
  auto keep = [](const std::set<std::string>& needed, std::map<std::string, Tensor>& into) {
    return [&needed, &into](const ir::Value& v, const Tensor& t) {
      if (needed.count(v.name)) into[v.name] = t.clone();
    };
  };
  ExecutorOptions eo;
  eo.threads = threads;
  std::map<std::string, Tensor> fvals, qvals;
  {
    RKD_ASSIGN(auto fg, load_portable(float_model));
    RKD_TRY(check_graph_inputs(*fg, inputs));
    ExecutorOptions fo = eo;
    fo.observe = keep(float_needed, fvals);
    RKD_ASSIGN(auto fx, Executor::create(*fg, fo));
    RKD_ASSIGN(auto outs, fx->run(inputs));
    for (const auto& [k, t] : inputs) fvals.emplace(k, t);
    for (const auto& [k, t] : outs) fvals[k] = t;
  }
  {
    ExecutorOptions qo = eo;
    qo.observe = keep(quant_needed, qvals);
    RKD_ASSIGN(auto qx, Executor::create(*qg, qo));
    RKD_ASSIGN(auto outs, qx->run(inputs));
    for (const auto& [k, t] : outs) {
      if (quant_needed.count(k)) qvals[k] = t;
    }
  }
  std::erase_if(sites, [&](const QdqSite& s) { return !fvals.count(s.name) || !qvals.count(s.dq->name); });
  std::map<const Value*, const QdqSite*> site_of_dq;
  for (const QdqSite& s : sites) site_of_dq[s.dq] = &s;

  // Resolves an input of a quantized layer for single mode.
  std::map<const Value*, Tensor> const_dq;
  auto single_input = [&](Value* v) -> std::optional<Tensor> {
    if (!v) return std::nullopt;
    if (v->constant) return *v->constant;
    if (auto it = site_of_dq.find(v); it != site_of_dq.end()) {
      const QdqSite& s = *it->second;
      return fake_quant(fvals.at(s.name), s.scale, s.zp, s.qtype);
    }
    if (Node* d = ir::produced_by(v, "DequantizeLinear")) {
      if (auto it = const_dq.find(v); it != const_dq.end()) return it->second;
      std::vector<const Tensor*> ins;
      for (Value* i : d->inputs) {
        if (i && !i->constant) return std::nullopt;
        ins.push_back(i ? &*i->constant : nullptr);
      }
      auto r = evaluate_node(*d, qg->opset, ins);
      if (!r.ok()) return std::nullopt;
      return const_dq[v] = r.value()[0];
    }
    if (auto it = fvals.find(v->name); it != fvals.end()) return it->second;
    return std::nullopt;
  };

  int64_t done_sites = 0;
  for (const QdqSite& s : sites) {
    RKD_TRY(report_progress("accuracy: layers", ++done_sites, static_cast<int64_t>(sites.size())));
    LayerAccuracy la;
    la.name = s.name;
    la.scale = s.scale;
    la.zero_point = s.zp;
    Node* p = s.quantize->inputs[0]->producer;
    la.op = p ? p->op_type : "input";
    la.entire = compare(fvals.at(s.name), qvals.at(s.dq->name), s.scale);
    if (!p) {
      la.single = compare(fvals.at(s.name), fake_quant(fvals.at(s.name), s.scale, s.zp, s.qtype), s.scale);
      la.has_single = true;
    } else {
      std::vector<Tensor> held;
      std::vector<const Tensor*> ins;
      bool ok = true;
      held.reserve(p->inputs.size());
      for (Value* v : p->inputs) {
        if (!v) {
          ins.push_back(nullptr);
          continue;
        }
        auto t = single_input(v);
        if (!t) {
          ok = false;
          break;
        }
        held.push_back(*t);
        ins.push_back(&held.back());
      }
      if (ok) {
        auto r = evaluate_node(*p, qg->opset, ins);
        size_t k = 0;
        while (r.ok() && k < p->outputs.size() && p->outputs[k] != s.quantize->inputs[0]) ++k;
        if (r.ok() && k < r.value().size()) {
          la.single = compare(fvals.at(s.name), fake_quant(r.value()[k], s.scale, s.zp, s.qtype), s.scale);
          la.has_single = true;
        }
      }
    }
    rep.layers.push_back(la);
  }
  for (size_t k = 0; k < model_outputs; ++k) {
    const Value* o = qg->outputs[k];
    for (const QdqSite& s : sites) {
      if (s.dq == o) rep.outputs.push_back(s.name);
    }
  }
  for (const OutputPlan& op : out_plans) {
    if (!fvals.count(op.name) || !qvals.count(op.name)) continue;
    OutputAccuracy oa;
    oa.name = op.name;
    oa.error = compare(fvals.at(op.name), qvals.at(op.name), 0);
    for (const auto& [fname, qname] : op.branches) {
      if (fvals.count(fname) && qvals.count(qname) && fvals.at(fname).shape() == qvals.at(qname).shape()) {
        oa.branches.push_back({fname, compare(fvals.at(fname), qvals.at(qname), 0)});
      }
    }
    rep.model_outputs.push_back(std::move(oa));
  }
  if (rep.layers.empty()) {
    return invalid(quant_model + ": no QuantizeLinear -> DequantizeLinear pair matches a value of " + float_model +
                   " (is it a QDQ model of that float model?)");
  }
  return rep;
}

std::string accuracy_json(const AccuracyReport& r) {
  nlohmann::json j;
  j["command"] = "accuracy";
  j["float_model"] = r.float_model;
  j["quant_model"] = r.quant_model;
  j["outputs"] = r.outputs;
  auto err = [](const LayerError& e) {
    return nlohmann::json{{"cosine", e.cosine}, {"euclidean", e.euclidean}, {"max_abs", e.max_abs}, {"lsb", e.lsb}};
  };
  j["model_outputs"] = nlohmann::json::array();
  for (const OutputAccuracy& o : r.model_outputs) {
    nlohmann::json e = err(o.error);
    e.erase("lsb");
    nlohmann::json b = nlohmann::json::array();
    for (const auto& br : o.branches) {
      nlohmann::json x = err(br.error);
      x.erase("lsb");
      x["name"] = br.name;
      b.push_back(x);
    }
    j["model_outputs"].push_back({{"name", o.name}, {"entire", e}, {"branches", b}});
  }
  j["layers"] = nlohmann::json::array();
  for (const LayerAccuracy& l : r.layers) {
    nlohmann::json e{{"name", l.name}, {"op", l.op}, {"scale", l.scale}, {"zero_point", l.zero_point}, {"entire", err(l.entire)}};
    if (l.has_single) e["single"] = err(l.single);
    j["layers"].push_back(e);
  }
  return json_text(j);
}

namespace {
std::string esc(const std::string& s) { return html_escape(s); }
std::string num(double v, int prec = 6) { return html_number(v, prec); }
}  // namespace

std::string accuracy_html(const AccuracyReport& r) {
  std::ostringstream h;
  const size_t n = r.layers.size();
  const double w = 960, ht = 260, left = 50, bottom = 30;
  double lo = 1.0;
  for (const auto& l : r.layers) {
    lo = std::min(lo, l.entire.cosine);
    if (l.has_single) lo = std::min(lo, l.single.cosine);
  }
  lo = std::max(-1.0, std::floor(lo * 20) / 20);
  if (lo >= 1.0) lo = 0.95;
  auto px = [&](size_t i) { return left + (w - left - 10) * (n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.5); };
  auto py = [&](double c) { return 10 + (ht - bottom - 10) * (1.0 - (c - lo) / (1.0 - lo)); };
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rkdeploy accuracy: " << esc(r.quant_model)
    << "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px}"
       "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td.l,th.l{text-align:left}"
       ".bad{background:#fdd}svg text{font-size:11px}</style></head><body>\n";
  h << "<h1>Per-layer accuracy</h1>\n<p>float model <code>" << esc(r.float_model) << "</code><br>quantized model <code>" << esc(r.quant_model)
    << "</code><br>" << n
    << " quantized layers. <b>entire</b>: the quantized model end to end (errors accumulate); <b>single</b>: each layer "
       "alone on the float model's inputs.</p>\n";
  h << "<svg id=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << ht << "\" role=\"img\">\n";
  for (int k = 0; k <= 4; ++k) {
    const double c = lo + (1.0 - lo) * k / 4.0;
    h << "<line x1=\"" << left << "\" x2=\"" << w - 10 << "\" y1=\"" << py(c) << "\" y2=\"" << py(c) << "\" stroke=\"#ddd\"/><text x=\"4\" y=\""
      << py(c) + 4 << "\">" << num(c, 4) << "</text>\n";
  }
  auto polyline = [&](bool single, const char* colour, const char* id) {
    h << "<polyline id=\"" << id << "\" fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.5\" points=\"";
    for (size_t i = 0; i < n; ++i) {
      const auto& l = r.layers[i];
      if (single && !l.has_single) continue;
      h << px(i) << "," << py(single ? l.single.cosine : l.entire.cosine) << " ";
    }
    h << "\"/>\n";
  };
  polyline(false, "#c0392b", "entire");
  polyline(true, "#2471a3", "single");
  h << "<text x=\"" << left << "\" y=\"" << ht - 8 << "\">layer (graph order) - cosine similarity: "
    << "<tspan fill=\"#c0392b\">entire</tspan> / <tspan fill=\"#2471a3\">single</tspan></text>\n</svg>\n";
  std::vector<const LayerAccuracy*> order;
  for (const auto& l : r.layers) order.push_back(&l);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) { return a->entire.cosine < b->entire.cosine; });
  h << "<h2>Layers, worst first</h2>\n<table id=\"layers\"><tr><th class=\"l\">layer</th><th class=\"l\">op</th>"
       "<th>cosine (entire)</th><th>euclidean (entire)</th><th>max abs (entire)</th><th>LSB (entire)</th>"
       "<th>cosine (single)</th><th>euclidean (single)</th><th>max abs (single)</th><th>LSB (single)</th><th>scale</th></tr>\n";
  for (const auto* l : order) {
    h << "<tr" << (l->entire.cosine < 0.99 ? " class=\"bad\"" : "") << "><td class=\"l\">" << esc(l->name) << "</td><td class=\"l\">" << esc(l->op)
      << "</td><td>" << num(l->entire.cosine) << "</td><td>" << num(l->entire.euclidean) << "</td><td>" << num(l->entire.max_abs) << "</td><td>"
      << num(l->entire.lsb, 4) << "</td>";
    if (l->has_single) {
      h << "<td>" << num(l->single.cosine) << "</td><td>" << num(l->single.euclidean) << "</td><td>" << num(l->single.max_abs) << "</td><td>"
        << num(l->single.lsb, 4) << "</td>";
    } else {
      h << "<td>-</td><td>-</td><td>-</td><td>-</td>";
    }
    h << "<td>" << num(l->scale) << "</td></tr>\n";
  }
  h << "</table>\n</body></html>\n";
  return h.str();
}

}  // namespace rkd::workflows
