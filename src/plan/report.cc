// Plan reports: JSON (docs/cli-json.md), terminal text, Markdown and a self-contained HTML
// page with an SVG timeline per variant and the latency terms as stacked bars.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/html.h"
#include "core/json_style.h"
#include "plan/plan.h"

namespace rkd::plan {

using nlohmann::json;

std::vector<Fallback> fallbacks(const VariantPlan& p) {
  std::map<std::tuple<std::string, Device, std::string>, Fallback> groups;
  for (const auto& n : p.nodes) {
    if (n.zero_cost || n.device == Device::npu) continue;
    Fallback& f = groups[{n.op_type, n.device, n.reason}];
    f.op = n.op_type;
    f.device = n.device;
    f.reason = n.reason;
    ++f.count;
    f.ms += n.ms;
  }
  std::vector<Fallback> v;
  for (auto& [key, f] : groups) v.push_back(f);
  std::sort(v.begin(), v.end(), [](const Fallback& a, const Fallback& b) { return a.ms != b.ms ? a.ms > b.ms : a.op < b.op; });
  return v;
}

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The nodes of a plan that take time, slowest first.
std::vector<const PlannedNode*> slowest(const VariantPlan& p, size_t limit) {
  std::vector<const PlannedNode*> v;
  for (const auto& n : p.nodes) {
    if (!n.zero_cost) v.push_back(&n);
  }
  std::stable_sort(v.begin(), v.end(), [](const PlannedNode* a, const PlannedNode* b) { return a->ms > b->ms; });
  if (v.size() > limit) v.resize(limit);
  return v;
}

json target_json(const Target& t) {
  json params;
  for (const auto& name : parameter_names()) params[name] = *get_parameter(t, name);
  return {{"name", t.name}, {"soc", t.soc}, {"runtime", t.runtime}, {"version", t.version}, {"path", t.path}, {"parameters", params}};
}

json efficiency_json(const NpuNodeEfficiency& e) {
  return {{"name", e.node->name},
          {"op", e.node->op_type},
          {"ms", e.ms},
          {"ideal_ms", e.ideal_ms},
          {"excess_ms", e.excess_ms()},
          {"tasks", e.work.tasks},
          {"jobs", e.work.jobs},
          {"macs", e.work.macs},
          {"padded_macs", e.work.padded_macs},
          {"mac_utilization", e.work.mac_utilization()},
          {"bytes", e.work.bytes},
          {"min_bytes", e.work.min_bytes},
          {"traffic_ratio", e.work.traffic_ratio()}};
}

// The rows of the "least efficient NPU nodes" tables.
constexpr size_t kEfficiencyRows = 8;

}  // namespace

