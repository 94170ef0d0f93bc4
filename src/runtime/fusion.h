// Fusion passes that produce rkdeploy's own ops (domain "rkdeploy"), and their kernels.
//
// conv-activation-fusion: Conv followed by Relu, or by the SiLU pair Sigmoid(y) and
// Mul(y, Sigmoid(y)), where the conv output has no other reader, becomes one Conv with
// the attribute rkd_activation = "relu" | "silu" (oneDNN post-op, applied after the bias).
#pragma once

#include "ir/pass.h"
#include "runtime/executor.h"
#include "runtime/op_registry.h"

namespace rkd::runtime {

ir::Pass conv_activation_fusion_pass();

bool is_fused_op(const ir::Node& n);              // domain "rkdeploy"
Result<Kernel> prepare_fused_op(const ir::Node& n);

}  // namespace rkd::runtime
