// Rewrites a float IR graph into an ONNX QDQ graph (what `rkdeploy quantize` writes), the
// way TensorFlow Lite's converter quantizes (int8 spec) where the two differ from ONNX
// Runtime's quantizer.
//
// Contract (docs/quantization.md has the reasons):
//  - Activations: every float32 value with calibration statistics that a compute node reads
//    is quantized per tensor, int8, asymmetric (symmetric with QdqOptions::symmetric):
//    X -> QuantizeLinear -> X/q (int8) -> DequantizeLinear -> X/dq, and every reader of X
//    reads X/dq. A graph output X keeps its name for the dequantized value; the float value
//    before QuantizeLinear is renamed X/float.
//  - Fused activations (TFLite): the output of Conv/ConvTranspose/MatMul/Gemm/Add read only
//    by a Relu or a Clip to [0, 6] is not quantized; the activation's output is.
//  - Mixed ranges: a Concat whose inputs' ranges differ by more than a factor 4 (one scale
//    would leave the narrowest fewer than 64 of 256 levels: a detector's boxes in pixels beside
//    its class probabilities, Ultralytics' output0) does not share one scale when it is a
//    graph output, directly or through layout-only ops and Concats each read once: each input is
//    quantized with its own parameters and the Concat (and those ops) run in float. Any such
//    Concat is named in QdqReport::warnings. Inside the model, a Concat that would leave its
//    narrowest input fewer than 16 levels stays float with the nodes that read it (through
//    layout-only ops), each named in a warning (QdqReport::collapse_kept); so does an Add or Sub
//    of two activations whose narrower input would keep fewer than 16 of its output's 256 levels
//    (a residual stream adding a small branch). A Concat with a float input that stays float
//    (post-processing, keep_float) stays float too, with the layout ops that pass its value on.
//  - Shared scales (TFLite's same-scale restriction): Concat's inputs and output, and the
//    input and output of MaxPool, Reshape, Transpose, Squeeze, Unsqueeze, Flatten, Slice,
//    Split, Gather, Resize (nearest), Pad (constant 0), share one parameter set computed
//    from the union of their ranges.
//  - Fixed output parameters (TFLite): Sigmoid and Softmax outputs scale 1/256, zero
//    point -128; Tanh 1/128, 0 - unless the value must share a scale as above.
//  - Weights: the constant weight of Conv (axis 0), ConvTranspose (axis 1, group 1),
//    MatMul (rank-2 B, axis 1) and Gemm (axis 0 with transB, else 1) becomes int8 symmetric,
//    per channel on that axis (per tensor with per_channel = false), read through
//    DequantizeLinear. Conv/ConvTranspose/Gemm bias: int32 at scale s_x * s_w[c], zero point
//    0. When a bias would not fit int32 with headroom for the accumulation (|b_q| <=
//    2^31 - 1 - taps * 255^2, quant/int8.h; a channel whose weights are all near 0), that
//    channel's weight scale is raised until it does (TFLite's converter and ONNX Runtime's
//    quantizer raise it to fit int32); counted in QdqReport::bias_rescaled.
//  - Other float constants read by Add, Sub, Mul, Div, Concat, Max, Min become int8 per
//    tensor from their own range. Scalars that configure an op (Clip bounds, Pad values,
//    Resize scales, LeakyRelu's input is not one) stay float.
//  - Post-processing stays float: outputs of TopK, ArgMax/ArgMin, NonMaxSuppression,
//    NonZero, Shape, Size, Range, Cast of an integer computed by a node, and of every node
//    whose non-constant inputs all come from such values or are integers computed by nodes
//    (index arithmetic, box decoding from indices). Integer graph inputs (an int32 image) are
//    data, not indices.
//  - Everything else (integer tensors, shape arithmetic) is unchanged.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/result.h"
#include "ir/ir.h"
#include "quant/calibrate.h"