std::string plan_json(const PlanReport& r) {
  json j;
  j["command"] = "plan";
  j["schema"] = "rkdeploy-plan/1";
  j["model"] = r.model;
  if (!r.discrete_model.empty()) j["discrete_model"] = r.discrete_model;
  j["target"] = target_json(r.target);
  j["host"] = json_record<nlohmann::ordered_json>(r.host);
  json vs = json::array();
  for (const auto& p : r.plans) {
    json v;
    v["variant"] = variant_name(p.variant);
    v["description"] = variant_description(p.variant);
    v["planned"] = p.planned;
    v["executable"] = p.executable;
    v["failures"] = p.failures;
    v["notes"] = p.notes;
    if (p.executable) {
      v["k"] = p.k;
      json terms;
      for (const auto& [name, field] : term_fields()) terms[name] = p.terms.*field;
      v["terms_ms"] = terms;
      v["total_ms"] = p.terms.total();
      // The CPU term over the host's runs: the median per node is the term, this its spread.
      v["cpu_ms_runs"] = {{"runs", p.cpu_runs}, {"min", p.cpu_min_ms}, {"max", p.cpu_max_ms}};
      json segs = json::array();
      for (const auto& s : p.segments) {
        segs.push_back({{"device", device_name(s.device)},
                        {"nodes", s.nodes.size()},
                        {"ms", s.ms},
                        {"boundary_ms", s.boundary_ms},
                        {"in_bytes", s.in_bytes},
                        {"first", s.nodes.empty() ? "" : p.nodes[s.nodes.front()].name},
                        {"last", s.nodes.empty() ? "" : p.nodes[s.nodes.back()].name}});
      }
      v["segments"] = segs;
      // The nodes that compute (views and zero-cost ops left out), per device.
      json by_device = json::object();
      for (const auto& n : p.nodes) {
        if (n.zero_cost) continue;
        const std::string d = device_name(n.device);
        by_device[d] = by_device.value(d, 0) + 1;
      }
      v["nodes_by_device"] = by_device;
    }
    json fb = json::array();
    for (const auto& f : fallbacks(p))
      fb.push_back({{"op", f.op}, {"device", device_name(f.device)}, {"count", f.count}, {"ms", f.ms}, {"reason", f.reason}});
    v["fallbacks"] = fb;
    json layers = json::array();
    for (const PlannedNode* n : slowest(p, static_cast<size_t>(r.layers))) {
      layers.push_back(
          {{"name", n->name}, {"op", n->op_type}, {"device", device_name(n->device)}, {"ms", n->ms}, {"macs", n->macs}, {"segment", n->segment}});
    }
    v["layers"] = layers;
    // Every lowered NPU node against its ideal, the most time above it first.
    json eff = json::array();
    for (const NpuNodeEfficiency& e : npu_efficiency(p, r.target)) eff.push_back(efficiency_json(e));
    v["npu_efficiency"] = eff;
    vs.push_back(v);
  }
  j["variants"] = vs;
  if (r.fit) {
    json c;
    c["before"] = r.fit->before;
    c["after"] = r.fit->after;
    json rows = json::array();
    for (const auto& row : r.fit->rows) {
      rows.push_back({{"model", row.model},
                      {"variant", row.variant},
                      {"role", row.role},
                      {"source", row.source},
                      {"measured_ms", row.measured_ms},
                      {"predicted_before_ms", row.predicted_before_ms},
                      {"predicted_ms", row.predicted_ms},
                      {"error_pct", row.error_pct()}});
    }
    c["rows"] = rows;
    c["note"] = r.fit->note;
    j["calibration"] = c;
  }
  return json_text(j);
}

