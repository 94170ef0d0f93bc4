// The vendor runtime's custom operators (kernels/rknn_custom_op_contract.h) in the graph.
//
// to-rknn-custom-ops: after deform-attn-fusion, each MSDeformAttn(MSDAPrepare(value), locations,
//   weights) becomes one cstMSDeformAttn(value, locations, weights) node (default domain, the
//   fused node's output value and name kept), and every 4-D GridSample a cstGridSample with the
//   same operation; the MSDAPrepare nodes go with dead-code elimination. What rkdeploy export
//   --rknn-custom-op writes: a graph the vendor toolkit converts with the nodes left to the
//   plugins (plugins/rknn). `report` gets one line per node replaced and per GridSample left
//   as it was, with the reason.
// from-rknn-custom-ops: the reverse, as the ONNX importer applies it: each cstMSDeformAttn
//   becomes MSDAPrepare + MSDeformAttn and each cstGridSample a GridSample with string
//   attributes, so rkdeploy runs such a file as it ran the original. Malformed attributes
//   are invalid errors naming the node and attribute.
#pragma once

#include <string>
#include <vector>

#include "ir/pass.h"

namespace rkd::ir {

Pass to_rknn_custom_ops_pass(std::vector<std::string>* report = nullptr);
Pass from_rknn_custom_ops_pass();

}  // namespace rkd::ir
