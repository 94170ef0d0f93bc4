#include "workflows/analyze.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "core/json_style.h"
#include "core/progress.h"
#include "ir/passes/shape_inference.h"
#include "npu/arch/arch.h"
#include "npu/regcmd/regcmd.h"
#include "plan/plan.h"
#include "quant/requant.h"
#include "core/html.h"
#include "runtime/executor.h"
#include "runtime/model.h"
#include "runtime/npu_conv.h"

namespace rkd::workflows {

using namespace runtime;  // NOLINT: the layer below (executor, model loading, detector pre- and post-processing)

namespace {

using ir::Node;
using npu::lower::ConvSpec;

// task_cycles: the SoC description's per-task overhead in NPU cycles (targets/soc/rk3588.json).
StrategyResult run_strategy(const ConvSpec& s, const Tensor& x, const Tensor& ref, npu::lower::Strategy st, const npu::sim::Quirks& q,
                            const npu::lower::LowerOptions& lo, int64_t task_cycles) {
  StrategyResult r;
  r.strategy = npu::lower::strategy_name(st);
  auto go = [&]() -> Status {
    npu::DeviceMemory mem;
    RKD_ASSIGN(uint32_t in, npu::lower::place_input(mem, s, x));
    RKD_ASSIGN(auto l, npu::lower::lower_conv(s, st, mem, in, lo));
    RKD_ASSIGN(auto placed, npu::lower::place_regcmd(mem, l));
    RKD_ASSIGN(auto stats, npu::sim::run(mem, placed.address, placed.spans[0].word_count, q));
    RKD_ASSIGN(Tensor y, npu::lower::gather_output(mem, s, l));
    r.tasks = static_cast<int64_t>(l.tasks.size());
    r.weight_bytes = static_cast<int64_t>(l.weight_bytes);
    r.operand_bytes = static_cast<int64_t>(l.operand_bytes);
    r.row_slices = l.row_slices;
    for (const auto& ts : stats) {
      r.est_cycles += ts.padded_macs / npu::arch::kRk3588.int8_macs_per_cycle_per_core + task_cycles;
    }
    int64_t sum = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      const int64_t d = std::llabs(static_cast<int64_t>(y.get_as_double(i)) - static_cast<int64_t>(ref.get_as_double(i)));
      r.max_diff = std::max(r.max_diff, d);
      sum += d;
      r.exact += d == 0;
    }
    r.values = y.numel();
    r.mean_diff = r.values ? static_cast<double>(sum) / static_cast<double>(r.values) : 0;
    return {};
  };
  Status s2 = go();
  if (!s2.ok()) r.error = s2.error().to_string();
  return r;
}

}  // namespace

