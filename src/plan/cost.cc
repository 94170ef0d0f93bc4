// The latency model (docs/planner.md): per-node times, boundaries, terms, calibration.
#include <algorithm>
#include <functional>
#include <map>
#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/json_fields.h"
#include "core/npy.h"
#include "plan/plan.h"

namespace rkd::plan {

double Terms::total() const { return npu_compute + npu_traffic + npu_overhead + cpu + gpu + boundary_sync + boundary_layout + boundary_copy; }

const std::vector<std::pair<std::string, double Terms::*>>& term_fields() {
  static const std::vector<std::pair<std::string, double Terms::*>> f = {{"npu_compute", &Terms::npu_compute},
                                                                         {"npu_traffic", &Terms::npu_traffic},
                                                                         {"npu_overhead", &Terms::npu_overhead},
                                                                         {"cpu", &Terms::cpu},
                                                                         {"gpu", &Terms::gpu},
                                                                         {"boundary_sync", &Terms::boundary_sync},
                                                                         {"boundary_layout", &Terms::boundary_layout},
                                                                         {"boundary_copy", &Terms::boundary_copy}};
  return f;
}

namespace {

// The profile's NPU rates: one core's MACs per second, the DDR's bytes per second, one job's
// milliseconds (its overhead and the runtime's submission).
struct NpuRates {
  double core_macs = 0, ddr = 0, job_ms = 0;
};
NpuRates npu_rates(const Target& t) {
  return {t.npu.macs_per_cycle * t.npu.clock_mhz * 1e6 * t.npu.utilization, t.npu.ddr_gbps * 1e9,
          (t.npu.task_overhead_us + t.npu.task_submit_us) / 1e3};
}

// A node priced from its work alone: its MACs on cores_used cores and its minimum bytes at the
// DDR rate overlap (the longer counts, in its term), plus one job. A node without lowered tasks
// is priced so; a lowered node's ideal is this.
struct WorkTime {
  double compute = 0, traffic = 0, overhead = 0;
  double ms() const { return std::max(compute, traffic) + overhead; }
};
WorkTime work_time(double macs, double bytes, const Target& t) {
  const NpuRates r = npu_rates(t);
  return {macs / (r.core_macs * std::max(1, t.npu.cores_used)) * 1e3, bytes / r.ddr * 1e3, r.job_ms};
}

// A lowered node's milliseconds, split into the terms. A task takes the longer of its MACs on one
// core's array (at the profile's utilization) and its DMA bytes at the DDR rate (the CNA reads
// while the array computes); a job its tasks in turn plus one task_overhead_us (its submission,
// register fetch, kick and completion interrupt); a stage's jobs run on cores_used cores (longest
// first, each on the least loaded core), and no faster than the stage's bytes at the DDR rate
// (the cores share the DDR); the stages in turn. The terms split the node's time in
// the proportions of its tasks' compute-bound and traffic-bound parts.
struct LoweredTime {
  double compute = 0, traffic = 0, overhead = 0;
};
LoweredTime lowered_time(const NpuNodeCost& c, const Target& t) {
  const NpuRates rates = npu_rates(t);
  const double mac_rate = rates.core_macs, ddr = rates.ddr, over = rates.job_ms;
  std::vector<double> task_ms(c.tasks.size()), compute_ms(c.tasks.size());
  for (size_t i = 0; i < c.tasks.size(); ++i) {
    const double mac = c.tasks[i].padded_macs / mac_rate * 1e3, dma = (c.tasks[i].read_bytes + c.tasks[i].write_bytes) / ddr * 1e3;
    task_ms[i] = std::max(mac, dma);
    compute_ms[i] = mac >= dma ? task_ms[i] : 0;
  }
  std::map<int, std::vector<double>> stages;  // per stage: each job's time
  std::map<int, double> stage_dma;            // per stage: its tasks' DMA time at the whole DDR rate
  double busy = 0, compute = 0, jobs = 0;
  for (const NpuJob& j : c.jobs) {
    double ms = over;
    for (size_t i : j.tasks) {
      if (i >= task_ms.size()) continue;
      ms += task_ms[i];
      busy += task_ms[i];
      compute += compute_ms[i];
      stage_dma[j.stage] += (c.tasks[i].read_bytes + c.tasks[i].write_bytes) / ddr * 1e3;
    }
    stages[j.stage].push_back(ms);
    jobs += 1;
  }
  double total = 0;
  const size_t cores = static_cast<size_t>(std::max(1, t.npu.cores_used));
  for (auto& [stage, ms] : stages) {
    std::sort(ms.begin(), ms.end(), std::greater<double>());
    std::vector<double> load(std::min(cores, ms.size()), 0.0);
    for (double m : ms) *std::min_element(load.begin(), load.end()) += m;
    // The cores share one DDR: a stage takes at least its bytes at the DDR rate.
    total += std::max(*std::max_element(load.begin(), load.end()), stage_dma[stage]);
  }
  // The makespan in the proportions of the serial sums: overhead, compute-bound, traffic-bound.
  const double serial = busy + jobs * over;
  LoweredTime r;
  if (serial <= 0) return r;
  r.overhead = total * jobs * over / serial;
  r.compute = total * compute / serial;
  r.traffic = total - r.overhead - r.compute;
  return r;
}

}  // namespace

void price(VariantPlan& p, const Target& t) {
  p.terms = Terms{};
  for (Segment& s : p.segments) {
    s.ms = 0;
    for (size_t i : s.nodes) {
      PlannedNode& n = p.nodes[i];
      n.ms = 0;
      if (n.zero_cost) continue;
      switch (s.device) {
        case Device::npu: {
          if (n.lowered_tasks) {
            const LoweredTime lt = lowered_time(*n.lowered_tasks, t);
            p.terms.npu_compute += lt.compute;
            p.terms.npu_traffic += lt.traffic;
            p.terms.npu_overhead += lt.overhead;
            n.ms = lt.compute + lt.traffic + lt.overhead;
            break;
          }
          const WorkTime w = work_time(n.macs, n.weight_bytes + n.feature_bytes, t);
          (w.compute >= w.traffic ? p.terms.npu_compute : p.terms.npu_traffic) += std::max(w.compute, w.traffic);
          p.terms.npu_overhead += w.overhead;
          n.ms = w.ms();
          break;
        }
        case Device::cpu:
          n.ms = n.board_ms >= 0 ? n.board_ms : n.host_ms * t.cpu.host_factor;
          p.terms.cpu += n.ms;
          break;
        case Device::gpu:
          n.ms = n.host_ms * t.gpu.host_factor + t.gpu.op_overhead_us / 1e3;
          p.terms.gpu += n.ms;
          break;
        case Device::none: break;
      }
      s.ms += n.ms;
    }
  }
  // The CPU term run by run.
  p.cpu_runs = 0;
  for (const PlannedNode& n : p.nodes)
    if (n.device == Device::cpu && !n.zero_cost && n.board_ms < 0) p.cpu_runs = std::max(p.cpu_runs, static_cast<int>(n.host_runs.size()));
  std::vector<double> per_run(static_cast<size_t>(p.cpu_runs), 0.0);
  for (const PlannedNode& n : p.nodes) {
    if (n.device != Device::cpu || n.zero_cost) continue;
    for (size_t r = 0; r < per_run.size(); ++r)
      per_run[r] += n.board_ms >= 0 ? n.board_ms : (r < n.host_runs.size() ? n.host_runs[r] : n.host_ms) * t.cpu.host_factor;
  }
  p.cpu_min_ms = per_run.empty() ? p.terms.cpu : *std::min_element(per_run.begin(), per_run.end());
  p.cpu_max_ms = per_run.empty() ? p.terms.cpu : *std::max_element(per_run.begin(), per_run.end());
  for (size_t i = 1; i < p.segments.size(); ++i) {
    Segment& s = p.segments[i];
    const double mb = s.in_bytes / 1e6;
    const double sync = t.boundary.sync_us / 1e3, layout = t.boundary.layout_us_per_mb * mb / 1e3,
                 copy = s.in_bytes / (t.boundary.copy_gbps * 1e9) * 1e3;
    s.boundary_ms = sync + layout + copy;
    p.terms.boundary_sync += sync;
    p.terms.boundary_layout += layout;
    p.terms.boundary_copy += copy;
  }
}

NpuWork npu_work(double macs, const NodeTraffic& minimum, const NpuNodeCost& c) {
  NpuWork w;
  w.tasks = static_cast<int>(c.tasks.size());
  w.jobs = static_cast<int>(c.jobs.size());
  w.macs = macs;
  w.min_bytes = minimum.weight_bytes + minimum.feature_bytes;
  for (const NpuTaskCost& tc : c.tasks) {
    w.padded_macs += tc.padded_macs;
    w.bytes += tc.read_bytes + tc.write_bytes;
  }
  return w;
}

std::vector<NpuNodeEfficiency> npu_efficiency(const VariantPlan& p, const Target& t) {
  std::vector<NpuNodeEfficiency> v;
  for (const PlannedNode& n : p.nodes) {
    if (n.device != Device::npu || n.zero_cost || !n.lowered_tasks) continue;
    NpuNodeEfficiency e;
    e.node = &n;
    e.work = npu_work(n.macs, {n.weight_bytes, n.feature_bytes}, *n.lowered_tasks);
    e.ms = n.ms;
    e.ideal_ms = work_time(n.macs, e.work.min_bytes, t).ms();
    v.push_back(e);
  }
  std::stable_sort(v.begin(), v.end(), [](const NpuNodeEfficiency& a, const NpuNodeEfficiency& b) { return a.excess_ms() > b.excess_ms(); });
  return v;
}

std::optional<double> node_macs(const ir::Node& n) {
  auto numel_batch1 = [](const ir::Value* v) -> std::optional<double> {
    if (!v || !v->shape) return std::nullopt;
    double p = 1;
    for (size_t i = 0; i < v->shape->size(); ++i) {
      const ir::Dim& d = (*v->shape)[i];
      if (d.is_static()) {
        p *= static_cast<double>(d.value);
      } else if (i != 0) {
        return std::nullopt;
      }
    }
    return p;
  };
  const bool qconv = n.op_type == "QLinearConv" || (n.op_type == "NpuConv" && n.domain == "rkdeploy");
  if ((n.op_type == "Conv" || n.op_type == "ConvTranspose" || qconv) && n.inputs.size() >= (qconv ? 4u : 2u) && !n.outputs.empty() && n.outputs[0]) {
    const ir::Value* w = n.inputs[qconv ? 3 : 1];
    if (!w || !w->shape || w->shape->size() < 3) return std::nullopt;
    double per = 1;  // weight elements per output channel (Conv) / per input channel (ConvTranspose)
    for (size_t i = 1; i < w->shape->size(); ++i) {
      if (!(*w->shape)[i].is_static()) return std::nullopt;
      per *= static_cast<double>((*w->shape)[i].value);
    }
    if (n.op_type == "Conv" || qconv) {
      auto out = numel_batch1(n.outputs[0]);
      return out ? std::optional<double>(*out * per) : std::nullopt;
    }
    auto in = numel_batch1(n.inputs[0]);
    return in ? std::optional<double>(*in * per) : std::nullopt;
  }
  const bool qmatmul = n.op_type == "QLinearMatMul" || (n.op_type == "NpuMatMul" && n.domain == "rkdeploy");
  if ((n.op_type == "MatMul" || n.op_type == "Gemm" || qmatmul) && n.inputs.size() >= 2 && !n.outputs.empty() && n.outputs[0]) {
    auto out = numel_batch1(n.outputs[0]);
    const ir::Value* a = n.inputs[0];
    if (!out || !a || !a->shape || a->shape->empty()) return std::nullopt;
    int64_t trans_a = 0;
    if (n.op_type == "Gemm") trans_a = n.attr_int("transA", 0).ok() ? *n.attr_int("transA", 0) : 0;
    const int r = static_cast<int>(a->shape->size());
    const ir::Dim& k = (*a->shape)[static_cast<size_t>(trans_a && r >= 2 ? r - 2 : r - 1)];
    if (!k.is_static()) return std::nullopt;
    return *out * static_cast<double>(k.value);
  }
  return std::nullopt;
}

namespace {

Result<nlohmann::json> read_json_file(const std::string& path, const char* what) {
  auto text = read_file_bytes(path);
  if (!text.ok()) return text.error().with_context(std::string("the ") + what);
  try {
    return nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& e) {
    return invalid(path + ": not valid JSON: " + e.what());
  }
}

}  // namespace

Result<BoardTimes> read_board_times(const std::string& path) {
  RKD_ASSIGN(nlohmann::json j, read_json_file(path, "CPU times"));
  if (!j.is_object() || j.value("schema", nlohmann::json()) != "rkdeploy-cpu-times/1")
    return invalid(path + ": schema: expected \"rkdeploy-cpu-times/1\"");
  BoardTimes bt;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "schema") continue;
    if (it.key() != "nodes" && it.key() != "ops") return invalid(path + ": " + it.key() + ": unknown field");
    if (!it->is_object()) return invalid(path + ": " + it.key() + ": must map names to milliseconds");
    auto& into = it.key() == "nodes" ? bt.nodes : bt.ops;
    for (auto e = it->begin(); e != it->end(); ++e) {
      if (!e->is_number() || !(e->get<double>() >= 0)) return invalid(path + ": " + it.key() + "." + e.key() + ": must be milliseconds >= 0");
      into[e.key()] = e->get<double>();
    }
  }
  return bt;
}