std::string plan_text(const PlanReport& r) {
  std::ostringstream o;
  o << r.model << " on " << r.target.name << " (" << r.target.soc << ", " << r.target.runtime << " " << r.target.version << ")\n";
  o << "  latency model: serial critical path, terms in ms (docs/planner.md); CPU times measured on this host x "
    << fmt("%.3g", r.target.cpu.host_factor) << "\n\n";
  char line[512];
  if (!r.plans.empty()) {
    std::snprintf(line, sizeof line, "  %-16s %-10s %3s %9s %9s %9s %9s %9s %9s %9s\n", "variant", "status", "k", "total", "npu", "cpu", "gpu",
                  "sync", "layout", "copy");
    o << line;
  }
  for (const auto& p : r.plans) {
    if (!p.executable) {
      std::snprintf(line, sizeof line, "  %-16s %-10s\n", variant_name(p.variant), p.planned ? "FAILS" : "skipped");
      o << line;
      continue;
    }
    const Terms& t = p.terms;
    std::snprintf(line, sizeof line, "  %-16s %-10s %3d %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n", variant_name(p.variant), "ok", p.k, t.total(),
                  t.npu_compute + t.npu_traffic + t.npu_overhead, t.cpu, t.gpu, t.boundary_sync, t.boundary_layout, t.boundary_copy);
    o << line;
  }
  for (const auto& p : r.plans) {
    o << "\n" << variant_name(p.variant) << ": " << variant_description(p.variant) << "\n";
    for (size_t i = 0; i < p.failures.size() && i < 3; ++i) o << (p.planned ? "  fails at run time: " : "  ") << p.failures[i] << "\n";
    if (p.failures.size() > 3) o << "  ... and " << p.failures.size() - 3 << " more (--json lists all)\n";
    for (const auto& n : p.notes) o << "  note: " << n << "\n";
    if (!p.executable) continue;
    o << "  " << p.segments.size() << " segment(s), k = " << p.k << "; NPU " << fmt("%.1f", p.terms.npu_compute) << " compute + "
      << fmt("%.1f", p.terms.npu_traffic) << " traffic + " << fmt("%.1f", p.terms.npu_overhead) << " overhead ms";
    if (p.cpu_runs > 1) {
      o << "; CPU " << fmt("%.1f", p.terms.cpu) << " ms (" << fmt("%.1f", p.cpu_min_ms) << " to " << fmt("%.1f", p.cpu_max_ms) << " over "
        << p.cpu_runs << " host runs)";
    }
    o << "\n";
    for (const auto& f : fallbacks(p)) {
      std::snprintf(line, sizeof line, "  %4d x %-22s on %-4s %9.2f ms  ", f.count, f.op.c_str(), device_name(f.device), f.ms);
      o << line << f.reason << "\n";
    }
    const std::vector<NpuNodeEfficiency> eff = npu_efficiency(p, r.target);
    if (!eff.empty()) {
      o << "  NPU nodes furthest from their ideal (MACs on " << r.target.npu.cores_used << " core(s), every byte once, one job; --json lists all):\n";
      std::snprintf(line, sizeof line, "  %9s %9s %6s %6s %8s %8s  %s\n", "ms", "ideal", "tasks", "jobs", "MAC use", "bytes x", "node");
      o << line;
      for (size_t i = 0; i < eff.size() && i < kEfficiencyRows; ++i) {
        const NpuNodeEfficiency& e = eff[i];
        std::snprintf(line, sizeof line, "  %9.3f %9.3f %6d %6d %7.0f%% %8.2f  ", e.ms, e.ideal_ms, e.work.tasks, e.work.jobs,
                      100 * e.work.mac_utilization(), e.work.traffic_ratio());
        o << line << e.node->name << " (" << e.node->op_type << ")\n";
      }
    }
  }
  if (r.fit) {
    o << "\ncalibration (" << r.target.name << "): ";
    for (const auto& [name, v] : r.fit->after) o << name << " " << fmt("%.4g", r.fit->before.at(name)) << " -> " << fmt("%.4g", v) << "  ";
    o << "\n";
    std::snprintf(line, sizeof line, "  %-32s %-6s %11s %11s %11s %8s\n", "variant", "role", "measured", "before", "predicted", "error");
    o << line;
    for (const auto& row : r.fit->rows) {
      const std::string what = row.model.empty() ? row.variant : row.model + " " + row.variant;
      std::snprintf(line, sizeof line, "  %-32s %-6s %11.1f %11.1f %11.1f %+7.1f%%\n", what.c_str(), row.role.c_str(), row.measured_ms,
                    row.predicted_before_ms, row.predicted_ms, row.error_pct());
      o << line;
    }
    if (!r.fit->note.empty()) o << "  note: " << r.fit->note << "\n";
  }
  return o.str();
}