Result<NpuAnalysis> analyze_npu(const std::string& model, const std::map<std::string, Tensor>& inputs,
                                const std::vector<npu::lower::Strategy>& strategies, const npu::sim::Quirks& quirks, int threads,
                                const npu::lower::LowerOptions& lower_options, const std::string& requant) {
  NpuAnalysis a;
  a.model = model;
  RKD_ASSIGN(ImportedModel imp, import_model(model, 1));
  ir::Graph g = std::move(imp.graph);
  if (!requant.empty()) {
    if (auto r = quant::parse_requant(requant); !r.ok()) return r.error().with_context("--requant");
    g.metadata["rkdeploy.requant"] = requant;
  }
  auto md = g.metadata.find("rkdeploy.requant");
  a.requant = md == g.metadata.end() ? "onnx_float" : md->second;
  CompileOptions co;
  co.int8 = true;
  co.channels_last = false;  // the QLinearConvs' NCHW geometry is read below
  RKD_TRY(optimize(g, co));
  // Keep every QLinearConv's input and output.
  std::vector<const Node*> convs;
  std::set<const ir::Value*> outs(g.outputs.begin(), g.outputs.end());
  for (const auto& np : g.nodes()) {
    if (np->op_type != "QLinearConv" || !np->domain.empty()) continue;
    convs.push_back(np.get());
    for (ir::Value* v : {np->inputs[0], np->outputs[0]}) {
      if (!v->constant && !outs.count(v)) {
        g.outputs.push_back(v);
        outs.insert(v);
      }
    }
  }
  if (convs.empty()) return unsupported(model + ": no int8 convolution (QLinearConv after qdq-to-qlinear) to analyze");
  ExecutorOptions eo;
  eo.threads = threads;
  RKD_TRY(check_graph_inputs(g, inputs));
  RKD_ASSIGN(auto ex, Executor::create(g, eo));
  RKD_ASSIGN(auto vals, ex->run(inputs));
  for (const auto& [k, t] : inputs) vals.emplace(k, t);
  plan::Target soc;
  RKD_TRY(plan::read_soc(plan::default_targets_dir() + "/rk3588-rkdeploy.json", "RK3588", soc));
  const auto task_cycles = static_cast<int64_t>(std::llround(soc.npu.task_overhead_us * soc.npu.clock_mhz));
  std::map<std::string, StrategyResult> totals;
  int64_t done_convs = 0;
  for (const Node* n : convs) {
    RKD_TRY(report_progress("analyze: lowering and simulating convolutions", ++done_convs, static_cast<int64_t>(convs.size())));
    ConvResult c;
    c.node = n->name;
    auto spec = npu_conv_spec(*n);
    if (!spec.ok()) {
      c.skipped = spec.error().message;
      a.convs.push_back(c);
      continue;
    }
    const ConvSpec& s = *spec;
    char shape[160];
    std::snprintf(shape, sizeof shape, "%lldx%lldx%lld -> %lldx%lldx%lld k%lldx%lld s%lld%s", static_cast<long long>(s.C),
                  static_cast<long long>(s.H), static_cast<long long>(s.W), static_cast<long long>(s.OC), static_cast<long long>(s.OH()),
                  static_cast<long long>(s.OW()), static_cast<long long>(s.KH), static_cast<long long>(s.KW), static_cast<long long>(s.stride_h),
                  s.depthwise ? " dw" : "");
    c.shape = shape;
    float lo = *std::min_element(s.w_scales.begin(), s.w_scales.end()), hi = *std::max_element(s.w_scales.begin(), s.w_scales.end());
    c.scale_spread = lo > 0 ? static_cast<double>(hi) / lo : 0;
    const Tensor& x = vals.at(n->inputs[0]->name);
    const Tensor& ref = vals.at(n->outputs[0]->name);
    std::vector<StrategyResult> results;
    for (npu::lower::Strategy st : strategies) results.push_back(run_strategy(s, x, ref, st, quirks, lower_options, task_cycles));
    // No strategy lowers it: it stays on the CPU, as in run --backend sim and compile.
    if (std::all_of(results.begin(), results.end(), [](const StrategyResult& r) { return !r.error.empty(); })) {
      c.skipped = results.front().error;
      a.convs.push_back(c);
      continue;
    }
    for (StrategyResult& r : results) {
      StrategyResult& t = totals[r.strategy];
      t.strategy = r.strategy;
      if (r.error.empty()) {
        t.max_diff = std::max(t.max_diff, r.max_diff);
        t.exact += r.exact;
        t.values += r.values;
        t.mean_diff += r.mean_diff * static_cast<double>(r.values);
        t.tasks += r.tasks;
        t.weight_bytes += r.weight_bytes;
        t.operand_bytes += r.operand_bytes;
        t.est_cycles += r.est_cycles;
        t.row_slices = std::max(t.row_slices, r.row_slices);
      } else if (t.error.empty()) {
        t.error = c.node + ": " + r.error;
      }
      c.strategies.push_back(r);
    }
    a.convs.push_back(c);
  }
  for (npu::lower::Strategy st : strategies) {
    StrategyResult t = totals[npu::lower::strategy_name(st)];
    t.strategy = npu::lower::strategy_name(st);
    if (t.values) t.mean_diff /= static_cast<double>(t.values);
    a.totals.push_back(t);
  }
  return a;
}

namespace {
double exact_percent(const StrategyResult& r) { return r.values ? 100.0 * static_cast<double>(r.exact) / static_cast<double>(r.values) : 0.0; }
}  // namespace

