// rkdeploy accuracy FLOAT_MODEL QUANT_MODEL --input NAME=FILE.npy|--image PHOTO: per-layer
// quantization error in entire and single modes (src/workflows/accuracy.h).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "cli/commands.h"
#include "core/output.h"
#include "ir/op_info.h"
#include "core/json_style.h"
#include "workflows/accuracy.h"
#include "workflows/eval.h"
#include "workflows/quantize.h"
#include "runtime/detect.h"
#include "runtime/model.h"

namespace rkd::cli {
namespace {

struct AccuracyArgs {
  std::string float_model, quant_model, image, config, html;
  std::vector<std::string> inputs;
  bool json = false, allow_nonfinite = false;
  int top = 10, threads = 0;
};

void run_accuracy(const AccuracyArgs& a) {
  OutputTransaction out_tx(read_paths({a.float_model, a.quant_model, a.image, a.config}, a.inputs));
  const std::string html_tmp = a.html.empty() ? "" : take(out_tx.file(a.html));
  const auto inputs = take(runtime::model_inputs(a.float_model, a.image, a.config, a.inputs));
  check(runtime::check_detector_inputs(inputs));
  if (!a.allow_nonfinite) check(runtime::check_finite_inputs(inputs));
  const auto rep = take(workflows::analyze_accuracy(a.float_model, a.quant_model, inputs, a.threads));
  // With a photo and a config that decodes: the detections of both models compared (COCO's
  // rules, the float model's at its threshold as ground truth; the QDQ file as ONNX defines it).
  std::optional<workflows::EvalResult> det;
  if (!a.image.empty() && !a.config.empty()) {
    auto g = take(workflows::load_portable(a.float_model));
    if (take(runtime::detector_config(*g, a.config)).output != "none") {
      workflows::EvalOptions eo;
      eo.photos = {a.image};
      eo.reference = a.float_model;
      eo.config = a.config;
      eo.load.exec.threads = a.threads;
      det = take(workflows::evaluate_model(a.quant_model, eo));
    }
  }
  if (!a.html.empty()) write_text(html_tmp, workflows::accuracy_html(rep));
  check(out_tx.publish());
  if (a.json) {
    nlohmann::json j = nlohmann::json::parse(workflows::accuracy_json(rep));
    if (det) {
      j["detections"] = {{"reference", det->metrics.ground_truth()},
                         {"matched50", det->metrics.matched50()},
                         {"AP50", det->metrics.summary.ap50},
                         {"AP", det->metrics.summary.ap}};
    }
    std::cout << json_text(j);
    return;
  }
  std::printf("%zu quantized layers of %s\n", rep.layers.size(), a.quant_model.c_str());
  if (det) {
    std::printf("detections: %lld of the float model's, %lld matched by the quantized model's at IoU 0.5 (AP50 %.3f, AP %.3f)\n",
                static_cast<long long>(det->metrics.ground_truth()), static_cast<long long>(det->metrics.matched50()), det->metrics.summary.ap50,
                det->metrics.summary.ap);
  }
  // Every model output, quantized or computed in float after the last quantized layer; a
  // quantized one also with its single-mode figure and its error in LSB of its scale.
  std::printf("model outputs (entire mode; single mode where the output is itself quantized):\n");
  for (const auto& o : rep.model_outputs) {
    const workflows::LayerAccuracy* l = nullptr;
    for (const auto& x : rep.layers)
      if (x.name == o.name) l = &x;
    if (l) {
      std::printf("  %-36s cosine %.6f / %.6f  max abs %.4g  (%.1f LSB)\n", o.name.c_str(), o.error.cosine, l->has_single ? l->single.cosine : NAN,
                  o.error.max_abs, l->entire.lsb);
    } else {
      std::printf("  %-36s cosine %.6f  max abs %.4g  (float)\n", o.name.c_str(), o.error.cosine, o.error.max_abs);
    }
    if (o.branches.empty()) continue;
    std::printf("    concatenates:\n");
    for (const auto& b : o.branches) {
      std::printf("    %-42s cosine %.6f  max abs %.4g\n", b.name.size() > 44 ? ("..." + b.name.substr(b.name.size() - 41)).c_str() : b.name.c_str(),
                  b.error.cosine, b.error.max_abs);
    }
  }
  // Layout and copy ops carry their input's values and scale: the table lists computing layers.
  std::vector<const workflows::LayerAccuracy*> order;
  for (const auto& l : rep.layers) {
    const ir::OpInfo* op = ir::find_op("", l.op);
    if (!op || !op->has(ir::kLayoutOnly)) order.push_back(&l);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto* x, const auto* y) { return x->entire.cosine < y->entire.cosine; });
  std::printf("worst computing layers (entire mode; copies and layout ops left out):\n  %-48s %-14s %10s %10s %10s %10s\n", "layer", "op",
              "cos entire", "cos single", "euclidean", "LSB");
  for (size_t i = 0; i < order.size() && static_cast<int>(i) < a.top; ++i) {
    const auto& l = *order[i];
    std::string name = l.name.size() > 48 ? "..." + l.name.substr(l.name.size() - 45) : l.name;
    std::printf("  %-48s %-14s %10.6f %10.6f %10.4g %10.1f\n", name.c_str(), l.op.c_str(), l.entire.cosine, l.has_single ? l.single.cosine : NAN,
                l.entire.euclidean, l.entire.lsb);
  }
  if (!a.html.empty()) std::printf("wrote %s\n", a.html.c_str());
}

}  // namespace

void add_accuracy_command(CLI::App& app) {
  auto a = std::make_shared<AccuracyArgs>();
  CLI::App* c =
      app.add_subcommand("accuracy", "Per-layer error of a quantized model against its float original: rkdeploy accuracy FLOAT QUANT --image PHOTO");
  c->add_option("float_model", a->float_model, "float model (.onnx or TensorFlow.js model.json)")->required();
  c->add_option("quant_model", a->quant_model, "its QDQ model (rkdeploy quantize)")->required();
  c->add_option("--input", a->inputs, "NAME=FILE.npy, one per graph input");
  c->add_option("--image", a->image, "a photo, preprocessed by --config (or the defaults)");
  c->add_option("--config", a->config, "detector config JSON (docs/detector-config.md)");
  c->add_option("--top", a->top, "rows of the worst-layer table")->check(CLI::Range(1, kMaxCount));
  add_threads_option(c, a->threads, "threads (0 = all cores)");
  c->add_option("--html", a->html, "write a self-contained HTML report");
  c->add_flag("--json", a->json, "print every layer as JSON");
  add_nonfinite_option(c, a->allow_nonfinite);
  c->callback([a] { run_accuracy(*a); });
}

}  // namespace rkd::cli
