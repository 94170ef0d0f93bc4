// The executor's operator table (private to src/runtime): ONNX op type -> a factory that
// reads a node's attributes once and returns the kernel call for it.
//
// Contract:
//  - prepare_op() is called with a node whose input and output shapes are all static
//    (the executor's precondition); the returned Kernel is called with the input tensors
//    (nullptr for omitted optional inputs) and dense output tensors preallocated with the
//    node's output shapes and dtypes, and may be called many times.
//  - Attribute values the kernels do not implement are "unsupported" errors naming the
//    node; values that break ONNX's rules are "invalid".
//  - Reading ops (Reshape, Squeeze, Unsqueeze, Flatten, Identity) are listed by
//    is_view_op(): the executor may alias their output to their input instead of copying.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "ir/ir.h"

namespace rkd::runtime {

using Kernel = std::function<Status(const std::vector<const Tensor*>& in, std::vector<Tensor>& out)>;

Result<Kernel> prepare_op(const ir::Node& n, int64_t opset);
bool has_kernel(const std::string& domain, const std::string& op_type);
std::vector<std::string> kernel_op_types();  // sorted, for docs and the coverage test
bool is_view_op(const std::string& op_type);

// Runs one node on the given inputs (used by constant folding): allocates outputs from
// the node's inferred output shapes.
Result<std::vector<Tensor>> evaluate_node(const ir::Node& n, int64_t opset, const std::vector<const Tensor*>& in);

}  // namespace rkd::runtime
