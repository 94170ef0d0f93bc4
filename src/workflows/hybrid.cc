// quantize --auto-hybrid (contract in quantize.h, HybridOptions).
#include <algorithm>
#include <cmath>

#include "core/progress.h"
#include "runtime/executor.h"
#include "workflows/accuracy.h"
#include "workflows/eval.h"
#include "workflows/quantize.h"

namespace rkd::workflows {

using namespace runtime;  // NOLINT: the layer below (executor, detector pre- and post-processing)

namespace {

// The sensitivity of each layer is judged on at most this many of the photos, evenly spaced
// (it costs one inference per layer and photo); the search judges on all of them.
constexpr size_t kSensitivityPhotos = 24;

// One quantized activation of the QDQ graph: the float value's name, its parameters, the node
// computing it.
struct Site {
  std::string value, node, op;
  quant::QParams params;
};

std::vector<Site> quantized_sites(ir::Graph& qdq, const ir::Graph& fp) {
  std::map<std::string, const ir::Node*> producer;
  for (const auto& n : fp.nodes()) {
    for (const ir::Value* v : n->outputs) {
      if (v) producer[v->name] = n.get();
    }
  }
  std::vector<Site> out;
  std::set<std::string> seen;
  for (const QdqSite& q : qdq_sites(qdq)) {
    auto it = producer.find(q.name);
    if (q.quantize->inputs[0]->constant || it == producer.end() || !seen.insert(q.name).second) continue;
    const ir::Node& p = *it->second;
    if (ir::op_has(p, ir::kSameScale) || ir::op_has(p, ir::kLayoutOnly) || p.op_type == "Concat") continue;  // copies follow their input
    Site s{q.name, p.name, p.op_type, {}};
    s.params.scale = static_cast<float>(q.scale);
    // The uint8 grid is the int8 grid shifted by 128 (quant/qdq.h).
    s.params.zero_point = static_cast<int32_t>(q.zp) - (q.qtype == DType::u8 ? 128 : 0);
    out.push_back(std::move(s));
  }
  return out;
}

struct Photo {
  Image image;
  Prepared prep;
};

// Detections of one executor over the photos as COCO boxes (image ids 1..N).
Result<std::vector<Detection>> detect_one(Executor& ex, const Photo& p, const DetectorConfig& cfg) {
  RKD_ASSIGN(auto out, ex.run(p.prep.inputs));
  return postprocess(out, cfg, p.prep, p.image);
}

}  // namespace

Result<HybridReport> search_hybrid(const std::string& model_path, const CalibrationSet& calibration,
                                   const std::map<std::string, quant::Range>& ranges, const quant::QdqOptions& qdq, const QuantizeOptions& opt) {
  if (!calibration.has_photos() || calibration.config().output == "none") {
    return invalid(model_path +
                   ": --auto-hybrid judges detections: it needs calibration photos (a folder, not an .npz) and a detector config that decodes them "
                   "(docs/detector-config.md)");
  }
  HybridReport rep;
  std::vector<Photo> photos;
  if (opt.hybrid.images.empty()) {
    for (int i = 0; i < calibration.size(); ++i) {
      RKD_ASSIGN(auto p, calibration.photo(i));
      photos.push_back({std::move(p.first), std::move(p.second)});
    }
  } else {
    RKD_ASSIGN(const auto files, list_photos(opt.hybrid.images));
    for (const std::string& f : files) {
      RKD_ASSIGN(auto p, calibration.prepare(f));
      photos.push_back({std::move(p.first), std::move(p.second)});
    }
  }
  rep.photos = static_cast<int>(photos.size());
  DetectorConfig ref_cfg = calibration.config(), cfg = calibration.config();
  ref_cfg.max_detections = cfg.max_detections = 100;
  cfg.score_threshold = 0.001f;

  // Ground truth: the float model's detections.
  RKD_ASSIGN(auto fp, load_portable(model_path));
  ExecutorOptions eo;
  eo.threads = opt.threads;
  CocoDataset gt;
  std::set<int64_t> labels;
  {
    RKD_ASSIGN(auto ex, Executor::create(*fp, eo));
    for (size_t i = 0; i < photos.size(); ++i) {
      RKD_ASSIGN(auto dets, detect_one(*ex, photos[i], ref_cfg));
      gt.images.push_back({static_cast<int64_t>(i) + 1, ""});
      for (const Detection& d : dets) {
        const quant::DetectionBox b = to_box(d, static_cast<int64_t>(i) + 1, d.label);
        gt.boxes.push_back({b.image, b.category, b.x, b.y, b.w, b.h, b.w * b.h, false, false});
        labels.insert(d.label);
      }
    }
  }
  // (AP50, AP@[.5:.95]) of an executor's detections against the float model's, on the photos
  // `which` lists.
  std::vector<size_t> all(photos.size()), sample;
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  for (size_t k = 0; k < std::min(all.size(), kSensitivityPhotos); ++k) sample.push_back(k * all.size() / std::min(all.size(), kSensitivityPhotos));
  auto agreement = [&](Executor& ex, const std::vector<size_t>& which) -> Result<std::pair<double, double>> {
    std::vector<quant::DetectionBox> dets;
    std::set<int64_t> cats = labels;
    CocoDataset g;
    std::set<int64_t> images;
    for (size_t i : which) images.insert(static_cast<int64_t>(i) + 1);
    for (const auto& im : gt.images) {
      if (images.count(im.id)) g.images.push_back(im);
    }
    for (const auto& b : gt.boxes) {
      if (images.count(b.image)) g.boxes.push_back(b);
    }
    for (size_t i : which) {
      RKD_ASSIGN(auto ds, detect_one(ex, photos[i], cfg));
      for (const Detection& d : ds) {
        dets.push_back(to_box(d, static_cast<int64_t>(i) + 1, d.label));
        cats.insert(d.label);
      }
    }
    g.categories.assign(cats.begin(), cats.end());
    const quant::CocoEvaluation e = evaluate_results(g, dets);
    // No ground truth at all (the float model finds nothing): agreement means finding nothing.
    if (g.boxes.empty()) return dets.empty() ? std::pair{1.0, 1.0} : std::pair{0.0, 0.0};
    return std::pair{std::max(0.0, e.summary.ap50), std::max(0.0, e.summary.ap)};
  };

  // The QDQ model with `keep` in float, run as ONNX defines it.
  auto evaluate = [&](const std::set<std::string>& keep) -> Result<double> {
    RKD_ASSIGN(auto g, load_portable(model_path));
    quant::QdqOptions o = qdq;
    o.keep_float.insert(keep.begin(), keep.end());
    if (auto r = quant::insert_qdq(*g, ranges, o); !r.ok()) return r.error();
    CompileOptions co;
    co.portable = true;
    RKD_TRY(optimize(*g, co));
    RKD_ASSIGN(auto ex, Executor::create(*g, eo));
    ++rep.evaluations;
    RKD_ASSIGN(const auto a, agreement(*ex, all));
    return a.first;
  };

  // Sensitivity of every layer alone.
  std::vector<Site> sites;
  {
    RKD_ASSIGN(auto g, load_portable(model_path));
    if (auto r = quant::insert_qdq(*g, ranges, qdq); !r.ok()) return r.error();
    sites = quantized_sites(*g, *fp);
  }
  rep.layers = static_cast<int>(sites.size());
  std::vector<std::pair<double, double>> alone(sites.size(), {1.0, 1.0});
  {
    const Site* current = nullptr;
    ExecutorOptions so = eo;
    so.rewrite = [&](const ir::Value& v, Tensor& t) {
      if (!current || v.name != current->value || t.dtype() != DType::f32) return;
      float* p = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = quant::fake_quant(p[i], current->params);
    };
    RKD_ASSIGN(auto ex, Executor::create(*fp, so));
    for (size_t k = 0; k < sites.size(); ++k) {
      current = &sites[k];
      RKD_ASSIGN(alone[k], agreement(*ex, sample));
      RKD_TRY(report_progress("auto-hybrid: sensitivity", static_cast<int64_t>(k) + 1, static_cast<int64_t>(sites.size())));
    }
  }
  std::vector<size_t> order(sites.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  // Most sensitive first: the lowest AP50 alone, ties broken by the lowest AP (box precision).
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return alone[a] < alone[b]; });
  auto keep_of = [&](size_t k) {
    std::set<std::string> keep;
    for (size_t i = 0; i < k; ++i) keep.insert(sites[order[i]].node);
    return keep;
  };

