// Detection-level evaluation of a model (`rkdeploy eval`): COCO metrics (quant/
// detection_metrics.h) of the model's detections on a folder of photos, against labels in
// COCO's annotation format or against the detections of a reference model (the float
// original of a quantized model: the users without labels, and our own tests).
//
// Contract:
//  - COCO annotation files (parse_coco_annotations): an object with "images" ({id,
//    file_name[, width, height]}), "annotations" ({image_id, category_id, bbox [x, y, w, h]
//    [, area (default w * h), iscrowd 0/1][, id]}) and "categories" ({id[, name]}). Every field is
//    checked (an annotation id given twice is refused: it would count the box twice); errors
//    name the file and the entry ("gt.json: annotations[3].bbox: ...").
//  - COCO results files (parse_coco_results / coco_results_json): an array of {image_id,
//    category_id, bbox [x, y, w, h], score}.
//  - Model labels and categories: with annotations, label k is the k-th category by id (the
//    contiguous labels of COCO-trained exports: 0 = person = id 1, ..., 79 = toothbrush =
//    id 90); a label past the last category is counted in EvalResult::labels_outside and
//    dropped. With a reference model, labels are the categories.
//  - evaluate_model(): every photo is decoded once and fed to each model through its
//    detector config (docs/detector-config.md). The evaluated model's detections are taken
//    above EvalOptions::score_threshold (default 0.001, as COCO evaluations do: the ranking
//    matters, not a cut), at most 100 per photo; the reference model's at its config's own
//    threshold, the boxes it would report (and, with reference_margin, those just below it as
//    ignored boxes). With a reference, every photo of the folder
//    (.png/.jpg/.jpeg/.bmp, sorted by name) is an image, ids 1..N in that order; with
//    annotations, the annotation file's images (their file_name inside the folder).
//  - Progress: report_progress("evaluating", photos done, photos).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/result.h"
#include "quant/detection_metrics.h"
#include "runtime/detect.h"
#include "runtime/model.h"

namespace rkd::workflows {

struct CocoImage {
  int64_t id = 0;
  std::string file_name;
};

struct CocoDataset {
  std::vector<CocoImage> images;
  std::vector<quant::GroundTruthBox> boxes;
  std::vector<int64_t> categories;                // sorted by id
  std::map<int64_t, std::string> category_names;  // id -> name (when the file gives one)
};

Result<CocoDataset> parse_coco_annotations(const std::string& text, const std::string& path);
Result<CocoDataset> read_coco_annotations(const std::string& path);
Result<std::vector<quant::DetectionBox>> parse_coco_results(const std::string& text, const std::string& path);
Result<std::vector<quant::DetectionBox>> read_coco_results(const std::string& path);
std::string coco_results_json(const std::vector<quant::DetectionBox>& detections);

struct EvalOptions {
  std::string images;               // folder of photos
  std::vector<std::string> photos;  // or these photos (with a reference; ids 1..N in this order)
  std::string annotations;          // COCO annotation file, or
  std::string reference;            // a reference model (run on the CPU in float)
  std::string config;               // detector config of the evaluated model ("" = the model's defaults)
  std::string reference_config;     // of the reference model ("" = config)
  runtime::LoadOptions load;        // the evaluated model's back end
  float score_threshold = 0.001f;
  // With a reference: its detections scoring in [threshold - margin, threshold) are ignored
  // ground truth (GroundTruthBox::ignore): a box the reference nearly reported is neither
  // required nor a false positive. 0: COCO's pure rule.
  float reference_margin = 0.f;
  int max_images = 0;  // 0: all
};

struct EvalResult {
  quant::CocoEvaluation metrics;
  CocoDataset ground_truth;  // the labels, or the reference's detections as boxes
  std::vector<quant::DetectionBox> detections;
  int64_t labels_outside = 0;
  std::vector<std::string> notes;  // what the back end placed where (sim, device)
  runtime::FusionReport fusion;
};

Result<EvalResult> evaluate_model(const std::string& model, const EvalOptions& opt);
// A detection as a COCO box [x, y, w, h] of `image` and `category`.
quant::DetectionBox to_box(const runtime::Detection& d, int64_t image, int64_t category);
// The metrics of detections given in COCO's results format against an annotation file.
// Refused first (check_results_against): a detection whose image_id is not among the annotation
// file's images or whose category_id is not among its categories (COCO's tools score against
// the annotations' ids; an id of another dataset would count as a miss, not as an error).
Status check_results_against(const CocoDataset& gt, const std::vector<quant::DetectionBox>& detections, const std::string& results_path,
                             const std::string& annotations_path);
quant::CocoEvaluation evaluate_results(const CocoDataset& gt, const std::vector<quant::DetectionBox>& detections);

}  // namespace rkd::workflows
