// An artifact of `rkdeploy compile -o MODEL.rkd` (artifact.h) loaded into a ready-to-run
// executor: the part of model loading the embeddable runtime (rkd_rt, the C API) has - no
// importer, no pass, no quantizer.
//
// Contract:
//  - load_artifact() reads and checks the file (read_artifact), runs its graph as stored (no
//    pass runs again) and creates the Executor. It needs the NPU's back ends
//    (LoadOptions::compile.int8 and npu_strategy set: the strategy is the artifact's, the
//    option only selects the back end); with compile.npu_mainline (a rocket device) the
//    artifact must have been compiled with --mainline. The NPU nodes are lowered again into
//    the executor's session; on the simulator (no exec.npu_device) that device memory must
//    equal the artifact's byte for byte, or an error names the first differing byte. Batch
//    is the compiled one (1). Errors name the file.
//  - carry_artifact_config(): the artifact's detector config into the graph's metadata, where
//    detector_config() (detect.h) finds it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "ir/ir.h"
#include "runtime/artifact.h"
#include "runtime/executor.h"

namespace rkd::runtime {

struct LoadOptions {
  int64_t batch = 0;  // 0: 1
  CompileOptions compile;
  ExecutorOptions exec;
  // When set: the inputs the model will be run with, checked against the imported graph's
  // inputs (check_graph_inputs) before any pass runs or kernel is prepared.
  const std::map<std::string, Tensor>* inputs = nullptr;
};

struct LoadedModel {
  std::unique_ptr<ir::Graph> graph;  // stable address: the executor reads it
  FusionReport fusion;
  std::vector<std::string> notes;
  std::unique_ptr<Executor> executor;
};

Result<LoadedModel> load_artifact(const std::string& path, const LoadOptions& opt);
void carry_artifact_config(const Artifact& a, ir::Graph& g);

}  // namespace rkd::runtime
