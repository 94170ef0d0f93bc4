// rkdeploy analyze MODEL: every int8 convolution lowered with each NPU strategy, simulated,
// and compared with the int8 reference on a real input (src/workflows/analyze.h).
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "core/output.h"
#include "core/npy.h"
#include "runtime/detect.h"
#include "runtime/model.h"
#include "workflows/analyze.h"
#include "quant/requant.h"

namespace rkd::cli {

namespace {
struct AnalyzeArgs {
  std::string model, image, config, strategy = "all", requant, html;
  std::vector<std::string> inputs, knobs;
  bool json = false, per_conv = false, allow_nonfinite = false;
  int threads = 0;
  npu::lower::LowerOptions lower;
};
}  // namespace

std::string sim_help() {
  std::string s =
      "The RK3588 NPU simulator (src/npu/sim) executes register commands on simulated device memory.\n"
      "Behaviours the public sources leave uncertain are knobs; set them with --sim NAME=VALUE\n"
      "(rkdeploy analyze). docs/npu.md describes each stage.\n\n";
  for (const auto& k : npu::sim::knob_list()) {
    s += std::string("  ") + k.name + " = " + k.values + "  (default " + k.default_value + ")\n      " + k.source + "\n";
  }
  return s;
}

void add_analyze_command(CLI::App& app) {
  auto a = std::make_shared<AnalyzeArgs>();
  CLI::App* c = app.add_subcommand("analyze",
                                   "Lower every int8 convolution for the RK3588 NPU with each per-axis strategy, simulate it "
                                   "and compare with the int8 reference: rkdeploy analyze QUANT_MODEL --image PHOTO");
  c->add_option("model", a->model, "quantized model (ONNX QDQ/QOperator or int8 TFLite)")->required();
  c->add_option("--image", a->image, "a photo, preprocessed by the detector config");
  c->add_option("--config", a->config, "detector config JSON (docs/detector-config.md)");
  c->add_option("--input", a->inputs, "NAME=FILE.npy, one per graph input");
  c->add_option("--strategy", a->strategy, "all (the default), or " + strategy_help());
  c->add_option("--requant", a->requant,
                "the reference's requantization, replacing the model format's: tflite_double_rounding, tflite_single_rounding, "
                "tflite_xnnpack, onnx_float, rknpu_out_cvt (the NPU's own; docs/quantization.md)")
      ->check(CLI::IsMember(quant::requant_names()));
  c->add_option("--sim", a->knobs, "simulator knob NAME=VALUE (rkdeploy help sim lists them)");
  c->add_flag("--per-conv", a->per_conv, "also print every convolution's results");
  c->add_option("--hybrid-ratio", a->lower.hybrid_ratio, "hybrid: split a 16-channel group into per-channel tasks above this max/min scale ratio")
      ->check(finite_range(1.0, 1e9));
  c->add_option("--sorted-spread-log2", a->lower.sorted_bs_spread_log2, "sorted-bs-multiplier: largest scale spread per task, as a power of two")
      ->check(CLI::Range(0, 14));
  c->add_flag("--json", a->json, "print JSON (docs/npu.md)");
  add_nonfinite_option(c, a->allow_nonfinite);
  c->add_option("--html", a->html, "also write a self-contained HTML report (chart and tables)");
  add_threads_option(c, a->threads, "threads for the reference run (0 = all cores)");
  c->callback([a] {
    OutputTransaction out_tx(read_paths({a->model, a->image, a->config}, a->inputs));
    const std::string html_tmp = a->html.empty() ? "" : take(out_tx.file(a->html));
    const auto inputs = take(runtime::model_inputs(a->model, a->image, a->config, a->inputs));
    if (!a->allow_nonfinite) check(runtime::check_finite_inputs(inputs));
    std::vector<npu::lower::Strategy> strategies;
    if (a->strategy == "all") strategies = npu::lower::all_strategies();
    else strategies = {take(npu::lower::parse_strategy(a->strategy))};
    npu::sim::Quirks q;
    for (const std::string& k : a->knobs) check(npu::sim::set_knob(q, k));
    const auto rep = take(workflows::analyze_npu(a->model, inputs, strategies, q, a->threads, a->lower, a->requant));
    if (!a->html.empty()) write_text(html_tmp, workflows::npu_analysis_html(rep));
    check(out_tx.publish());
    if (a->json) std::cout << workflows::npu_analysis_json(rep);
    else std::cout << workflows::npu_analysis_text(rep, a->per_conv);
    // A strategy that failed on a convolution within the shared limits is a result the user
    // must not miss: the report stands, the exit status says it.
    std::string failed;
    for (const auto& t : rep.totals) {
      if (!t.error.empty()) failed += (failed.empty() ? "" : ", ") + t.strategy;
    }
    if (!failed.empty()) fail(unsupported("analyze: strategy " + failed + " could not lower every convolution (the report says where)"));
  });
}

}  // namespace rkd::cli
