// rkdeploy export --rknn-custom-op (contract in export.h).
#include "workflows/export.h"

#include <filesystem>
#include <fstream>

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

std::string rknn_ops_module_path(const std::string& onnx_output) {
  return (std::filesystem::path(onnx_output).parent_path() / "rkdeploy_rknn_ops.py").string();
}

Status check_rknn_ops_module(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  if (ec || st.type() == std::filesystem::file_type::not_found) return {};
  const std::string why = path + ": exists and export --rknn-custom-op writes its module there (beside the ONNX file); ";
  if (st.type() == std::filesystem::file_type::symlink)
    return invalid(why + "it is a symbolic link, which is never followed: remove it or write the ONNX file elsewhere");
  if (st.type() != std::filesystem::file_type::regular) return invalid(why + "it is not a regular file");
  const std::string module = rknn_custom_ops_python();
  const std::string first = module.substr(0, module.find('\n') + 1);
  std::ifstream in(path, std::ios::binary);
  std::string head(first.size(), '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  if (!in || head != first) {
    return invalid(why + "it is not a module a previous export wrote, so it is left alone: move it away or write the ONNX file elsewhere");
  }
  return {};
}

}  // namespace rkd::workflows
