// rkdeploy run: a model on one back end, from tensors or from a photo.
//
// Contract:
//  - run_tensors() checks the inputs (check_detector_inputs; every element finite unless
//    allow_nonfinite), binds the batch to the first input's, loads the model with
//    RunOptions::load (its batch and inputs set here), calls `loaded` once it is loaded (the
//    caller's reports), runs it `repeat` times and returns the last run's outputs; runs after
//    the first are timed (the first warms caches).
//  - run_photo() loads the photo and the model, preprocesses the photo by the detector config
//    (`config`, or the model's default), runs `repeat` times and decodes the last run's outputs
//    into detections (runtime/detect.h).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "runtime/detect.h"
#include "runtime/detector_config.h"
#include "runtime/model.h"

namespace rkd::workflows {

struct RunOptions {
  runtime::LoadOptions load;  // back end, fusion, threads, profiling
  int repeat = 1;
  bool allow_nonfinite = false;
  std::function<void(const runtime::LoadedModel&)> loaded;
};

struct RunResult {
  runtime::LoadedModel model;
  std::map<std::string, Tensor> outputs;  // the last run's
  std::vector<double> warm_ms;            // each run after the first, sorted
};

Result<RunResult> run_tensors(const std::string& model, const std::map<std::string, Tensor>& inputs, RunOptions o);

struct PhotoRun {
  runtime::Image image;
  runtime::DetectorConfig config;
  std::vector<runtime::Detection> detections;
  RunResult run;
};

Result<PhotoRun> run_photo(const std::string& model, const std::string& image, const std::string& config, RunOptions o);

}  // namespace rkd::workflows
