// Importing a model file by its type: the one place that picks the importer.
//
// Contract:
//  - TensorFlow.js for a model.json path (tfjs::is_tfjs_path), TFLite for a .tflite file
//    (tflite::is_tflite_path), ONNX otherwise; errors name the file (the importer's own).
//  - `batch` > 0 binds ONNX's symbolic batch dimension (TF.js: the batch of its placeholders,
//    1 when <= 0); `evaluate` (the executor's kernels, injected: frontends run nothing of
//    their own) folds constant subgraphs while importing TF.js and TFLite.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "ir/ir.h"
#include "ir/pass.h"

namespace rkd::frontends {

struct ImportedModel {
  ir::Graph graph;
  std::vector<std::string> notes;
  int64_t ir_version = 0;  // ONNX only
};

Result<ImportedModel> import_file(const std::string& path, int64_t batch, const ir::NodeEvaluator& evaluate);

}  // namespace rkd::frontends
