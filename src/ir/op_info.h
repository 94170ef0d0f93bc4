// The one operator table: for every (domain, op type) rkdeploy knows, its shape function and
// its traits. Every list of op types elsewhere (the executor's views, the float-only kernels,
// the ops a pass may move or fold) is derived from here; a test checks that the executor's
// kernels and this table cover each other (tests/runtime/test_passes.cc).
//
// Contract:
//  - Domains: "" is ONNX's default domain ("ai.onnx" is the same domain), "rkdeploy" holds the
//    ops rkdeploy's passes create. The creating pass sets their output shapes; their shape
//    functions derive the same from inputs and attributes (a placed NPU node has its source
//    op's), so that a graph read from an artifact is checked like an imported one.
//  - A trait states a property of the op's semantics that holds for every attribute value,
//    unless its comment names the condition a user of the trait must still check.
//  - find_op() is nullptr for an op the table does not know; such a node gets no inferred
//    shape and no kernel, and every trait query on it is false.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "ir/ir.h"

namespace rkd::ir {

namespace detail {
struct Ctx;
}
// Sets a node's output types and shapes (shape_inference.h's infer_node contract).
using ShapeFn = Status (*)(const detail::Ctx&);

enum OpTrait : uint32_t {
  // The output is input 0's bytes under another shape (Reshape, Flatten, Squeeze, Unsqueeze,
  // Identity): the executor may alias the output to the input instead of copying.
  kView = 1u << 0,
  // Output 0 holds exactly input 0's elements, reordered or reshaped, nothing dropped or
  // added (the views and Transpose): a layer that only carries its input's values and scale.
  kLayoutOnly = 1u << 1,
  // The CPU kernel takes float32 in input 0 only; other types are refused by name.
  kFloatOnly = 1u << 2,
  // Each output element is a function of the inputs' elements at its (broadcast) position,
  // with a numeric (not boolean) result: with every other input a constant scalar, a table
  // over an 8-bit input reproduces it.
  kPointwise = 1u << 3,
  // op(DequantizeLinear(q)) == DequantizeLinear(op(q)) exactly for a per-tensor dequantize
  // (data movement; Pad only with pad value 0, Concat only when every input is dequantized with
  // the same scale, zero point and type, Resize only where resize_copies_elements(), checked by
  // the user; for Split each output is the DequantizeLinear of its part): the op can run on the
  // integers.
  kCommutesWithDequantize = 1u << 4,
  // Quantized, the output takes input 0's scale and zero point: no requantization (Resize
  // only where resize_copies_elements() and Pad only with pad value 0, checked by the user).
  kSameScale = 1u << 5,
  // The output is indices or values chosen by index (TopK, ArgMax, Shape, ...): what is
  // computed from it is post-processing and stays float when quantizing.
  kSelection = 1u << 6,
  // A ReLU/ReLU6 that reads its output alone folds into the output's requantization range.
  kAbsorbsActivation = 1u << 7,
  // Known so that passes treat it right, but with no CPU kernel: the executor refuses a
  // graph that still holds it (detectors' NMS runs in runtime/detect.h, not in the graph).
  kNoKernel = 1u << 8,
  // Runs on the NPU (simulator or device): the runtime's NPU placement
  // (runtime/npu_conv.h) created it; the planner's as-run variant places it on the NPU.
  kOnNpu = 1u << 10,
};

struct OpInfo {
  std::string_view domain;  // "" or "rkdeploy"
  std::string_view op_type;
  ShapeFn shape;  // nullptr: none (a kNoKernel op with no shape rule)
  uint32_t traits;
  bool has(uint32_t t) const { return (traits & t) == t; }
};

const std::vector<OpInfo>& op_table();
const OpInfo* find_op(std::string_view domain, std::string_view op_type);
inline const OpInfo* find_op(const Node& n) { return find_op(n.domain, n.op_type); }
// True when the table knows n's op and gives it every trait in `traits`.
bool op_has(const Node& n, uint32_t traits);
// A Resize each of whose output elements is one input element: mode nearest with any
// coordinate transformation but tf_crop_and_resize (whose extrapolation writes a float). It
// keeps its input's scale and runs on integers (kSameScale, kCommutesWithDequantize).
bool resize_copies_elements(const Node& n);
// A linear Resize of a static [N, C, H, W] map to [N, C, 2 H, 2 W] whose taps are 3/4 and 1/4
// of the two nearest input cells per axis, edges clamped: half_pixel, pytorch_half_pixel or
// half_pixel_symmetric, no antialias, scales (when given) exactly [1, 1, 2, 2]: a depthwise
// 3 x 3 convolution, weights [1 2 1]^T [1 2 1] / 16, over the nearest x2 map edge-padded by 1
// (qdq-to-qlinear's NPU form, quant/qlinear_lut.h).
bool resize_is_bilinear2(const Node& n);
// The same by 1/2 ([N, C, 2 H, 2 W] to [N, C, H, W], scales when given [1, 1, 0.5, 0.5]): each
// output the mean of a 2 x 2 block (taps 1/2, 1/2 per axis), a 2 x 2 stride-2 average pool.
// qdq-to-qlinear makes it a depthwise QLinearConv under rknpu_out_cvt (quant/qlinear_lut.h).
bool resize_is_average2(const Node& n);
// A linear asymmetric Resize by 2 (TensorFlow's ResizeBilinear without half_pixel_centers, as
// centernet's neck has it; shapes and scales as resize_is_bilinear2): output 2 i takes input i,
// output 2 i + 1 the mean of inputs i and i + 1 (clamped), per axis - a depthwise 3 x 3
// convolution of weights [0 0 0; 0 1 1; 0 1 1] / 4 over the same edge-padded nearest x2 map.
bool resize_is_asymmetric_bilinear2(const Node& n);
// A ConvTranspose whose every output cell has exactly one tap: a 2 x 2 kernel (weights input
// of static shape [IC, OC, 2, 2]), stride 2, no padding or output padding, unit dilations,
// group 1, no output_shape / auto_pad. It is a 1 x 1 convolution of 4 OC outputs followed by
// DepthToSpace (DCR, 2): qdq-to-qlinear rewrites it so, the planner checks for it.
bool conv_transpose_is_2x2_stride2(const Node& n);
// The windows of an average over a static [N, C, H, W] map that is one depthwise convolution of
// weights 1 (qdq-to-qlinear's NPU form, quant/qlinear_lut.h; the planner's check): AveragePool
// in floor mode without dilation (pads only with count_include_pad 1, where a padded cell counts
// as a real 0 - the convolution's zero-point padding; with count_include_pad 0 the border
// divisors vary, which no convolution has), GlobalAveragePool, and ReduceMean over axes {2, 3}
// exactly (either keepdims). nullopt for any other node.
struct AverageWindow {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  std::vector<int64_t> pads{0, 0, 0, 0};  // top, left, bottom, right
};
std::optional<AverageWindow> average_window(const Node& n);
// The op types of one domain with every trait in `traits`, sorted.
std::vector<std::string> op_types_with(uint32_t traits, std::string_view domain = "");

}  // namespace rkd::ir
