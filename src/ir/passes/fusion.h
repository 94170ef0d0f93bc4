// Fusion passes: patterns rewritten into fewer nodes (rkdeploy's own ops, domain "rkdeploy",
// whose kernels are the executor's: src/runtime/op_registry_rkdeploy.cc).
//
// conv-activation-fusion: Conv followed by Relu, or by the SiLU pair Sigmoid(y) and
// Mul(y, Sigmoid(y)), where the conv output has no other reader, becomes one Conv with
// the attribute rkd_activation = "relu" | "silu" (oneDNN post-op, applied after the bias).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/pass.h"

namespace rkd::ir {

// What the NPU placement did with one operation family's candidates.
struct NpuFamilyPlacement {
  int placed = 0;                    // nodes placed on the NPU
  std::vector<std::string> on_cpu;   // "node X: <reason>" for the candidates left on the CPU
  std::map<std::string, int> notes;  // the family's own counts (runtime/npu_ops.cc names them)
};

// What the rewriting passes did, for `run` and `inspect` to print.
struct FusionReport {
  int fused_sites = 0;
  std::vector<std::string> fused;      // one line per fused site
  std::vector<std::string> not_fused;  // "node X: <reason>"
  // The NPU placement (runtime/npu_ops.h), per operation family of its table (the family's name).
  std::map<std::string, NpuFamilyPlacement> npu;
};

Pass conv_activation_fusion_pass();

// deform-attn-fusion: recognises the sampling subgraph of D-FINE/DEIM decoders
// (deformable_attention_core_func_v2) as PyTorch exports it and replaces it by
//   prepared = rkdeploy.MSDAPrepare(value)            - once per distinct value tensor
//   out      = rkdeploy.MSDeformAttn(prepared, locations, weights)
// with the kernels of src/kernels/deform_attn.h. Recognised forms, per site:
//   value      Reshape [B,T,nH,c] -> Transpose(0,2,3,1) -> Reshape [B*nH,c,T] -> one Slice
//              (or Split) per level, in token order -> Reshape [B*nH,c,h,w];
//   locations  L [B,Q,nH,P,2] -> (default: Mul 2, Sub 1) -> Transpose(0,2,1,3,4) ->
//              Reshape [B*nH,Q,P,2] -> Split over the points axis by level;
//   weights    W [B,Q,nH,P] -> Transpose(0,2,1,3) -> Reshape [B*nH,1,Q,P];
//   per level  default:  GridSample(bilinear, zeros, align_corners=0);
//              discrete: Mul [w,h] -> Add 0.5 -> Cast int64 -> Clip(0, h-1) -> (index
//              arithmetic on constants only) -> Gather from Flatten(Transpose(0,2,3,1)(value_l))
//              -> Reshape/Transpose/Reshape to [B*nH,c,Q,P_l];
//   tail       Concat(levels, -1) * weights -> ReduceSum(-1) -> Reshape [B,nH*c,Q] ->
//              Transpose(0,2,1).
// A site that looks similar (a Concat of GridSample or Gather samples) but fails a check
// is left as it is and reported with the check that failed.
Pass deform_attn_fusion_pass(FusionReport* report);

}  // namespace rkd::ir
