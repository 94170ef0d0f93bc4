#include "workflows/plan.h"

#include <dnnl.hpp>
#include <hwy/highway.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "core/npy.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "kernels/tensor_ops.h"
#include "npu/lower/strategy.h"
#include "runtime/model.h"
#include "runtime/npu_conv.h"
#include "runtime/npu_ops.h"

namespace rkd::workflows {

using namespace runtime;  // NOLINT: the layer below (executor, model loading, detector pre- and post-processing)

namespace {

// Per node, its host milliseconds in each of `runs` profiled runs after `warmup` unprofiled ones.
Result<std::map<std::string, std::vector<double>>> measure(ir::Graph& g, const PlanOptions& o) {
  ExecutorOptions eo;
  eo.threads = o.threads;
  eo.profile = true;
  RKD_TRY(check_graph_inputs(g, o.inputs));
  RKD_ASSIGN(auto ex, Executor::create(g, eo));
  std::map<std::string, std::vector<double>> samples;
  for (int i = 0; i < o.warmup + o.runs; ++i) {
    RKD_TRY(report_progress("plan: measuring on this host", i + 1, o.warmup + o.runs));
    RKD_ASSIGN(auto out, ex->run(o.inputs));
    if (i < o.warmup) continue;
    for (const NodeTime& t : ex->last_profile()) samples[t.node].push_back(t.micros / 1e3);
  }
  return samples;
}

std::map<std::string, double> medians(const std::map<std::string, std::vector<double>>& samples) {
  std::map<std::string, double> ms;
  for (const auto& [name, v0] : samples) {
    std::vector<double> v = v0;
    std::sort(v.begin(), v.end());
    ms[name] = v.empty() ? 0 : v[v.size() / 2];
  }
  return ms;
}

// Every NPU node of the runtime's graph lowered as the runtime lowers it (one session, graph
// order): its tasks' work from their register commands and its jobs on `cores` cores.
Result<std::map<std::string, plan::NpuNodeCost>> lowered_costs(const ir::Graph& g, int cores) {
  std::map<std::string, plan::NpuNodeCost> costs;
  std::shared_ptr<NpuSession> session = make_npu_session(g.outputs);
  for (const auto& np : g.nodes()) {
    if (!npu_family_of(*np)) continue;
    RKD_ASSIGN(auto ln, lower_npu_node(*np, session));
    RKD_ASSIGN(costs[np->name], npu_node_cost(*session, *ln, cores));
  }
  return costs;
}

}  // namespace

Result<plan::NpuNodeCost> npu_node_cost(const NpuSession& s, const NpuLoweredNode& ln, int cores) {
  RKD_ASSIGN(auto work, npu_node_work(s, ln));
  plan::NpuNodeCost c;
  for (const npu::sim::TaskWork& w : work)
    c.tasks.push_back({static_cast<double>(w.padded_macs), static_cast<double>(w.read_bytes), static_cast<double>(w.write_bytes)});
  for (const NpuJobPlan& j : npu_node_jobs(ln, cores)) c.jobs.push_back({j.stage, j.tasks});
  return c;
}

Result<std::vector<plan::VariantPlan>> plan_model(const PlanOptions& o, const plan::Target& t) {
  if (o.runs < 1 || o.warmup < 0) return invalid("plan: --runs must be at least 1 and --warmup at least 0");
  RKD_TRY(check_real_inputs(o.inputs));
  std::vector<plan::VariantPlan> plans;
  std::map<plan::GraphForm, std::vector<plan::Variant>> by_form;
  for (plan::Variant v : o.variants) by_form[plan::graph_form(v)].push_back(v);
  std::map<plan::Variant, plan::VariantPlan> done;
  for (const auto& [form, variants] : by_form) {
    const std::string path = form == plan::GraphForm::discrete ? o.discrete_model : o.model;
    if (path.empty()) {
      for (plan::Variant v : variants) {
        plan::VariantPlan p;
        p.variant = v;
        p.planned = false;
        p.executable = false;
        p.failures.push_back(
            "not planned: give --discrete-model FILE, the same model exported with discrete sampling "
            "(scripts/models/make_models.py --models deim_discrete)");
        done[v] = std::move(p);
      }
      continue;
    }
    RKD_ASSIGN(ImportedModel imp, import_model(path, 1));
    CompileOptions co;
    co.fuse = form == plan::GraphForm::fused;
    co.fuse_activations = false;
    co.require_executable = false;
    if (form == plan::GraphForm::runtime) {
      // What `run --backend sim` compiles: the int8 graph, the NPU placement with the default
      // strategy, the CPU fusions of the int8 path.
      co.fuse = true;
      co.fuse_activations = true;
      co.int8 = true;
      co.npu_strategy = npu::lower::kDefaultStrategy;
    }
    plan::RuntimePlacement rt;
    ir::FusionReport placement;
    Status s = optimize(imp.graph, co, &placement);
    if (!s.ok() && form == plan::GraphForm::runtime && s.error().kind == ErrorKind::unsupported) {
      // A graph the int8 back ends refuse (a float model): as-run is not planned, with why.
      for (plan::Variant v : variants) {
        plan::VariantPlan p;
        p.variant = v;
        p.planned = false;
        p.executable = false;
        p.failures.push_back("not planned: " + s.error().message);
        done[v] = std::move(p);
      }
      continue;
    }
    if (!s.ok()) return s.error().with_context(path);
    bool placed_any = false;
    for (const auto& n : imp.graph.nodes()) placed_any = placed_any || plan::npu_placed_op(*n);
    // rkdeploy's own back end: the runtime graph's NPU nodes priced from their lowered tasks;
    // the candidates it left on the CPU with the placement's reason.
    if (form == plan::GraphForm::runtime && t.rkdeploy_lowering) {
      auto lc = lowered_costs(imp.graph, t.npu.cores_used);
      if (!lc.ok()) return lc.error().with_context(path);
      rt.lowered = std::move(lc).value();
    }
    for (const auto& n : imp.graph.nodes())
      if (std::string why = npu_cpu_reason(placement, n->name); !why.empty()) rt.cpu_reasons[n->name] = why;
    // A graph this host cannot run is still placed: its nodes without a CPU kernel are
    // reported in every plan, and no host time is measured (the CPU terms would be partial).
    const std::vector<std::string> unrunnable = unexecutable_nodes(imp.graph);
    std::map<std::string, std::vector<double>> runs;
    if (unrunnable.empty()) {
      auto m = measure(imp.graph, o);
      if (!m.ok()) return m.error().with_context(path);
      runs = std::move(m).value();
    }
    const std::map<std::string, double> host = medians(runs);
    for (plan::Variant v : variants) {
      auto p = plan::plan_variant(imp.graph, t, v, host, runs, rt);
      if (!p.ok()) return p.error().with_context(path);
      if (form == plan::GraphForm::runtime && !placed_any) p->notes.push_back("nothing placed on the NPU: no operator the lowering takes");
      if (!unrunnable.empty()) {
        p->executable = false;
        for (const std::string& u : unrunnable) p->failures.push_back(u + " in rkdeploy: the host cannot run the graph to measure it");
      }
      done[v] = std::move(p).value();
    }
  }
  for (plan::Variant v : o.variants) plans.push_back(std::move(done[v]));
  return plans;
}

Result<plan::FitResult> calibrate_set(const CalibrationSetOptions& o, plan::Target& t) {
  std::vector<std::string> free;
  RKD_ASSIGN(const std::vector<plan::Measurement> ms, plan::read_measurements(o.file, &free));
  if (!free.empty()) t.free_parameters = free;
  std::vector<const plan::Measurement*> mine;
  for (const plan::Measurement& m : ms) {
    if (m.target != t.name) continue;
    if (m.model.empty()) return invalid(o.file + ": a measurement of " + t.name + " without its \"model\" (a calibration set names each)");
    mine.push_back(&m);
  }
  if (mine.empty()) return invalid(o.file + ": no measurement for target " + t.name);
  // One plan per measurement (its model, its variant), kept at stable addresses for the fit.
  std::vector<std::unique_ptr<plan::VariantPlan>> plans;
  std::vector<plan::CalibrationRow> rows;
  for (size_t i = 0; i < mine.size(); ++i) {
    const plan::Measurement& m = *mine[i];
    RKD_TRY(report_progress("plan: the calibration set's models", i + 1, mine.size()));
    namespace fs = std::filesystem;
    const fs::path model = fs::path(o.models_dir) / m.model;
    PlanOptions po;
    po.model = model.string();
    po.threads = o.threads;
    po.warmup = o.warmup;
    po.runs = o.runs;
    RKD_ASSIGN(plan::Variant v, plan::parse_variant(m.variant));
    po.variants = {v};
    const std::string stem = model.stem().string() + ".input_";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(o.models_dir, ec)) {
      const std::string f = e.path().filename().string();
      if (f.rfind(stem, 0) == 0 && e.path().extension() == ".npy") {
        RKD_ASSIGN(po.inputs[f.substr(stem.size(), f.size() - stem.size() - 4)], read_npy(e.path().string()));
      }
    }
    if (ec) return io_error(o.models_dir + ": " + ec.message());
    if (po.inputs.empty()) return invalid(model.string() + ": no saved input " + stem + "NAME.npy beside it (make_models.py writes them)");
    RKD_ASSIGN(auto p, plan_model(po, t));
    plans.push_back(std::make_unique<plan::VariantPlan>(std::move(p.at(0))));
    rows.push_back({plans.back().get(), &m});
  }
  return plan::calibrate_rows(t, rows);
}

std::map<std::string, std::string> environment() {
  std::map<std::string, std::string> e;
  e["rkdeploy"] = RKD_VERSION;
  e["build_type"] = RKD_BUILD_TYPE;
#if defined(__clang__)
  e["compiler"] = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  e["compiler"] = std::string("gcc ") + __VERSION__;
#endif
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      e["cpu"] = line.substr(line.find(':') + 2);
      break;
    }
  }
  e["hardware_threads"] = std::to_string(std::thread::hardware_concurrency());
  e["threads"] = std::to_string(global_thread_count());
  const dnnl_version_t* dv = dnnl_version();
  e["onednn"] = std::to_string(dv->major) + "." + std::to_string(dv->minor) + "." + std::to_string(dv->patch);
  e["highway"] = std::to_string(HWY_MAJOR) + "." + std::to_string(HWY_MINOR) + "." + std::to_string(HWY_PATCH);
  for (const auto& [k, v] : ops::dispatch_report()) e[k] = v;
  return e;
}

}  // namespace rkd::workflows
