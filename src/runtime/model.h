// Loading a model file into a ready-to-run executor, and the input contracts of the
// detector families rkdeploy knows.
//
// Contract:
//  - load_model() imports the file (ONNX, TFLite, TF.js), binds a symbolic batch dimension to
//    LoadOptions::batch (1 when 0), runs optimize() (executor.h) and creates the
//    Executor; an artifact (.rkd) goes to load_artifact() (load_artifact.h). Errors name the
//    file.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "frontends/import.h"
#include "ir/ir.h"
#include "runtime/detect.h"
#include "runtime/executor.h"
#include "runtime/load_artifact.h"

namespace rkd::runtime {

Result<LoadedModel> load_model(const std::string& path, const LoadOptions& opt);

// The import step of load_model alone (frontends/import.h), folding with the executor's
// kernels. batch <= 0 leaves ONNX's symbolic batch unbound.
using frontends::ImportedModel;
Result<ImportedModel> import_model(const std::string& path, int64_t batch);

// A model's inputs: a photo preprocessed by the detector config (`config`, or the default for
// the model; a DEIM-style model also gets orig_target_sizes), or NAME=FILE.npy specs - one of
// the two. Errors name the spec or file.
Result<std::map<std::string, Tensor>> model_inputs(const std::string& model, const std::string& image, const std::string& config,
                                                   const std::vector<std::string>& specs);
// For measurements (bench, plan): check_detector_inputs, and no input whose elements are all
// equal (an all-zero image takes one path through data-dependent ops such as TopK).
Status check_real_inputs(const std::map<std::string, Tensor>& inputs);

}  // namespace rkd::runtime
