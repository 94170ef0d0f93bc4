// libFuzzer target for the TensorFlow.js front end: the input is model.json's text, a NUL
// byte, then the weight bytes. Any input must give a graph or an Error, never a crash, a
// sanitizer report or an unbounded allocation. Import-time folding is off here (it runs the
// executor's kernels, which are not part of the fuzz build); the importer's own shape
// inference runs on every node, and the IR's shape-inference pass on accepted graphs.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "frontends/tfjs/tfjs_import.h"
#include "ir/pass.h"
#include "ir/passes/fold.h"
#include "ir/passes/shape_inference.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const void* nul = std::memchr(data, 0, size);
  const size_t text_len = nul ? static_cast<size_t>(static_cast<const uint8_t*>(nul) - data) : size;
  const std::string_view text(reinterpret_cast<const char*>(data), text_len);
  std::span<const uint8_t> weights;
  if (nul) weights = std::span<const uint8_t>(data + text_len + 1, size - text_len - 1);
  auto imported = rkd::tfjs_frontend::import_tfjs(text, weights, "fuzz.json");
  if (!imported.ok()) return 0;
  rkd::ir::PassManager pm;
  pm.add(rkd::ir::shape_inference_pass());
  pm.add(rkd::ir::dead_code_elimination_pass());
  (void)pm.run(imported->graph);
  return 0;
}
