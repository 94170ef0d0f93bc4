// Fusion passes: patterns rewritten into fewer nodes (rkdeploy's own ops, domain "rkdeploy",
// whose kernels are the executor's: src/runtime/op_registry_rkdeploy.cc).
//
// conv-activation-fusion: Conv followed by Relu, or by the SiLU pair Sigmoid(y) and
// Mul(y, Sigmoid(y)), where the conv output has no other reader, becomes one Conv with
// the attribute rkd_activation = "relu" | "silu" (oneDNN post-op, applied after the bias).
#pragma once

#include <string>
#include <vector>

#include "ir/pass.h"

namespace rkd::ir {

// What the rewriting passes did, for `run` and `inspect` to print.
struct FusionReport {
  int fused_sites = 0;
  std::vector<std::string> fused;                    // one line per fused site
  std::vector<std::string> not_fused;                // "node X: <reason>"
  int npu_sim_convs = 0;                             // convolutions placed on the NPU simulator
  int npu_fused_adds = 0;                            // of which with the following Add fused (EW stage)
  std::vector<std::string> npu_cpu_convs;            // "node X: <reason>" for those left on the CPU
  int npu_sim_adds = 0;                              // QLinearAdds placed on the NPU simulator as DPU-only tasks
  std::vector<std::string> npu_cpu_adds;             // "node X: <reason>" for the QLinearAdds left on the CPU
  int npu_sim_alus = 0;                              // QLinearSub / QLinearMax / QLinearMin placed on the NPU simulator (EW ALU)
  std::vector<std::string> npu_cpu_alus;             // "node X: <reason>" for those left on the CPU
  int npu_sim_muls = 0;                              // QLinearMuls placed on the NPU simulator (the EW multiply)
  std::vector<std::string> npu_cpu_muls;             // "node X: <reason>" for the QLinearMuls left on the CPU
  int npu_sim_leaky_relus = 0;                       // LeakyRelu tables placed on the NPU simulator as DPU-only tasks
  int npu_leaky_relu_table_differences = 0;          // the most entries (of 256) of one whose reference table differs
  int npu_sim_luts = 0;                              // other tables (Sigmoid, SiLU, HardSwish, ...) through the DPU's LUT
  std::vector<std::string> npu_cpu_luts;             // "node X: <reason>" for the tables left on the CPU
  int npu_sim_concats = 0;                           // integer channel Concats placed on the NPU simulator as copy tasks
  std::vector<std::string> npu_cpu_concats;          // "node X: <reason>" for the integer Concats left on the CPU
  int npu_sim_splits = 0;                            // integer channel Splits placed on the NPU simulator as copy tasks
  std::vector<std::string> npu_cpu_splits;           // "node X: <reason>" for the integer Splits left on the CPU
  int npu_sim_pools = 0;                             // integer MaxPools placed on the NPU simulator as PPU tasks
  std::vector<std::string> npu_cpu_pools;            // "node X: <reason>" for the integer MaxPools left on the CPU
  int npu_sim_pads = 0;                              // integer channel Pads placed on the NPU simulator as DPU tasks
  std::vector<std::string> npu_cpu_pads;             // "node X: <reason>" for the integer Pads left on the CPU
  int npu_sim_resizes = 0;                           // integer x2 Resizes placed on the NPU simulator (nearest: DPU copy tasks)
  int npu_sim_edge_resizes = 0;                      // of which with a Pad edge by 1 merged (a bilinear x2's first half)
  std::vector<std::string> npu_cpu_resizes;          // "node X: <reason>" for the integer x2 Resize candidates left on the CPU
  int npu_sim_depth_to_spaces = 0;                   // integer DepthToSpaces (a ConvTranspose's interleave) as DPU copy tasks
  std::vector<std::string> npu_cpu_depth_to_spaces;  // "node X: <reason>" for the integer DepthToSpaces left on the CPU
  // Every npu_cpu_* list above: the nodes npu-sim-placement left on the CPU, with the reason.
  std::vector<const std::vector<std::string>*> npu_cpu_lists() const {
    return {&npu_cpu_convs,  &npu_cpu_adds,  &npu_cpu_alus, &npu_cpu_muls,    &npu_cpu_luts,           &npu_cpu_concats,
            &npu_cpu_splits, &npu_cpu_pools, &npu_cpu_pads, &npu_cpu_resizes, &npu_cpu_depth_to_spaces};
  }
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
