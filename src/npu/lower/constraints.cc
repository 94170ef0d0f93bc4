#include "npu/lower/constraints.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "npu/arch/arch.h"

namespace rkd::npu::lower {

namespace {

using namespace arch;  // NOLINT: register fields and parameters

// "A.B.C and D are N-bit fields" for two fields of one register.
std::string fields_reason(const Field& a, const Field& b) {
  const std::string bn = b.name;
  std::ostringstream o;
  o << a.name << " and " << bn.substr(bn.rfind('.') + 1) << " are " << a.width() << "-bit fields";
  return o.str();
}

// One rule over a geometry G: found() is empty when the rule holds.
template <typename G>
struct RuleOf {
  std::string rule, reason;
  std::function<std::string(const G&)> found;
};
using Rule = RuleOf<ConvGeometry>;
using EltwiseRule = RuleOf<EltwiseGeometry>;
using PoolRule = RuleOf<PoolGeometry>;

template <typename G>
std::vector<std::pair<std::string, std::string>> listed(const std::vector<RuleOf<G>>& rules) {
  std::vector<std::pair<std::string, std::string>> v;
  for (const RuleOf<G>& r : rules) v.emplace_back(r.rule, r.reason);
  return v;
}

template <typename G>
std::vector<Violation> broken(const std::vector<RuleOf<G>>& rules, const G& g) {
  std::vector<Violation> v;
  for (const RuleOf<G>& r : rules) {
    std::string f = r.found(g);
    if (!f.empty()) v.push_back({std::move(f), r.rule, r.reason});
  }
  return v;
}

Status first_violation(const std::vector<Violation>& v, const std::string& what) {
  if (v.empty()) return {};
  return unsupported(what + v[0].text());
}

std::string dims(int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

const std::vector<Rule>& rules() {
  static const std::vector<Rule> r = [] {
    const ConvLimits& l = conv_limits();
    std::vector<Rule> v;
    v.push_back({"int8 or uint8", "the lowering emits the int8 datapath (INT16 output times out on the hardware)", [](const ConvGeometry& g) {
                   return g.dtype == DType::i8 || g.dtype == DType::u8 ? std::string() : std::string(dtype_name(g.dtype)) + " convolution";
                 }});
    v.push_back({"batch 1", "one image per task set (batches are not lowered)",
                 [](const ConvGeometry& g) { return g.batch == 1 ? std::string() : "batch " + std::to_string(g.batch); }});
    v.push_back(
        {"one input and one output scale", "the CNA takes one input zero point and OUT_CVT one output offset per task",
         [](const ConvGeometry& g) { return g.per_axis_activations ? std::string("per-axis input or output quantization") : std::string(); }});
    v.push_back({"dilation 1", "dilated convolutions are not lowered yet", [](const ConvGeometry& g) {
                   return g.dilation_h == 1 && g.dilation_w == 1 ? std::string() : "dilation " + dims(g.dilation_h, g.dilation_w);
                 }});
    v.push_back({"dense or depthwise (groups = C = OC)", "grouped convolutions and channel multipliers are not lowered", [](const ConvGeometry& g) {
                   if (g.groups == 1 || (g.groups == g.C && g.OC == g.C)) return std::string();
                   return std::to_string(g.groups) + " groups of " + std::to_string(g.C) + " -> " + std::to_string(g.OC) + " channels";
                 }});
    v.push_back(
        {"kernel <= " + std::to_string(l.max_kernel_w), fields_reason(CNA_WEIGHT_SIZE2_WEIGHT_WIDTH, CNA_WEIGHT_SIZE2_WEIGHT_HEIGHT),
         [l](const ConvGeometry& g) { return g.KW <= l.max_kernel_w && g.KH <= l.max_kernel_h ? std::string() : "kernel " + dims(g.KH, g.KW); }});
    v.push_back({"stride <= " + std::to_string(l.max_stride_w), fields_reason(CNA_CONV_CON3_CONV_X_STRIDE, CNA_CONV_CON3_CONV_Y_STRIDE),
                 [l](const ConvGeometry& g) {
                   return g.stride_w <= l.max_stride_w && g.stride_h <= l.max_stride_h ? std::string() : "stride " + dims(g.stride_h, g.stride_w);
                 }});
    v.push_back({"top and left padding <= " + std::to_string(l.max_pad_top),
                 fields_reason(CNA_PAD_CON0_PAD_TOP, CNA_PAD_CON0_PAD_LEFT) + " (bottom and right padding follow from the output size)",
                 [l](const ConvGeometry& g) {
                   return g.pad_top <= l.max_pad_top && g.pad_left <= l.max_pad_left ? std::string() : "padding " + dims(g.pad_top, g.pad_left);
                 }});
    v.push_back({"width <= " + std::to_string(l.max_width),
                 std::string(CNA_DATA_SIZE0_DATAIN_WIDTH.name) + " is " + std::to_string(CNA_DATA_SIZE0_DATAIN_WIDTH.width()) +
                     " bits wide; rows are split into slices, the width is not (width splitting is not implemented)",
                 [l](const ConvGeometry& g) { return g.W <= l.max_width ? std::string() : "width " + std::to_string(g.W); }});
    v.push_back({"height <= " + std::to_string(l.max_height), "rk3588.json size_field_max: the 13-bit size fields, kept below 8191 [HW]",
                 [l](const ConvGeometry& g) { return g.H <= l.max_height ? std::string() : "height " + std::to_string(g.H); }});
    v.push_back({"one weight zero point", "OW_OP (the weight zero point's correction) is one register per task", [](const ConvGeometry& g) {
                   return g.per_channel_weight_zero_points ? std::string("per-channel weight zero points") : std::string();
                 }});
    v.push_back(
        {"no fused activation, ReLU or a clamp from above", "the BS stage's ReLU clamps at the output zero point only", [](const ConvGeometry& g) {
           return g.fused_lower_bound_other_than_relu ? std::string("a fused lower bound other than ReLU's") : std::string();
         }});
    v.push_back({"no activation after a fused residual add", "the EW stage's ReLU is not lowered", [](const ConvGeometry& g) {
                   return g.activation_after_residual ? std::string("an activation after a fused residual add") : std::string();
                 }});
    return v;
  }();
  return r;
}

// "F is N bits wide (minus one)" for a cube size field.
std::string size_reason(const Field& f) { return std::string(f.name) + " is " + std::to_string(f.width()) + " bits wide, the size minus one"; }

const std::vector<EltwiseRule>& eltwise_rule_list() {
  static const std::vector<EltwiseRule> r = [] {
    std::vector<EltwiseRule> v;
    v.push_back({"int8 or uint8", "the lowering emits the DPU's int8 datapath", [](const EltwiseGeometry& g) {
                   return g.dtype == DType::i8 || g.dtype == DType::u8 ? std::string() : std::string(dtype_name(g.dtype)) + " operands";
                 }});
    v.push_back({"batch 1", "one image per task",
                 [](const EltwiseGeometry& g) { return g.batch == 1 ? std::string() : "batch " + std::to_string(g.batch); }});
    v.push_back({"operands of one shape, or a per-channel or one-element second operand",
                 "ERDMA reads one operand value per element (EW_DATA_MODE 1) or one per channel (EW_DATA_MODE 0)", [](const EltwiseGeometry& g) {
                   if (!g.broadcast || g.per_channel_operand) return std::string();
                   return std::string("a broadcast operand (a row or a column)");
                 }});
    v.push_back({"one scale and zero point per tensor", "the EW converter and OUT_CVT take one offset and one multiplier per task",
                 [](const EltwiseGeometry& g) { return g.per_axis_quantization ? std::string("per-axis quantization") : std::string(); }});
    v.push_back({"no fused activation", "the EW stage's ReLU is not lowered yet",
                 [](const EltwiseGeometry& g) { return g.fused_activation ? std::string("a fused activation") : std::string(); }});
    const std::string c2 = std::to_string(kRk3588.feature_c2_int8);
    v.push_back({"Concat, Split and DepthToSpace parts start at multiples of " + c2 + " channels",
                 "MRDMA reads and WDMA writes whole " + c2 +
                     "-channel surfaces: a part's copy task is placed by its first surface's address (SRC_BASE_ADDR, DST_BASE_ADDR)",
                 [](const EltwiseGeometry& g) {
                   return g.unaligned_part_offset == 0 ? std::string() : "a part at channel " + std::to_string(g.unaligned_part_offset);
                 }});
    const int64_t mw = static_cast<int64_t>(DPU_DATA_CUBE_WIDTH_WIDTH.max()) + 1, mh = static_cast<int64_t>(DPU_DATA_CUBE_HEIGHT_HEIGHT.max()) + 1,
                  mc = static_cast<int64_t>(DPU_DATA_CUBE_CHANNEL_CHANNEL.max()) + 1;
    v.push_back({"width <= " + std::to_string(mw), size_reason(DPU_DATA_CUBE_WIDTH_WIDTH),
                 [mw](const EltwiseGeometry& g) { return g.W <= mw ? std::string() : "width " + std::to_string(g.W); }});
    v.push_back({"height <= " + std::to_string(mh), size_reason(DPU_DATA_CUBE_HEIGHT_HEIGHT),
                 [mh](const EltwiseGeometry& g) { return g.H <= mh ? std::string() : "height " + std::to_string(g.H); }});
    v.push_back({"channels <= " + std::to_string(mc), size_reason(DPU_DATA_CUBE_CHANNEL_CHANNEL),
                 [mc](const EltwiseGeometry& g) { return (g.C + 15) / 16 * 16 <= mc ? std::string() : std::to_string(g.C) + " channels"; }});
    return v;
  }();
  return r;
}

const std::vector<PoolRule>& pool_rule_list() {
  static const std::vector<PoolRule> r = [] {
    std::vector<PoolRule> v;
    v.push_back({"int8 or uint8", "the lowering emits the PPU's int8 precision", [](const PoolGeometry& g) {
                   return g.dtype == DType::i8 || g.dtype == DType::u8 ? std::string() : std::string(dtype_name(g.dtype)) + " input";
                 }});
    v.push_back(
        {"batch 1", "one image per task", [](const PoolGeometry& g) { return g.batch == 1 ? std::string() : "batch " + std::to_string(g.batch); }});
    v.push_back({"no Indices output", "PPU.OPERATION_MODE_CFG.INDEX_EN writes window positions, not ONNX's flat indices",
                 [](const PoolGeometry& g) { return g.indices ? std::string("the Indices output") : std::string(); }});
    v.push_back({"no dilation", "the PPU's windows are dense", [](const PoolGeometry& g) {
                   return g.dilation_h == 1 && g.dilation_w == 1 ? std::string() : "dilation " + dims(g.dilation_h, g.dilation_w);
                 }});
    v.push_back({"floor mode", "the PPU's output holds the windows that fit (ceil_mode 1 is not lowered)",
                 [](const PoolGeometry& g) { return g.ceil_mode ? std::string("ceil_mode 1") : std::string(); }});
    const int64_t mk = static_cast<int64_t>(PPU_POOLING_KERNEL_CFG_KERNEL_WIDTH.max()) + 1;
    const int64_t ms = static_cast<int64_t>(PPU_POOLING_KERNEL_CFG_KERNEL_STRIDE_WIDTH.max()) + 1;
    const int64_t mp = static_cast<int64_t>(PPU_POOLING_PADDING_CFG_PAD_LEFT.max());
    v.push_back({"kernel <= " + std::to_string(mk),
                 fields_reason(PPU_POOLING_KERNEL_CFG_KERNEL_WIDTH, PPU_POOLING_KERNEL_CFG_KERNEL_HEIGHT) + ", the size minus one",
                 [mk](const PoolGeometry& g) { return g.KH <= mk && g.KW <= mk ? std::string() : "kernel " + dims(g.KH, g.KW); }});
    v.push_back(
        {"stride <= " + std::to_string(ms),
         fields_reason(PPU_POOLING_KERNEL_CFG_KERNEL_STRIDE_WIDTH, PPU_POOLING_KERNEL_CFG_KERNEL_STRIDE_HEIGHT) + ", the stride minus one",
         [ms](const PoolGeometry& g) { return g.stride_h <= ms && g.stride_w <= ms ? std::string() : "stride " + dims(g.stride_h, g.stride_w); }});
    v.push_back({"pads <= " + std::to_string(mp),
                 std::string("PPU.POOLING_PADDING_CFG's PAD_LEFT, PAD_TOP, PAD_RIGHT and PAD_BOTTOM are ") +
                     std::to_string(PPU_POOLING_PADDING_CFG_PAD_LEFT.width()) + "-bit fields",
                 [mp](const PoolGeometry& g) {
                   const int64_t m = std::max({g.pad_top, g.pad_left, g.pad_bottom, g.pad_right});
                   return m <= mp ? std::string() : "a pad of " + std::to_string(m);
                 }});
    v.push_back({"no padding with a kernel of " + std::to_string(mk),
                 "allbilly/rk3588's measured program pools a kernel of 16 and pads of 7 alone, not both together (it returned the first input "
                 "value) [HW]",
                 [mk](const PoolGeometry& g) {
                   const bool padded = g.pad_top || g.pad_left || g.pad_bottom || g.pad_right;
                   return padded && (g.KH == mk || g.KW == mk) ? "kernel " + dims(g.KH, g.KW) + " with padding" : std::string();
                 }});
    v.push_back({"pads below the kernel", "every window holds a cell of the map (how the PPU pads a max is unmeasured: sim knob ppu_max_padding)",
                 [](const PoolGeometry& g) {
                   return g.pad_top < g.KH && g.pad_bottom < g.KH && g.pad_left < g.KW && g.pad_right < g.KW
                              ? std::string()
                              : std::string("a pad of at least the kernel");
                 }});
    const int64_t mw = static_cast<int64_t>(PPU_DATA_CUBE_IN_WIDTH_CUBE_IN_WIDTH.max()) + 1;
    const int64_t mh = static_cast<int64_t>(PPU_DATA_CUBE_IN_HEIGHT_CUBE_IN_HEIGHT.max()) + 1;
    const int64_t mc = static_cast<int64_t>(PPU_DATA_CUBE_IN_CHANNEL_CUBE_IN_CHANNEL.max()) + 1;
    v.push_back({"width <= " + std::to_string(mw), size_reason(PPU_DATA_CUBE_IN_WIDTH_CUBE_IN_WIDTH),
                 [mw](const PoolGeometry& g) { return g.W <= mw ? std::string() : "width " + std::to_string(g.W); }});
    v.push_back({"height <= " + std::to_string(mh), size_reason(PPU_DATA_CUBE_IN_HEIGHT_CUBE_IN_HEIGHT),
                 [mh](const PoolGeometry& g) { return g.H <= mh ? std::string() : "height " + std::to_string(g.H); }});
    v.push_back({"channels <= " + std::to_string(mc), size_reason(PPU_DATA_CUBE_IN_CHANNEL_CUBE_IN_CHANNEL),
                 [mc](const PoolGeometry& g) { return (g.C + 15) / 16 * 16 <= mc ? std::string() : std::to_string(g.C) + " channels"; }});
    return v;
  }();
  return r;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> pool_rules() { return listed(pool_rule_list()); }
std::vector<Violation> check_pool(const PoolGeometry& g) { return broken(pool_rule_list(), g); }
Status pool_supported(const PoolGeometry& g, const std::string& what) { return first_violation(check_pool(g), what); }

int64_t unaligned_part_offset(const std::vector<int64_t>& parts) {
  int64_t at = 0;
  for (int64_t c : parts) {
    if (at % kRk3588.feature_c2_int8 != 0) return at;
    at += c;
  }
  return 0;
}

std::vector<std::pair<std::string, std::string>> eltwise_rules() { return listed(eltwise_rule_list()); }
std::vector<Violation> check_eltwise(const EltwiseGeometry& g) { return broken(eltwise_rule_list(), g); }
bool per_channel_operand(const std::vector<int64_t>& map, const std::vector<int64_t>& b) {
  int64_t nb = 1;
  for (int64_t d : b) nb *= d;
  if (nb == 1) return true;
  if (map.size() != 4 || b.size() < 3 || b.size() > 4 || (b.size() == 4 && b[0] != 1)) return false;
  return b[b.size() - 3] == map[1] && b[b.size() - 2] == 1 && b[b.size() - 1] == 1;
}

Status eltwise_supported(const EltwiseGeometry& g, const std::string& what) { return first_violation(check_eltwise(g), what); }

const ConvLimits& conv_limits() {
  static const ConvLimits l{static_cast<int64_t>(CNA_WEIGHT_SIZE2_WEIGHT_WIDTH.max()), static_cast<int64_t>(CNA_WEIGHT_SIZE2_WEIGHT_HEIGHT.max()),
                            static_cast<int64_t>(CNA_CONV_CON3_CONV_X_STRIDE.max()),   static_cast<int64_t>(CNA_CONV_CON3_CONV_Y_STRIDE.max()),
                            static_cast<int64_t>(CNA_PAD_CON0_PAD_LEFT.max()),         static_cast<int64_t>(CNA_PAD_CON0_PAD_TOP.max()),
                            static_cast<int64_t>(CNA_DATA_SIZE0_DATAIN_WIDTH.max()),   kRk3588.size_field_max};
  return l;
}

std::string Violation::text() const { return found + ": " + rule + " (" + reason + ")"; }

std::vector<std::pair<std::string, std::string>> conv_rules() { return listed(rules()); }
std::vector<Violation> check_conv(const ConvGeometry& g) { return broken(rules(), g); }
Status conv_supported(const ConvGeometry& g, const std::string& what) { return first_violation(check_conv(g), what); }

}  // namespace rkd::npu::lower