std::string plan_markdown(const PlanReport& r) {
  std::ostringstream o;
  o << "# Deployment plan: " << r.model << " on " << r.target.name << "\n\n";
  o << r.target.soc << ", " << r.target.runtime << " " << r.target.version
    << ". Latency model: a serial critical path (docs/planner.md); CPU times measured on "
    << (r.host.count("cpu") ? r.host.at("cpu") : std::string("this host")) << " and scaled by " << fmt("%.3g", r.target.cpu.host_factor) << ".\n\n";
  o << "| variant | status | k | total ms |";
  for (const auto& [name, field] : term_fields()) o << " " << name << " |";
  o << "\n|---|---|---|---|";
  for (size_t i = 0; i < term_fields().size(); ++i) o << "---|";
  o << "\n";
  for (const auto& p : r.plans) {
    o << "| " << variant_name(p.variant) << " | " << (p.executable ? "ok" : p.planned ? "fails" : "not planned") << " | ";
    if (!p.executable) {
      o << "- | - |";
      for (size_t i = 0; i < term_fields().size(); ++i) o << " - |";
    } else {
      o << p.k << " | " << fmt("%.1f", p.terms.total()) << " |";
      for (const auto& [name, field] : term_fields()) o << " " << fmt("%.1f", p.terms.*field) << " |";
    }
    o << "\n";
  }
  for (const auto& p : r.plans) {
    o << "\n## " << variant_name(p.variant) << "\n\n" << variant_description(p.variant) << ".\n\n";
    for (const auto& f : p.failures) o << (p.planned ? "- **fails at run time**: " : "- ") << f << "\n";
    for (const auto& n : p.notes) o << "- note: " << n << "\n";
    if (!p.executable) continue;
    o << "\nSegments (k = " << p.k << "):";
    for (const auto& s : p.segments) o << " " << device_name(s.device) << " " << fmt("%.1f", s.ms) << " ms;";
    o << "\n\n| ops off the NPU | device | count | ms | reason |\n|---|---|---|---|---|\n";
    for (const auto& f : fallbacks(p))
      o << "| " << f.op << " | " << device_name(f.device) << " | " << f.count << " | " << fmt("%.2f", f.ms) << " | " << f.reason << " |\n";
    o << "\n| slowest nodes | op | device | ms | MACs |\n|---|---|---|---|---|\n";
    for (const PlannedNode* n : slowest(p, static_cast<size_t>(r.layers))) {
      o << "| " << n->name << " | " << n->op_type << " | " << device_name(n->device) << " | " << fmt("%.3f", n->ms) << " | " << fmt("%.3g", n->macs)
        << " |\n";
    }
    const std::vector<NpuNodeEfficiency> eff = npu_efficiency(p, r.target);
    if (!eff.empty()) {
      o << "\n| NPU nodes furthest from their ideal | op | ms | ideal ms | tasks | jobs | MAC utilisation | bytes / minimum |\n"
           "|---|---|---|---|---|---|---|---|\n";
      for (size_t i = 0; i < eff.size() && i < kEfficiencyRows; ++i) {
        const NpuNodeEfficiency& e = eff[i];
        o << "| " << e.node->name << " | " << e.node->op_type << " | " << fmt("%.3f", e.ms) << " | " << fmt("%.3f", e.ideal_ms) << " | "
          << e.work.tasks << " | " << e.work.jobs << " | " << fmt("%.0f%%", 100 * e.work.mac_utilization()) << " | "
          << fmt("%.2f", e.work.traffic_ratio()) << " |\n";
      }
    }
  }
  if (r.fit) {
    o << "\n## Calibration\n\n| parameter | before | after |\n|---|---|---|\n";
    for (const auto& [name, v] : r.fit->after) o << "| " << name << " | " << fmt("%.4g", r.fit->before.at(name)) << " | " << fmt("%.4g", v) << " |\n";
    o << "\n| variant | role | measured ms | predicted before | predicted after | error | source |\n|---|---|---|---|---|---|---|\n";
    for (const auto& row : r.fit->rows) {
      o << "| " << row.variant << " | " << row.role << " | " << fmt("%.1f", row.measured_ms) << " | " << fmt("%.1f", row.predicted_before_ms) << " | "
        << fmt("%.1f", row.predicted_ms) << " | " << fmt("%+.1f%%", row.error_pct()) << " | " << row.source << " |\n";
    }
    if (!r.fit->note.empty()) o << "\n" << r.fit->note << "\n";
  }
  return o.str();
}

