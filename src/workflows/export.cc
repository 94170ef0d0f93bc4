// rkdeploy export --rknn-custom-op (contract in export.h).
#include "workflows/export.h"

#include "ir/passes/rknn_custom_op.h"
#include "kernels/rknn_custom_op_contract.h"
#include "runtime/model.h"
#include "workflows/rknn_custom_ops_py.h"

namespace rkd::workflows {

Result<std::unique_ptr<ir::Graph>> rknn_custom_op_graph(const std::string& model, bool fuse, RknnCustomOpReport* report) {
  RKD_ASSIGN(runtime::ImportedModel imp, runtime::import_model(model, 1));
  auto g = std::make_unique<ir::Graph>(std::move(imp.graph));
  runtime::CompileOptions co;
  co.fuse = fuse;
  co.fuse_activations = false;  // standard ONNX around the custom nodes
  co.require_executable = false;
  runtime::FusionReport fusion;
  Status s = runtime::optimize(*g, co, &fusion);
  if (!s.ok()) return s.error().with_context(model);
  std::vector<std::string> lines;
  ir::PassManager pm;
  pm.add(ir::to_rknn_custom_ops_pass(&lines));
  s = pm.run(*g);
  if (!s.ok()) return s.error().with_context(model);
  if (report) {
    report->lines = lines;
    for (const std::string& n : fusion.not_fused) report->lines.push_back("not fused: " + n);
    for (const auto& n : g->nodes()) {
      report->msda += n->op_type == rknn_contract::kMsdaType;
      report->grid_sample += n->op_type == rknn_contract::kGridSampleType;
    }
  }
  return g;
}

std::string rknn_custom_ops_python() {
  std::string s = kRknnCustomOpsPython;
  auto put = [&s](const std::string& key, const std::string& v) {
    for (size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + v.size())) s.replace(at, key.size(), v);
  };
  put("{MSDA_TYPE}", rknn_contract::kMsdaType);
  put("{GRID_SAMPLE_TYPE}", rknn_contract::kGridSampleType);
  return s;
}

}  // namespace rkd::workflows
