// The executor's operator registry (private to src/runtime): (domain, op type) -> a factory
// that reads a node's attributes once and returns the kernel call for it. Shapes and traits
// are ir/op_info.h's; this holds the kernels only.
//
// Contract:
//  - prepare_op() is called with a node whose input and output shapes are all static
//    (the executor's precondition); the returned Kernel is called with the input tensors
//    (nullptr for omitted optional inputs) and dense output tensors preallocated with the
//    node's output shapes and dtypes, and may be called many times.
//  - Attribute values the kernels do not implement are "unsupported" errors naming the
//    node; values that break ONNX's rules are "invalid".
//  - Ops with ir::kView (op_info.h) are not prepared: the executor aliases their output to
//    their input instead of copying.
#pragma once

#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "ir/ir.h"

namespace rkd::runtime {

using Kernel = std::function<Status(const std::vector<const Tensor*>& in, std::vector<Tensor>& out)>;

Result<Kernel> prepare_op(const ir::Node& n, int64_t opset);
bool has_kernel(const std::string& domain, const std::string& op_type);
// Every (domain, op type) with a kernel, sorted by domain then op: for docs and the coverage test.
std::vector<std::pair<std::string, std::string>> kernel_ops();

// Runs one node on the given inputs (used by constant folding): allocates outputs from
// the node's inferred output shapes.
Result<std::vector<Tensor>> evaluate_node(const ir::Node& n, int64_t opset, const std::vector<const Tensor*>& in);

}  // namespace rkd::runtime
