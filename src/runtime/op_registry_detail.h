// Private to src/runtime: the operator registry's shared helpers, and the registration of
// the quantized operators (QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul),
// which live in op_registry_int8.cc.
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

void register_int8_ops(std::map<std::string, Factory>& r);

}  // namespace rkd::runtime::detail
