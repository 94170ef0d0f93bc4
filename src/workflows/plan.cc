#include "workflows/plan.h"

#include <dnnl.hpp>
#include <hwy/highway.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "core/progress.h"
#include "core/thread_pool.h"
#include "kernels/tensor_ops.h"
#include "npu/lower/strategy.h"
#include "runtime/model.h"

namespace rkd::workflows {

using namespace runtime;  // NOLINT: the layer below (executor, model loading, detector pre- and post-processing)

namespace {

// Per-node median host milliseconds of `runs` profiled runs after `warmup` unprofiled ones.
Result<std::map<std::string, double>> measure(ir::Graph& g, const PlanOptions& o) {
  ExecutorOptions eo;
  eo.threads = o.threads;
  eo.profile = true;
  RKD_TRY(check_graph_inputs(g, o.inputs));
  RKD_ASSIGN(auto ex, Executor::create(g, eo));
  std::map<std::string, std::vector<double>> samples;
  for (int i = 0; i < o.warmup + o.runs; ++i) {
    report_progress("plan: measuring on this host", i + 1, o.warmup + o.runs);
    RKD_ASSIGN(auto out, ex->run(o.inputs));
    if (i < o.warmup) continue;
    for (const NodeTime& t : ex->last_profile()) samples[t.node].push_back(t.micros / 1e3);
  }
  std::map<std::string, double> ms;
  for (auto& [name, v] : samples) {
    std::sort(v.begin(), v.end());
    ms[name] = v[v.size() / 2];
  }
  return ms;
}

}  // namespace

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
      co.npu_sim_strategy = npu::lower::strategy_name(npu::lower::kDefaultStrategy);
    }
    Status s = optimize(imp.graph, co);
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
    // A graph this host cannot run is still placed: its nodes without a CPU kernel are
    // reported in every plan, and no host time is measured (the CPU terms would be partial).
    const std::vector<std::string> unrunnable = unexecutable_nodes(imp.graph);
    std::map<std::string, double> host;
    if (unrunnable.empty()) {
      auto m = measure(imp.graph, o);
      if (!m.ok()) return m.error().with_context(path);
      host = std::move(m).value();
    }
    for (plan::Variant v : variants) {
      auto p = plan::plan_variant(imp.graph, t, v, host);
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
