// ONNX front end: a .onnx file (ModelProto, read with Debian's libonnx/protobuf classes) to
// the IR (src/ir/ir.h).
//
// Contract:
//  - Reads opsets 11-22 of the default domain; initializers of float32, float16,
//    bfloat16, int8, uint8, int16, int32, int64 and bool, inline or in external-data files
//    (paths relative to the model's folder, never absolute or leaving it).
//  - Everything the file does that rkdeploy cannot represent (other op domains,
//    subgraph attributes, sparse tensors, unsupported dtypes) is collected and reported
//    at once, one line per node or tensor, as an "unsupported" error; structural faults
//    (undefined inputs, duplicate names, sizes that do not match the data) are "invalid".
//  - Malformed files end in an Error, never a crash: every size is checked against the
//    bytes actually present before anything is allocated (fuzz/fuzz_onnx.cc).
//  - Shapes: the file's own value_info plus ONNX's shape inference (libonnx), run after
//    the model passed these checks; a symbolic batch dimension of the inputs can be bound
//    to a size first. Shape-inference failures are kept as notes, not errors.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "ir/ir.h"

namespace rkd::onnx_frontend {

struct ImportOptions {
  int64_t batch = 0;         // > 0: bind a symbolic first dimension of every input to this
  bool infer_shapes = true;  // run ONNX shape inference
};

struct Imported {
  ir::Graph graph;
  std::vector<std::string> notes;  // non-fatal findings (e.g. shape inference failed)
  int64_t ir_version = 0;
};

Result<Imported> import_onnx_file(const std::string& path, const ImportOptions& opt = {});
// `what` names the source in errors; `base_dir` resolves external data ("" = none allowed).
Result<Imported> import_onnx_bytes(std::span<const uint8_t> bytes, const std::string& what, const std::string& base_dir,
                                   const ImportOptions& opt = {});

// One serialized TensorProto (the test_data_set_*/input_N.pb files of ONNX test data).
Result<Tensor> import_onnx_tensor(std::span<const uint8_t> bytes, const std::string& what);

}  // namespace rkd::onnx_frontend
