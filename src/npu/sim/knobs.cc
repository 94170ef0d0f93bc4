// The simulator's knobs (every disputed hardware behaviour a named choice: sim.h, Quirks;
// `rkdeploy help sim` lists them with their defaults and sources) and the LUT stage they
// parameterise most (sim.h, stage 6b).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "npu/sim/conv_task.h"
#include "npu/sim/sim.h"

namespace rkd::npu::sim {

int32_t detail::apply_lut(const Lut& l, int32_t v, const Quirks& q) {
  // Per table: -1 underflow, 0 hit (index i, fraction r), 1 overflow.
  struct View {
    int flow;
    int64_t i, r;
  };
  auto view = [&](int t) {
    const int64_t d = static_cast<int64_t>(v) - l.start[t];
    if (d < 0 || (d == 0 && q.lut_start_underflows)) return View{-1, 0, 0};
    const int64_t i = d >> l.select[t];
    if (i >= static_cast<int64_t>(l.table[t].size()) - 1) return View{1, 0, 0};
    return View{0, i, d & ((int64_t{1} << l.select[t]) - 1)};
  };
  const View le = view(0), lo = view(1);
  int t;
  if (le.flow == 0 && lo.flow == 0) t = l.hybrid_lo ? 1 : 0;
  else if (le.flow == -1 && lo.flow == -1) t = l.uflow_lo ? 1 : 0;
  else if (le.flow == 1 && lo.flow == 1) t = l.oflow_lo ? 1 : 0;
  else if (le.flow == 0) t = 0;
  else t = 1;  // LO hits, or one table under- and the other overflows [INF]
  const View& w = t == 0 ? le : lo;
  const std::vector<int16_t>& T = l.table[t];
  int64_t y;
  if (w.flow == 0) {
    const int s = l.select[t];
    y = round_shift(static_cast<int64_t>(T[w.i]) * ((int64_t{1} << s) - w.r) + static_cast<int64_t>(T[w.i + 1]) * w.r, s, q.lut_interp_rounding);
  } else if (w.flow < 0) {
    y = T.front() + round_shift((static_cast<int64_t>(v) - l.start[t]) * l.uflow_scale[t], l.uflow_shift[t], q.lut_interp_rounding);
  } else {
    y = T.back() + round_shift((static_cast<int64_t>(v) - l.end[t]) * l.oflow_scale[t], l.oflow_shift[t], q.lut_interp_rounding);
  }
  return detail::sat32(y);
}

const char* rounding_name(Rounding r) {
  switch (r) {
    case Rounding::half_to_even: return "half_to_even";
    case Rounding::half_away: return "half_away";
    case Rounding::half_up: return "half_up";
    case Rounding::truncate: return "truncate";
  }
  return "?";
}

std::vector<KnobInfo> knob_list() {
  return {
      {"out_cvt_rounding", "half_to_even|half_away|half_up|truncate", "half_to_even",
       "TRM: OUT_CVT rounds half to even; measured on RK3576, not on RK3588"},
      {"bs_shift_rounding", "half_to_even|half_away|half_up|truncate", "half_up", "rounding of the BS MUL right shift: unmeasured on RK3588"},
      {"out_cvt_scale_signed", "true|false", "true", "OUT_CVT_SCALE read as signed 16-bit (0x8000 flips the sign on RK3576)"},
      {"width_is_line", "true|false", "true",
       "CNA.DATA_SIZE0.DATAIN_WIDTH is the contiguous line dimension (hardware notes); false: Mesa's swap, consistent only on square maps"},
      {"ew_mode", "integer|float", "integer",
       "the EW stage's operand converter (a fused or DPU-only Add, LeakyRelu's max, a Mul's operand): Mesa's integer form ((e + OFFSET) * SCALE >> "
       "SHIFT, half "
       "up) or float32 arithmetic (another report); measured only at scale 1; disputed"},
      {"lut_start", "underflow|hit", "underflow",
       "the DPU LUT at v == START: an underflow (NVDLA's <= compare) or index 0; unmeasured on RK3588 (rkdeploy's tables give the same result "
       "either way)"},
      {"lut_interp_rounding", "half_to_even|half_away|half_up|truncate", "half_away",
       "rounding of the LUT's interpolation and overflow slopes: NVDLA's (half away from zero); unmeasured on RK3588 (rkdeploy's tables "
       "never interpolate)"},
      {"ppu_max_padding", "ignored|value", "ignored",
       "PPU max pooling over padded cells: ignored (NVDLA's PDP, whose padding values serve average pooling) or PADDING_VALUE_1_CFG's low "
       "byte; unmeasured on RK3588 with negative inputs (rkdeploy pads with the type's minimum, the same result either way)"},
  };
}

Status set_knob(Quirks& q, const std::string& a) {
  const auto eq = a.find('=');
  if (eq == std::string::npos) return invalid("sim knob '" + a + "': expected NAME=VALUE");
  const std::string k = a.substr(0, eq), v = a.substr(eq + 1);
  auto rounding = [&](Rounding& out) -> Status {
    for (Rounding r : {Rounding::half_to_even, Rounding::half_away, Rounding::half_up, Rounding::truncate}) {
      if (v == rounding_name(r)) {
        out = r;
        return {};
      }
    }
    return invalid("sim knob " + k + ": '" + v + "' is not half_to_even, half_away, half_up or truncate");
  };
  auto boolean = [&](bool& out) -> Status {
    if (v != "true" && v != "false") return invalid("sim knob " + k + ": '" + v + "' is not true or false");
    out = v == "true";
    return {};
  };
  if (k == "out_cvt_rounding") return rounding(q.out_cvt_rounding);
  if (k == "bs_shift_rounding") return rounding(q.bs_shift_rounding);
  if (k == "out_cvt_scale_signed") return boolean(q.out_cvt_scale_signed);
  if (k == "width_is_line") return boolean(q.width_is_line);
  if (k == "lut_interp_rounding") return rounding(q.lut_interp_rounding);
  if (k == "lut_start") {
    if (v != "underflow" && v != "hit") return invalid("sim knob lut_start: '" + v + "' is not underflow or hit");
    q.lut_start_underflows = v == "underflow";
    return {};
  }
  if (k == "ppu_max_padding") {
    if (v != "ignored" && v != "value") return invalid("sim knob ppu_max_padding: '" + v + "' is not ignored or value");
    q.ppu_max_pad_ignored = v == "ignored";
    return {};
  }
  if (k == "ew_mode") {
    if (v != "integer" && v != "float") return invalid("sim knob ew_mode: '" + v + "' is not integer or float");
    q.ew_float = v == "float";
    return {};
  }
  return invalid("sim knob '" + k + "': unknown (rkdeploy help sim lists them)");
}

namespace {

// A knob's value in q, as set_knob spells it.
std::string knob_value(const Quirks& q, const std::string& k) {
  if (k == "out_cvt_rounding") return rounding_name(q.out_cvt_rounding);
  if (k == "bs_shift_rounding") return rounding_name(q.bs_shift_rounding);
  if (k == "out_cvt_scale_signed") return q.out_cvt_scale_signed ? "true" : "false";
  if (k == "width_is_line") return q.width_is_line ? "true" : "false";
  if (k == "lut_interp_rounding") return rounding_name(q.lut_interp_rounding);
  if (k == "lut_start") return q.lut_start_underflows ? "underflow" : "hit";
  if (k == "ppu_max_padding") return q.ppu_max_pad_ignored ? "ignored" : "value";
  if (k == "ew_mode") return q.ew_float ? "float" : "integer";
  return "";
}

}  // namespace

std::string knob_assignments(const Quirks& q) {
  std::string s;
  for (const KnobInfo& k : knob_list()) {
    const std::string v = knob_value(q, k.name);
    if (v == k.default_value) continue;
    if (!s.empty()) s += ';';
    s.append(k.name).append("=").append(v);
  }
  return s;
}

Result<Quirks> quirks_from_assignments(const std::string& assignments) {
  Quirks q;
  size_t at = 0;
  while (at < assignments.size()) {
    const size_t end = std::min(assignments.find(';', at), assignments.size());
    RKD_TRY(set_knob(q, assignments.substr(at, end - at)));
    at = end + 1;
  }
  return q;
}

}  // namespace rkd::npu::sim
