#include "workflows/run.h"

#include <algorithm>
#include <chrono>

namespace rkd::workflows {

namespace {

// Runs the loaded model `repeat` times on `inputs`: the last run's outputs, the runs after the
// first timed.
Status run_repeated(RunResult& r, const std::map<std::string, Tensor>& inputs, int repeat) {
  RKD_ASSIGN(r.outputs, r.model.executor->run(inputs));
  for (int i = 1; i < repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    RKD_ASSIGN(r.outputs, r.model.executor->run(inputs));
    r.warm_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(r.warm_ms.begin(), r.warm_ms.end());
  return {};
}

}  // namespace

Result<RunResult> run_tensors(const std::string& model, const std::map<std::string, Tensor>& inputs, RunOptions o) {
  if (o.repeat < 1) return invalid("run: --repeat must be at least 1");
  RKD_TRY(runtime::check_run_inputs(inputs, o.allow_nonfinite));
  o.load.batch = 0;
  for (const auto& [name, t] : inputs) {
    if (t.rank() > 0) {
      o.load.batch = t.dim(0);
      break;
    }
  }
  o.load.inputs = &inputs;
  RunResult r;
  RKD_ASSIGN(r.model, runtime::load_model(model, o.load));
  if (o.loaded) o.loaded(r.model);
  RKD_TRY(run_repeated(r, inputs, o.repeat));
  return r;
}

Result<PhotoRun> run_photo(const std::string& model, const std::string& image, const std::string& config, RunOptions o) {
  if (o.repeat < 1) return invalid("run: --repeat must be at least 1");
  PhotoRun p;
  RKD_ASSIGN(p.image, runtime::load_image(image));
  o.load.batch = 1;
  o.load.inputs = nullptr;
  RKD_ASSIGN(p.run.model, runtime::load_model(model, o.load));
  if (o.loaded) o.loaded(p.run.model);
  RKD_ASSIGN(p.config, runtime::detector_config(*p.run.model.graph, config));
  RKD_ASSIGN(const runtime::Prepared prep, runtime::preprocess(p.image, p.config, runtime::takes_target_sizes(*p.run.model.graph)));
  RKD_TRY(runtime::check_detector_inputs(prep.inputs));
  RKD_TRY(run_repeated(p.run, prep.inputs, o.repeat));
  RKD_ASSIGN(p.detections, runtime::postprocess(p.run.outputs, p.config, prep, p.image));
  return p;
}

}  // namespace rkd::workflows