namespace rkd::quant {

struct QdqOptions {
  bool per_channel = true;
  bool symmetric_activations = false;
  // u8: TFLite's legacy uint8 scheme (what Mesa's rocket driver runs): activations and other
  // constants on the same grids shifted by 128 (zero point + 128, values + 128); weights
  // uint8 asymmetric per tensor, scale = (max(w, 0) - min(w, 0)) / 255, zero point
  // round(-min / scale) in [0, 255]. Needs per_channel = false.
  DType dtype = DType::i8;
  // Node names or op types that compute in float (`quantize --keep-float`): their outputs are
  // not quantized, they read their inputs unquantized (an input only they read is not
  // quantized at all), their weights stay float. An entry matches as keep_float_matches()
  // says; one that matches nothing is an error.
  std::set<std::string> keep_float;
  // Node names a target runs on its CPU (`quantize --target`): they compute in float as
  // keep_float's do, but an output that a quantized node reads is quantized for it (the
  // QuantizeLinear at the boundary to the NPU); one that only float nodes read, or a graph
  // output, stays float.
  std::set<std::string> cpu_nodes;
  // The model's outputs stay float: each graph output, back through the layout-only ops that
  // carry it, up to and including the value of the node that computes it (`quantize
  // --float-outputs`). That node reads int8 inputs and writes float: a detector's score logits
  // and box regressions keep their resolution (one int8 scale over BlazeFace's logits, range
  // [-550, 4], leaves steps of 2.2 around the decision boundary).
  bool float_outputs = false;
};

struct QdqReport {
  int activations = 0;                // values quantized (one QuantizeLinear each)
  int weights = 0;                    // constant weights quantized
  int biases = 0;                     // int32 biases
  int bias_rescaled = 0;              // channels whose weight scale was raised for the bias
  int shared_groups = 0;              // groups of values forced to one scale (size > 1)
  int fused_activations = 0;          // producer outputs left unquantized (Relu / Clip fused)
  int kept_float = 0;                 // nodes kept in float by QdqOptions::keep_float
  int mixed_range_concats = 0;        // graph-output Concats of branches of widely different range, kept in float
  int collapse_kept = 0;              // internal Concats, Adds and Subs whose narrowest branch collapses, and their readers, kept in float
  int float_selection = 0;            // nodes that compute only a GridSample's grid or a TopK's input (coordinates, selection scores), kept in float
  int float_decoder = 0;              // nodes that read a TopK's selection, directly or through others (a DETR's decoder), kept in float
  std::vector<std::string> warnings;  // each names the node and what one scale would cost
};

// Whether a keep_float entry takes node n: the entry is n's name or op type; or, holding a glob
// character (* ? [), matches n's name as fnmatch(3) does (without FNM_PATHNAME: * crosses '/');
// or, ending in '/', is a prefix of n's name ("/model.22/": every node under that scope).
bool keep_float_matches(const std::string& entry, const ir::Node& n);
// Every entry of keep_float takes a node of `g` (an invalid error naming the first that does
// not). With `before_folding` (the model as imported, before rkdeploy's passes), an entry that
// named a node the passes removed says what became of it: the node now computing its output
// (to keep that one in float instead), or that nothing of it runs.
Status check_keep_float(const ir::Graph& g, const std::set<std::string>& keep_float, const ir::Graph* before_folding = nullptr);
// A fully connected layer as PyTorch exports it for inputs of rank 3 or more: `mm` a MatMul
// with a constant float B [K, N] whose only reader is an Add of a constant float of N values
// along the last axis (either operand). Returns that Add: insert_qdq makes its constant the
// MatMul's int32 bias (scale x_scale * w_scale, as a Gemm's) and leaves the product
// unquantized before it (one accumulation, one rounding; qdq-to-qlinear's QLinearMatMul with a
// bias). Null otherwise.
ir::Node* matmul_bias_add(const ir::Graph& g, const ir::Node& mm);
// ranges: value name -> calibrated range of that float value.
Result<QdqReport> insert_qdq(ir::Graph& g, const std::map<std::string, Range>& ranges, const QdqOptions& opt);

}  // namespace rkd::quant
