// Private to src/runtime: the operator registry's shared helpers and its families. Each
// family file registers its kernels by op type; op_registry.cc keeps one map per domain.
//   op_registry_elementwise.cc  unary and binary arithmetic, comparisons, logic, Clip, Cast, Where
//   op_registry_layout.cc       views, Concat, Split, Slice, gathers, scatters, Transpose, Pad, ...
//   op_registry_nn.cc           normalizations, Softmax, Conv, pooling, Resize, MatMul, reductions, ...
//   op_registry_int8.cc         QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul
//   op_registry_rkdeploy.cc     the "rkdeploy" domain: MSDA, the int8 tables and TFLite kernels,
//                               the NPU-simulated convolution
#pragma once

#include <functional>
#include <map>
#include <string>

#include "ir/ir.h"
#include "kernels/tensor_ops.h"
#include "runtime/op_registry.h"

namespace rkd::runtime::detail {

using ir::Node;
using Factory = std::function<Result<Kernel>(const Node&, int64_t opset)>;

int norm_axis(int64_t a, int rank);
int rank_of(const Node& n, size_t input);  // rank of input i's static shape (0 when unknown)
Result<int> checked_axis(const Node& n, int64_t a, int rank);
Result<ops::ConvParams> conv_params(const Node& n, const Shape& x, const Shape& w, bool transposed);
// A MaxPool's / AveragePool's window (auto_pad resolved against x's spatial dims).
Result<ops::PoolParams> pool_params(const Node& n, const Shape& x);

// A Resize's attributes (ops::ResizeParams without the scales), refused by name where the
// kernel lacks them; the scales as the kernel takes them: output / input with sizes, else the
// scales input's values, else 1.
Result<ops::ResizeParams> resize_attrs(const Node& n);
void resize_scales(ops::ResizeParams& p, const Shape& xs, const Shape& ys, const Tensor* scales, const Tensor* sizes);

// The values of a constant int32/int64 tensor (empty for nullptr).
std::vector<int64_t> ints_of(const Tensor* t);

void register_elementwise_ops(std::map<std::string, Factory>& r);
void register_layout_ops(std::map<std::string, Factory>& r);
void register_nn_ops(std::map<std::string, Factory>& r);
void register_int8_ops(std::map<std::string, Factory>& r);
void register_rkdeploy_ops(std::map<std::string, Factory>& r);  // domain "rkdeploy"

}  // namespace rkd::runtime::detail
