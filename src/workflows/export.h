// rkdeploy export: a model as standard ONNX, or, with --rknn-custom-op, for the vendor toolkit
// with the sampling the NPU cannot run left to rkdeploy's plugins (docs/rknn-custom-op.md).
//
// Contract:
//  - rknn_custom_op_graph(): imports the model (ONNX, TFLite, TF.js), folds it as export does
//    (shape inference, constant folding, BatchNorm folding) and, with `fuse`, runs
//    deform-attn-fusion, then ir::to_rknn_custom_ops_pass: one cstMSDeformAttn node per decoder
//    layer's sampling site (the planner's fused-fallback), one cstGridSample per remaining 4-D
//    GridSample (without `fuse`, every GridSample: custom-op-cpu). The rest of the graph is standard ONNX
//    as written. `report` lists every node replaced and every site kept, with the reason.
//  - rknn_custom_ops_python(): the source of the Python module whose classes the vendor
//    toolkit's reg_custom_op takes (shape inference and a NumPy compute for its host
//    simulation), with the operator names of kernels/rknn_custom_op_contract.h.
//  - rknn_ops_module_path(): where that module goes: rkdeploy_rknn_ops.py beside the ONNX file.
//    check_rknn_ops_module(): the module is a file the user did not name, so an existing one is
//    replaced only when it is a regular file that export wrote (it begins with the module's
//    first line); a symbolic link, anything else of that name, or another file is refused
//    (invalid), naming it: nothing the command did not write is replaced.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "ir/ir.h"

namespace rkd::workflows {

struct RknnCustomOpReport {
  int msda = 0, grid_sample = 0;
  std::vector<std::string> lines;  // one per node replaced or site kept
};

Result<std::unique_ptr<ir::Graph>> rknn_custom_op_graph(const std::string& model, bool fuse, RknnCustomOpReport* report);
std::string rknn_custom_ops_python();
std::string rknn_ops_module_path(const std::string& onnx_output);
Status check_rknn_ops_module(const std::string& path);

}  // namespace rkd::workflows
