// rkdeploy eval MODEL --images DIR (--annotations COCO.json | --reference FLOAT_MODEL): COCO
// detection metrics of a model's detections (src/workflows/eval.h); rkdeploy eval --results
// DETECTIONS.json --annotations COCO.json: the same for detections made elsewhere.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/backend.h"
#include "cli/commands.h"
#include "core/json_style.h"
#include "core/output.h"
#include "runtime/detect.h"
#include "workflows/eval.h"

namespace rkd::cli {
namespace {

struct EvalArgs {
  std::string model, images, annotations, reference, config, reference_config, results, detections_out, classes = "coco";
  BackendArgs backend;
  float score_threshold = 0.001f, reference_margin = 0.f;
  int max_images = 0, threads = 0;
  bool json = false;
};

std::string metric_text(double v) {
  char b[32];
  if (v < 0) return "     -";
  std::snprintf(b, sizeof b, "%6.3f", v);
  return b;
}

std::string category_name(const EvalArgs& a, const workflows::CocoDataset& gt, int64_t id) {
  auto it = gt.category_names.find(id);
  if (it != gt.category_names.end()) return it->second;
  const auto& coco = runtime::coco_class_names();
  if (!a.reference.empty() && a.classes == "coco" && id >= 0 && id < static_cast<int64_t>(coco.size())) return coco[static_cast<size_t>(id)];
  return std::to_string(id);
}

size_t ignored_boxes(const workflows::CocoDataset& gt) {
  return static_cast<size_t>(std::count_if(gt.boxes.begin(), gt.boxes.end(), [](const quant::GroundTruthBox& b) { return b.ignore; }));
}

void print_result(const EvalArgs& a, const quant::CocoEvaluation& m, const workflows::CocoDataset& gt, size_t detections, int64_t outside) {
  const auto names = quant::CocoSummary::names();
  const auto values = m.summary.values();
  const int64_t gt_boxes = m.ground_truth(), matched = m.matched50();
  if (a.json) {
    nlohmann::ordered_json j;
    j["command"] = "eval";
    if (!a.model.empty()) {
      j["model"] = a.model;
      j["backend"] = backend_description(a.backend);
      j["score_threshold"] = a.score_threshold;
    } else {
      j["results"] = a.results;
    }
    j["images"] = gt.images.size();
    j["ground_truth"] = {{"kind", a.reference.empty() ? "annotations" : "reference"},
                         {"path", a.reference.empty() ? a.annotations : a.reference},
                         {"boxes", gt.boxes.size() - ignored_boxes(gt)},
                         {"ignored_boxes", ignored_boxes(gt)},
                         {"categories", gt.categories.size()}};
    j["detections"] = detections;
    j["matched50"] = matched;
    j["matched50_share"] = gt_boxes ? static_cast<double>(matched) / static_cast<double>(gt_boxes) : -1.0;
    if (outside) j["labels_outside_categories"] = outside;
    nlohmann::ordered_json metrics;
    for (size_t i = 0; i < names.size(); ++i) metrics[names[i]] = values[i];
    j["metrics"] = metrics;
    nlohmann::ordered_json cats = nlohmann::ordered_json::array();
    for (const auto& c : m.categories) {
      cats.push_back({{"id", c.category},
                      {"name", category_name(a, gt, c.category)},
                      {"ground_truth", c.ground_truth},
                      {"detections", c.detections},
                      {"matched50", c.matched50},
                      {"AP", c.ap},
                      {"AP50", c.ap50},
                      {"AR100", c.ar100}});
    }
    j["categories"] = cats;
    std::cout << json_text(j);
    return;
  }
  size_t with_gt = 0;
  int64_t uncounted = 0, uncounted_categories = 0;
  for (const auto& c : m.categories) {
    with_gt += c.ground_truth > 0;
    if (c.ground_truth == 0 && c.detections > 0) {
      uncounted += c.detections;
      ++uncounted_categories;
    }
  }
  if (const size_t ig = ignored_boxes(gt)) std::printf("ignored: %zu box(es) just below the reference's threshold (--reference-margin)\n", ig);
  std::printf("ground truth: %zu box(es) in %zu image(s), %zu categor%s (%s)\n", gt.boxes.size() - ignored_boxes(gt), gt.images.size(), with_gt,
              with_gt == 1 ? "y" : "ies", a.reference.empty() ? a.annotations.c_str() : ("the detections of " + a.reference).c_str());
  std::printf("detections: %zu%s\n", detections,
              a.model.empty() ? "" : (" (score >= " + std::to_string(a.score_threshold).substr(0, 5) + ", at most 100 per image)").c_str());
  if (outside) std::printf("  %lld detection(s) with a label past the annotation file's categories, dropped\n", static_cast<long long>(outside));
  if (gt_boxes) {
    std::printf("matched at IoU 0.5 (same category): %lld of %lld ground-truth box(es), %.1f %%\n", static_cast<long long>(matched),
                static_cast<long long>(gt_boxes), 100.0 * static_cast<double>(matched) / static_cast<double>(gt_boxes));
  }
  std::printf("COCO metrics (IoU 0.50:0.95 unless named; maxDets 100 unless named; - where nothing counts):\n ");
  for (const char* n : names) std::printf(" %9s", n);
  std::printf("\n ");
  for (double v : values) std::printf("    %s", metric_text(v).c_str());
  std::printf("\nper category (area all, maxDets 100):\n  %-16s %12s %10s %11s %7s %7s %7s\n", "category", "ground truth", "detections", "matched@.5",
              "AP", "AP50", "AR100");
  for (const auto& c : m.categories) {
    if (c.ground_truth == 0) continue;
    std::printf("  %-16s %12lld %10lld %11lld %s %s %s\n", category_name(a, gt, c.category).c_str(), static_cast<long long>(c.ground_truth),
                static_cast<long long>(c.detections), static_cast<long long>(c.matched50), metric_text(c.ap).c_str(), metric_text(c.ap50).c_str(),
                metric_text(c.ar100).c_str());
  }
  if (uncounted) {
    std::printf("  %lld detection(s) in %lld categor%s without ground truth: not counted (COCO's rule)\n", static_cast<long long>(uncounted),
                static_cast<long long>(uncounted_categories), uncounted_categories == 1 ? "y" : "ies");
  }
}

void run_eval(const EvalArgs& a) {
  if (!a.results.empty()) {
    if (!a.model.empty() || !a.reference.empty() || !a.images.empty()) {
      fail(invalid("--results evaluates detections made elsewhere: give it with --annotations only (no MODEL, --images or --reference)"));
    }
    if (a.annotations.empty()) fail(invalid("--results needs --annotations"));
    const auto gt = take(workflows::read_coco_annotations(a.annotations));
    const auto dets = take(workflows::read_coco_results(a.results));
    check(workflows::check_results_against(gt, dets, a.results, a.annotations));
    print_result(a, workflows::evaluate_results(gt, dets), gt, dets.size(), 0);
    return;
  }
  if (a.model.empty()) fail(invalid("eval needs MODEL (or --results DETECTIONS.json)"));
  if (a.images.empty()) fail(invalid("eval needs --images DIR"));
  if (a.annotations.empty() == a.reference.empty()) fail(invalid("eval needs one of --annotations COCO.json and --reference MODEL"));
  OutputTransaction out_tx({a.model, a.images, a.annotations, a.reference, a.config, a.reference_config});
  const std::string det_tmp = a.detections_out.empty() ? "" : take(out_tx.file(a.detections_out));
  workflows::EvalOptions o;
  o.images = a.images;
  o.annotations = a.annotations;
  o.reference = a.reference;
  o.config = a.config;
  o.reference_config = a.reference_config;
  o.score_threshold = a.score_threshold;
  o.reference_margin = a.reference_margin;
  o.max_images = a.max_images;
  o.load.exec.threads = a.threads;
  apply_backend(a.backend, o.load.compile, o.load.exec);
  const auto r = take(workflows::evaluate_model(a.model, o));
  if (!a.json)
    std::printf("eval: %s, backend %s, %zu photo(s) of %s\n", a.model.c_str(), backend_description(a.backend).c_str(), r.ground_truth.images.size(),
                a.images.c_str());
  print_result(a, r.metrics, r.ground_truth, r.detections.size(), r.labels_outside);
  if (!a.detections_out.empty()) {
    write_text(det_tmp, workflows::coco_results_json(r.detections));
    check(out_tx.publish());
    if (!a.json) std::printf("wrote %s\n", a.detections_out.c_str());
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* c = app.add_subcommand(
      "eval", "COCO detection metrics: rkdeploy eval MODEL --images DIR (--annotations COCO.json | --reference FLOAT_MODEL) [--config CFG]");
  c->add_option("model", a->model, "the model to evaluate (ONNX, TFLite or TensorFlow.js)");
  c->add_option("--images", a->images, "folder of photos (with --reference: every .png/.jpg/.jpeg/.bmp in it)");
  c->add_option("--annotations", a->annotations, "ground truth in COCO's annotation format (images' file_name inside --images)");
  c->add_option("--reference", a->reference, "ground truth = this model's detections (float, on the CPU, at its config's score threshold)");
  c->add_option("--config", a->config, "detector config JSON of MODEL (docs/detector-config.md)");
  c->add_option("--reference-config", a->reference_config, "detector config of the reference model (default: --config)");
  c->add_option("--score-threshold", a->score_threshold, "MODEL's detections above this score count (default 0.001)")->check(finite_range(0.0, 1.0));
  c->add_option("--reference-margin", a->reference_margin,
                "with --reference: its detections within this much below its threshold are ignored ground truth, neither required nor false "
                "(default 0)")
      ->check(finite_range(0.0, 1.0));
  c->add_option("--max-images", a->max_images, "the first N images only (0 = all)")->check(CLI::Range(0, kMaxCount));
  c->add_option("--detections", a->detections_out, "write MODEL's detections in COCO's results format to this file");
  c->add_option("--results", a->results, "evaluate these detections (COCO results format) against --annotations instead of running a model");
  c->add_option("--classes", a->classes, "category names with --reference: coco (default) or ids")->check(CLI::IsMember({"coco", "ids"}));
  add_backend_options(c, a->backend);
  add_threads_option(c, a->threads, "threads (0 = all cores)");
  c->add_flag("--json", a->json, "print JSON (docs/cli-json.md)");
  c->callback([a] { run_eval(*a); });
}

}  // namespace rkd::cli