namespace {

const char* device_color(Device d) {
  switch (d) {
    case Device::npu: return "#2f7ed8";
    case Device::cpu: return "#e4572e";
    case Device::gpu: return "#76b041";
    case Device::none: return "#888888";
  }
  return "#000";
}

const char* term_color(size_t i) {
  static const char* c[] = {"#1f4e9c", "#4f8fe0", "#9cc3f0", "#e4572e", "#76b041", "#6b4c9a", "#a98bd1", "#d9c8ef"};
  return c[i % 8];
}

// Segments on one lane per device along a time axis; boundaries drawn as hatched gaps.
std::string timeline_svg(const VariantPlan& p, double scale_ms) {
  const double width = 900, lane = 26, left = 50;
  const std::vector<Device> lanes = {Device::npu, Device::cpu, Device::gpu};
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width + left + 10 << "' height='" << lane * 3 + 30 << "' class='timeline' data-variant='"
    << variant_name(p.variant) << "'>";
  for (size_t l = 0; l < lanes.size(); ++l) {
    o << "<text x='4' y='" << l * lane + 17 << "' font-size='12'>" << device_name(lanes[l]) << "</text>";
    o << "<line x1='" << left << "' x2='" << left + width << "' y1='" << (l + 1) * lane << "' y2='" << (l + 1) * lane << "' stroke='#ddd'/>";
  }
  double t = 0;
  auto x = [&](double ms) { return left + width * ms / std::max(scale_ms, 1e-9); };
  for (size_t i = 0; i < p.segments.size(); ++i) {
    const Segment& s = p.segments[i];
    if (s.boundary_ms > 0) {
      o << "<rect class='boundary' x='" << x(t) << "' y='0' width='" << std::max(0.5, x(t + s.boundary_ms) - x(t)) << "' height='" << lane * 3
        << "' fill='#f2c14e' opacity='0.6'><title>boundary " << html_number(s.boundary_ms, 4) << " ms, " << html_number(s.in_bytes / 1e6, 4)
        << " MB in</title></rect>";
      t += s.boundary_ms;
    }
    const size_t l = static_cast<size_t>(std::find(lanes.begin(), lanes.end(), s.device) - lanes.begin());
    o << "<rect class='segment' data-device='" << device_name(s.device) << "' data-ms='" << html_number(s.ms, 17) << "' x='" << x(t) << "' y='"
      << l * lane + 3 << "' width='" << std::max(0.5, x(t + s.ms) - x(t)) << "' height='" << lane - 6 << "' fill='" << device_color(s.device)
      << "'><title>" << device_name(s.device) << " segment " << i << ": " << s.nodes.size() << " nodes, " << html_number(s.ms, 4)
      << " ms</title></rect>";
    t += s.ms;
  }
  o << "<text x='" << left << "' y='" << lane * 3 + 22 << "' font-size='11'>0</text><text x='" << left + width - 60 << "' y='" << lane * 3 + 22
    << "' font-size='11'>" << html_number(scale_ms, 5) << " ms</text></svg>";
  return o.str();
}

std::string terms_svg(const std::vector<VariantPlan>& plans, double scale_ms) {
  const double width = 700, row = 24, left = 130;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width + left + 80 << "' height='" << row * (plans.size() + 1) + 10 << "' class='terms'>";
  for (size_t i = 0; i < plans.size(); ++i) {
    const VariantPlan& p = plans[i];
    const double y = static_cast<double>(i) * row + 4;
    o << "<text x='4' y='" << y + 15 << "' font-size='12'>" << variant_name(p.variant) << "</text>";
    if (!p.executable) {
      o << "<text x='" << left << "' y='" << y + 15 << "' font-size='12' fill='#b00'>" << (p.planned ? "fails at run time" : "not planned")
        << "</text>";
      continue;
    }
    double x = left;
    size_t k = 0;
    for (const auto& [name, field] : term_fields()) {
      const double w = width * (p.terms.*field) / std::max(scale_ms, 1e-9);
      if (w > 0) {
        o << "<rect class='term' data-variant='" << variant_name(p.variant) << "' data-term='" << name << "' data-ms='"
          << html_number(p.terms.*field, 17) << "' x='" << x << "' y='" << y << "' width='" << w << "' height='" << row - 6 << "' fill='"
          << term_color(k) << "'><title>" << name << " " << html_number(p.terms.*field, 4) << " ms</title></rect>";
      }
      x += w;
      ++k;
    }
    o << "<text x='" << x + 4 << "' y='" << y + 15 << "' font-size='12'>" << html_number(p.terms.total(), 5) << " ms</text>";
  }
  double x = left;
  size_t k = 0;
  const double ly = static_cast<double>(plans.size()) * row + 4;
  for (const auto& [name, field] : term_fields()) {
    o << "<rect x='" << x << "' y='" << ly << "' width='10' height='10' fill='" << term_color(k++) << "'/><text x='" << x + 13 << "' y='" << ly + 9
      << "' font-size='10'>" << name << "</text>";
    x += 95;
  }
  o << "</svg>";
  return o.str();
}

}  // namespace