int apply_board_times(VariantPlan& p, const BoardTimes& bt) {
  int n = 0;
  for (PlannedNode& node : p.nodes) {
    if (node.device != Device::cpu || node.zero_cost) continue;
    const double* v = nullptr;
    if (auto a = bt.nodes.find(node.name); a != bt.nodes.end()) {
      v = &a->second;
    } else if (auto b = bt.ops.find(node.op_type); b != bt.ops.end()) {
      v = &b->second;
    }
    if (!v) continue;
    node.board_ms = *v;
    ++n;
  }
  return n;
}

Result<std::vector<Measurement>> read_measurements(const std::string& path, std::vector<std::string>* free) {
  RKD_ASSIGN(nlohmann::json j, read_json_file(path, "measurements"));
  if (!j.is_object() || j.value("schema", nlohmann::json()) != "rkdeploy-measurements/1")
    return invalid(path + ": schema: expected \"rkdeploy-measurements/1\"");
  if (!j.contains("measurements") || !j["measurements"].is_array()) return invalid(path + ": measurements: missing or not an array");
  if (j.contains("free")) {
    const auto& f = j["free"];
    if (!f.is_array() || f.empty()) return invalid(path + ": free: must be a non-empty array of parameter names");
    for (size_t i = 0; i < f.size(); ++i) {
      const std::string where = path + ": free[" + std::to_string(i) + "]";
      if (!f[i].is_string()) return invalid(where + ": must be a string");
      const std::string name = f[i].get<std::string>();
      const auto& known = parameter_names();
      if (std::find(known.begin(), known.end(), name) == known.end()) return invalid(where + ": unknown parameter '" + name + "'");
      if (free) free->push_back(name);
    }
  }
  std::vector<Measurement> v;
  for (size_t i = 0; i < j["measurements"].size(); ++i) {
    const auto& e = j["measurements"][i];
    const std::string where = path + ": measurements[" + std::to_string(i) + "]";
    if (!e.is_object()) return invalid(where + ": must be an object");
    for (auto it = e.begin(); it != e.end(); ++it) {
      const std::string& k = it.key();
      if (k != "target" && k != "variant" && k != "latency_ms" && k != "role" && k != "source" && k != "model")
        return invalid(where + "." + k + ": unknown field");
    }
    Measurement m;
    if (!e.contains("target") || !e["target"].is_string()) return invalid(where + ".target: missing or not a string");
    if (!e.contains("variant") || !e["variant"].is_string()) return invalid(where + ".variant: missing or not a string");
    if (!e.contains("latency_ms") || !e["latency_ms"].is_number() || !(e["latency_ms"].get<double>() > 0)) {
      return invalid(where + ".latency_ms: missing or not a positive number");
    }
    m.target = e["target"].get<std::string>();
    m.variant = e["variant"].get<std::string>();
    if (auto pv = parse_variant(m.variant); !pv.ok()) return invalid(where + ".variant: " + pv.error().message);
    m.latency_ms = e["latency_ms"].get<double>();
    RKD_TRY(json_string(e, "role", m.role, where + ".role"));
    if (m.role != "fit" && m.role != "check") return invalid(where + ".role: '" + m.role + "' (fit or check)");
    RKD_TRY(json_string(e, "source", m.source, where + ".source"));
    RKD_TRY(json_string(e, "model", m.model, where + ".model"));
    v.push_back(std::move(m));
  }
  return v;
}