std::string npu_analysis_text(const NpuAnalysis& a, bool per_conv) {
  std::string out;
  char line[512];
  int lowered = 0;
  for (const auto& c : a.convs) lowered += c.skipped.empty();
  std::snprintf(line, sizeof line, "%s: %zu int8 convolutions (%d lowered), reference requantization %s\n", a.model.c_str(), a.convs.size(), lowered,
                a.requant.c_str());
  out += line;
  std::snprintf(line, sizeof line, "  %-22s %8s %9s %9s %7s %11s %11s %12s\n", "strategy", "max LSB", "mean LSB", "exact %", "tasks", "weights B",
                "operands B", "est. cycles");
  out += line;
  for (const auto& t : a.totals) {
    if (!t.error.empty()) {
      out += "  " + t.strategy + ": failed: " + t.error + "\n";
      continue;
    }
    std::snprintf(line, sizeof line, "  %-22s %8lld %9.4f %9.3f %7lld %11lld %11lld %12lld\n", t.strategy.c_str(), static_cast<long long>(t.max_diff),
                  t.mean_diff, exact_percent(t), static_cast<long long>(t.tasks), static_cast<long long>(t.weight_bytes),
                  static_cast<long long>(t.operand_bytes), static_cast<long long>(t.est_cycles));
    out += line;
  }
  for (const auto& c : a.convs) {
    if (!c.skipped.empty()) out += "  not lowered: " + c.node + ": " + c.skipped + "\n";
  }
  if (!per_conv) return out;
  for (const auto& c : a.convs) {
    if (!c.skipped.empty()) continue;
    std::snprintf(line, sizeof line, "%s  %s  weight-scale spread %.1f\n", c.node.c_str(), c.shape.c_str(), c.scale_spread);
    out += line;
    for (const auto& r : c.strategies) {
      if (!r.error.empty()) {
        out += "    " + r.strategy + ": " + r.error + "\n";
        continue;
      }
      std::snprintf(line, sizeof line, "    %-22s max %4lld  mean %.4f  exact %7.3f%%  tasks %4lld\n", r.strategy.c_str(),
                    static_cast<long long>(r.max_diff), r.mean_diff, exact_percent(r), static_cast<long long>(r.tasks));
      out += line;
    }
  }
  return out;
}

std::string npu_analysis_json(const NpuAnalysis& a) {
  auto strat = [](const StrategyResult& r) {
    nlohmann::ordered_json j = {{"strategy", r.strategy}};
    if (!r.error.empty()) {
      j["error"] = r.error;
      return j;
    }
    j["max_diff_lsb"] = r.max_diff;
    j["mean_diff_lsb"] = r.mean_diff;
    j["exact"] = r.exact;
    j["values"] = r.values;
    j["exact_percent"] = exact_percent(r);
    j["tasks"] = r.tasks;
    j["weight_bytes"] = r.weight_bytes;
    j["operand_bytes"] = r.operand_bytes;
    j["est_cycles"] = r.est_cycles;
    j["row_slices"] = r.row_slices;
    return j;
  };
  nlohmann::ordered_json j;
  j["model"] = a.model;
  j["requant"] = a.requant;
  j["totals"] = nlohmann::ordered_json::array();
  for (const auto& t : a.totals) j["totals"].push_back(strat(t));
  j["convs"] = nlohmann::ordered_json::array();
  for (const auto& c : a.convs) {
    nlohmann::ordered_json jc = {{"node", c.node}};
    if (!c.skipped.empty()) {
      jc["skipped"] = c.skipped;
    } else {
      jc["shape"] = c.shape;
      jc["scale_spread"] = c.scale_spread;
      jc["strategies"] = nlohmann::ordered_json::array();
      for (const auto& r : c.strategies) jc["strategies"].push_back(strat(r));
    }
    j["convs"].push_back(jc);
  }
  return json_text(j);
}

