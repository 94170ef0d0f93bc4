// Per-layer accuracy of a quantized (QDQ) model against its float original
// (`rkdeploy accuracy`), in RKNN-Toolkit2's two modes.
//
// Contract:
//  - Layers are the quantized activations of the QDQ model (quant/qdq.h naming: the float
//    value X is quantized as X/q and read back as X/dq; a graph output keeps X for the
//    dequantized value). Each is compared with the float model's value X.
//  - entire: the QDQ model runs end to end on the CPU executor (QuantizeLinear and
//    DequantizeLinear as written, ops in float between them: ONNX's meaning of the file), so
//    errors accumulate; the layer's value is X/dq.
//  - single: every quantized layer is evaluated alone on the float model's inputs: each
//    activation input is the float model's value quantize-dequantized with the QDQ model's
//    parameters for it, weights as the QDQ model dequantizes them; the result is then
//    quantize-dequantized with the layer's own parameters. The error is that layer's own.
//  - Metrics per layer (f = float, q = quantized, over the elements where f is finite -
//    a -inf pad value before a max pool has no error to measure -, in double):
//      cosine      f.q / (|f| |q|) (1 when both are all zero, 0 when only one is);
//      euclidean   |f - q| / |f| (normalised; |f - q| when |f| = 0);
//      max_abs     max |f - q|;
//      lsb         max_abs / the layer's output scale (error in output quantization steps).
//  - Layers are listed in graph order; worst() sorts by cosine ascending (entire mode).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "ir/ir.h"

namespace rkd::workflows {

struct LayerError {
  double cosine = 1, euclidean = 0, max_abs = 0, lsb = 0;
};

struct LayerAccuracy {
  std::string name;  // the float model's value name
  std::string op;    // op type of its producer
  double scale = 0;  // output quantization scale
  int64_t zero_point = 0;
  LayerError entire, single;
  bool has_single = false;
};

// A model output compared whole (entire mode), quantized or not, and - when it is a Concat,
// directly or through layout-only ops - each of the Concat's inputs compared alone: one
// number over a detector's boxes beside its class scores hides a collapsed branch
// (Ultralytics' output0 under one scale: cosine 0.9999, every class score 0).
struct OutputAccuracy {
  std::string name;
  LayerError error;
  struct Branch {
    std::string name;  // the float model's value concatenated
    LayerError error;
  };
  std::vector<Branch> branches;
};

struct AccuracyReport {
  std::string float_model, quant_model;
  std::vector<LayerAccuracy> layers;          // graph order
  std::vector<std::string> outputs;           // the graph outputs among the layers
  std::vector<OutputAccuracy> model_outputs;  // every graph output, in graph order
};

LayerError compare(const Tensor& reference, const Tensor& quantized, double scale);

// A quantized activation of a QDQ graph: QuantizeLinear(X) with a per-tensor scale and zero
// point read back by a DequantizeLinear; `name` is X's name in the float model (the QDQ
// graph renames a graph output's float value X/float, quant/qdq.h).
struct QdqSite {
  ir::Node* quantize = nullptr;
  ir::Value* dq = nullptr;  // the DequantizeLinear's output
  std::string name;
  double scale = 0;
  int64_t zp = 0;
  DType qtype = DType::i8;
};
// Every such site, in graph order.
std::vector<QdqSite> qdq_sites(ir::Graph& qdq);

Result<AccuracyReport> analyze_accuracy(const std::string& float_model, const std::string& quant_model, const std::map<std::string, Tensor>& inputs,
                                        int threads);

// The report as JSON text, and as one self-contained HTML page (inline SVG chart of both
// modes' cosine per layer, the table worst first; no network, no scripts).
std::string accuracy_json(const AccuracyReport& r);
std::string accuracy_html(const AccuracyReport& r);

}  // namespace rkd::workflows
