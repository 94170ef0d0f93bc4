// TFLite front end: a .tflite flatbuffer to the IR.
//
// Contract:
//  - The file is checked by the flatbuffers verifier generated from rkdeploy's subset of the
//    public TFLite schema (tflite_subset.fbs) before anything is read; sizes and indices
//    (tensor, buffer, operator code, external buffer offsets) are checked against what is
//    present. Malformed files end in an Error naming the file, never a crash
//    (fuzz/fuzz_tflite.cc).
//  - The first subgraph is the model. Operators become IR ops through the shared
//    TensorFlow-op converter (src/frontends/tf/tf_convert.h: NHWC semantics, NCHW kernels,
//    layout tracked per tensor). Supported builtin operators are listed by
//    supported_tflite_ops(); every other one is reported at once with its count.
//  - Quantized models (int8/uint8 activations per tensor; int8 weights per tensor or per
//    axis; int32 biases): graph inputs and outputs keep their integer type; every quantized
//    activation is QuantizeLinear -> DequantizeLinear with the tensor's scale and zero point
//    after the op that produces it, and constant weights and biases are dequantized exactly
//    (q - zero_point) * scale in float64, stored as float32. The graph is therefore the QDQ
//    form of the model: run as written (`--backend cpu`) it computes every op in float on
//    the int8 grid of each tensor. (Integer execution with TFLite's own requantization
//    rounding is not wired to TFLite files yet.)
//  - Tensor names become value names (':' and '#' replaced by '_'; empty or repeated names
//    become t<index>).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "ir/ir.h"
#include "ir/pass.h"

namespace rkd::tflite_frontend {

struct ImportOptions {
  ir::NodeEvaluator evaluate;  // optional: folds constant subgraphs while importing
};

struct Imported {
  ir::Graph graph;
  std::vector<std::string> notes;
};

bool is_tflite_path(const std::string& path);
Result<Imported> import_tflite_file(const std::string& path, const ImportOptions& opt = {});
Result<Imported> import_tflite(std::span<const uint8_t> bytes, const std::string& what, const ImportOptions& opt = {});
std::vector<std::string> supported_tflite_ops();

}  // namespace rkd::tflite_frontend
