// Post-training quantization of a float model (`rkdeploy quantize`) and the float/quantized
// pair runs that accuracy analysis needs.
//
// Contract:
//  - open_calibration(): a folder of photos (.png/.jpg/.jpeg, sorted by name, the first
//    max_images; each preprocessed by the detector config, docs/detector-config.md) or an
//    .npz whose members are named like the model's inputs and hold the samples along the
//    first axis (sample i = index i of every member, batch 1). Errors name the file. Photos
//    are decoded when a sample is asked for, so a set holds one photo's tensors at a time
//    (an .npz is in memory: it is read whole).
//  - quantize_model(): imports the model, compiles it `portable` (standard ONNX, folded,
//    BatchNorm folded into convolutions), runs every calibration sample through it (two
//    passes unless the method is minmax) and streams every float value a node computes, and
//    the float graph inputs, into per-tensor statistics as it is computed (the executor's
//    observer: no value outlives its node), chooses ranges (quant/calibrate.h) and rewrites
//    the graph to QDQ (quant/qdq.h). Each sample's float inputs are checked finite unless
//    allow_nonfinite. The result is ready for onnx_frontend::export_onnx_file().
//  - Progress: the callback gets (pass, samples done, samples total).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "ir/ir.h"
#include "quant/calibrate.h"
#include "plan/plan.h"
#include "quant/qdq.h"
#include "runtime/detect.h"

namespace rkd::workflows {

using Sample = std::map<std::string, Tensor>;

struct CalibrationInput {
  std::string path;  // folder of photos or .npz
  int max_images = 100;
  std::string config;  // detector config JSON ("" = defaults from the model)
};

class CalibrationSet {
 public:
  int size() const { return static_cast<int>(photos_.empty() ? samples_.size() : photos_.size()); }
  // Sample i (0 <= i < size()); a photo's decoding error names the file.
  Result<Sample> sample(int i) const;
  // A folder of photos (not an .npz): photo i decoded and preprocessed, and the config.
  bool has_photos() const { return !photos_.empty(); }
  Result<std::pair<runtime::Image, runtime::Prepared>> photo(int i) const { return prepare(photos_.at(static_cast<size_t>(i))); }
  // Any photo, preprocessed as the set's photos are.
  Result<std::pair<runtime::Image, runtime::Prepared>> prepare(const std::string& path) const;
  const runtime::DetectorConfig& config() const { return config_; }

