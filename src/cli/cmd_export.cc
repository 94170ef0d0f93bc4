// rkdeploy export MODEL -o OUT.onnx: any model rkdeploy reads (ONNX, TFLite, TensorFlow.js) as
// standard ONNX, folded the way quantize sees it (src/workflows/quantize.h, load_portable).
#include <cstdio>

#include "cli/commands.h"
#include "core/output.h"
#include "frontends/onnx/onnx_export.h"
#include "workflows/quantize.h"

namespace rkd::cli {
namespace {

struct ExportArgs {
  std::string model, output;
};

void run_export(const ExportArgs& a) {
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
  c->callback([a] { run_export(*a); });
}

}  // namespace rkd::cli
