// libFuzzer target for the TFLite front end: any byte string must give a graph or an Error,
// never a crash, a sanitizer report or an unbounded allocation. The flatbuffers verifier runs
// first; import-time folding is off (the executor's kernels are not in the fuzz build); the
// IR's shape inference runs on accepted graphs.
#include <cstddef>
#include <cstdint>
#include <span>

#include "frontends/tflite/tflite_import.h"
#include "ir/pass.h"
#include "ir/passes/fold.h"
#include "ir/passes/shape_inference.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto imported = rkd::tflite_frontend::import_tflite(std::span<const uint8_t>(data, size), "fuzz.tflite");
  if (!imported.ok()) return 0;
  rkd::ir::PassManager pm;
  pm.add(rkd::ir::shape_inference_pass());
  pm.add(rkd::ir::dead_code_elimination_pass());
  (void)pm.run(imported->graph);
  return 0;
}
