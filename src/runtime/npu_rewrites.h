// The graph rewrites the NPU operation table's convolution family makes (npu_ops.cc): each
// replaces nodes by ones the lowering takes and that compute the same integers.
#pragma once

#include "core/result.h"
#include "ir/ir.h"

namespace rkd::runtime {

// A QLinearConv whose output only an rkdeploy.QLinearAdd reads (the Add's other operand a map of
// its output's shape, per-tensor constant parameters): one QLinearConv with the residual fused
// (npu_conv_spec's inputs 9-11, attribute rkd_residual; the EW stage adds it before OUT_CVT: one
// rounding where the Add rounds twice), when the lowering can express it. Returns the fused node,
// or nullptr (the graph unchanged).
ir::Node* fuse_residual_add(ir::Graph& g, ir::Node* n);
// Every QLinearConv that is a patch embedding (npu::lower::npu_patch_embedding_as_1x1) as a
// space-to-depth on the CPU and the 1 x 1 convolution of its weights reshaped: the same
// products summed, so the same integers.
Status patch_embeddings_as_1x1(ir::Graph& g);

}  // namespace rkd::runtime
