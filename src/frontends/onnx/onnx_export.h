// IR -> ONNX file (the inverse of onnx_import.h, for graphs rkdeploy writes: quantized
// models from `rkdeploy quantize`).
//
// Contract:
//  - Writes a ModelProto (IR version 8) importing the default domain at the graph's opset
//    and, when nodes use it, the `rkdeploy` domain at version 1 (such files are for
//    rkdeploy only; `rkdeploy quantize` never emits them).
//  - Constants become initializers (raw little-endian data); graph inputs and outputs get
//    value_info with dtype and shape (symbolic dims as dim_param); intermediate values with
//    a known dtype get value_info too.
//  - The file is written to PATH.tmp and renamed, so an existing PATH is never left half
//    written. Errors name the path.
#pragma once

#include <string>

#include "core/result.h"
#include "ir/ir.h"

namespace rkd::onnx_frontend {

Status export_onnx_file(const ir::Graph& g, const std::string& path);
// The serialized ModelProto.
Result<std::string> export_onnx_bytes(const ir::Graph& g);

}  // namespace rkd::onnx_frontend
