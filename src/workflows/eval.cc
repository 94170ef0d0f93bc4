// Detection-level evaluation (contract in eval.h).
#include "workflows/eval.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/json_fields.h"
#include "core/json_style.h"
#include "core/npy.h"
#include "core/progress.h"
#include "runtime/detect.h"

namespace rkd::workflows {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// bbox [x, y, w, h]: four finite numbers, w and h >= 0.
Status read_bbox(const json& e, const std::string& name, double& x, double& y, double& w, double& h) {
  double out[4];
  if (!e.contains("bbox")) return invalid(name + ": no field 'bbox'");
  const json& b = e["bbox"];
  if (!b.is_array() || b.size() != 4) return invalid(name + ".bbox: needs 4 numbers [x, y, w, h]");
  for (size_t k = 0; k < 4; ++k) {
    if (!b[k].is_number()) return invalid(name + ".bbox: needs 4 numbers [x, y, w, h]");
    out[k] = b[k].get<double>();
    if (!std::isfinite(out[k])) return invalid(name + ".bbox: not finite");
  }
  if (out[2] < 0 || out[3] < 0) return invalid(name + ".bbox: negative width or height");
  x = out[0];
  y = out[1];
  w = out[2];
  h = out[3];
  return {};
}

Status required_integer(const json& e, const char* key, int64_t& into, const std::string& name) {
  if (!e.contains(key)) return invalid(name + ": no field '" + key + "'");
  return json_integer(e, key, into, name + "." + key);
}

Result<json> parse_json(const std::string& text, const std::string& path) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return invalid(path + ": not valid JSON");
  return j;
}

}  // namespace

Result<CocoDataset> parse_coco_annotations(const std::string& text, const std::string& path) {
  RKD_ASSIGN(const json j, parse_json(text, path));
  if (!j.is_object()) return invalid(path + ": a COCO annotation file is a JSON object");
  for (const char* key : {"images", "annotations", "categories"}) {
    if (!j.contains(key) || !j[key].is_array()) return invalid(path + ": field '" + key + "' must be an array");
  }
  CocoDataset d;
  std::set<int64_t> image_ids;
  for (size_t i = 0; i < j["images"].size(); ++i) {
    const json& e = j["images"][i];
    const std::string name = path + ": images[" + std::to_string(i) + "]";
    if (!e.is_object()) return invalid(name + ": must be an object");
    CocoImage img;
    RKD_TRY(required_integer(e, "id", img.id, name));
    if (!e.contains("file_name")) return invalid(name + ": no field 'file_name'");
    RKD_TRY(json_string(e, "file_name", img.file_name, name + ".file_name"));
    if (!image_ids.insert(img.id).second) return invalid(name + ": image id " + std::to_string(img.id) + " given twice");
    d.images.push_back(std::move(img));
  }
  std::set<int64_t> category_ids;
  for (size_t i = 0; i < j["categories"].size(); ++i) {
    const json& e = j["categories"][i];
    const std::string name = path + ": categories[" + std::to_string(i) + "]";
    if (!e.is_object()) return invalid(name + ": must be an object");
    int64_t id = 0;
    RKD_TRY(required_integer(e, "id", id, name));
    if (!category_ids.insert(id).second) return invalid(name + ": category id " + std::to_string(id) + " given twice");
    std::string cname;
    RKD_TRY(json_string(e, "name", cname, name + ".name"));
    if (!cname.empty()) d.category_names[id] = cname;
  }
  d.categories.assign(category_ids.begin(), category_ids.end());
  std::set<int64_t> annotation_ids;
  for (size_t i = 0; i < j["annotations"].size(); ++i) {
    const json& e = j["annotations"][i];
    const std::string name = path + ": annotations[" + std::to_string(i) + "]";
    if (!e.is_object()) return invalid(name + ": must be an object");
    quant::GroundTruthBox g;
    RKD_TRY(required_integer(e, "image_id", g.image, name));
    RKD_TRY(required_integer(e, "category_id", g.category, name));
    if (e.contains("id")) {
      int64_t id = 0;
      RKD_TRY(required_integer(e, "id", id, name));
      if (!annotation_ids.insert(id).second) return invalid(name + ": annotation id " + std::to_string(id) + " given twice");
    }
    if (!image_ids.count(g.image)) return invalid(name + ": image_id " + std::to_string(g.image) + " is not among the file's images");
    if (!category_ids.count(g.category)) return invalid(name + ": category_id " + std::to_string(g.category) + " is not among the file's categories");
    RKD_TRY(read_bbox(e, name, g.x, g.y, g.w, g.h));
    g.area = g.w * g.h;
    RKD_TRY(json_number(e, "area", g.area, name + ".area"));
    if (!std::isfinite(g.area) || g.area < 0) return invalid(name + ".area: must be finite and >= 0");
    int64_t crowd = 0;
    RKD_TRY(json_integer(e, "iscrowd", crowd, name + ".iscrowd"));
    if (crowd != 0 && crowd != 1) return invalid(name + ".iscrowd: must be 0 or 1");
    g.crowd = crowd == 1;
    d.boxes.push_back(g);
  }
  return d;
}