  // Doubling, then bisection.
  RKD_ASSIGN(rep.ap50_all, evaluate({}));
  rep.ap50 = rep.ap50_all;
  size_t good = 0;
  if (rep.ap50_all < opt.hybrid.min_ap50) {
    size_t bad = 0, k = 1;
    double good_ap = -1;
    for (;; k = std::min(sites.size(), k * 2)) {
      RKD_ASSIGN(const double a, evaluate(keep_of(k)));
      RKD_TRY(report_progress("auto-hybrid: search", static_cast<int64_t>(k), static_cast<int64_t>(sites.size())));
      if (a >= opt.hybrid.min_ap50) {
        good = k;
        good_ap = a;
        break;
      }
      bad = k;
      if (k == sites.size()) {
        char buf[256];
        std::snprintf(buf, sizeof buf, ": --auto-hybrid %.3f: with all %zu quantized layers in float the AP50 against float is %.3f",
                      opt.hybrid.min_ap50, sites.size(), a);
        return invalid(model_path + buf);
      }
    }
    while (good - bad > 1) {
      const size_t mid = bad + (good - bad) / 2;
      RKD_ASSIGN(const double a, evaluate(keep_of(mid)));
      if (a >= opt.hybrid.min_ap50) {
        good = mid;
        good_ap = a;
      } else {
        bad = mid;
      }
    }
    rep.ap50 = good_ap;
  }
  for (size_t i = 0; i < good; ++i) rep.kept.push_back({sites[order[i]].node, sites[order[i]].op, alone[order[i]].first, alone[order[i]].second});
  return rep;
}

}  // namespace rkd::workflows
