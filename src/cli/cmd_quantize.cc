// rkdeploy quantize MODEL --calib DIR|FILE.npz -o OUT.onnx: post-training quantization to an
// ONNX QDQ model (src/workflows/quantize.h, src/quant/qdq.h, docs/quantization.md).
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <optional>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/json_style.h"
#include "core/output.h"
#include "frontends/onnx/onnx_export.h"
#include "plan/plan.h"
#include "runtime/model.h"
#include "workflows/plan.h"
#include "workflows/quantize.h"

namespace rkd::cli {
namespace {

struct QuantizeArgs {
  std::string model, calib, config, output;
  int images = 100;
  std::string method = "minmax";
  std::string dtype = "int8";
  double percentile = 99.99;
  bool per_tensor = false, per_channel = false, symmetric = false, json = false, percentile_given = false, allow_nonfinite = false;
  int threads = 0;
  std::vector<std::string> keep_float;
  bool float_outputs = false;
  std::string target = "rk3588-rkdeploy";
  double auto_hybrid = 0;
  std::string hybrid_images;
};

// The plan of a QDQ graph as rkdeploy's back end runs it (variant as-run) on `t`, CPU terms
// measured here on `inputs`: what keeping layers in float costs in boundaries and time.
plan::VariantPlan plan_as_run(const std::string& model, const plan::Target& t, const workflows::Sample& inputs, int threads) {
  workflows::PlanOptions po;
  po.model = model;
  po.inputs = inputs;
  po.variants = {plan::Variant::as_run};
  po.threads = threads;
  auto plans = take(workflows::plan_model(po, t));
  return plans.front();
}

void run_quantize(const QuantizeArgs& a) {
  if (a.per_tensor && a.per_channel) fail(invalid("--per-channel and --per-tensor exclude each other"));
  const bool u8 = a.dtype == "uint8";
  if (u8 && a.per_channel) fail(invalid("--dtype uint8: weights are per tensor (TFLite's uint8 scheme); drop --per-channel"));
  const bool per_tensor = a.per_tensor || u8;
  if (a.percentile_given && a.method != "percentile") {
    fail(invalid("--percentile applies to --method percentile only (the method is " + a.method + ")"));
  }
  OutputTransaction out_tx({a.model, a.calib, a.config, a.hybrid_images});
  const std::string out_tmp = take(out_tx.file(a.output));
  workflows::QuantizeOptions opt;
  opt.qdq.dtype = u8 ? DType::u8 : DType::i8;
  opt.method = take(quant::calib_method_from_name(a.method));
  opt.percentile = a.percentile;
  opt.qdq.per_channel = !per_tensor;
  opt.qdq.symmetric_activations = a.symmetric;
  opt.threads = a.threads;
  opt.qdq.keep_float.insert(a.keep_float.begin(), a.keep_float.end());
  opt.qdq.float_outputs = a.float_outputs;
  // The calibration set needs the model's inputs and detector config (photos are
  // preprocessed one at a time while calibrating).
  const auto samples = take(workflows::open_calibration_for(a.model, {a.calib, a.images, a.config}));
  if (a.target != "none") opt.target = take(plan::find_target(a.target, plan::default_targets_dir()));
  opt.hybrid.min_ap50 = a.auto_hybrid;
  opt.hybrid.images = a.hybrid_images;
  opt.allow_nonfinite = a.allow_nonfinite;
  opt.source = a.calib;
  auto q = take(workflows::quantize_model(a.model, samples, opt));
  check(onnx_frontend::export_onnx_file(*q.graph, out_tmp));
  check(out_tx.publish());
  const auto& r = q.report;
  // With --auto-hybrid and a target: both choices planned (the all-int8 graph written to a
  // temporary file for the planner, removed after).
  std::optional<std::pair<plan::VariantPlan, plan::VariantPlan>> trade;
  if (q.hybrid && opt.target && q.all_int8) {
    std::string tmp = (std::filesystem::temp_directory_path() / "rkdeploy-all-int8-XXXXXX").string();
    const int fd = ::mkstemp(tmp.data());
    if (fd < 0) fail(io_error(tmp + ": cannot create a temporary file"));
    ::close(fd);
    const Status w = onnx_frontend::export_onnx_file(*q.all_int8, tmp);
    const auto in = samples.sample(0);
    if (w.ok() && in.ok()) {
      auto all = plan_as_run(tmp, *opt.target, in.value(), a.threads);
      trade.emplace(std::move(all), plan_as_run(a.output, *opt.target, in.value(), a.threads));
    }
    std::filesystem::remove(tmp);
    check(w);
  }
  for (const std::string& w : r.warnings) std::fprintf(stderr, "rkdeploy: warning: %s\n", w.c_str());
  if (a.json) {
    nlohmann::json j = nlohmann::json::parse(workflows::quantize_summary_json(q, opt, a.target));
    j["command"] = "quantize";
    j["model"] = a.model;
    j["output"] = a.output;
    if (trade) {
      j["auto_hybrid"]["planned"] = {{"target", opt.target->name},
                                     {"variant", "as-run"},
                                     {"all_int8", {{"k", trade->first.k}, {"ms", trade->first.terms.total()}}},
                                     {"hybrid", {{"k", trade->second.k}, {"ms", trade->second.terms.total()}}}};
    }
    std::cout << json_text(j);
    return;
  }
  std::printf("quantized %s with %d calibration sample(s), method %s\n", a.model.c_str(), q.samples, a.method.c_str());
  std::printf("  activations  %d %s %s per tensor (%d groups share a scale, %d outputs fused into Relu/Clip)\n", r.activations, a.dtype.c_str(),
              a.symmetric ? "symmetric" : "asymmetric", r.shared_groups, r.fused_activations);
  std::printf("  weights      %d %s %s, %d int32 biases (%d channel scales raised to fit the bias)\n", r.weights,
              u8 ? "uint8 asymmetric" : "int8 symmetric", per_tensor ? "per tensor" : "per output channel", r.biases, r.bias_rescaled);
  if (!q.cpu_placed.empty()) {
    int n = 0;
    std::string kinds;
    for (const auto& [op, k] : q.cpu_placed) {
      n += k;
      kinds += (kinds.empty() ? "" : ", ") + op + " " + std::to_string(k);
    }
    std::printf("  %d node(s) in float: %s runs them on its CPU (%s)\n", n, a.target.c_str(), kinds.c_str());
  }
  int named = r.kept_float - (q.hybrid ? static_cast<int>(q.hybrid->kept.size()) : 0);
  for (const auto& [op, k] : q.cpu_placed) named -= k;
  if (named > 0) std::printf("  %d node(s) kept in float (--keep-float)\n", named);
  if (q.hybrid) {
    const auto& h = *q.hybrid;
    std::printf("  auto-hybrid: AP50 against float on %d photo(s): %.3f with every layer quantized, %.3f with %zu of %d layer(s) in float\n",
                h.photos, h.ap50_all, h.ap50, h.kept.size(), h.layers);
    if (trade) {
      std::printf("  planned on %s as run (CPU terms measured here): every layer int8 k = %d, %.1f ms; with those in float k = %d, %.1f ms\n",
                  opt.target->name.c_str(), trade->first.k, trade->first.terms.total(), trade->second.k, trade->second.terms.total());
    }
    for (const auto& l : h.kept) {
      std::printf("    %-60s %-12s AP50 %.3f, AP %.3f when only it is quantized\n", l.node.c_str(), l.op.c_str(), l.ap50_alone, l.ap_alone);
    }
  }
  if (r.collapse_kept)
    std::printf("  %d node(s) kept in float: Concats, Adds and Subs whose narrowest input one scale would collapse, and their readers\n",
                r.collapse_kept);
  if (r.float_selection)
    std::printf("  %d node(s) kept in float: they compute only sampling coordinates or selection scores (a GridSample's grid, a TopK's input)\n",
                r.float_selection);
  if (r.float_decoder)
    std::printf("  %d node(s) kept in float: they read a TopK's selection (a DETR's decoder: the selected queries refined into the detections)\n",
                r.float_decoder);
  if (r.mixed_range_concats) {
    std::printf("  %d graph-output Concat(s) of branches of different range kept in float, each branch with its own scale\n", r.mixed_range_concats);
  }
  std::printf("wrote %s\n", a.output.c_str());
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto a = std::make_shared<QuantizeArgs>();
  CLI::App* c = app.add_subcommand("quantize",
                                   "Post-training int8 quantization to an ONNX QDQ model: rkdeploy quantize MODEL --calib DIR|FILE.npz -o OUT.onnx");
  c->add_option("model", a->model, "float model: ONNX (.onnx), TFLite (.tflite) or TensorFlow.js (model.json)")->required();
  c->add_option("--calib", a->calib, "folder of calibration photos, or .npz with one member per model input (samples on axis 0)")->required();
  c->add_option("--images", a->images, "use at most N calibration samples")->check(CLI::Range(1, 100000));
  c->add_option("--config", a->config, "detector config JSON for the photos (docs/detector-config.md)");
  c->add_option("--method", a->method, "activation ranges: minmax, percentile, kl or mse")
      ->check(CLI::IsMember({"minmax", "percentile", "kl", "mse"}));
  c->add_flag("--float-outputs", a->float_outputs,
              "the model's outputs stay float: the node computing each output reads int8 and writes float (score logits, box regressions)");
  c->add_option("--keep-float", a->keep_float,
                "node names or op types that stay float (computed on the CPU; repeatable): e.g. Softmax, a node a quantize warning names, "
                "a glob over node names ('*/attn/*') or a scope prefix ending in '/' ('/model.22/')");
  c->add_option("--target", a->target,
                "quantize only what this target profile runs on its NPU (NAME in targets/ or a .json; the rest computes in float "
                "on the CPU), or none: every op (default rk3588-rkdeploy)");
  c->add_option("--auto-hybrid", a->auto_hybrid,
                "keep the most sensitive layers in float until the detections on the calibration photos reach this AP50 against the float "
                "model's (e.g. 0.95; needs photos and a detector config)")
      ->check(finite_range(0.0, 1.0));
  c->add_option("--hybrid-images", a->hybrid_images, "with --auto-hybrid: judge on the photos of this folder instead of the calibration photos")
      ->needs("--auto-hybrid");
  c->add_option("--percentile", a->percentile, "with --method percentile (default 99.99)")->check(finite_range(50.0, 100.0));
  c->add_flag("--per-channel", a->per_channel, "per-output-channel weight scales (default)");
  c->add_flag("--per-tensor", a->per_tensor, "one weight scale per tensor");
  c->add_option("--dtype", a->dtype, "int8 (default), or uint8: TFLite's uint8 scheme, per-tensor asymmetric weights (Mesa's rocket driver)")
      ->check(CLI::IsMember({"int8", "uint8"}));
  c->add_flag("--symmetric-activations", a->symmetric, "activation zero points 0");
  add_threads_option(c, a->threads, "threads (0 = all cores)");
  c->add_option("-o,--output", a->output, "QDQ model to write (.onnx)")->required();
  c->add_flag("--json", a->json, "print the summary as JSON");
  c->add_flag("--allow-nonfinite", a->allow_nonfinite,
              "calibrate on samples with NaN or infinite values (refused by default; the "
              "ranges ignore them)");
  c->callback([a, c] {
    a->percentile_given = c->count("--percentile") > 0;
    run_quantize(*a);
  });
}

}  // namespace rkd::cli
