// Calibration driver (contract in quantize.h).
#include "workflows/quantize.h"

#include <algorithm>
#include <filesystem>

#include <set>

#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "core/progress.h"
#include "ir/op_info.h"
#include "runtime/executor.h"
#include "runtime/model.h"

namespace rkd::workflows {

using namespace runtime;  // NOLINT: the layer below (executor, model loading, detector pre- and post-processing)

namespace fs = std::filesystem;

Result<Sample> CalibrationSet::sample(int i) const {
  if (photos_.empty()) return samples_.at(static_cast<size_t>(i));
  RKD_ASSIGN(Image img, load_image(photos_.at(static_cast<size_t>(i))));
  RKD_ASSIGN(Prepared prep, preprocess(img, config_, deim_));
  return std::move(prep.inputs);
}

Result<std::pair<Image, Prepared>> CalibrationSet::prepare(const std::string& path) const {
  RKD_ASSIGN(Image img, load_image(path));
  RKD_ASSIGN(Prepared prep, preprocess(img, config_, deim_));
  return std::pair<Image, Prepared>{std::move(img), std::move(prep)};
}

Result<CalibrationSet> open_calibration(const CalibrationInput& in, const ir::Graph& model) {
  CalibrationSet out;
  std::error_code ec;
  if (fs::is_directory(in.path, ec)) {
    RKD_ASSIGN(out.photos_, list_photos(in.path));
    if (static_cast<int>(out.photos_.size()) > in.max_images) out.photos_.resize(static_cast<size_t>(in.max_images));
    RKD_ASSIGN(out.config_, detector_config(model, in.config));
    out.deim_ = takes_target_sizes(model);
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
  std::vector<Sample> samples;
  for (int64_t i = 0; i < std::min<int64_t>(n, in.max_images); ++i) {
    Sample s;
    for (const auto& [name, t] : m) {
      RKD_ASSIGN(Tensor one, t.slice(0, i, i + 1));
      s[name] = one.contiguous();
    }
    samples.push_back(std::move(s));
  }
  return calibration_from_samples(std::move(samples), model, in.path);
}

Result<CalibrationSet> calibration_from_samples(std::vector<Sample> samples, const ir::Graph& model, const std::string& source) {
  if (samples.empty()) return invalid(source + ": no calibration sample");
  for (size_t i = 0; i < samples.size(); ++i) {
    for (const ir::Value* v : model.inputs) {
      if (!samples[i].count(v->name))
        return invalid(source + ": sample " + std::to_string(i) + " has no tensor named like the model input '" + v->name + "'");
    }
  }
  CalibrationSet out;
  out.samples_ = std::move(samples);
  return out;
}

Result<CalibrationSet> open_calibration_for(const std::string& model_path, const CalibrationInput& in) {
  RKD_ASSIGN(auto probe, load_portable(model_path));
  return open_calibration(in, *probe);
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

std::vector<const ir::Node*> cpu_placed_nodes(const ir::Graph& g, const plan::Target& t) {
  auto on_npu = [&](const ir::Node& n) {
    const plan::Placement p = plan::place(t, n);
    return p.device == plan::Device::npu && p.lowered;
  };
  // The bias Adds of the MatMuls the target runs on its NPU are those MatMuls' biases.
  std::set<const ir::Node*> biases;
  for (const auto& np : g.nodes()) {
    if (const ir::Node* a = quant::matmul_bias_add(g, *np); a && on_npu(*np)) biases.insert(a);
  }
  std::vector<const ir::Node*> out;
  for (const auto& np : g.nodes()) {
    const ir::Node& n = *np;
    if (ir::op_has(n, ir::kSameScale) || biases.count(&n)) continue;
    if (std::none_of(n.outputs.begin(), n.outputs.end(), [](const ir::Value* v) { return v && v->dtype == DType::f32; })) continue;
    const plan::Placement p = plan::place(t, n);
    if (p.zero_cost || (p.device == plan::Device::npu && p.lowered)) continue;
    out.push_back(&n);
  }
  return out;
}

Status check_quantize_options(const QuantizeOptions& opt) {
  if (!(opt.percentile >= 50 && opt.percentile <= 100))
    return invalid("quantize: percentile " + std::to_string(opt.percentile) + ": must be 50 to 100");
  if (!(opt.hybrid.min_ap50 >= 0 && opt.hybrid.min_ap50 <= 1)) {
    return invalid("quantize: auto-hybrid " + std::to_string(opt.hybrid.min_ap50) + ": must be an AP50 in [0, 1] (0: off)");
  }
  return check_thread_count(opt.threads, "quantize: threads");
}

Result<QuantizedModel> quantize_model(const std::string& model_path, const CalibrationSet& calibration, const QuantizeOptions& opt) {
  RKD_TRY(check_quantize_options(opt));
  const int total = calibration.size();
  if (total == 0) return invalid(model_path + ": no calibration samples");
  QuantizedModel q;
  RKD_ASSIGN(q.graph, load_portable(model_path));
  if (Status k = quant::check_keep_float(*q.graph, opt.qdq.keep_float); !k.ok()) {
    // Say what became of a name the passes folded away: the model as imported knows it.
    auto imported = runtime::import_model(model_path, 1);
    if (!imported.ok()) return k.error();
    const Status named = quant::check_keep_float(*q.graph, opt.qdq.keep_float, &imported->graph);
    return named.ok() ? k.error() : named.error();
  }
  RKD_ASSIGN(auto probe, load_portable(model_path));
  std::map<std::string, quant::TensorStats> stats;
  int pass = 1;
  ExecutorOptions eo;
  eo.threads = opt.threads;
  eo.observe = [&](const ir::Value& v, const Tensor& t) {
    if (t.dtype() != DType::f32) return;
    if (pass == 1) stats[v.name].observe_minmax(t);
    else stats[v.name].observe_histogram(t);
  };
  RKD_ASSIGN(auto ex, Executor::create(*probe, eo));
  const std::string source = opt.source.empty() ? model_path : opt.source;
  const int passes = opt.method == quant::CalibMethod::minmax ? 1 : 2;
  for (pass = 1; pass <= passes; ++pass) {
    for (int i = 0; i < total; ++i) {
      const std::string where = source + ": calibration sample " + std::to_string(i);
      RKD_ASSIGN(const Sample s, calibration.sample(i));
      if (pass == 1) {
        if (Status st = check_graph_inputs(*probe, s); !st.ok()) return st.error().with_context(where);
        if (!opt.allow_nonfinite) RKD_TRY(check_finite_inputs(s, where + ", input"));
      }
      auto out = ex->run(s);
      if (!out.ok()) return out.error().with_context(model_path + ": calibration sample " + std::to_string(i));
      // Graph inputs are activations too.
      for (const auto& [name, t] : s) {
        if (t.dtype() != DType::f32) continue;
        if (pass == 1) stats[name].observe_minmax(t);
        else stats[name].observe_histogram(t);
      }
      RKD_TRY(report_progress(passes == 1 ? "calibrating" : pass == 1 ? "calibrating: ranges" : "calibrating: histograms", i + 1, total));
    }
  }
  int64_t chosen = 0;
  for (const auto& [name, st] : stats) {
    if (st.seen()) q.ranges[name] = st.choose_range(opt.method, opt.percentile, opt.qdq.symmetric_activations);
    RKD_TRY(
        report_progress(std::string("choosing ranges (") + quant::calib_method_name(opt.method) + ")", ++chosen, static_cast<int64_t>(stats.size())));
  }
  quant::QdqOptions qo = opt.qdq;
  if (opt.target) {
    for (const ir::Node* n : cpu_placed_nodes(*q.graph, *opt.target)) {
      if (qo.cpu_nodes.insert(n->name).second) ++q.cpu_placed[n->op_type];
    }
  }
  if (opt.hybrid.min_ap50 > 0) {
    RKD_ASSIGN(HybridReport h, search_hybrid(model_path, calibration, q.ranges, qo, opt));
    RKD_ASSIGN(q.all_int8, load_portable(model_path));
    if (auto r = quant::insert_qdq(*q.all_int8, q.ranges, qo); !r.ok()) return r.error();
    for (const HybridLayer& l : h.kept) qo.keep_float.insert(l.node);
    q.hybrid = std::move(h);
  }
  RKD_ASSIGN(q.report, quant::insert_qdq(*q.graph, q.ranges, qo));
  q.samples = total;
  return q;
}

std::string quantize_summary_json(const QuantizedModel& q, const QuantizeOptions& opt, const std::string& target) {
  const quant::QdqReport& r = q.report;
  nlohmann::json j;
  j["samples"] = q.samples;
  j["method"] = quant::calib_method_name(opt.method);
  j["dtype"] = opt.qdq.dtype == DType::u8 ? "uint8" : "int8";
  j["weights"] = opt.qdq.per_channel ? "per-channel" : "per-tensor";
  j["activations"] = opt.qdq.symmetric_activations ? "symmetric" : "asymmetric";
  j["quantized_activations"] = r.activations;
  j["quantized_weights"] = r.weights;
  j["int32_biases"] = r.biases;
  j["bias_rescaled_channels"] = r.bias_rescaled;
  j["shared_scale_groups"] = r.shared_groups;
  j["fused_activations"] = r.fused_activations;
  j["mixed_range_concats"] = r.mixed_range_concats;
  j["collapse_kept"] = r.collapse_kept;
  j["float_selection"] = r.float_selection;
  j["float_decoder"] = r.float_decoder;
  if (q.hybrid) {
    nlohmann::json h;
    h["min_ap50"] = opt.hybrid.min_ap50;
    h["photos"] = q.hybrid->photos;
    h["layers"] = q.hybrid->layers;
    h["evaluations"] = q.hybrid->evaluations;
    h["ap50_all_quantized"] = q.hybrid->ap50_all;
    h["ap50"] = q.hybrid->ap50;
    h["kept_float"] = nlohmann::json::array();
    for (const auto& l : q.hybrid->kept)
      h["kept_float"].push_back({{"node", l.node}, {"op", l.op}, {"ap50_alone", l.ap50_alone}, {"ap_alone", l.ap_alone}});
    j["auto_hybrid"] = h;
  }
  j["kept_float"] = r.kept_float;
  j["target"] = target;
  j["cpu_placed"] = q.cpu_placed;
  j["warnings"] = r.warnings;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace rkd::workflows
