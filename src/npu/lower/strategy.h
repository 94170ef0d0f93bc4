// Stage 1 of the convolution lowering: the per-axis strategy. Which output channels share a
// task, and each task's requantization (OUT_CVT, BS multipliers, the residual's EW converter,
// the ReLUX bound), as lower.h's header comment defines them. Pure arithmetic: no memory, no
// registers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "npu/lower/spec.h"
#include "quant/requant.h"

namespace rkd::npu::lower {

const char* strategy_name(Strategy s);
Result<Strategy> parse_strategy(const std::string& s);
std::vector<Strategy> all_strategies();

Result<OutCvt> encode_out_cvt(double m);
// OUT_CVT's value for v: round_half_even(v SCALE / 2^SHIFT) (the default rounding, per the TRM).
int64_t apply_out_cvt(int64_t v, const OutCvt& c);
// The largest int32 v with apply_out_cvt(v) <= limit (BS ReLUX's compare value for an upper
// bound `limit` above the output offset); unsupported when limit < 0.
Result<int64_t> relux_bound(const OutCvt& c, int64_t limit);

// One task's channels and requantization.
struct TaskPlan {
  std::vector<int64_t> channels;  // original output channels, in the task's order
  bool use_mul = false;           // per-channel BS multipliers (mul, bs_shift)
  int bs_shift = 0;
  std::vector<int32_t> mul;  // per task channel (int16 range)
  OutCvt cvt;
};
// M_k = s_x s_w[k] / s_y.
double real_multiplier(const ConvSpec& s, int64_t k);
// The strategy's tasks over all output channels (before any CBUF split).
Result<std::vector<TaskPlan>> plan_tasks(const ConvSpec& s, Strategy st, const LowerOptions& opt);

// With a residual, the EW converter must hold m = s_r / (s_y M_out) (M_out the task's OUT_CVT
// multiplier) in 15 bits: when M_out is so small that m >= 2^15, CORE truncates the
// accumulator by T bits (half to even) and the bias is folded in that coarser unit. Returns T
// and lowers cvt.shift by it; unsupported when T would exceed the shift.
Result<int> residual_truncation(const ConvSpec& s, OutCvt& cvt);
// The EW operand converter for the residual after residual_truncation (cvt as adjusted):
// e' = (e + OFFSET) SCALE / 2^SHIFT in pre-OUT_CVT units.
Result<quant::Multiplier15> residual_converter(const ConvSpec& s, const OutCvt& cvt);

}  // namespace rkd::npu::lower
