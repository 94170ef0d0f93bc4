// Planning a model file on a target profile (plan/plan.h): builds each variant's graph form,
// measures this host's CPU time of every node with the executor, and plans.
//
// Contract:
//  - The imported form runs the executor's pipeline without its fusions (fuse = false,
//    fuse_activations = false): ONNX ops as a vendor converter sees them, after shape
//    inference and constant folding. The fused form adds deform-attn-fusion (one
//    MSDeformAttn per decoder layer). The discrete form is PlanOptions::discrete_model.
//  - Every form runs `warmup` + `runs` times on `inputs` (check_real_inputs first); a node's
//    host time is its median over the runs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "plan/plan.h"

namespace rkd::runtime {
struct NpuSession;
struct NpuLoweredNode;
}  // namespace rkd::runtime

namespace rkd::workflows {

struct PlanOptions {
  std::string model, discrete_model;
  std::map<std::string, Tensor> inputs;
  std::vector<plan::Variant> variants;
  int threads = 1, warmup = 1, runs = 3;
};

Result<std::vector<plan::VariantPlan>> plan_model(const PlanOptions& o, const plan::Target& t);

// One NPU node lowered into a session, as the planner prices it: its tasks' work from their
// register commands (npu::sim::chain_work) and its jobs on `cores` cores (runtime::npu_node_jobs).
Result<plan::NpuNodeCost> npu_node_cost(const runtime::NpuSession& s, const runtime::NpuLoweredNode& ln, int cores);

// A calibration set (`plan --calibrate FILE` without a MODEL): every measurement of t names its
// model file (relative to models_dir) and variant; each model is planned with its saved inputs
// (models_dir/<stem>.input_<name>.npy, as make_models.py writes them), then t's free parameters
// are fitted over the "fit" rows of all models together and the "check" rows predicted.
struct CalibrationSetOptions {
  std::string file, models_dir;
  int threads = 1, warmup = 0, runs = 1;
};
Result<plan::FitResult> calibrate_set(const CalibrationSetOptions& o, plan::Target& t);

// Facts about this host and build for measurement reports: rkdeploy version, compiler, CPU
// model, the thread count the kernels use now (set by the last executor created), library
// versions, the ISA dispatch.
std::map<std::string, std::string> environment();

}  // namespace rkd::workflows