Result<CocoDataset> read_coco_annotations(const std::string& path) {
  RKD_ASSIGN(const std::string text, read_file_bytes(path));
  return parse_coco_annotations(text, path);
}

Result<std::vector<quant::DetectionBox>> parse_coco_results(const std::string& text, const std::string& path) {
  RKD_ASSIGN(const json j, parse_json(text, path));
  if (!j.is_array()) return invalid(path + ": a COCO results file is a JSON array");
  std::vector<quant::DetectionBox> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& e = j[i];
    const std::string name = path + ": [" + std::to_string(i) + "]";
    if (!e.is_object()) return invalid(name + ": must be an object");
    quant::DetectionBox d;
    RKD_TRY(required_integer(e, "image_id", d.image, name));
    RKD_TRY(required_integer(e, "category_id", d.category, name));
    RKD_TRY(read_bbox(e, name, d.x, d.y, d.w, d.h));
    if (!e.contains("score")) return invalid(name + ": no field 'score'");
    RKD_TRY(json_number(e, "score", d.score, name + ".score"));
    if (!std::isfinite(d.score)) return invalid(name + ".score: not finite");
    out.push_back(d);
  }
  return out;
}

Result<std::vector<quant::DetectionBox>> read_coco_results(const std::string& path) {
  RKD_ASSIGN(const std::string text, read_file_bytes(path));
  return parse_coco_results(text, path);
}

std::string coco_results_json(const std::vector<quant::DetectionBox>& detections) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& d : detections) {
    arr.push_back({{"image_id", d.image}, {"category_id", d.category}, {"bbox", {d.x, d.y, d.w, d.h}}, {"score", d.score}});
  }
  return json_text(arr);
}

Status check_results_against(const CocoDataset& gt, const std::vector<quant::DetectionBox>& detections, const std::string& results_path,
                             const std::string& annotations_path) {
  std::set<int64_t> images;
  for (const CocoImage& i : gt.images) images.insert(i.id);
  const std::set<int64_t> categories(gt.categories.begin(), gt.categories.end());
  for (size_t k = 0; k < detections.size(); ++k) {
    const quant::DetectionBox& d = detections[k];
    const std::string name = results_path + ": [" + std::to_string(k) + "]";
    if (!images.count(d.image)) return invalid(name + ": image_id " + std::to_string(d.image) + " is not among the images of " + annotations_path);
    if (!categories.count(d.category)) {
      return invalid(name + ": category_id " + std::to_string(d.category) + " is not among the categories of " + annotations_path);
    }
  }
  return {};
}

quant::CocoEvaluation evaluate_results(const CocoDataset& gt, const std::vector<quant::DetectionBox>& detections) {
  std::vector<int64_t> images;
  for (const CocoImage& i : gt.images) images.push_back(i.id);
  std::sort(images.begin(), images.end());
  return quant::evaluate_coco(gt.boxes, detections, images, gt.categories);
}

namespace {

struct Detector {
  runtime::LoadedModel model;
  runtime::DetectorConfig config;
  bool target_sizes = false;
};

Result<Detector> load_detector(const std::string& path, const runtime::LoadOptions& lo, const std::string& config, float score_threshold) {
  Detector d;
  runtime::LoadOptions o = lo;
  o.batch = 1;
  RKD_ASSIGN(d.model, runtime::load_model(path, o));
  RKD_ASSIGN(d.config, runtime::detector_config(*d.model.graph, config));
  if (d.config.output == "none") {
    return invalid(path +
                   ": the detector config says output 'none' (no decoding): eval needs detections; name the output kind in --config "
                   "(docs/detector-config.md)");
  }
  if (score_threshold >= 0) d.config.score_threshold = score_threshold;
  d.config.max_detections = 100;
  d.target_sizes = runtime::takes_target_sizes(*d.model.graph);
  return d;
}

Result<std::vector<runtime::Detection>> detect(Detector& d, const runtime::Image& img, const std::string& photo) {
  RKD_ASSIGN(runtime::Prepared prep, runtime::preprocess(img, d.config, d.target_sizes));
  auto out = d.model.executor->run(prep.inputs);
  if (!out.ok()) return out.error().with_context(photo);
  auto dets = runtime::postprocess(*out, d.config, prep, img);
  if (!dets.ok()) return dets.error().with_context(photo);
  return dets;
}

}  // namespace

