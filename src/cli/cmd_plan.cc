// rkdeploy plan MODEL --target PROFILE: placement, boundaries and latency per deployment
// variant (src/plan, docs/planner.md); rkdeploy bench MODEL: P50/P95 latency on this host.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/progress.h"
#include "cli/backend.h"
#include "cli/commands.h"
#include "core/json_style.h"
#include "core/output.h"
#include "npu/arch/arch.h"
#include "npu/lower/lower.h"
#include "plan/plan.h"
#include "runtime/detect.h"
#include "runtime/model.h"
#include "workflows/bench.h"
#include "workflows/plan.h"

namespace rkd::cli {

namespace {

struct PlanArgs {
  std::string model, target, targets_dir, calibrate, cpu_times, html, markdown, discrete_model, image, config, models_dir;
  std::vector<std::string> variants{"all"}, inputs;
  bool json = false, supported_ops = false, allow_nonfinite = false;
  int runs = 3, warmup = 1, threads = 1, layers = 25;
};

void run_plan(const PlanArgs& a) {
  const std::string dir = a.targets_dir.empty() ? plan::default_targets_dir() : a.targets_dir;
  if (a.supported_ops) {
    std::cout << plan::supported_ops_markdown(take(plan::load_targets(dir)));
    return;
  }
  if (a.target.empty()) fail(invalid("plan: give --target PROFILE (a name in " + dir + " or a .json path)"));
  plan::PlanReport rep;
  rep.target = take(plan::find_target(a.target, dir));
  if (a.threads > rep.target.cpu.cores) {
    fail(invalid("--threads " + std::to_string(a.threads) + ": " + rep.target.name + "'s CPU has " + std::to_string(rep.target.cpu.cores) +
                 " big cores (the CPU factor scales this host's time at the same thread count)"));
  }
  if (a.model.empty() && !a.calibrate.empty()) {
    // A calibration set: every measurement names its model.
    if (a.models_dir.empty()) fail(invalid("plan --calibrate FILE without a MODEL: give --models-dir DIR, where the set's models are"));
    OutputTransaction out_tx({a.calibrate});
    rep.model = a.calibrate;
    workflows::CalibrationSetOptions co;
    co.file = a.calibrate;
    co.models_dir = a.models_dir;
    co.threads = a.threads;
    co.runs = a.runs;
    co.warmup = a.warmup;
    auto fit = workflows::calibrate_set(co, rep.target);
    if (!fit.ok()) fail(fit.error().with_context(a.calibrate));
    rep.fit = std::move(fit).value();
    rep.host = workflows::environment();
    check(out_tx.publish());
    std::cout << (a.json ? plan::plan_json(rep) : plan::plan_text(rep));
    return;
  }
  if (!a.models_dir.empty()) fail(invalid("--models-dir goes with --calibrate FILE and no MODEL (a calibration set)"));
  if (a.model.empty()) fail(invalid("plan: give a MODEL (or --supported-ops, or --calibrate FILE with --models-dir)"));
  OutputTransaction out_tx(read_paths({a.model, a.discrete_model, a.calibrate, a.cpu_times, a.image, a.config}, a.inputs));
  const std::string html_tmp = a.html.empty() ? "" : take(out_tx.file(a.html));
  const std::string md_tmp = a.markdown.empty() ? "" : take(out_tx.file(a.markdown));
  workflows::PlanOptions po;
  po.model = a.model;
  po.discrete_model = a.discrete_model;
  po.runs = a.runs;
  po.warmup = a.warmup;
  po.threads = a.threads;
  for (const std::string& v : a.variants) {
    if (v == "all") {
      po.variants = plan::default_variants(rep.target);
      break;
    }
    po.variants.push_back(take(plan::parse_variant(v)));
  }
  po.inputs = take(runtime::model_inputs(a.model, a.image, a.config, a.inputs));
  if (!a.allow_nonfinite) check(runtime::check_finite_inputs(po.inputs));
  rep.model = a.model;
  rep.discrete_model = a.discrete_model;
  rep.layers = a.layers;
  rep.plans = take(workflows::plan_model(po, rep.target));
  rep.host = workflows::environment();
  rep.host["runs"] = std::to_string(a.runs);
  if (!a.cpu_times.empty()) {
    const plan::BoardTimes bt = take(plan::read_board_times(a.cpu_times));
    int covered = 0;
    for (auto& p : rep.plans) {
      covered += plan::apply_board_times(p, bt);
      plan::price(p, rep.target);
    }
    rep.host["cpu_times"] = a.cpu_times + " (" + std::to_string(covered) + " CPU nodes over all variants measured on the board)";
  }
  if (!a.calibrate.empty()) {
    std::vector<std::string> free;
    const auto ms = take(plan::read_measurements(a.calibrate, &free));
    if (!free.empty()) rep.target.free_parameters = free;
    auto fit = plan::calibrate(rep.target, rep.plans, ms);
    if (!fit.ok()) fail(fit.error().with_context(a.calibrate));
    rep.fit = std::move(fit).value();
  }
  if (!a.html.empty()) write_text(html_tmp, plan::plan_html(rep));
  if (!a.markdown.empty()) write_text(md_tmp, plan::plan_markdown(rep));
  check(out_tx.publish());
  std::cout << (a.json ? plan::plan_json(rep) : plan::plan_text(rep));
}

struct BenchArgs {
  std::string model, image, config;
  workflows::BackendChoice backend;  // --backend, --strategy, --device, --cores
  std::vector<std::string> inputs;
  int warmup = 3, runs = 20, threads = 1;
  bool json = false, allow_nonfinite = false;
};

void run_bench(const BenchArgs& a) {
  workflows::BenchOptions o;
  o.model = a.model;
  o.image = a.image;
  o.config = a.config;
  o.backend = a.backend;
  o.inputs = a.inputs;
  o.warmup = a.warmup;
  o.runs = a.runs;
  o.threads = a.threads;
  o.allow_nonfinite = a.allow_nonfinite;
  const workflows::BenchResult r = take(workflows::bench(o));
  const workflows::LatencyStats& f = r.forward;
  nlohmann::json j = nlohmann::json::parse(workflows::bench_json(r));
  j["command"] = "bench";
  j["model"] = a.model;
  j["backend"] = a.backend.backend;
  j["warmup"] = a.warmup;
  j["runs"] = a.runs;
  const auto& env = r.environment;
  if (a.json) {
    std::cout << json_text(j);
    return;
  }
  std::printf("%s on %s (%s), %d runs after %d warm-up\n", a.model.c_str(), a.backend.backend.c_str(), env.at("cpu").c_str(), a.runs, a.warmup);
  if (env.count("npu_device")) std::printf("  npu device   %s\n", env.at("npu_device").c_str());
  std::printf("  dispatch     Highway %s, oneDNN %s, int8 products %s, vectorised loops %s (ISA ceiling %s)\n", env.at("highway_target").c_str(),
              env.at("onednn_isa").c_str(), env.at("int8_products").c_str(), env.at("vectorised_loops").c_str(), env.at("isa_ceiling").c_str());
  // The 95th percentile of fewer than 20 runs would be their maximum: not printed as a P95.
  auto p95 = [](const workflows::LatencyStats& s) {
    char b[64];
    if (s.p95) std::snprintf(b, sizeof b, "P95 %9.3f ms", *s.p95);
    else std::snprintf(b, sizeof b, "P95 n/a (< %d runs)", workflows::kMinRunsForP95);
    return std::string(b);
  };
  std::printf("  forward      P50 %9.3f ms  %s  (min %.3f, max %.3f)\n", f.p50, p95(f).c_str(), f.min, f.max);
  if (r.end_to_end) {
    const workflows::LatencyStats& e = *r.end_to_end;
    std::printf("  end to end   P50 %9.3f ms  %s  (min %.3f, max %.3f; preprocessing and decoding included)\n", e.p50, p95(e).c_str(), e.min, e.max);
  }
}

}  // namespace

void add_plan_commands(CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* c = app.add_subcommand("plan",
                                   "Place a model on a target profile and compare deployment variants: segments, execution boundaries (k) "
                                   "and a latency decomposition (docs/planner.md): rkdeploy plan MODEL --target PROFILE --image PHOTO");
  c->add_option("model", a->model, "the model: ONNX, TFLite or TensorFlow.js");
  c->add_option("--target", a->target, "profile name (targets/NAME.json) or a .json path");
  c->add_option("--targets", a->targets_dir, "profile folder (default: $RKDEPLOY_TARGETS or the source tree's targets/)");
  c->add_option("--variant", a->variants,
                "all (the default: on rkdeploy's own profile as-run first, then every other; elsewhere every variant but as-run), or any of " +
                    plan::variant_names());
  c->add_option("--discrete-model", a->discrete_model, "the same model exported with discrete sampling (for --variant discrete)");
  c->add_option("--calibrate", a->calibrate,
                "measured latencies (docs/planner.md): fit the profile's free parameters, predict the rest; without a MODEL, a calibration "
                "set whose every measurement names its model (--models-dir)");
  c->add_option("--models-dir", a->models_dir, "with --calibrate and no MODEL: where the set's models and their saved inputs are");
  c->add_option("--cpu-times", a->cpu_times, "CPU node times measured on the board (docs/planner.md), replacing this host's x the CPU factor");
  c->add_option("--image", a->image, "a photo to measure the CPU parts on (preprocessed by the detector config)");
  c->add_option("--config", a->config, "detector config JSON (docs/detector-config.md)");
  c->add_option("--input", a->inputs, "NAME=FILE.npy, one per graph input (instead of --image)");
  c->add_option("--runs", a->runs, "profiled runs per graph form (the median per node counts)")->check(CLI::Range(1, kMaxCount));
  c->add_option("--warmup", a->warmup, "unprofiled runs first")->check(CLI::Range(0, kMaxCount));
  add_threads_option(c, a->threads, "threads of the host measurement (the target's CPU factor assumes 1)");
  c->add_option("--layers", a->layers, "rows of the slowest-node tables")->check(CLI::Range(1, kMaxCount));
  c->add_flag("--json", a->json, "print JSON (docs/cli-json.md)");
  c->add_option("--html", a->html, "also write a self-contained HTML report (timeline, stacked terms, tables)");
  c->add_option("--markdown", a->markdown, "also write a Markdown report");
  c->add_flag("--supported-ops", a->supported_ops, "print docs/SUPPORTED_OPS.md from the profiles and exit");
  add_nonfinite_option(c, a->allow_nonfinite);
  c->callback([a] { run_plan(*a); });

  auto b = std::make_shared<BenchArgs>();
  CLI::App* bc = app.add_subcommand("bench",
                                    "Latency on this host: forward-only and end-to-end P50/P95 with the environment recorded: "
                                    "rkdeploy bench MODEL --image PHOTO");
  bc->add_option("model", b->model, "the model (ONNX, TFLite, TensorFlow.js, or an artifact of compile: .rkd)")->required();
  bc->add_option("--backend", b->backend.backend,
                 "cpu (float), int8 (integer kernels), sim (int8, NPU nodes on the RK3588 NPU simulator) or device (the same on a board's "
                 "NPU: docs/device.md)")
      ->check(CLI::IsMember(workflows::backend_names()));
  bc->add_option("--device", b->backend.device, "with --backend device: the NPU's device node (default: as for run)");
  bc->add_option("--cores", b->backend.cores, "with --backend device: NPU cores a convolution's tasks are split over (1-3)")->check(CLI::Range(1, 3));
  bc->add_option("--strategy", b->backend.strategy, "with --backend sim or device: " + strategy_help());
  bc->add_option("--image", b->image, "a photo (also enables the end-to-end measurement)");
  bc->add_option("--config", b->config, "detector config JSON");
  bc->add_option("--input", b->inputs, "NAME=FILE.npy, one per graph input (instead of --image)");
  bc->add_option("--warmup", b->warmup, "runs before measuring")->check(CLI::Range(0, kMaxCount));
  bc->add_option("--runs", b->runs, "measured runs")->check(CLI::Range(1, kMaxCount));
  add_threads_option(bc, b->threads,
                     "CPU threads (default 1, as plan measures: a figure that does not depend on the host's load and core count; 0 = one per core)");
  bc->add_flag("--json", b->json, "print JSON (docs/cli-json.md)");
  add_nonfinite_option(bc, b->allow_nonfinite);
  bc->callback([b] { run_bench(*b); });
}

}  // namespace rkd::cli
