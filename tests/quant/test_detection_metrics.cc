// COCO detection metrics on hand-worked cases: each expected number is derived in the comment
// above it from COCO's definition (detection_metrics.h). tests/cli/test_eval_coco.py checks
// random cases against a second implementation.
#include <gtest/gtest.h>

#include "quant/detection_metrics.h"

namespace rkd::quant {
namespace {

GroundTruthBox gt(int64_t image, int64_t cat, double x, double y, double w, double h, bool crowd = false) {
  return GroundTruthBox{image, cat, x, y, w, h, w * h, crowd};
}
DetectionBox det(int64_t image, int64_t cat, double x, double y, double w, double h, double score) {
  return DetectionBox{image, cat, x, y, w, h, score};
}

TEST(CocoMetrics, PerfectDetectionIsOne) {
  const auto e = evaluate_coco({gt(1, 1, 10, 10, 50, 50)}, {det(1, 1, 10, 10, 50, 50, 0.9)}, {1}, {1});
  EXPECT_DOUBLE_EQ(e.summary.ap, 1.0);
  EXPECT_DOUBLE_EQ(e.summary.ap50, 1.0);
  EXPECT_DOUBLE_EQ(e.summary.ar1, 1.0);
  // 50 x 50 = 2500 px: medium (1024 .. 9216); nothing small or large counts.
  EXPECT_DOUBLE_EQ(e.summary.ap_medium, 1.0);
  EXPECT_EQ(e.summary.ap_small, -1);
  EXPECT_EQ(e.summary.ap_large, -1);
  ASSERT_EQ(e.categories.size(), 1u);
  EXPECT_EQ(e.categories[0].ground_truth, 1);
  EXPECT_EQ(e.categories[0].matched50, 1);
}

TEST(CocoMetrics, NoGroundTruthAtAllIsMinusOne) {
  const auto e = evaluate_coco({}, {det(1, 1, 0, 0, 10, 10, 0.5)}, {1}, {1});
  for (double v : e.summary.values()) EXPECT_EQ(v, -1);
}

TEST(CocoMetrics, FalsePositiveOnAnEmptyImageHalvesPrecision) {
  // Image 2 has no ground truth; its detection (0.95) ranks before the true one (0.9):
  // tp = [0, 1], fp = [1, 1] -> recall [0, 1], precision [0, 0.5], made monotone [0.5, 0.5];
  // every recall point reads 0.5, at every threshold.
  const auto e = evaluate_coco({gt(1, 1, 0, 0, 40, 40)}, {det(1, 1, 0, 0, 40, 40, 0.9), det(2, 1, 0, 0, 40, 40, 0.95)}, {1, 2}, {1});
  EXPECT_DOUBLE_EQ(e.summary.ap, 0.5);
  EXPECT_DOUBLE_EQ(e.summary.ar100, 1.0);
}

TEST(CocoMetrics, EqualScoresKeepTheirOrder) {
  // Across images the images' order decides (COCO concatenates per image, then sorts
  // stably): the true detection of image 1 ranks first whatever the input order -> AP 1.
  const std::vector<GroundTruthBox> g = {gt(1, 1, 0, 0, 40, 40)};
  EXPECT_DOUBLE_EQ(evaluate_coco(g, {det(2, 1, 0, 0, 40, 40, 0.5), det(1, 1, 0, 0, 40, 40, 0.5)}, {1, 2}, {1}).summary.ap, 1.0);
  // Within an image the input order decides. A = the box itself, B = [0, 0, 40, 25] (IoU
  // 0.625: a match at thresholds 0.50, 0.55, 0.60). A first: A matches everywhere, B is false
  // after it -> 1. B first: at those three thresholds B matches and A is false after it (1);
  // at the seven others B is false before A (0.5) -> (3 + 3.5) / 10.
  const DetectionBox a = det(1, 1, 0, 0, 40, 40, 0.5), b = det(1, 1, 0, 0, 40, 25, 0.5);
  EXPECT_DOUBLE_EQ(evaluate_coco(g, {a, b}, {1}, {1}).summary.ap, 1.0);
  EXPECT_DOUBLE_EQ(evaluate_coco(g, {b, a}, {1}, {1}).summary.ap, 0.65);
}

TEST(CocoMetrics, DetectionsInACrowdAreIgnoredNotFalse) {
  // A crowd region and one person; two detections inside the crowd match it (intersection
  // over the detection's area = 1, matched twice) and are ignored; the person's detection
  // is the only one that counts: AP 1. Without the crowd flag one of them would be false.
  const std::vector<GroundTruthBox> g = {gt(1, 1, 0, 0, 200, 200, true), gt(1, 1, 300, 300, 40, 40)};
  const std::vector<DetectionBox> d = {det(1, 1, 10, 10, 30, 30, 0.99), det(1, 1, 60, 60, 30, 30, 0.98), det(1, 1, 300, 300, 40, 40, 0.5)};
  const auto e = evaluate_coco(g, d, {1}, {1});
  EXPECT_DOUBLE_EQ(e.summary.ap, 1.0);
  EXPECT_EQ(e.categories[0].ground_truth, 1);
  auto no_crowd = g;
  no_crowd[0].crowd = false;
  EXPECT_LT(evaluate_coco(no_crowd, d, {1}, {1}).summary.ap, 1.0);
}

TEST(CocoMetrics, IgnoredBoxesAbsorbOneDetectionAndAreNotMissed) {
  // A = a box to find, B = an ignored box (a reference detection just below its threshold).
  GroundTruthBox b = gt(1, 1, 100, 100, 40, 40);
  b.ignore = true;
  const std::vector<GroundTruthBox> g = {gt(1, 1, 0, 0, 40, 40), b};
  // A detection on B (0.9) is neither true nor false: A's (0.8) ranks first among the counted -> 1.
  EXPECT_DOUBLE_EQ(evaluate_coco(g, {det(1, 1, 100, 100, 40, 40, 0.9), det(1, 1, 0, 0, 40, 40, 0.8)}, {1}, {1}).summary.ap, 1.0);
  // Without B the same detection is false and ranks first: 0.5.
  EXPECT_DOUBLE_EQ(evaluate_coco({g[0]}, {det(1, 1, 100, 100, 40, 40, 0.9), det(1, 1, 0, 0, 40, 40, 0.8)}, {1}, {1}).summary.ap, 0.5);
  // Not found, B is not missed: AR 1.
  EXPECT_DOUBLE_EQ(evaluate_coco(g, {det(1, 1, 0, 0, 40, 40, 0.8)}, {1}, {1}).summary.ar100, 1.0);
  // Unlike a crowd box it absorbs one detection: the second on B is false -> 0.5.
  EXPECT_DOUBLE_EQ(
      evaluate_coco(g, {det(1, 1, 100, 100, 40, 40, 0.95), det(1, 1, 100, 100, 40, 40, 0.9), det(1, 1, 0, 0, 40, 40, 0.8)}, {1}, {1}).summary.ap,
      0.5);
}

TEST(CocoMetrics, CategoryWithoutGroundTruthCountsNowhere) {
  // Category 2 has only a false detection: it has no ground truth, so it is left out of
  // the mean (-1), and category 1's AP is the summary's.
  const auto e = evaluate_coco({gt(1, 1, 0, 0, 40, 40)}, {det(1, 1, 0, 0, 40, 40, 0.9), det(1, 2, 50, 50, 40, 40, 0.99)}, {1}, {1, 2});
  EXPECT_DOUBLE_EQ(e.summary.ap, 1.0);
  EXPECT_EQ(e.categories[1].ap, -1);
  EXPECT_EQ(e.categories[1].detections, 1);
  // A category with ground truth and no detection counts 0.
  const auto missed = evaluate_coco({gt(1, 1, 0, 0, 40, 40), gt(1, 2, 50, 50, 40, 40)}, {det(1, 1, 0, 0, 40, 40, 0.9)}, {1}, {1, 2});
  EXPECT_DOUBLE_EQ(missed.summary.ap, 0.5);
  EXPECT_DOUBLE_EQ(missed.categories[1].ap, 0.0);
}

TEST(CocoMetrics, AreaBoundsBelongToBothRanges) {
  // 32 x 32 = 1024 is both small ([0, 1024]) and medium ([1024, 9216]); 96 x 96 both medium
  // and large.
  const auto s = evaluate_coco({gt(1, 1, 0, 0, 32, 32)}, {det(1, 1, 0, 0, 32, 32, 0.9)}, {1}, {1});
  EXPECT_DOUBLE_EQ(s.summary.ap_small, 1.0);
  EXPECT_DOUBLE_EQ(s.summary.ap_medium, 1.0);
  EXPECT_EQ(s.summary.ap_large, -1);
  const auto l = evaluate_coco({gt(1, 1, 0, 0, 96, 96)}, {det(1, 1, 0, 0, 96, 96, 0.9)}, {1}, {1});
  EXPECT_EQ(l.summary.ap_small, -1);
  EXPECT_DOUBLE_EQ(l.summary.ap_medium, 1.0);
  EXPECT_DOUBLE_EQ(l.summary.ap_large, 1.0);
}

TEST(CocoMetrics, UnmatchedDetectionOutsideTheRangeIsIgnored) {
  // A small true box and a large false detection: in the small range the false one is
  // outside the range and ignored (AP_small 1); over all areas it ranks first and costs.
  const auto e = evaluate_coco({gt(1, 1, 0, 0, 20, 20)}, {det(1, 1, 0, 0, 20, 20, 0.5), det(1, 1, 100, 100, 150, 150, 0.9)}, {1}, {1});
  EXPECT_DOUBLE_EQ(e.summary.ap_small, 1.0);
  EXPECT_DOUBLE_EQ(e.summary.ap, 0.5);
}

TEST(CocoMetrics, IouOfExactlyOneHalfMatchesAtTheFirstThresholdOnly) {
  // [0, 0, 10, 10] against [0, 0, 10, 20]: IoU 100 / 200 = 0.5, matched at 0.50 only:
  // precision 1 at one threshold of ten.
  const auto e = evaluate_coco({gt(1, 1, 0, 0, 10, 20)}, {det(1, 1, 0, 0, 10, 10, 0.9)}, {1}, {1});
  EXPECT_DOUBLE_EQ(e.summary.ap50, 1.0);
  EXPECT_DOUBLE_EQ(e.summary.ap75, 0.0);
  EXPECT_DOUBLE_EQ(e.summary.ap, 0.1);
}

TEST(CocoMetrics, MaxDetsLimitsRecall) {
  // Two boxes, two perfect detections in one image: AR@1 sees one of them (recall 0.5).
  const std::vector<GroundTruthBox> g = {gt(1, 1, 0, 0, 40, 40), gt(1, 1, 100, 100, 40, 40)};
  const auto e = evaluate_coco(g, {det(1, 1, 0, 0, 40, 40, 0.9), det(1, 1, 100, 100, 40, 40, 0.8)}, {1}, {1});
  EXPECT_DOUBLE_EQ(e.summary.ar1, 0.5);
  EXPECT_DOUBLE_EQ(e.summary.ar10, 1.0);
}

TEST(CocoMetrics, ThresholdsAreNumPysLinspace) {
  // The values NumPy's linspace gives (the comparisons with them are exact).
  EXPECT_EQ(coco_iou_thresholds()[0], 0.5);
  EXPECT_EQ(coco_iou_thresholds()[5], 0.75);
  EXPECT_EQ(coco_iou_thresholds()[9], 0.95);
  EXPECT_EQ(coco_iou_thresholds()[8], 0.8999999999999999);
  EXPECT_EQ(coco_recall_points()[35], 35 * 0.01);
  EXPECT_NE(coco_recall_points()[35], 0.35);
}

}  // namespace
}  // namespace rkd::quant
