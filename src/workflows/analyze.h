// rkdeploy analyze: every int8 convolution of a quantized model, lowered with each per-axis
// strategy (npu/lower), executed by the NPU simulator (npu/sim) on the activations the int8
// reference path computes for a real input, and compared with the reference's output.
//
// Contract:
//  - The model is compiled with --backend int8 (QDQ -> QLinearConv, the model's own
//    requantization convention: ONNX Runtime's for ONNX files, TFLite's for .tflite) and run
//    once on `inputs`; each QLinearConv's int8 input and output are kept.
//  - Each convolution (batch 1, 2-D, groups 1 or depthwise, no dilation, per-tensor input
//    and output quantization) is lowered with each requested strategy into fresh simulated
//    device memory, encoded as regcmd, executed by the simulator, compacted, and compared
//    with the reference output value by value. Convolutions the lowering cannot express are
//    listed with the reason, not silently dropped.
//  - Estimated cycles per task: padded MACs / (MACs per cycle per core) + the per-task
//    overhead (both from src/npu/arch/rk3588.json); one core.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tensor.h"
#include "npu/lower/lower.h"
#include "npu/sim/sim.h"

namespace rkd::workflows {

struct StrategyResult {
  std::string strategy;
  int64_t max_diff = 0;  // LSB
  double mean_diff = 0;  // LSB
  int64_t exact = 0, values = 0;
  int64_t tasks = 0;
  int64_t weight_bytes = 0, operand_bytes = 0;
  int64_t est_cycles = 0;
  int64_t row_slices = 1;  // the most CBUF row slices of one channel group (1: none)
  std::string error;       // lowering or simulation failed: why
};

struct ConvResult {
  std::string node;
  std::string shape;        // "3x320x320 -> 16x160x160 k3 s2"
  double scale_spread = 1;  // max / min weight scale
  std::vector<StrategyResult> strategies;
  std::string skipped;  // not lowered (outside the shared limits, or no strategy lowers it): why
};

struct NpuAnalysis {
  std::string model;
  std::string requant;  // the reference's convention
  std::vector<ConvResult> convs;
  std::vector<StrategyResult> totals;  // per strategy over all lowered convs (max of max, sums)
};

Result<NpuAnalysis> analyze_npu(const std::string& model, const std::map<std::string, Tensor>& inputs,
                                const std::vector<npu::lower::Strategy>& strategies, const npu::sim::Quirks& quirks, int threads,
                                const npu::lower::LowerOptions& lower_options = {}, const std::string& requant = "");

std::string npu_analysis_text(const NpuAnalysis& a, bool per_conv);
std::string npu_analysis_json(const NpuAnalysis& a);
// A self-contained page (no scripts, no network): a bar chart of each strategy's bit-exact
// share (svg#exact, one rect per strategy with data-exact and data-max), the totals
// (table#totals, the text report's columns plus row slices) and every convolution
// (table#convs: exact % / max LSB per strategy).
std::string npu_analysis_html(const NpuAnalysis& a);

}  // namespace rkd::workflows