quant::DetectionBox to_box(const runtime::Detection& d, int64_t image, int64_t category) {
  quant::DetectionBox b;
  b.image = image;
  b.category = category;
  b.x = d.x0;
  b.y = d.y0;
  b.w = std::max(0.f, d.x1 - d.x0);
  b.h = std::max(0.f, d.y1 - d.y0);
  b.score = d.score;
  return b;
}

Result<EvalResult> evaluate_model(const std::string& model, const EvalOptions& opt) {
  if (opt.annotations.empty() == opt.reference.empty()) return invalid("eval: give either --annotations or --reference");
  EvalResult r;
  std::vector<std::pair<int64_t, std::string>> photos;  // image id, path
  if (!opt.annotations.empty()) {
    RKD_ASSIGN(r.ground_truth, read_coco_annotations(opt.annotations));
    for (const CocoImage& i : r.ground_truth.images) {
      RKD_ASSIGN(std::string p, path_inside_folder(opt.images, i.file_name, opt.annotations + ": image " + std::to_string(i.id) + " file_name"));
      photos.emplace_back(i.id, std::move(p));
    }
  } else {
    std::vector<std::string> files = opt.photos;
    if (files.empty()) {
      RKD_ASSIGN(files, runtime::list_photos(opt.images));
    }
    for (size_t i = 0; i < files.size(); ++i) {
      photos.emplace_back(static_cast<int64_t>(i) + 1, files[i]);
      r.ground_truth.images.push_back({static_cast<int64_t>(i) + 1, fs::path(files[i]).filename().string()});
    }
  }
  if (opt.max_images > 0 && static_cast<int>(photos.size()) > opt.max_images) {
    photos.resize(static_cast<size_t>(opt.max_images));
    r.ground_truth.images.resize(photos.size());
    std::set<int64_t> kept;
    for (const auto& [id, p] : photos) kept.insert(id);
    std::erase_if(r.ground_truth.boxes, [&](const quant::GroundTruthBox& b) { return !kept.count(b.image); });
  }
  if (photos.empty()) return invalid(opt.annotations + ": no images");
  RKD_ASSIGN(Detector evaluated, load_detector(model, opt.load, opt.config, opt.score_threshold));
  r.fusion = evaluated.model.fusion;
  r.notes = evaluated.model.notes;
  Detector reference;
  float reference_threshold = 0;
  if (!opt.reference.empty()) {
    runtime::LoadOptions ref_load;
    ref_load.exec.threads = opt.load.exec.threads;
    RKD_ASSIGN(reference, load_detector(opt.reference, ref_load, opt.reference_config.empty() ? opt.config : opt.reference_config, -1.f));
    reference_threshold = reference.config.score_threshold;
    reference.config.score_threshold = std::max(0.f, reference_threshold - opt.reference_margin);
  }
  std::set<int64_t> labels;
  const int64_t total = static_cast<int64_t>(photos.size());
  for (int64_t n = 0; n < total; ++n) {
    const auto& [id, path] = photos[static_cast<size_t>(n)];
    RKD_ASSIGN(const runtime::Image img, runtime::load_image(path));
    RKD_ASSIGN(const auto dets, detect(evaluated, img, path));
    for (const runtime::Detection& d : dets) {
      if (!opt.reference.empty()) {
        r.detections.push_back(to_box(d, id, d.label));
        labels.insert(d.label);
      } else if (d.label >= 0 && d.label < static_cast<int64_t>(r.ground_truth.categories.size())) {
        r.detections.push_back(to_box(d, id, r.ground_truth.categories[static_cast<size_t>(d.label)]));
      } else {
        ++r.labels_outside;
      }
    }
    if (!opt.reference.empty()) {
      RKD_ASSIGN(const auto ref, detect(reference, img, path));
      for (const runtime::Detection& d : ref) {
        const quant::DetectionBox b = to_box(d, id, d.label);
        r.ground_truth.boxes.push_back({b.image, b.category, b.x, b.y, b.w, b.h, b.w * b.h, false, d.score < reference_threshold});
        labels.insert(d.label);
      }
    }
    RKD_TRY(report_progress("evaluating", n + 1, total));
  }
  if (!opt.reference.empty()) r.ground_truth.categories.assign(labels.begin(), labels.end());
  r.metrics = evaluate_results(r.ground_truth, r.detections);
  return r;
}

}  // namespace rkd::workflows
