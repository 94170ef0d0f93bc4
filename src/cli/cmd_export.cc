// rkdeploy export MODEL -o OUT.onnx: any model rkdeploy reads (ONNX, TFLite, TensorFlow.js) as
// standard ONNX, folded the way quantize sees it (src/workflows/quantize.h, load_portable);
// with --rknn-custom-op, for the vendor toolkit with rkdeploy's custom operators
// (src/workflows/export.h, docs/rknn-custom-op.md).
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "core/output.h"
#include "frontends/onnx/onnx_export.h"
#include "workflows/export.h"
#include "workflows/quantize.h"

namespace rkd::cli {
namespace {

struct ExportArgs {
  std::string model, output;
  bool rknn_custom_op = false, unfused = false;
};

// OUT.onnx with the custom nodes, and beside it the module with the classes the vendor
// toolkit's reg_custom_op takes.
void run_rknn_export(const ExportArgs& a) {
  OutputTransaction out_tx({a.model});
  const std::string tmp = take(out_tx.file(a.output));
  const std::string py = workflows::rknn_ops_module_path(a.output);
  check(workflows::check_rknn_ops_module(py));
  const std::string py_tmp = take(out_tx.file(py));
  workflows::RknnCustomOpReport r;
  const auto g = take(workflows::rknn_custom_op_graph(a.model, !a.unfused, &r));
  check(onnx_frontend::export_onnx_file(*g, tmp));
  write_text(py_tmp, workflows::rknn_custom_ops_python());
  check(out_tx.publish());
  for (const std::string& l : r.lines) std::printf("  %s\n", l.c_str());
  std::printf("wrote %s: %d cstMSDeformAttn and %d cstGridSample node(s) for the vendor runtime's plugins, %zu nodes in all\n", a.output.c_str(),
              r.msda, r.grid_sample, g->nodes().size());
  std::printf("wrote %s: the classes for RKNN-Toolkit2's reg_custom_op\n", py.c_str());
}

void run_export(const ExportArgs& a) {
  if (a.unfused && !a.rknn_custom_op) fail(invalid("--unfused goes with --rknn-custom-op"));
  if (a.rknn_custom_op) return run_rknn_export(a);
  OutputTransaction out_tx({a.model});
  const std::string tmp = take(out_tx.file(a.output));
  const auto g = take(workflows::load_portable(a.model));
  check(onnx_frontend::export_onnx_file(*g, tmp));
  check(out_tx.publish());
  std::printf("wrote %s: %zu nodes, %zu inputs, %zu outputs (standard ONNX)\n", a.output.c_str(), g->nodes().size(), g->inputs.size(),
              g->outputs.size());
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* c = app.add_subcommand("export", "Write a model (ONNX, TFLite or TensorFlow.js) as standard ONNX: rkdeploy export MODEL -o OUT.onnx");
  c->add_option("model", a->model, "the model (.onnx, .tflite or TensorFlow.js model.json)")->required();
  c->add_option("-o,--output", a->output, "the ONNX file to write")->required();
  c->add_flag("--rknn-custom-op", a->rknn_custom_op,
              "for the vendor toolkit: each decoder layer's sampling as one cstMSDeformAttn node and each GridSample as cstGridSample, "
              "computed on the board by rkdeploy's plugins; also writes rkdeploy_rknn_ops.py beside OUT (docs/rknn-custom-op.md)");
  c->add_flag("--unfused", a->unfused,
              "with --rknn-custom-op: no fusion; every GridSample as its own cstGridSample node (the planner's custom-op-cpu variant)");
  c->callback([a] { run_export(*a); });
}

}  // namespace rkd::cli
