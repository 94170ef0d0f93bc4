// Clean-up and folding passes: dead code, constants, Conv + BatchNormalization, Conv + bias Add.
#pragma once

#include <set>
#include <string>

#include "ir/pass.h"

namespace rkd::ir {

// dead-code-elimination: removes nodes none of whose outputs reach a graph output, and
// constants nothing reads.
Pass dead_code_elimination_pass();

// constant-folding: in topological order, infers each node's shapes (shape_inference.h)
// and replaces a node by constants when every present input is constant (Shape and Size
// also when the input's shape is static), unless one output would exceed
// kMaxFoldedBytes. Folded values keep their names. Nodes the evaluator cannot run stay.
// `keep` lists op types never folded (the first folding keeps DequantizeLinear so that
// QDQ sites stay recognisable); `name` distinguishes repeated runs.
inline constexpr int64_t kMaxFoldedBytes = int64_t{64} << 20;
Pass constant_folding_pass(NodeEvaluator eval, std::set<std::string> keep = {}, std::string name = "constant-folding");

// conv-bn-folding: Conv (constant weights, optional constant bias) followed by an
// inference BatchNormalization (constant scale, bias, mean, var) that is the conv
// output's only reader becomes one Conv with W' = W * k[o], b' = (b - mean) * k + beta,
// k = scale / sqrt(var + eps), computed in double and rounded once to float32.
Pass conv_bn_folding_pass();

// conv-bias-folding: a float Conv or group-1 ConvTranspose (constant weights, optional constant bias) whose only
// reader is an Add of a constant float32 that is one value per output channel (broadcast
// shape [OC, 1, ..., 1] or [1, OC, 1, ..., 1], not widening the output) or one value,
// becomes one node with b' = b + c (in double, rounded once to float32); the Add's output
// value keeps its name. TensorFlow exports a biased convolution this way (Conv2D then
// BiasAdd); without the fold a quantizer puts a QuantizeLinear between the two, and the
// integer back ends run the bias add in float on the CPU after every convolution.
Pass conv_bias_folding_pass();

// conv-scale-folding: a float Conv or ConvTranspose (constant weights, optional constant bias;
// ConvTranspose of group 1) whose only reader is a Mul by a constant float32 that is one value
// per output channel (or one value) becomes one node with W'[o] = W[o] * m[o] (the output
// channel's slice: axis 0 of a Conv's weights, axis 1 of a ConvTranspose's) and b' = b * m[o],
// computed in double and rounded once to float32; the Mul's output value keeps its name.
// TensorFlow.js keeps a BatchNormalization after a Conv2DTranspose as Mul then Add
// (handdetect's): this and conv-bias-folding (which also takes ConvTranspose) make it one
// transposed convolution, which qdq-to-qlinear can then lower.
Pass conv_scale_folding_pass();

}  // namespace rkd::ir
