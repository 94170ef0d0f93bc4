#include "frontends/import.h"

#include "frontends/onnx/onnx_import.h"
#include "frontends/tfjs/tfjs_import.h"
#include "frontends/tflite/tflite_import.h"

namespace rkd::frontends {

Result<ImportedModel> import_file(const std::string& path, int64_t batch, const ir::NodeEvaluator& evaluate) {
  ImportedModel m;
  if (tfjs_frontend::is_tfjs_path(path)) {
    tfjs_frontend::ImportOptions io;
    io.batch = batch > 0 ? batch : 1;
    io.evaluate = evaluate;
    RKD_ASSIGN(tfjs_frontend::Imported imp, tfjs_frontend::import_tfjs_file(path, io));
    m.graph = std::move(imp.graph);
    m.notes = std::move(imp.notes);
  } else if (tflite_frontend::is_tflite_path(path)) {
    tflite_frontend::ImportOptions io;
    io.evaluate = evaluate;
    RKD_ASSIGN(tflite_frontend::Imported imp, tflite_frontend::import_tflite_file(path, io));
    m.graph = std::move(imp.graph);
    m.notes = std::move(imp.notes);
  } else {
    onnx_frontend::ImportOptions io;
    io.batch = batch;
    RKD_ASSIGN(onnx_frontend::Imported imp, onnx_frontend::import_onnx_file(path, io));
    m.graph = std::move(imp.graph);
    m.notes = std::move(imp.notes);
    m.ir_version = imp.ir_version;
  }
  return m;
}

}  // namespace rkd::frontends
