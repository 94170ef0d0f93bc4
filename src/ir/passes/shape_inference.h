// Shape and dtype inference for the ONNX operators rkdeploy executes.
//
// Contract:
//  - infer_node() sets the dtype and shape of every present output of one node from its
//    inputs' dtypes, shapes and (where the op reads them: Reshape's shape, Slice's starts,
//    TopK's k, ...) constant values. Static dims are computed exactly; a symbolic dim
//    (e.g. the batch "N") passes through ops that keep it (elementwise, Conv, ...);
//    anything not determinable leaves the output's shape unset (nullopt), never guessed.
//  - A shape that breaks the op's rules (broadcast of 3 with 4, a Reshape whose element
//    counts differ, an axis out of range) is an "invalid" Error naming the node.
//  - If the output already carries a static shape (from the file or from ONNX's own
//    inference) that contradicts the inferred one, that is an "invalid" Error too.
//  - has_shape_function() is the list of op types covered; the executor's op registry is
//    checked against it by a test.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "ir/ir.h"
#include "ir/pass.h"

namespace rkd::ir {

Status infer_node(Node& n, int64_t opset);
bool has_shape_function(const std::string& op_type);

// ONNX TensorProto.DataType code (Cast's `to`) to a DType; nullopt for types rkdeploy
// does not hold (string, complex, double, uint16..uint64).
std::optional<DType> dtype_from_onnx_code(int64_t code);

// A constant integer tensor's values (int64 or int32), or nullopt if `v` is not constant
// or not integer.
std::optional<std::vector<int64_t>> constant_ints(const Value* v);
// Every dim static: the shape as sizes.
std::optional<Shape> static_shape(const Value* v);

// ONNX's auto_pad of a windowed op (Conv, ConvTranspose, QLinearConv, pooling), the one
// resolution every user calls. NOTSET keeps `pads` ([begin..., end...]); VALID zeroes them;
// SAME_UPPER / SAME_LOWER pad in total max(0, (ceil(in / stride) - 1) stride + k - in) per
// spatial dim, k = (kernel - 1) dilation + 1 (transposed: stride (in - 1) + output_padding + k
// - in stride, output in * stride), the odd unit at the end (UPPER) or at the beginning
// (LOWER). An "invalid" Error names the value for anything else, or for vectors whose lengths
// do not match `in` (output_padding may be empty: zeros).
struct WindowGeometry {
  std::vector<int64_t> in, kernel, strides, dilations, output_padding;
  bool transposed = false;
};
Status resolve_auto_pad(const std::string& auto_pad, const WindowGeometry& g, std::vector<int64_t>& pads);

// An Einsum equation with an explicit output ("bij,bjk->bik"): one label string per operand
// and the output's. Spaces are ignored; implicit outputs and ellipses are "unsupported".
struct EinsumEquation {
  std::vector<std::string> operands;
  std::string output;
};
Result<EinsumEquation> parse_einsum(const std::string& equation);

// shape-inference: infer_node() over the graph in topological order.
Pass shape_inference_pass();

// For a graph read from outside whose values all carry a declared type and shape (a compiled
// artifact): every graph input and constant has a type and a static shape (a constant's those
// of its tensor), and every node's outputs, derived again by infer_node() from its inputs and
// attributes in topological order, equal the declared ones exactly (dtype, static dims). An op
// with no shape function, an output the derivation leaves open, or any difference is an
// "invalid" Error naming the node and the output with both forms; the derivation's own errors
// (an attribute out of range, inputs that do not fit) name the node. What this accepts, the
// executor can size its buffers from.
Status verify_declared_shapes(Graph& g);

}  // namespace rkd::ir
