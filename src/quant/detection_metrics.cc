// COCO detection metrics (contract in detection_metrics.h).
#include "quant/detection_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

namespace rkd::quant {

const std::array<const char*, 12>& CocoSummary::names() {
  static const std::array<const char*, 12> n = {"AP",  "AP50", "AP75",  "AP_small", "AP_medium", "AP_large",
                                                "AR1", "AR10", "AR100", "AR_small", "AR_medium", "AR_large"};
  return n;
}

const std::array<double, 10>& coco_iou_thresholds() {
  static const std::array<double, 10> t = [] {
    std::array<double, 10> a{};
    const double step = (0.95 - 0.5) / 9.0;
    for (int i = 0; i < 10; ++i) a[static_cast<size_t>(i)] = static_cast<double>(i) * step + 0.5;
    a[9] = 0.95;
    return a;
  }();
  return t;
}

const std::array<double, 101>& coco_recall_points() {
  static const std::array<double, 101> r = [] {
    std::array<double, 101> a{};
    const double step = 1.0 / 100.0;
    for (int i = 0; i < 101; ++i) a[static_cast<size_t>(i)] = static_cast<double>(i) * step + 0.0;
    a[100] = 1.0;
    return a;
  }();
  return r;
}

namespace {

constexpr int kThresholds = 10;
constexpr int kAreas = 4;
constexpr double kAreaRanges[kAreas][2] = {{0, 1e10}, {0, 32.0 * 32.0}, {32.0 * 32.0, 96.0 * 96.0}, {96.0 * 96.0, 1e10}};

double iou(const DetectionBox& d, const GroundTruthBox& g) {
  const double iw = std::min(d.x + d.w, g.x + g.w) - std::max(d.x, g.x);
  const double ih = std::min(d.y + d.h, g.y + g.h) - std::max(d.y, g.y);
  if (iw <= 0 || ih <= 0) return 0;
  const double inter = iw * ih;
  const double u = g.crowd ? d.w * d.h : d.w * d.h + g.w * g.h - inter;
  return u > 0 ? inter / u : 0;
}

// One image and category in one area range: COCO's evaluateImg.
struct ImageResult {
  std::vector<double> scores;                          // kept detections, score order
  std::vector<std::array<bool, kThresholds>> matched;  // per detection and threshold
  std::vector<std::array<bool, kThresholds>> ignored;
  int64_t unignored_gt = 0;
};

ImageResult evaluate_image(const std::vector<const GroundTruthBox*>& gt, const std::vector<const DetectionBox*>& dt,
                           const std::vector<std::vector<double>>& ious, int area) {
  const double lo = kAreaRanges[area][0], hi = kAreaRanges[area][1];
  // Ground truth: unignored first, each group in input order (a stable sort on the flag).
  std::vector<size_t> gorder(gt.size());
  std::iota(gorder.begin(), gorder.end(), size_t{0});
  std::vector<bool> gignore(gt.size());
  for (size_t g = 0; g < gt.size(); ++g) gignore[g] = gt[g]->crowd || gt[g]->ignore || gt[g]->area < lo || gt[g]->area > hi;
  std::stable_sort(gorder.begin(), gorder.end(), [&](size_t a, size_t b) { return !gignore[a] && gignore[b]; });
  ImageResult r;
  for (size_t g = 0; g < gt.size(); ++g) r.unignored_gt += !gignore[g];
  const auto& thresholds = coco_iou_thresholds();
  r.scores.resize(dt.size());
  r.matched.assign(dt.size(), {});
  r.ignored.assign(dt.size(), {});
  for (size_t d = 0; d < dt.size(); ++d) r.scores[d] = dt[d]->score;
  for (int t = 0; t < kThresholds; ++t) {
    std::vector<bool> gt_taken(gt.size(), false);  // by position in gorder
    for (size_t d = 0; d < dt.size(); ++d) {
      double best = std::min(thresholds[static_cast<size_t>(t)], 1 - 1e-10);
      int m = -1;
      for (size_t gi = 0; gi < gorder.size(); ++gi) {
        const size_t g = gorder[gi];
        if (gt_taken[gi] && !gt[g]->crowd) continue;
        // Once an unignored box is matched, ignored ones (sorted last) cannot take over.
        if (m > -1 && !gignore[gorder[static_cast<size_t>(m)]] && gignore[g]) break;
        if (ious[d][g] < best) continue;
        best = ious[d][g];
        m = static_cast<int>(gi);
      }
      if (m == -1) continue;
      r.ignored[d][static_cast<size_t>(t)] = gignore[gorder[static_cast<size_t>(m)]];
      r.matched[d][static_cast<size_t>(t)] = true;
      gt_taken[static_cast<size_t>(m)] = true;
    }
    for (size_t d = 0; d < dt.size(); ++d) {
      const double a = dt[d]->w * dt[d]->h;
      if (!r.matched[d][static_cast<size_t>(t)] && (a < lo || a > hi)) r.ignored[d][static_cast<size_t>(t)] = true;
    }
  }
  return r;
}

// COCO's accumulate() for one category, area range and maxDets: the mean precision over the
// 101 recall points (per threshold) and the final recall (per threshold); nullopt when the
// category has no unignored ground truth (the -1 entries).
struct Accumulated {
  bool counts = false;
  std::array<double, kThresholds> precision{}, recall{};
  int64_t matched50 = 0;
};

Accumulated accumulate(const std::vector<const ImageResult*>& images, size_t max_dets) {
  Accumulated acc;
  int64_t npig = 0;
  struct Entry {
    double score;
    size_t image, det;
  };
  std::vector<Entry> entries;
  for (size_t i = 0; i < images.size(); ++i) {
    npig += images[i]->unignored_gt;
    for (size_t d = 0; d < std::min(max_dets, images[i]->scores.size()); ++d) entries.push_back({images[i]->scores[d], i, d});
  }
  if (npig == 0) return acc;
  acc.counts = true;
  // NumPy's argsort(-scores, kind='mergesort'): stable.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.score > b.score; });
  const auto& points = coco_recall_points();
  const double eps = std::numeric_limits<double>::epsilon();  // np.spacing(1)
  for (int t = 0; t < kThresholds; ++t) {
    std::vector<double> rc, pr;
    double tp = 0, fp = 0;
    for (const Entry& e : entries) {
      const ImageResult& r = *images[e.image];
      if (r.ignored[e.det][static_cast<size_t>(t)]) {
        // Ignored detections do not move the cumulative sums but keep their place.
      } else if (r.matched[e.det][static_cast<size_t>(t)]) {
        tp += 1;
      } else {
        fp += 1;
      }
      rc.push_back(tp / static_cast<double>(npig));
      pr.push_back(tp / (fp + tp + eps));
    }
    if (t == 0) acc.matched50 = static_cast<int64_t>(tp);
    acc.recall[static_cast<size_t>(t)] = rc.empty() ? 0 : rc.back();
    for (size_t i = pr.size(); i-- > 1;) {
      if (pr[i] > pr[i - 1]) pr[i - 1] = pr[i];
    }
    double sum = 0;
    for (double p : points) {
      const size_t at = static_cast<size_t>(std::lower_bound(rc.begin(), rc.end(), p) - rc.begin());
      if (at < pr.size()) sum += pr[at];
    }
    acc.precision[static_cast<size_t>(t)] = sum / static_cast<double>(points.size());
  }
  return acc;
}

struct Mean {
  double sum = 0;
  int64_t n = 0;
  void add(double v) {
    sum += v;
    ++n;
  }
  double value() const { return n ? sum / static_cast<double>(n) : -1; }
};

}  // namespace

CocoEvaluation evaluate_coco(const std::vector<GroundTruthBox>& ground_truth, const std::vector<DetectionBox>& detections,
                             const std::vector<int64_t>& images, const std::vector<int64_t>& categories, const CocoParams& params) {
  std::map<int64_t, size_t> image_index, category_index;
  for (int64_t id : images) image_index.emplace(id, image_index.size());
  for (int64_t id : categories) category_index.emplace(id, category_index.size());
  const size_t I = image_index.size(), K = category_index.size();
  std::vector<int64_t> category_ids(K);
  for (const auto& [id, k] : category_index) category_ids[k] = id;
  std::vector<std::vector<const GroundTruthBox*>> gts(I * K);
  std::vector<std::vector<const DetectionBox*>> dts(I * K);
  for (const GroundTruthBox& g : ground_truth) {
    auto i = image_index.find(g.image);
    auto k = category_index.find(g.category);
    if (i != image_index.end() && k != category_index.end()) gts[k->second * I + i->second].push_back(&g);
  }
  for (const DetectionBox& d : detections) {
    auto i = image_index.find(d.image);
    auto k = category_index.find(d.category);
    if (i != image_index.end() && k != category_index.end()) dts[k->second * I + i->second].push_back(&d);
  }
  const size_t max_dets = static_cast<size_t>(std::max(params.max_dets, 0));
  // Per (category, image): detections by score, the first max_dets; IoU with every box.
  std::vector<std::vector<ImageResult>> results(kAreas, std::vector<ImageResult>(I * K));
  std::vector<bool> present(I * K, false);
  for (size_t c = 0; c < I * K; ++c) {
    auto& dt = dts[c];
    std::stable_sort(dt.begin(), dt.end(), [](const DetectionBox* a, const DetectionBox* b) { return a->score > b->score; });
    if (dt.size() > max_dets) dt.resize(max_dets);
    if (gts[c].empty() && dt.empty()) continue;
    present[c] = true;
    std::vector<std::vector<double>> ious(dt.size(), std::vector<double>(gts[c].size()));
    for (size_t d = 0; d < dt.size(); ++d) {
      for (size_t g = 0; g < gts[c].size(); ++g) ious[d][g] = iou(*dt[d], *gts[c][g]);
    }
    for (int a = 0; a < kAreas; ++a) results[static_cast<size_t>(a)][c] = evaluate_image(gts[c], dt, ious, a);
  }
  CocoEvaluation ev;
  // summary means, by (area, maxDets): [area][0..2] for maxDets small/medium/max.
  Mean ap[kAreas][3], ap50, ap75, ar[kAreas][3];
  const size_t md[3] = {static_cast<size_t>(std::max(params.max_dets_small, 0)), static_cast<size_t>(std::max(params.max_dets_medium, 0)), max_dets};
  for (size_t k = 0; k < K; ++k) {
    CategoryResult cr;
    cr.category = category_ids[k];
    for (size_t i = 0; i < I; ++i) cr.detections += static_cast<int64_t>(dts[k * I + i].size());
    for (int a = 0; a < kAreas; ++a) {
      std::vector<const ImageResult*> imgs;
      for (size_t i = 0; i < I; ++i) {
        if (present[k * I + i]) imgs.push_back(&results[static_cast<size_t>(a)][k * I + i]);
      }
      if (imgs.empty()) continue;
      for (int m = 0; m < 3; ++m) {
        const Accumulated acc = accumulate(imgs, md[m]);
        if (!acc.counts) continue;
        for (int t = 0; t < kThresholds; ++t) {
          ap[a][m].add(acc.precision[static_cast<size_t>(t)]);
          ar[a][m].add(acc.recall[static_cast<size_t>(t)]);
        }
        if (a == 0 && m == 2) {
          ap50.add(acc.precision[0]);
          ap75.add(acc.precision[5]);
          Mean c_ap, c_ar;
          for (int t = 0; t < kThresholds; ++t) {
            c_ap.add(acc.precision[static_cast<size_t>(t)]);
            c_ar.add(acc.recall[static_cast<size_t>(t)]);
          }
          cr.ap = c_ap.value();
          cr.ap50 = acc.precision[0];
          cr.ar100 = c_ar.value();
          cr.matched50 = acc.matched50;
        }
      }
      if (a == 0) {
        for (const ImageResult* r : imgs) cr.ground_truth += r->unignored_gt;
      }
    }
    ev.categories.push_back(cr);
  }
  CocoSummary& s = ev.summary;
  s.ap = ap[0][2].value();
  s.ap50 = ap50.value();
  s.ap75 = ap75.value();
  s.ap_small = ap[1][2].value();
  s.ap_medium = ap[2][2].value();
  s.ap_large = ap[3][2].value();
  s.ar1 = ar[0][0].value();
  s.ar10 = ar[0][1].value();
  s.ar100 = ar[0][2].value();
  s.ar_small = ar[1][2].value();
  s.ar_medium = ar[2][2].value();
  s.ar_large = ar[3][2].value();
  return ev;
}

int64_t CocoEvaluation::ground_truth() const {
  int64_t n = 0;
  for (const CategoryResult& c : categories) n += c.ground_truth;
  return n;
}

int64_t CocoEvaluation::matched50() const {
  int64_t n = 0;
  for (const CategoryResult& c : categories) n += c.matched50;
  return n;
}

}  // namespace rkd::quant