std::string plan_html(const PlanReport& r) {
  double scale = 0;
  for (const auto& p : r.plans) {
    if (p.executable) scale = std::max(scale, p.terms.total());
  }
  std::ostringstream o;
  o << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>rkdeploy plan: " << html_escape(r.model) << "</title><style>"
    << "body{font-family:sans-serif;margin:20px;max-width:1100px}table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px "
       "7px;"
       "font-size:13px;text-align:left}td.n{text-align:right}.fails{color:#b00;font-weight:bold}</style></head><body>";
  o << "<h1>Deployment plan</h1><p>Model <code>" << html_escape(r.model) << "</code> on <b>" << html_escape(r.target.name) << "</b> ("
    << html_escape(r.target.soc) << ", " << html_escape(r.target.runtime) << " " << html_escape(r.target.version)
    << "). Latency: a serial critical path of NPU, CPU and GPU segments and the boundaries between them (docs/planner.md).</p>";
  o << "<h2>Latency terms</h2>" << terms_svg(r.plans, scale);
  o << "<table id='summary'><tr><th>variant</th><th>status</th><th>k</th><th>total ms</th>";
  for (const auto& [name, field] : term_fields()) o << "<th>" << name << "</th>";
  o << "</tr>";
  for (const auto& p : r.plans) {
    const std::string v = variant_name(p.variant);
    o << "<tr><td>" << v << "</td>";
    if (!p.executable) {
      o << "<td class='fails' data-variant='" << v << "' data-field='status'>" << (p.planned ? "fails" : "not planned") << "</td><td colspan='"
        << term_fields().size() + 2 << "'>" << html_escape(p.failures.empty() ? "" : p.failures.front())
        << (p.failures.size() > 1 ? " (+" + std::to_string(p.failures.size() - 1) + " more)" : "") << "</td></tr>";
      continue;
    }
    o << "<td data-variant='" << v << "' data-field='status'>ok</td><td class='n' data-variant='" << v << "' data-field='k'>" << p.k
      << "</td><td class='n' data-variant='" << v << "' data-field='total_ms'>" << html_number(p.terms.total(), 6) << "</td>";
    for (const auto& [name, field] : term_fields())
      o << "<td class='n' data-variant='" << v << "' data-field='" << name << "'>" << html_number(p.terms.*field, 6) << "</td>";
    o << "</tr>";
  }
  o << "</table>";
  for (const auto& p : r.plans) {
    o << "<h2>" << variant_name(p.variant) << "</h2><p>" << html_escape(variant_description(p.variant)) << ".</p>";
    for (const auto& f : p.failures) o << "<p class='fails'>" << (p.planned ? "fails at run time: " : "") << html_escape(f) << "</p>";
    for (const auto& n : p.notes) o << "<p>note: " << html_escape(n) << "</p>";
    if (!p.executable) continue;
    o << timeline_svg(p, scale);
    o << "<table><tr><th>off the NPU</th><th>device</th><th>count</th><th>ms</th><th>reason</th></tr>";
    for (const auto& f : fallbacks(p)) {
      o << "<tr><td>" << html_escape(f.op) << "</td><td>" << device_name(f.device) << "</td><td class='n'>" << f.count << "</td><td class='n'>"
        << html_number(f.ms, 4) << "</td><td>" << html_escape(f.reason) << "</td></tr>";
    }
    o << "</table><table><tr><th>slowest nodes</th><th>op</th><th>device</th><th>ms</th><th>MACs</th></tr>";
    for (const PlannedNode* n : slowest(p, static_cast<size_t>(r.layers))) {
      o << "<tr><td>" << html_escape(n->name) << "</td><td>" << html_escape(n->op_type) << "</td><td>" << device_name(n->device)
        << "</td><td class='n'>" << html_number(n->ms, 4) << "</td><td class='n'>" << html_number(n->macs, 4) << "</td></tr>";
    }
    o << "</table>";
  }
  if (r.fit) {
    o << "<h2>Calibration</h2><table id='calibration'><tr><th>variant</th><th>role</th><th>measured ms</th><th>predicted "
         "before</th><th>predicted</th><th>error</th>"
         "<th>source</th></tr>";
    for (const auto& row : r.fit->rows) {
      o << "<tr><td>" << html_escape(row.variant) << "</td><td>" << row.role << "</td><td class='n'>" << html_number(row.measured_ms, 6)
        << "</td><td class='n'>" << html_number(row.predicted_before_ms, 6) << "</td><td class='n' data-variant='" << html_escape(row.variant)
        << "' data-field='predicted_ms'>" << html_number(row.predicted_ms, 6) << "</td><td class='n'>" << fmt("%+.1f%%", row.error_pct())
        << "</td><td>" << html_escape(row.source) << "</td></tr>";
    }
    o << "</table>";
    if (!r.fit->note.empty()) o << "<p>" << html_escape(r.fit->note) << "</p>";
  }
  o << "</body></html>\n";
  return o.str();
}

}  // namespace rkd::plan