std::string npu_analysis_html(const NpuAnalysis& a) {
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rkdeploy analyze: " + html_escape(a.model) +
       "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px;margin-bottom:18px}"
       "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td.l,th.l{text-align:left}.bad{background:#fdd}"
       "svg text{font-size:11px}</style></head><body>\n";
  int lowered = 0;
  for (const auto& c : a.convs) lowered += c.skipped.empty();
  h += "<h1>RK3588 NPU: per-axis strategies</h1>\n<p>model <code>" + html_escape(a.model) + "</code><br>" + std::to_string(a.convs.size()) +
       " int8 convolutions, " + std::to_string(lowered) + " lowered; each strategy's tasks run on the simulator and every output value is " +
       "compared with the int8 reference (requantization <code>" + html_escape(a.requant) + "</code>).</p>\n";
  // Bar chart: bit-exact share per strategy, the largest difference above each bar.
  const double w = 960, ht = 240, left = 40, bottom = 60, bw = (w - left) / static_cast<double>(std::max<size_t>(a.totals.size(), 1));
  h += "<svg id=\"exact\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + html_number(w) + "\" height=\"" + html_number(ht) + "\" role=\"img\">\n";
  for (int k = 0; k <= 4; ++k) {
    const double y = 10 + (ht - bottom - 10) * (1.0 - k / 4.0);
    h += "<line x1=\"" + html_number(left) + "\" x2=\"" + html_number(w) + "\" y1=\"" + html_number(y) + "\" y2=\"" + html_number(y) +
         "\" stroke=\"#ddd\"/><text x=\"4\" y=\"" + html_number(y + 4) + "\">" + std::to_string(25 * k) + "%</text>\n";
  }
  for (size_t i = 0; i < a.totals.size(); ++i) {
    const auto& t = a.totals[i];
    if (!t.error.empty()) continue;
    const double e = exact_percent(t), bh = (ht - bottom - 10) * e / 100.0, x = left + bw * static_cast<double>(i) + 6;
    h += "<rect class=\"bar\" data-strategy=\"" + html_escape(t.strategy) + "\" data-exact=\"" + html_number(e, 8) + "\" data-max=\"" +
         std::to_string(t.max_diff) + "\" x=\"" + html_number(x) + "\" y=\"" + html_number(ht - bottom - bh) + "\" width=\"" + html_number(bw - 12) +
         "\" height=\"" + html_number(bh) + "\" fill=\"" + (t.max_diff <= 1 ? "#2e86c1" : "#c0392b") + "\"/>\n";
    h += "<text x=\"" + html_number(x) + "\" y=\"" + html_number(ht - bottom - bh - 3) + "\">max " + std::to_string(t.max_diff) + " LSB</text>\n";
    h += "<text x=\"" + html_number(x) + "\" y=\"" + html_number(ht - bottom + 14) + "\">" + html_escape(t.strategy) + "</text>\n";
  }
  h += "<text x=\"" + html_number(left) + "\" y=\"" + html_number(ht - 8) +
       "\">bit-exact values per strategy (blue: at most one step everywhere; red: larger errors)</text>\n</svg>\n";
  h += "<h2>Totals</h2>\n<table id=\"totals\"><tr><th class=\"l\">strategy</th><th>max LSB</th><th>mean LSB</th><th>exact %</th><th>tasks</th>"
       "<th>weights B</th><th>operands B</th><th>est. cycles</th><th>row slices</th></tr>\n";
  for (const auto& t : a.totals) {
    if (!t.error.empty()) {
      h += "<tr class=\"bad\"><td class=\"l\">" + html_escape(t.strategy) + "</td><td class=\"l\" colspan=\"8\">failed: " + html_escape(t.error) +
           "</td></tr>\n";
      continue;
    }
    h += std::string("<tr") + (t.max_diff > 1 ? " class=\"bad\"" : "") + "><td class=\"l\">" + html_escape(t.strategy) + "</td><td>" +
         std::to_string(t.max_diff) + "</td><td>" + html_number(t.mean_diff) + "</td><td>" + html_number(exact_percent(t), 8) + "</td><td>" +
         std::to_string(t.tasks) + "</td><td>" + std::to_string(t.weight_bytes) + "</td><td>" + std::to_string(t.operand_bytes) + "</td><td>" +
         std::to_string(t.est_cycles) + "</td><td>" + std::to_string(t.row_slices) + "</td></tr>\n";
  }
  h += "</table>\n<h2>Convolutions</h2>\n<table id=\"convs\"><tr><th class=\"l\">node</th><th class=\"l\">shape</th><th>scale spread</th>";
  for (const auto& t : a.totals) h += "<th>" + html_escape(t.strategy) + "<br>exact % / max</th>";
  h += "</tr>\n";
  for (const auto& c : a.convs) {
    h += "<tr><td class=\"l\">" + html_escape(c.node) + "</td>";
    if (!c.skipped.empty()) {
      h += "<td class=\"l\" colspan=\"" + std::to_string(a.totals.size() + 2) + "\">not lowered: " + html_escape(c.skipped) + "</td></tr>\n";
      continue;
    }
    h += "<td class=\"l\">" + html_escape(c.shape) + "</td><td>" + html_number(c.scale_spread, 4) + "</td>";
    for (const auto& r : c.strategies) {
      if (!r.error.empty()) h += "<td class=\"bad\">failed</td>";
      else
        h += std::string("<td") + (r.max_diff > 1 ? " class=\"bad\"" : "") + ">" + html_number(exact_percent(r), 6) + " / " +
             std::to_string(r.max_diff) + "</td>";
    }
    h += "</tr>\n";
  }
  h += "</table>\n</body></html>\n";
  return h;
}

}  // namespace rkd::workflows