 private:
  friend Result<CalibrationSet> open_calibration(const CalibrationInput& in, const ir::Graph& model);
  // The same for the model file `model_path` (imported here as load_portable() does, to learn its
  // inputs and default detector config).
  Result<CalibrationSet> open_calibration_for(const std::string& model_path, const CalibrationInput& in);
  // Samples given as tensors (batch 1 each; the Python package's arrays): every one must hold a
  // tensor named like each model input (the error names `source` and the sample).
  Result<CalibrationSet> calibration_from_samples(std::vector<Sample> samples, const ir::Graph& model, const std::string& source);
  friend Result<CalibrationSet> calibration_from_samples(std::vector<Sample> samples, const ir::Graph& model, const std::string& source);
  std::vector<std::string> photos_;
  runtime::DetectorConfig config_;
  bool deim_ = false;
  std::vector<Sample> samples_;  // from an .npz
};

Result<CalibrationSet> open_calibration(const CalibrationInput& in, const ir::Graph& model);
// The same for the model file `model_path` (imported here as load_portable() does, to learn its
// inputs and default detector config).
Result<CalibrationSet> open_calibration_for(const std::string& model_path, const CalibrationInput& in);
// Samples given as tensors (batch 1 each; the Python package's arrays): every one must hold a
// tensor named like each model input (the error names `source` and the sample).
Result<CalibrationSet> calibration_from_samples(std::vector<Sample> samples, const ir::Graph& model, const std::string& source);

// quantize --auto-hybrid: the smallest set of the most sensitive layers computed in float that
// brings the quantized model's detections to `min_ap50` against the float model's.
//  - Judged on the calibration photos, or the photos of HybridOptions::images (the calibration
//    set must be a folder of photos either way; its detector config must decode detections):
//    ground truth = the float model's detections at the config's threshold, the quantized
//    model's taken above 0.001; COCO's AP50 (quant/detection_metrics.h).
//  - Sensitivity of a layer: the AP50 (ties: the AP), on at most 24 of the photos evenly
//    spaced, when only its value is quantized (fake-quantized in the
//    float model with the parameters the QDQ graph gives it; ExecutorOptions::rewrite). Layers
//    are the quantized activations computed by nodes that do work (not copies, not views).
//  - Search: the k most sensitive layers' nodes in float (QdqOptions::keep_float), k = 0, 1,
//    2, 4, ... until the QDQ model (run as ONNX defines it, the CPU back end) reaches
//    min_ap50, then bisection between the last two k (AP50 taken as rising with k). Every
//    layer in float and still short: an error saying so.
struct HybridOptions {
  double min_ap50 = 0;  // 0: off
  std::string images;   // photos the search judges on (quantize --hybrid-images); "": the calibration photos
};
struct HybridLayer {
  std::string node, op;
  double ap50_alone = 1, ap_alone = 1;  // AP50 and AP@[.5:.95] with only this layer quantized
};
struct HybridReport {
  double ap50_all = 0, ap50 = 0;  // every layer quantized; with `kept` in float
  int layers = 0, evaluations = 0, photos = 0;
  std::vector<HybridLayer> kept;  // most sensitive first
};

struct QuantizeOptions {
  quant::CalibMethod method = quant::CalibMethod::minmax;
  double percentile = 99.99;
  quant::QdqOptions qdq;
  int threads = 0;
  // Set: only what this target runs on its NPU is quantized (quantize --target; see
  // cpu_placed_nodes). Unset: every op the QDQ rules reach (--target none).
  std::optional<plan::Target> target;
  HybridOptions hybrid;
  bool allow_nonfinite = false;  // calibration inputs may hold NaN or infinity
  std::string source;            // names the calibration set in errors
};

struct QuantizedModel {
  std::unique_ptr<ir::Graph> graph;  // QDQ, standard ONNX
  quant::QdqReport report;
  // With a target: the nodes kept in float because it runs them on its CPU, by op type.
  std::map<std::string, int> cpu_placed;
  std::optional<HybridReport> hybrid;
  std::unique_ptr<ir::Graph> all_int8;  // with hybrid: the same quantization without the hybrid layers in float
  std::map<std::string, quant::Range> ranges;
  int samples = 0;
};

// The options' ranges, for every caller (the command line checks them while parsing too):
// percentile in [50, 100], hybrid.min_ap50 in [0, 1] (0: no search), threads as
// check_thread_count. An invalid error names the option.
Status check_quantize_options(const QuantizeOptions& opt);
Result<QuantizedModel> quantize_model(const std::string& model_path, const CalibrationSet& calibration, const QuantizeOptions& opt);

// What `quantize --json` reports of a quantization (docs/cli-json.md, "quantize"), as JSON text:
// every field but the command's own (command, model, output) and the planned trade-off of
// --auto-hybrid. `target` as the user named it ("none" without one).
std::string quantize_summary_json(const QuantizedModel& q, const QuantizeOptions& opt, const std::string& target);

// The --auto-hybrid search (HybridOptions), starting from the quantization `qdq` describes.
Result<HybridReport> search_hybrid(const std::string& model_path, const CalibrationSet& calibration,
                                   const std::map<std::string, quant::Range>& ranges, const quant::QdqOptions& qdq, const QuantizeOptions& opt);

// The nodes of a portable float graph that `t` runs off its NPU, or on it only in a form its
// runtime does not lower yet (plan::place on the node as written): quantizing them buys no
// NPU time, so they compute in float (QdqOptions::keep_float). Listed are nodes with a float
// output that do work of their own: views (t's zero-cost ops) and copies (Concat, Split,
// Slice, Transpose, MaxPool... quant/qdq.h's shared-scale ops) follow their inputs instead.
std::vector<const ir::Node*> cpu_placed_nodes(const ir::Graph& g, const plan::Target& t);

// Imports `path` (ONNX, TFLite, TF.js) and compiles it portably (runtime::CompileOptions::
// portable: standard ONNX, folded, BatchNorm folded into convolutions): what quantize
// calibrates and `rkdeploy export` writes.
Result<std::unique_ptr<ir::Graph>> load_portable(const std::string& path);

}  // namespace rkd::workflows
