// COCO detection metrics (bounding boxes), with the rules of COCO's own evaluation
// (cocodataset/cocoapi PythonAPI/pycocotools/cocoeval.py, iouType "bbox", useCats 1), so that
// a number rkdeploy prints is the number the COCO tools would print for the same boxes.
//
// Contract (what COCO's definition says, in the order it is applied):
//  - Boxes are [x, y, w, h] in pixels; IoU = intersection / union with no +1 pixel. A crowd
//    ground-truth box (iscrowd = 1) is matched by intersection / detection area instead.
//  - Ground truth area is the annotation's `area` (a segment's area in COCO's own files); a
//    detection's area is w * h. Area ranges: all [0, 1e10], small [0, 32^2], medium
//    [32^2, 96^2], large [96^2, 1e10]; a ground truth box is ignored in a range when it is
//    crowd (or flagged `ignore`) or its area lies outside the range (bounds included).
//  - Per image and category: detections sorted by score (descending, stable: equal scores
//    keep their input order), the first maxDets kept (COCO applies maxDets per image and
//    category). For each IoU threshold t in {0.50, 0.55, ..., 0.95}, detections in that order
//    each take the best still-unmatched ground truth with IoU >= t (crowd boxes can be matched
//    any number of times; an ignored box only when no unignored one qualifies). A detection
//    matched to an ignored box is ignored; an unmatched one whose area is outside the range
//    is ignored too.
//  - Per category, area range and maxDets: all images' kept detections merged by score
//    (stable), true and false positives accumulated, precision made monotone from the right,
//    and read at the 101 recall points 0, 0.01, ..., 1 (first index whose recall >= the
//    point, 0 past the last); recall = matched / unignored ground truth. A category without
//    unignored ground truth in that range counts nowhere (-1); with ground truth and no
//    detection it counts 0.
//  - Summary: AP = mean precision over thresholds, recall points and categories (entries
//    that count); AP50 / AP75 the same at one threshold; AR@k = mean recall over thresholds
//    and categories with maxDets k. -1 when nothing counts (e.g. no ground truth at all).
//  - Detections of categories outside `categories` are dropped; images outside `images` too.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace rkd::quant {

struct GroundTruthBox {
  int64_t image = 0, category = 0;
  double x = 0, y = 0, w = 0, h = 0;
  double area = 0;  // COCO's `area` field (w * h for boxes without a segment)
  bool crowd = false;
  // Ignored like a crowd box (a detection matched to it is neither true nor false; it is not
  // counted as missed) but matched with the ordinary IoU, once: the reference detections just
  // below the reference's threshold (`eval --reference-margin`). Not in COCO's files.
  bool ignore = false;
};

struct DetectionBox {
  int64_t image = 0, category = 0;
  double x = 0, y = 0, w = 0, h = 0;
  double score = 0;
};

// The twelve numbers COCO's summarize() prints, in its order.
struct CocoSummary {
  double ap = -1, ap50 = -1, ap75 = -1, ap_small = -1, ap_medium = -1, ap_large = -1;
  double ar1 = -1, ar10 = -1, ar100 = -1, ar_small = -1, ar_medium = -1, ar_large = -1;
  std::array<double, 12> values() const { return {ap, ap50, ap75, ap_small, ap_medium, ap_large, ar1, ar10, ar100, ar_small, ar_medium, ar_large}; }
  static const std::array<const char*, 12>& names();  // "AP", "AP50", ..., "AR_large"
};

struct CategoryResult {
  int64_t category = 0;
  int64_t ground_truth = 0;  // unignored ground truth boxes (area all)
  int64_t detections = 0;    // detections kept (maxDets 100 per image)
  int64_t matched50 = 0;     // of those, matched at IoU 0.5
  double ap = -1, ap50 = -1, ar100 = -1;
};

struct CocoEvaluation {
  CocoSummary summary;
  std::vector<CategoryResult> categories;  // in the order of `categories`
  // Sums over the categories: unignored ground truth boxes, and those matched at IoU 0.5.
  int64_t ground_truth() const;
  int64_t matched50() const;
};

struct CocoParams {
  int max_dets_small = 1, max_dets_medium = 10, max_dets = 100;  // COCO's maxDets [1, 10, 100]
};

CocoEvaluation evaluate_coco(const std::vector<GroundTruthBox>& ground_truth, const std::vector<DetectionBox>& detections,
                             const std::vector<int64_t>& images, const std::vector<int64_t>& categories, const CocoParams& params = {});

// COCO's IoU thresholds 0.50:0.05:0.95 and recall points 0:0.01:1, computed as NumPy's
// linspace computes them (the comparisons are exact, so the values must be the same doubles).
const std::array<double, 10>& coco_iou_thresholds();
const std::array<double, 101>& coco_recall_points();

}  // namespace rkd::quant
