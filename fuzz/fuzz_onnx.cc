// libFuzzer target for the ONNX front end and the IR's shape inference: any byte string
// must give a graph or an Error, never a crash, a sanitizer report or an unbounded
// allocation. libonnx's own shape inference is off (it is libonnx's code, run only on
// models that passed rkdeploy's checks); rkdeploy's shape inference (the first pass of the
// executor, src/ir/shape_inference.cc) runs on every graph the importer accepts.
#include <cstddef>
#include <cstdint>
#include <span>

#include "frontends/onnx/onnx_import.h"
#include "ir/pass.h"
#include "ir/passes/fold.h"
#include "ir/passes/shape_inference.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rkd::onnx_frontend::ImportOptions opt;
  opt.infer_shapes = false;
  opt.batch = 1;
  auto imported = rkd::onnx_frontend::import_onnx_bytes(std::span<const uint8_t>(data, size), "fuzz.onnx", "", opt);
  if (!imported.ok()) return 0;
  rkd::ir::PassManager pm;
  pm.add(rkd::ir::shape_inference_pass());
  pm.add(rkd::ir::dead_code_elimination_pass());
  (void)pm.run(imported->graph);
  return 0;
}
