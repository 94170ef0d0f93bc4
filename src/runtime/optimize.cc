// executor.h: optimize(), the pass pipeline from an imported graph to the one the executor
// runs. Not part of the embeddable runtime (rkd_rt): it needs the quantizer's qdq-to-qlinear.
#include <algorithm>

#include "ir/pass.h"
#include "ir/passes/fold.h"
#include "ir/passes/fusion.h"
#include "ir/passes/int8_layout.h"
#include "ir/passes/shape_inference.h"
#include "quant/qlinear.h"
#include "quant/requant.h"
#include "runtime/executor.h"
#include "runtime/npu_ops.h"
#include "runtime/op_registry.h"

namespace rkd::runtime {

std::vector<std::string> pass_names(bool fuse) {
  std::vector<std::string> v{"shape-inference",   "constant-folding", "dead-code-elimination", "conv-bn-folding",
                             "conv-bias-folding", "qdq-to-qlinear",   "constant-folding-2"};
  if (fuse) v.push_back("deform-attn-fusion");
  v.push_back("conv-activation-fusion");
  v.push_back("int8-channels-last");
  v.push_back("dead-code-elimination-2");
  return v;
}

Status optimize(ir::Graph& g, const CompileOptions& opt, FusionReport* report) {
  if (opt.int8) {
    // The integer back ends on a float model would run it in float and say nothing.
    const bool quantized = std::any_of(g.nodes().begin(), g.nodes().end(), [](const auto& n) {
      const std::string& t = n->op_type;
      return t.find("Quantize") != std::string::npos || t.rfind("QLinear", 0) == 0 || t.ends_with("Integer");
    });
    if (!quantized) {
      return unsupported(
          "no quantized operator (QuantizeLinear, DequantizeLinear, QLinear*, *Integer): a float model; the int8 "
          "back ends (--backend int8, sim, analyze, compile) need a quantized one (rkdeploy quantize)");
    }
  }
  if (opt.int8 && opt.requant) g.metadata["rkdeploy.requant"] = quant::to_string(*opt.requant);
  if (opt.int8 && !opt.portable && opt.npu_strategy) g.metadata["rkdeploy.npu"] = npu::lower::strategy_name(*opt.npu_strategy);
  ir::PassManager pm;
  pm.add(ir::shape_inference_pass());
  pm.add(ir::constant_folding_pass(evaluate_node, {"DequantizeLinear"}));
  pm.add(ir::dead_code_elimination_pass());
  pm.add(ir::conv_bn_folding_pass());
  pm.add(ir::conv_scale_folding_pass());
  pm.add(ir::conv_bias_folding_pass());
  if (opt.int8 && !opt.portable) pm.add(quant::qdq_to_qlinear_pass(evaluate_node));
  if (opt.int8 && !opt.portable && opt.npu_strategy) {
    // The dequantized copies qdq-to-qlinear left unread go first: the placement fuses a
    // convolution with the Add that is its only reader.
    ir::Pass dce = ir::dead_code_elimination_pass();
    dce.name = "dead-code-elimination-npu";
    pm.add(dce);
    NpuPlacementOptions po;
    po.strategy = *opt.npu_strategy;
    po.quirks = opt.npu_quirks;
    po.fuse_add = opt.npu_fuse_add;
    po.ppu_only_tasks = !opt.npu_mainline;
    pm.add(npu_placement_pass(po, report));
  }
  pm.add(ir::constant_folding_pass(evaluate_node, {}, "constant-folding-2"));
  FusionReport local;
  if (opt.fuse && !opt.portable) pm.add(ir::deform_attn_fusion_pass(report ? report : &local));
  if (!opt.portable && opt.fuse_activations) pm.add(ir::conv_activation_fusion_pass());
  if (opt.int8 && !opt.portable && opt.channels_last) pm.add(ir::int8_channels_last_pass());
  ir::Pass dce2 = ir::dead_code_elimination_pass();
  dce2.name = "dead-code-elimination-2";
  pm.add(dce2);
  // Last: the order every consumer of the NPU graph runs (and the planner's as-run prices).
  if (opt.int8 && !opt.portable && opt.npu_strategy) pm.add(npu_schedule_pass());
  ir::PassOptions po;
  po.dump_after = opt.dump_after;
  po.dump = opt.dump;
  RKD_TRY(pm.run(g, po));
  if (!opt.require_executable) return {};
  // Everything left must be executable: report every node that is not, at once.
  const std::vector<std::string> problems = unexecutable_nodes(g);
  if (!problems.empty()) {
    std::string msg = std::to_string(problems.size()) + " node(s) cannot run on the CPU executor:";
    for (const auto& p : problems) msg += "\n  " + p;
    return unsupported(msg);
  }
  return {};
}

}  // namespace rkd::runtime
