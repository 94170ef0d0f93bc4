// Calibration driver (contract in quantize.h).
#include "workflows/quantize.h"

#include <algorithm>
#include <filesystem>

#include "core/npy.h"
#include "core/progress.h"
#include "runtime/executor.h"
#include "runtime/model.h"

namespace rkd::workflows {

using namespace runtime;  // NOLINT: the layer below (executor, model loading, detector pre- and post-processing)

namespace fs = std::filesystem;

Result<std::vector<Sample>> load_calibration(const CalibrationInput& in, const ir::Graph& model) {
  std::vector<Sample> out;
  std::error_code ec;
  if (fs::is_directory(in.path, ec)) {
    RKD_ASSIGN(std::vector<std::string> photos, list_photos(in.path));
    if (static_cast<int>(photos.size()) > in.max_images) photos.resize(static_cast<size_t>(in.max_images));
    RKD_ASSIGN(const DetectorConfig cfg, detector_config(model, in.config));
    const bool deim = takes_target_sizes(model);
    for (const std::string& p : photos) {
      RKD_ASSIGN(Image img, load_image(p));
      RKD_ASSIGN(Prepared prep, preprocess(img, cfg, deim));
      out.push_back(std::move(prep.inputs));
    }
    return out;
  }
  RKD_ASSIGN(TensorMap m, read_npz(in.path));
  if (m.empty()) return invalid(in.path + ": the .npz holds no arrays");
  int64_t n = -1;
  for (const auto& [name, t] : m) {
    if (t.rank() < 1) return invalid(in.path + ": member '" + name + "' needs a leading sample axis");
    if (n >= 0 && t.dim(0) != n) return invalid(in.path + ": members hold different sample counts");
    n = t.dim(0);
  }
  for (const ir::Value* v : model.inputs) {
    if (!m.count(v->name)) return invalid(in.path + ": no member named like the model input '" + v->name + "'");
  }
  for (int64_t i = 0; i < std::min<int64_t>(n, in.max_images); ++i) {
    Sample s;
    for (const auto& [name, t] : m) {
      RKD_ASSIGN(Tensor one, t.slice(0, i, i + 1));
      s[name] = one.contiguous();
    }
    out.push_back(std::move(s));
  }
  return out;
}

int expose_all_float_values(ir::Graph& g) {
  int added = 0;
  std::set<const ir::Value*> outs(g.outputs.begin(), g.outputs.end());
  for (const auto& n : g.nodes()) {
    for (ir::Value* v : n->outputs) {
      if (v && v->dtype == DType::f32 && !outs.count(v)) {
        g.outputs.push_back(v);
        outs.insert(v);
        ++added;
      }
    }
  }
  return added;
}

Result<std::unique_ptr<ir::Graph>> load_portable(const std::string& path) {
  RKD_ASSIGN(ImportedModel imp, import_model(path, 1));
  auto g = std::make_unique<ir::Graph>(std::move(imp.graph));
  CompileOptions co;
  co.portable = true;
  Status s = optimize(*g, co);
  if (!s.ok()) return s.error().with_context(path);
  return g;
}

Result<std::unique_ptr<ir::Graph>> load_with_all_values(const std::string& path, size_t* model_outputs) {
  RKD_ASSIGN(auto g, load_portable(path));
  if (model_outputs) *model_outputs = g->outputs.size();
  expose_all_float_values(*g);
  return g;
}

Result<QuantizedModel> quantize_model(const std::string& model_path, const std::vector<Sample>& calibration, const QuantizeOptions& opt) {
  if (calibration.empty()) return invalid(model_path + ": no calibration samples");
  QuantizedModel q;
  RKD_ASSIGN(q.graph, load_portable(model_path));
  RKD_TRY(quant::check_keep_float(*q.graph, opt.qdq.keep_float));
  RKD_ASSIGN(auto probe, load_with_all_values(model_path));
  ExecutorOptions eo;
  eo.threads = opt.threads;
  RKD_TRY(check_graph_inputs(*probe, calibration.front()));
  RKD_ASSIGN(auto ex, Executor::create(*probe, eo));
  std::map<std::string, quant::TensorStats> stats;
  const int passes = opt.method == quant::CalibMethod::minmax ? 1 : 2;
  const int total = static_cast<int>(calibration.size());
  for (int pass = 1; pass <= passes; ++pass) {
    for (int i = 0; i < total; ++i) {
      auto out = ex->run(calibration[static_cast<size_t>(i)]);
      if (!out.ok()) return out.error().with_context(model_path + ": calibration sample " + std::to_string(i));
      // Graph inputs are activations too.
      for (const auto& [name, t] : calibration[static_cast<size_t>(i)]) {
        if (t.dtype() == DType::f32) out->emplace(name, t);
      }
      for (const auto& [name, t] : *out) {
        if (t.dtype() != DType::f32) continue;
        if (pass == 1) stats[name].observe_minmax(t);
        else stats[name].observe_histogram(t);
      }
      report_progress(passes == 1 ? "calibrating" : pass == 1 ? "calibrating: ranges" : "calibrating: histograms", i + 1, total);
    }
  }
  int64_t chosen = 0;
  for (const auto& [name, st] : stats) {
    if (st.seen()) q.ranges[name] = st.choose_range(opt.method, opt.percentile, opt.qdq.symmetric_activations);
    report_progress(std::string("choosing ranges (") + quant::calib_method_name(opt.method) + ")", ++chosen, static_cast<int64_t>(stats.size()));
  }
  RKD_ASSIGN(q.report, quant::insert_qdq(*q.graph, q.ranges, opt.qdq));
  q.samples = total;
  return q;
}

}  // namespace rkd::workflows