namespace {

std::pair<double, double> parameter_bounds(const std::string& name) {
  if (name == "npu.utilization") return {1e-4, 1.0};
  return {1e-6, 1e7};
}

}  // namespace

Result<FitResult> calibrate(Target& t, std::vector<VariantPlan>& plans, const std::vector<Measurement>& ms) {
  std::vector<CalibrationRow> rows;
  for (const Measurement& m : ms) {
    if (m.target != t.name) continue;
    VariantPlan* p = nullptr;
    for (auto& vp : plans) {
      if (variant_name(vp.variant) == m.variant) p = &vp;
    }
    if (!p)
      return invalid("--calibrate: a measurement of variant '" + m.variant + "' on " + t.name +
                     ", which this plan did not compute (add it to --variant)");
    rows.push_back({p, &m});
  }
  RKD_ASSIGN(FitResult fr, calibrate_rows(t, rows));
  for (auto& vp : plans) price(vp, t);
  return fr;
}

Result<FitResult> calibrate_rows(Target& t, const std::vector<CalibrationRow>& rows) {
  FitResult fr;
  using Row = CalibrationRow;
  std::vector<Row> fit, all;
  for (const Row& r : rows) {
    if (!r.plan->executable)
      return invalid("--calibrate: variant '" + r.m->variant + "'" + (r.m->model.empty() ? "" : " of " + r.m->model) + " is measured at " +
                     std::to_string(r.m->latency_ms) + " ms but not executable on " + t.name);
    all.push_back(r);
    if (r.m->role == "fit") fit.push_back(r);
  }
  if (all.empty()) return invalid("--calibrate: no measurement for target " + t.name);
  const std::vector<std::string>& free = t.free_parameters;
  if (free.empty()) return invalid("--calibrate: " + t.path + " lists no calibration.free parameters");
  if (fit.empty()) return invalid("--calibrate: no measurement with role \"fit\" for " + t.name);
  for (const auto& pname : free) {
    RKD_ASSIGN(fr.before[pname], get_parameter(t, pname));
  }
  std::vector<double> before_ms;
  for (const Row& r : all) before_ms.push_back(r.plan->terms.total());
  // Least squares of relative residuals over the fit rows, by coordinate descent: a golden
  // section search of each parameter in log space within its bounds, 30 rounds.
  auto objective = [&]() {
    double s = 0;
    for (const Row& r : fit) {
      price(*r.plan, t);
      const double e = (r.plan->terms.total() - r.m->latency_ms) / r.m->latency_ms;
      s += e * e;
    }
    return s;
  };
  for (int round = 0; round < 30; ++round) {
    for (const auto& name : free) {
      auto [lo, hi] = parameter_bounds(name);
      double a = std::log(lo), b = std::log(hi);
      const double g = (std::sqrt(5.0) - 1) / 2;
      auto at = [&](double u) {
        (void)set_parameter(t, name, std::exp(u));
        return objective();
      };
      double c = b - g * (b - a), d = a + g * (b - a), fc = at(c), fd = at(d);
      for (int it = 0; it < 80; ++it) {
        if (fc < fd) {
          b = d;
          d = c;
          fd = fc;
          c = b - g * (b - a);
          fc = at(c);
        } else {
          a = c;
          c = d;
          fc = fd;
          d = a + g * (b - a);
          fd = at(d);
        }
      }
      (void)set_parameter(t, name, std::exp((a + b) / 2));
    }
  }
  objective();
  for (const Row& r : all) price(*r.plan, t);
  for (const auto& pname : free) {
    RKD_ASSIGN(fr.after[pname], get_parameter(t, pname));
  }
  for (size_t i = 0; i < all.size(); ++i) {
    FitResult::Row row;
    row.model = all[i].m->model;
    row.variant = all[i].m->variant;
    row.role = all[i].m->role;
    row.source = all[i].m->source;
    row.measured_ms = all[i].m->latency_ms;
    row.predicted_before_ms = before_ms[i];
    row.predicted_ms = all[i].plan->terms.total();
    fr.rows.push_back(row);
  }
  if (fit.size() < free.size()) {
    fr.note = std::to_string(fit.size()) + " fit measurement(s) for " + std::to_string(free.size()) +
              " free parameter(s): the fit is not unique; the values found are one solution";
  }
  for (const auto& name : free) {
    const auto [lo, hi] = parameter_bounds(name);
    const double v = fr.after[name];
    if (v <= lo * 1.0001 || v >= hi * 0.9999)
      fr.note += (fr.note.empty() ? "" : "; ") + name + " ended at its bound: the model cannot reach the measurement with it alone";
  }
  return fr;
}

}  // namespace rkd::plan
