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

 private:
  friend Result<CalibrationSet> open_calibration(const CalibrationInput& in, const ir::Graph& model);
  std::vector<std::string> photos_;
  runtime::DetectorConfig config_;
  bool deim_ = false;
  std::vector<Sample> samples_;  // from an .npz
};

Result<CalibrationSet> open_calibration(const CalibrationInput& in, const ir::Graph& model);

struct QuantizeOptions {
  quant::CalibMethod method = quant::CalibMethod::minmax;
  double percentile = 99.99;
  quant::QdqOptions qdq;
  int threads = 0;
  // Set: only what this target runs on its NPU is quantized (quantize --target; see
  // cpu_placed_nodes). Unset: every op the QDQ rules reach (--target none).
  std::optional<plan::Target> target;
  bool allow_nonfinite = false;  // calibration inputs may hold NaN or infinity
  std::string source;            // names the calibration set in errors
};

struct QuantizedModel {
  std::unique_ptr<ir::Graph> graph;  // QDQ, standard ONNX
  quant::QdqReport report;
  // With a target: the nodes kept in float because it runs them on its CPU, by op type.
  std::map<std::string, int> cpu_placed;
  std::map<std::string, quant::Range> ranges;
  int samples = 0;
};

Result<QuantizedModel> quantize_model(const std::string& model_path, const CalibrationSet& calibration, const QuantizeOptions& opt);

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
// Imports and compiles `path` portably, then marks every float value computed by a node as
// a graph output so that one run returns all of them (calibration, accuracy analysis). The
// model's own outputs stay first: `model_outputs` (when given) receives their count.
Result<std::unique_ptr<ir::Graph>> load_with_all_values(const std::string& path, size_t* model_outputs = nullptr);
// The same for a graph already in memory (compiled portably); returns the output count added.
int expose_all_float_values(ir::Graph& g);

}  // namespace rkd::workflows
