// TensorFlow.js graph-model front end: model.json (topology + weightsManifest) and its
// weight shards to the IR (src/ir/ir.h).
//
// Contract:
//  - Reads `format: graph-model` files as written by tensorflowjs_converter: the node list
//    of a TensorFlow GraphDef in protobuf-JSON form, and weights per the manifest: float32,
//    int32 and bool, float16-stored float32 (quantization dtype float16), and uint8/uint16
//    affine-quantized float32/int32 (value = q * scale + min, computed in double and stored
//    as float32, int32 ones rounded, as TensorFlow.js does). Shard paths are relative to the
//    model's folder and may not leave it.
//  - TensorFlow ops become ONNX-form IR ops (opset 17) through the shared TensorFlow-op
//    converter (src/frontends/tf/tf_convert.h: NHWC semantics, NCHW kernels, layout tracked
//    per tensor). Graph outputs are NHWC, exactly as TensorFlow.js returns them, so outputs
//    equal TensorFlow.js's up to float rounding (docs/models.md).
//  - Value names are TensorFlow tensor names ("node" for output 0, "node:1", ...); the NCHW
//    twin of a tensor is "name#nchw". Inputs and outputs come from the signature when the
//    file has one (also under userDefinedMetadata), else Placeholders and unread nodes.
//  - Every node's outputs get shapes at once (ir::infer_node); nodes whose inputs are all
//    constant are evaluated by ImportOptions::evaluate when given (the executor's kernels),
//    so shape arithmetic folds to constants as the graph is built.
//  - Errors name the file and the TensorFlow node. Ops that are not supported are listed
//    all at once, with their counts. Malformed files end in an Error, never a crash
//    (fuzz/fuzz_tfjs.cc): every size is checked against the bytes present.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "ir/ir.h"
#include "ir/pass.h"

namespace rkd::tfjs_frontend {

struct ImportOptions {
  int64_t batch = 1;           // size bound to unknown (-1) leading input dimensions
  ir::NodeEvaluator evaluate;  // optional: folds nodes with constant inputs while importing
};

struct Imported {
  ir::Graph graph;
  std::vector<std::string> notes;
};

// True if `path` looks like a TensorFlow.js model (.json).
bool is_tfjs_path(const std::string& path);

Result<Imported> import_tfjs_file(const std::string& json_path, const ImportOptions& opt = {});
// `json` is the model.json text; `weights` the shards' bytes concatenated in manifest order
// (group by group, path by path). `what` names the source in errors.
Result<Imported> import_tfjs(std::string_view json, std::span<const uint8_t> weights, const std::string& what, const ImportOptions& opt = {});

}  // namespace rkd::tfjs_frontend
