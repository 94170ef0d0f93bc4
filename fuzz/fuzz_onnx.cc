// libFuzzer target for the ONNX front end: any byte string must give a graph or an Error,
// never a crash, a sanitizer report or an unbounded allocation. Shape inference is off
// (it is libonnx's code, run only on models that passed rkdeploy's checks).
#include <cstddef>
#include <cstdint>
#include <span>

#include "frontends/onnx/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rkd::onnx_frontend::ImportOptions opt;
  opt.infer_shapes = false;
  (void)rkd::onnx_frontend::import_onnx_bytes(std::span<const uint8_t>(data, size), "fuzz.onnx", "", opt);
  return 0;
}
