#include "npu/lower/lower.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/tensor_ops.h"
#include "npu/lower/layout_simd.h"
#include "npu/arch/arch.h"
#include "npu/lower/constraints.h"
#include "quant/requant.h"

namespace rkd::npu::lower {

namespace {

using namespace arch;  // NOLINT: register constants

int64_t align(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

int32_t load(const Tensor& t, int64_t i) {
  return t.dtype() == DType::i8 ? static_cast<int32_t>(t.data<int8_t>()[i]) : static_cast<int32_t>(t.data<uint8_t>()[i]);
}

// Stored (signed) domain: uint8 values are kept minus 128.
int32_t stored(int32_t v, DType t) { return t == DType::u8 ? v - 128 : v; }

// Maps shorter than the hardware's minimum height (4 rows: lower ones are broken [HW]) are
// stored with extra rows of the input zero point below them.
int64_t stored_height(const ConvSpec& s) { return std::max<int64_t>(s.H, kRk3588.min_height); }

struct TaskPlan {
  std::vector<int64_t> channels;  // original output channels, in the task's order
  bool use_mul = false;
  int bs_shift = 0;
  std::vector<int32_t> mul;  // per task channel (int16 range)
  OutCvt cvt;
};

double real_multiplier(const ConvSpec& s, int64_t k) {
  return static_cast<double>(s.x_scale) * static_cast<double>(s.w_scales.size() == 1 ? s.w_scales[0] : s.w_scales[static_cast<size_t>(k)]) /
         static_cast<double>(s.y_scale);
}

// OUT_CVT's value for v: round_half_even(v SCALE / 2^SHIFT) (the default rounding, per the TRM).
int64_t out_cvt(int64_t v, const OutCvt& c) {
  const int64_t p = v * c.scale;
  if (c.shift == 0) return p;
  const int64_t q = p >> c.shift, rem = p & ((int64_t{1} << c.shift) - 1), half = int64_t{1} << (c.shift - 1);
  return rem > half || (rem == half && (q & 1)) ? q + 1 : q;
}

// The largest int32 v with out_cvt(v) <= limit (out_cvt is non-decreasing in v).
Result<int64_t> relux_bound(const OutCvt& c, int64_t limit) {
  if (limit < 0) return unsupported("npu lowering: an activation upper bound below the zero point");
  int64_t lo = 0, hi = INT32_MAX;
  if (out_cvt(hi, c) <= limit) return hi;
  while (lo < hi) {  // invariant: out_cvt(lo) <= limit < out_cvt(hi + 1)... binary search for the last v
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (out_cvt(mid, c) <= limit) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Tasks with one OUT_CVT each, from each group's largest multiplier.
Result<std::vector<TaskPlan>> out_cvt_groups(const ConvSpec& s, const std::vector<std::vector<int64_t>>& groups) {
  std::vector<TaskPlan> plans;
  for (const auto& g : groups) {
    double m = 0;
    for (int64_t k : g) m = std::max(m, real_multiplier(s, k));
    TaskPlan p;
    p.channels = g;
    RKD_ASSIGN(p.cvt, encode_out_cvt(m));
    plans.push_back(std::move(p));
  }
  return plans;
}

// One task over `channels` with per-channel BS multipliers. opt: bs-multiplier-opt's joint
// choice; otherwise the vendor's MUL = round(2^14 M_k / M_max) with OUT_CVT from M_max.
Result<TaskPlan> bs_task(const ConvSpec& s, std::vector<int64_t> channels, bool opt) {
  double m_max = 0;
  for (int64_t k : channels) m_max = std::max(m_max, real_multiplier(s, k));
  TaskPlan p;
  p.channels = std::move(channels);
  p.use_mul = true;
  if (!opt) {
    p.bs_shift = 14;
    RKD_ASSIGN(p.cvt, encode_out_cvt(m_max));
    for (int64_t k : p.channels) p.mul.push_back(static_cast<int32_t>(std::lround(16384.0 * real_multiplier(s, k) / m_max)));
    return p;
  }
  p.bs_shift = 15;
  RKD_ASSIGN(p.cvt, encode_out_cvt(m_max * 32768.0 / 32767.0));
  // The multiplier that, with the OUT_CVT scale as encoded, gives M_k: MUL = M_k 2^(15 + SHIFT) / SCALE.
  for (int64_t k : p.channels) {
    const double ideal = real_multiplier(s, k) * std::ldexp(1.0, 15 + p.cvt.shift) / p.cvt.scale;
    p.mul.push_back(static_cast<int32_t>(std::clamp<double>(std::nearbyint(ideal), 1.0, 32767.0)));
  }
  return p;
}

Result<std::vector<TaskPlan>> plan(const ConvSpec& s, Strategy st, const LowerOptions& opt) {
  std::vector<int64_t> all(static_cast<size_t>(s.OC));
  std::iota(all.begin(), all.end(), 0);
  auto chunks = [](const std::vector<int64_t>& v, size_t n) {
    std::vector<std::vector<int64_t>> g;
    for (size_t i = 0; i < v.size(); i += n)
      g.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(i), v.begin() + static_cast<std::ptrdiff_t>(std::min(v.size(), i + n)));
    return g;
  };
  std::vector<int64_t> sorted = all;
  std::stable_sort(sorted.begin(), sorted.end(), [&](int64_t a, int64_t b) { return real_multiplier(s, a) < real_multiplier(s, b); });
  switch (st) {
    case Strategy::per_tensor: return out_cvt_groups(s, {all});
    case Strategy::group16: return out_cvt_groups(s, chunks(all, 16));
    case Strategy::sorted_groups: return out_cvt_groups(s, chunks(sorted, 16));
    case Strategy::per_channel: return out_cvt_groups(s, chunks(all, 1));
    case Strategy::hybrid: {
      std::vector<std::vector<int64_t>> groups;
      for (const auto& g : chunks(all, 16)) {
        double lo = 1e300, hi = 0;
        for (int64_t k : g) {
          lo = std::min(lo, real_multiplier(s, k));
          hi = std::max(hi, real_multiplier(s, k));
        }
        if (hi / lo > opt.hybrid_ratio) {
          for (int64_t k : g) groups.push_back({k});
        } else {
          groups.push_back(g);
        }
      }
      return out_cvt_groups(s, groups);
    }
    case Strategy::bs_multiplier:
    case Strategy::bs_multiplier_opt: {
      RKD_ASSIGN(TaskPlan p, bs_task(s, all, st == Strategy::bs_multiplier_opt));
      return std::vector<TaskPlan>{p};
    }
    case Strategy::sorted_bs_multiplier: {
      std::vector<TaskPlan> plans;
      const double spread = std::ldexp(1.0, opt.sorted_bs_spread_log2);
      std::vector<int64_t> cur;
      for (int64_t k : sorted) {
        if (!cur.empty() && real_multiplier(s, k) > real_multiplier(s, cur.front()) * spread) {
          RKD_ASSIGN(TaskPlan p, bs_task(s, cur, true));
          plans.push_back(std::move(p));
          cur.clear();
        }
        cur.push_back(k);
      }
      RKD_ASSIGN(TaskPlan p, bs_task(s, cur, true));
      plans.push_back(std::move(p));
      return plans;
    }
  }
  return invalid("unknown strategy");
}

}  // namespace

ConvGeometry geometry_of(const ConvSpec& s) {
  ConvGeometry g;
  g.dtype = s.dtype;
  g.C = s.C;
  g.H = s.H;
  g.W = s.W;
  g.OC = s.OC;
  g.KH = s.KH;
  g.KW = s.KW;
  g.stride_h = s.stride_h;
  g.stride_w = s.stride_w;
  g.pad_top = s.pad_top;
  g.pad_left = s.pad_left;
  g.groups = s.depthwise ? s.C : 1;
  for (int32_t z : s.w_zero_points) g.per_channel_weight_zero_points = g.per_channel_weight_zero_points || z != s.w_zero_points[0];
  const int32_t qmin = s.dtype == DType::i8 ? -128 : 0, qmax = s.dtype == DType::i8 ? 127 : 255;
  g.fused_lower_bound_other_than_relu = s.act_min != qmin && s.act_min != s.y_zero_point;
  g.activation_after_residual = s.residual && (s.act_min != qmin || s.act_max != qmax);
  return g;
}

Status check_spec(const ConvSpec& s) {
  // Malformed specs first ("invalid"), then what the NPU does not take (constraints.h).
  if (s.C < 1 || s.H < 1 || s.W < 1 || s.OC < 1 || s.KH < 1 || s.KW < 1) return invalid("npu lowering: empty convolution");
  if (s.dtype == DType::i8 || s.dtype == DType::u8) {
    const Shape want{s.OC, s.depthwise ? 1 : s.C, s.KH, s.KW};
    if (s.weights.shape() != want || s.weights.dtype() != s.dtype)
      return invalid("npu lowering: weights must be [OC, C/groups, KH, KW] of the input's type");
    const int32_t qmax = s.dtype == DType::i8 ? 127 : 255, qmin = s.dtype == DType::i8 ? -128 : 0;
    if (s.act_max < qmin || s.act_max > qmax) return invalid("npu lowering: activation upper bound outside the type's range");
  }
  if (s.w_scales.size() != 1 && static_cast<int64_t>(s.w_scales.size()) != s.OC)
    return invalid("npu lowering: one weight scale or one per output channel");
  if (s.w_zero_points.size() != 1 && static_cast<int64_t>(s.w_zero_points.size()) != s.OC)
    return invalid("npu lowering: one weight zero point or one per output channel");
  if (!s.bias.empty() && static_cast<int64_t>(s.bias.size()) != s.OC) return invalid("npu lowering: bias must have OC values");
  if (s.residual && !(s.r_scale > 0)) return invalid("npu lowering: residual scale must be positive");
  RKD_TRY(conv_supported(geometry_of(s), "npu lowering: "));
  if (s.OH() < 1 || s.OW() < 1) return unsupported("npu lowering: the padded input is smaller than the kernel");
  return {};
}

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::per_tensor: return "per-tensor";
    case Strategy::group16: return "group16";
    case Strategy::sorted_groups: return "sorted-groups";
    case Strategy::per_channel: return "per-channel";
    case Strategy::hybrid: return "hybrid";
    case Strategy::bs_multiplier: return "bs-multiplier";
    case Strategy::bs_multiplier_opt: return "bs-multiplier-opt";
    case Strategy::sorted_bs_multiplier: return "sorted-bs-multiplier";
  }
  return "?";
}

std::vector<Strategy> all_strategies() {
  return {Strategy::per_tensor, Strategy::group16,       Strategy::sorted_groups,     Strategy::per_channel,
          Strategy::hybrid,     Strategy::bs_multiplier, Strategy::bs_multiplier_opt, Strategy::sorted_bs_multiplier};
}

Result<Strategy> parse_strategy(const std::string& name) {
  std::string names;
  for (Strategy s : all_strategies()) {
    if (name == strategy_name(s)) return s;
    names += names.empty() ? "" : ", ";
    names += strategy_name(s);
  }
  return invalid("strategy '" + name + "': expected one of " + names);
}

Result<OutCvt> encode_out_cvt(double m) {
  RKD_ASSIGN(quant::Multiplier15 q, quant::quantize_multiplier_15(m));
  return OutCvt{q.scale, q.shift};
}

Result<Tiling> plan_tiling(const TileGeometry& g) {
  const int64_t bank = kRk3588.cbuf_bank_bytes, banks = kRk3588.cbuf_banks;
  if (g.C < 1 || g.H < 1 || g.W < 1 || g.KH < 1 || g.stride_h < 1 || g.OH < 1 || g.element_bytes < 1) return invalid("CBUF tiling: empty geometry");
  const int64_t row = g.W * g.C * g.element_bytes;
  const int64_t weight_banks = std::max<int64_t>(1, (g.weight_bytes + bank - 1) / bank);
  Tiling t;
  const int64_t whole = (g.H * row + bank - 1) / bank + g.spare_banks;
  if (whole + weight_banks <= banks) {
    t.data_banks = whole;
    t.weight_banks = banks - whole;
    t.slices.push_back(Slice{0, g.H, 0, g.OH, g.pad_top});
    return t;
  }
  t.weight_banks = weight_banks;
  t.data_banks = banks - weight_banks;
  const int64_t cap = t.data_banks > g.spare_banks ? (t.data_banks - g.spare_banks) * bank / row : 0;
  if (cap < std::max<int64_t>(g.KH, kRk3588.min_height)) {
    return unsupported("CBUF tiling: " + std::to_string(std::max<int64_t>(g.KH, kRk3588.min_height)) + " input rows of " + std::to_string(row) +
                       " bytes do not fit the " + std::to_string(t.data_banks) + " data banks the weights (" + std::to_string(g.weight_bytes) +
                       " bytes) leave; width or channel splitting is not implemented");
  }
  const int64_t per = (cap - g.KH) / g.stride_h + 1;  // output rows whose input fits
  // Greedy, as the vendor's single-core runs slice (c32 112x112 fp16: 50, 50, 16 rows); the
  // last slice takes rows from the one before when it would read fewer than 4 rows.
  std::vector<int64_t> rows;
  for (int64_t left = g.OH; left > 0; left -= rows.back()) rows.push_back(std::min(per, left));
  auto first_row = [&](size_t i) {
    int64_t o0 = 0;
    for (size_t j = 0; j < i; ++j) o0 += rows[j];
    return std::max<int64_t>(0, o0 * g.stride_h - g.pad_top);
  };
  while (rows.size() > 1 && first_row(rows.size() - 1) > g.H - kRk3588.min_height && rows[rows.size() - 2] > 1) {
    --rows[rows.size() - 2];
    ++rows.back();
  }
  int64_t o0 = 0;
  for (int64_t r : rows) {
    Slice s;
    s.out_row0 = o0;
    s.out_rows = r;
    const int64_t first = o0 * g.stride_h - g.pad_top, last = (o0 + r - 1) * g.stride_h + g.KH - 1 - g.pad_top;
    s.pad_top = std::max<int64_t>(0, -first);
    s.in_row0 = std::max<int64_t>(0, first);
    // The hardware needs at least 4 rows: read further rows below (unused by the taps).
    const int64_t end = std::min(g.H - 1, std::max(std::min(g.H - 1, last), s.in_row0 + kRk3588.min_height - 1));
    s.in_rows = end - s.in_row0 + 1;
    if (s.in_rows < kRk3588.min_height) return unsupported("CBUF tiling: a slice of fewer than 4 rows at the bottom of the map");
    if (s.in_rows > cap) return Error{ErrorKind::internal, "CBUF tiling: slice exceeds its banks"};
    t.slices.push_back(s);
    o0 += r;
  }
  return t;
}

namespace {
int64_t input_bytes(const ConvSpec& s) { return align(std::max<int64_t>(s.C, 16), 16) / 16 * stored_height(s) * s.W * 16; }
}  // namespace

namespace {

// NC1HWC2 <-> channel planes. Channel j of a map lives in block j / 16 (at blocks + (j / 16)
// * surface), lane j % 16 of every 16-byte pixel. Blocks and chunks of pixels on the math
// threads (OpenMP), each a 16 x 16 byte transpose per 16 pixels (layout_simd.cc). Every
// byte is XORed with `flip`.
constexpr int64_t kChunk = 4096;

// Block bytes of pixels [0, pixels) from planes[j] (nullptr: `fill` in that lane).
void planes_to_blocks(const std::vector<const uint8_t*>& planes, int64_t pixels, uint8_t fill, uint8_t flip, uint8_t* blocks, int64_t surface) {
  const int64_t nb = (static_cast<int64_t>(planes.size()) + 15) / 16, chunks = (pixels + kChunk - 1) / kChunk;
  ops::math_parallel_for(nb * chunks, nb * 16 * pixels, [&](int64_t job) {
    const int64_t b = job / chunks, i0 = (job % chunks) * kChunk, i1 = std::min(pixels, i0 + kChunk);
    const uint8_t* src[16];
    for (size_t lane = 0; lane < 16; ++lane) {
      const size_t j = static_cast<size_t>(b) * 16 + lane;
      src[lane] = j < planes.size() ? planes[j] : nullptr;
    }
    detail::planes_to_block(src, i0, i1, fill, flip, blocks + b * surface);
  });
}

// planes[j][i] = block byte of channel j, pixel i, for the planes that are not nullptr.
void blocks_to_planes(const uint8_t* blocks, int64_t surface, int64_t pixels, uint8_t flip, const std::vector<uint8_t*>& planes) {
  const int64_t nb = (static_cast<int64_t>(planes.size()) + 15) / 16, chunks = (pixels + kChunk - 1) / kChunk;
  ops::math_parallel_for(nb * chunks, nb * 16 * pixels, [&](int64_t job) {
    const int64_t b = job / chunks, i0 = (job % chunks) * kChunk, i1 = std::min(pixels, i0 + kChunk);
    const uint8_t* src = blocks + b * surface;
    uint8_t* dst[16];
    int used = 0;
    for (size_t lane = 0; lane < 16; ++lane) {
      const size_t j = static_cast<size_t>(b) * 16 + lane;
      dst[lane] = j < planes.size() ? planes[j] : nullptr;
      used += dst[lane] != nullptr;
    }
    if (used > 0) detail::block_to_planes(src, i0, i1, flip, dst);  // none: a depthwise window's block another task computes
  });
}

}  // namespace

Status write_input(DeviceMemory& mem, uint32_t address, const ConvSpec& s, const Tensor& x0) {
  if (x0.shape() != Shape{1, s.C, s.H, s.W} || x0.dtype() != s.dtype) return invalid("npu input: expected [1, C, H, W] of the convolution's type");
  const Tensor x = x0.contiguous();
  const int64_t ICp = align(std::max<int64_t>(s.C, 16), 16), plane = stored_height(s) * s.W, real = s.H * s.W;
  RKD_ASSIGN(std::span<uint8_t> bytes, mem.span(address, static_cast<size_t>(input_bytes(s))));
  // Rows below the map (maps shorter than the hardware's minimum height) and padded channels
  // hold the input zero point: the same as the convolution's zero padding.
  const uint8_t zx = static_cast<uint8_t>(static_cast<int8_t>(stored(s.x_zero_point, s.dtype)));
  const uint8_t flip = s.dtype == DType::u8 ? 0x80 : 0;  // uint8 -> stored int8: x - 128
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  std::vector<const uint8_t*> planes(static_cast<size_t>(ICp), nullptr);
  for (int64_t c = 0; c < s.C; ++c) planes[static_cast<size_t>(c)] = src + c * real;
  planes_to_blocks(planes, real, zx, flip, bytes.data(), plane * 16);
  for (int64_t b = 0; b < ICp / 16; ++b) std::memset(bytes.data() + (b * plane + real) * 16, zx, static_cast<size_t>((plane - real) * 16));
  return {};
}

Result<uint32_t> place_input(DeviceMemory& mem, const ConvSpec& s, const Tensor& x) {
  const uint32_t a = mem.alloc(static_cast<size_t>(input_bytes(s)));
  RKD_TRY(write_input(mem, a, s, x));
  return a;
}

Result<Lowered> lower_conv(const ConvSpec& s, Strategy st, DeviceMemory& mem, uint32_t input_address, const LowerOptions& opt) {
  RKD_TRY(check_spec(s));
  RKD_ASSIGN(std::vector<TaskPlan> plans, plan(s, st, opt));
  const int64_t kk = s.KH * s.KW, ICp = align(std::max<int64_t>(s.C, 16), 16);
  const Tensor w = s.weights.contiguous();
  const int32_t zw = s.w_zero_points[0];
  const int32_t ow_op = s.dtype == DType::u8 ? 128 - zw : -zw;  // w_s + OW_OP = w - z_w
  const int32_t zx = stored(s.x_zero_point, s.dtype);
  const int64_t OH = s.OH(), OW = s.OW();
  Lowered out;
  out.input_address = input_address;
  out.OH = OH;
  out.OW = OW;
  // Kernel chunks: a channel group whose weights would leave fewer data banks than one row
  // slice needs is split into consecutive chunks of kernels (32-kernel steps) whose weights
  // fit the banks the input leaves (at most 7 of them for the input, as Mesa splits).
  if (!s.depthwise && opt.cbuf_tiling) {
    const int64_t bank = kRk3588.cbuf_bank_bytes, banks = kRk3588.cbuf_banks, spare = kRk3588.cbuf_spare_feature_banks;
    const int64_t row = ICp * s.W, kernel = kk * ICp;
    const int64_t min_rows = std::min(stored_height(s), std::max<int64_t>(s.KH, kRk3588.min_height));
    const int64_t min_data = (min_rows * row + bank - 1) / bank + spare;
    const int64_t whole_data = (stored_height(s) * row + bank - 1) / bank + spare;
    const int64_t weight_budget = banks - std::max(min_data, std::min<int64_t>(whole_data, 7));
    int64_t per = weight_budget > 0 ? weight_budget * bank / kernel : 0;
    per = per >= 32 ? per / 32 * 32 : per / 2 * 2;
    if (per < 2)
      return unsupported("npu lowering: two kernels of " + std::to_string(kernel) + " bytes and " + std::to_string(min_rows) +
                         " input rows do not fit the CBUF (width or channel splitting is not implemented)");
    std::vector<TaskPlan> chunked;
    for (const TaskPlan& p : plans) {
      if (align(static_cast<int64_t>(p.channels.size()), 2) * kernel <= (banks - min_data) * bank) {
        chunked.push_back(p);
        continue;
      }
      for (size_t i = 0; i < p.channels.size(); i += static_cast<size_t>(per)) {
        const size_t e = std::min(p.channels.size(), i + static_cast<size_t>(per));
        TaskPlan c = p;
        c.channels.assign(p.channels.begin() + static_cast<std::ptrdiff_t>(i), p.channels.begin() + static_cast<std::ptrdiff_t>(e));
        if (p.use_mul) c.mul.assign(p.mul.begin() + static_cast<std::ptrdiff_t>(i), p.mul.begin() + static_cast<std::ptrdiff_t>(e));
        chunked.push_back(std::move(c));
      }
    }
    plans = std::move(chunked);
  }
  for (const TaskPlan& plan_in : plans) {
    // A depthwise task reads input channel j for output channel j: its channels are a
    // contiguous window starting on a 16-channel (C2) boundary, from which the plan's
    // channels are kept and the others discarded (-1).
    TaskPlan p = plan_in;
    uint32_t task_input = input_address;
    std::vector<int64_t> keep = p.channels;
    if (s.depthwise) {
      const int64_t lo = *std::min_element(p.channels.begin(), p.channels.end()) / 16 * 16;
      const int64_t hi = std::min(align(*std::max_element(p.channels.begin(), p.channels.end()) + 1, 16), s.C);
      task_input = input_address + static_cast<uint32_t>(lo / 16 * stored_height(s) * s.W * 16);
      std::vector<int32_t> mul(static_cast<size_t>(hi - lo), 1);
      keep.assign(static_cast<size_t>(hi - lo), -1);
      for (size_t j = 0; j < p.channels.size(); ++j) {
        keep[static_cast<size_t>(p.channels[j] - lo)] = p.channels[j];
        if (p.use_mul) mul[static_cast<size_t>(p.channels[j] - lo)] = p.mul[j];
      }
      p.channels.clear();
      for (int64_t c = lo; c < hi; ++c) p.channels.push_back(c);
      p.mul = mul;
    }
    const int64_t n = static_cast<int64_t>(p.channels.size());
    const int64_t task_C = s.depthwise ? n : s.C;
    // Weights of this task's kernels, packed.
    std::vector<uint8_t> wb;
    int64_t kernels = 0;
    auto wval = [&](int64_t k, int64_t c, int64_t ky, int64_t kx) -> int32_t {  // w_s, or -OW_OP where padded
      if (k >= n || c >= (s.depthwise ? 1 : s.C)) return -ow_op;
      return stored(load(w, ((p.channels[static_cast<size_t>(k)] * (s.depthwise ? 1 : s.C) + c) * s.KH + ky) * s.KW + kx), s.dtype);
    };
    if (s.depthwise) {
      const int64_t cp = align(n, 64);
      wb.assign(static_cast<size_t>(cp * kk), 0);
      for (int64_t k = 0; k < cp; ++k)
        for (int64_t ky = 0; ky < s.KH; ++ky)
          for (int64_t kx = 0; kx < s.KW; ++kx)
            wb[static_cast<size_t>((k / 64) * kk * 64 + (ky * s.KW + kx) * 64 + k % 64)] =
                static_cast<uint8_t>(static_cast<int8_t>(wval(k, 0, ky, kx)));
      kernels = n;
    } else {
      kernels = align(n, 2);
      wb.assign(static_cast<size_t>(kernels * kk * ICp), 0);
      for (int64_t k = 0; k < kernels; ++k) {
        const int64_t oc1 = k / 32, goc = std::min<int64_t>(32, kernels - 32 * oc1);
        for (int64_t c = 0; c < ICp; ++c) {
          const int64_t ic1 = c / 32, gic = std::min<int64_t>(32, ICp - 32 * ic1);
          for (int64_t ky = 0; ky < s.KH; ++ky)
            for (int64_t kx = 0; kx < s.KW; ++kx) {
              const int64_t at = oc1 * 32 * kk * ICp + ic1 * goc * kk * 32 + ((ky * s.KW + kx) * goc + k % 32) * gic + c % 32;
              // Padded kernels (k >= n) are 0; padded input lanes -OW_OP.
              const int32_t v = k >= n ? 0 : wval(k, c, ky, kx);
              wb[static_cast<size_t>(at)] = static_cast<uint8_t>(static_cast<int8_t>(v));
            }
        }
      }
    }
    const uint32_t waddr = mem.alloc(wb.size());
    RKD_TRY(mem.write(waddr, wb));
    out.weight_bytes += wb.size();
    out.buffers.push_back(Buffer{"weights", out.tasks.size(), waddr, wb.size()});
    // With a residual the EW converter (15-bit scale, shift >= 0) must hold the multiplier
    // m = s_r / (s_y M_out), M_out = SCALE / 2^SHIFT the OUT_CVT's. When M_out is so small
    // that m >= 2^15, CORE truncates the accumulator by T bits (half to even) and the bias is
    // folded in that coarser unit: M_out grows by 2^T (SHIFT - T) and m shrinks by 2^T. The
    // extra rounding is at most one unit of M_out 2^T output steps (measured in the tests).
    int truncate = 0;
    if (s.residual) {
      const double m0 = static_cast<double>(s.r_scale) / static_cast<double>(s.y_scale) * std::ldexp(1.0, p.cvt.shift) / p.cvt.scale;
      while (std::ldexp(m0, -truncate) >= 32767.0 && truncate < 31) ++truncate;
      if (truncate > p.cvt.shift) return unsupported("npu lowering: residual multiplier " + std::to_string(m0) + " outside the EW converter's range");
      p.cvt.shift -= truncate;
    }
    // bias'[k] = bias[k] - z_x_s * sum_taps (w - z_w) (in units of 2^T, rounded half up).
    std::vector<int32_t> bias(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      const int64_t oc = p.channels[static_cast<size_t>(k)];
      int64_t sum = 0;
      for (int64_t c = 0; c < (s.depthwise ? 1 : s.C); ++c)
        for (int64_t t = 0; t < kk; ++t) sum += load(w, (oc * (s.depthwise ? 1 : s.C) + c) * kk + t) - zw;
      int64_t b = (s.bias.empty() ? 0 : s.bias[static_cast<size_t>(oc)]) - static_cast<int64_t>(zx) * sum;
      if (truncate > 0) b = (b + (int64_t{1} << (truncate - 1))) >> truncate;
      if (b < INT32_MIN || b > INT32_MAX) return unsupported("npu lowering: folded bias of channel " + std::to_string(oc) + " overflows int32");
      bias[static_cast<size_t>(k)] = static_cast<int32_t>(b);
    }
    // Written channels: 32-channel groups for a convolution, 64 for depthwise.
    const int64_t written = s.depthwise ? align(n, 64) : align(std::max<int64_t>(n, 32), 32);
    std::vector<uint8_t> ops;
    uint32_t data_use;
    if (p.use_mul) {
      ops.assign(static_cast<size_t>(align(written, 8) / 8 * 64), 0);
      for (int64_t k = 0; k < n; ++k) {
        const size_t blk = static_cast<size_t>(k / 8) * 64, lane = static_cast<size_t>(k % 8);
        std::memcpy(ops.data() + blk + 4 * lane, &bias[static_cast<size_t>(k)], 4);
        const int16_t m = static_cast<int16_t>(p.mul[static_cast<size_t>(k)]);
        std::memcpy(ops.data() + blk + 48 + 2 * lane, &m, 2);
      }
      data_use = 7;  // ALU, CPEND, MUL (the vendor's BRDMA_CFG 0xE)
    } else {
      ops.assign(static_cast<size_t>(written) * 4, 0);
      std::memcpy(ops.data(), bias.data(), static_cast<size_t>(n) * 4);
      data_use = 1;
    }
    const uint32_t baddr = mem.alloc(ops.size());
    RKD_TRY(mem.write(baddr, ops));
    out.operand_bytes += ops.size();
    out.buffers.push_back(Buffer{"operands", out.tasks.size(), baddr, ops.size()});
    OutputRegion region;
    region.surface_bytes = OH * OW * 16;
    region.channels = keep;
    region.address = mem.alloc(static_cast<size_t>(written / 16 * region.surface_bytes));
    out.buffers.push_back(Buffer{"output", out.tasks.size(), region.address, static_cast<size_t>(written / 16 * region.surface_bytes)});
    // EW operand converter: e' = (e + OFFSET) SCALE / 2^SHIFT in pre-OUT_CVT units, i.e. the
    // residual's real value divided by the OUT_CVT's multiplier times s_y.
    quant::Multiplier15 ew{};
    if (s.residual) {
      region.residual_surface_bytes = std::max<int64_t>(OH * OW, 12) * 16;  // EW_SURF_STRIDE has a floor of 12 [HW]
      const size_t rbytes = static_cast<size_t>((written / 16 - 1) * region.residual_surface_bytes + OH * OW * 16);
      region.residual_address = mem.alloc(rbytes);
      out.buffers.push_back(Buffer{"residual", out.tasks.size(), region.residual_address, rbytes});
      const double m = static_cast<double>(s.r_scale) / static_cast<double>(s.y_scale) * std::ldexp(1.0, p.cvt.shift) / p.cvt.scale;
      auto e = quant::quantize_multiplier_15(m);
      if (!e.ok()) return unsupported("npu lowering: residual multiplier " + std::to_string(m) + " outside the EW converter's range");
      ew = *e;
    }
    const int64_t task_ICp = align(std::max<int64_t>(task_C, 16), 16);
    TileGeometry tg;
    tg.C = task_ICp;
    tg.H = stored_height(s);
    tg.W = s.W;
    tg.KH = s.KH;
    tg.stride_h = s.stride_h;
    tg.pad_top = s.pad_top;
    tg.OH = OH;
    tg.weight_bytes = static_cast<int64_t>(wb.size());
    tg.spare_banks = kRk3588.cbuf_spare_feature_banks;
    Tiling tiling;
    if (opt.cbuf_tiling) {
      RKD_ASSIGN(tiling, plan_tiling(tg));
    } else {
      tiling.data_banks = kRk3588.cbuf_banks - 1;
      tiling.weight_banks = 1;
      tiling.slices.push_back(Slice{0, tg.H, 0, OH, s.pad_top});
    }
    out.row_slices = std::max(out.row_slices, static_cast<int64_t>(tiling.slices.size()));
    for (size_t si = 0; si < tiling.slices.size(); ++si) {
      const Slice& sl = tiling.slices[si];
      regcmd::Task t;
      auto& r = t.regs;
      RKD_TRY(r.set(CNA_CONV_CON1_CONV_MODE, s.depthwise ? 3 : 0));
      RKD_TRY(r.set(CNA_CONV_CON3_CONV_X_STRIDE, static_cast<uint64_t>(s.stride_w)));
      RKD_TRY(r.set(CNA_CONV_CON3_CONV_Y_STRIDE, static_cast<uint64_t>(s.stride_h)));
      RKD_TRY(r.set(CNA_DATA_SIZE0_DATAIN_WIDTH, static_cast<uint64_t>(s.W)));
      RKD_TRY(r.set(CNA_DATA_SIZE0_DATAIN_HEIGHT, static_cast<uint64_t>(sl.in_rows)));
      RKD_TRY(r.set(CNA_DATA_SIZE1_DATAIN_CHANNEL, static_cast<uint64_t>(task_ICp)));
      RKD_TRY(r.set(CNA_DATA_SIZE1_DATAIN_CHANNEL_REAL, static_cast<uint64_t>(task_C - 1)));
      RKD_TRY(r.set(CNA_DATA_SIZE2_DATAOUT_WIDTH, static_cast<uint64_t>(OW)));
      RKD_TRY(r.set(CNA_DATA_SIZE3_DATAOUT_ATOMICS, static_cast<uint64_t>(OW * sl.out_rows)));
      RKD_TRY(r.set(CNA_WEIGHT_SIZE0_WEIGHT_BYTES, wb.size()));
      RKD_TRY(r.set(CNA_WEIGHT_SIZE1_WEIGHT_BYTES_PER_KERNEL, static_cast<uint64_t>(kk * (s.depthwise ? 1 : ICp))));

      RKD_TRY(r.set(CNA_WEIGHT_SIZE2_WEIGHT_WIDTH, static_cast<uint64_t>(s.KW)));
      RKD_TRY(r.set(CNA_WEIGHT_SIZE2_WEIGHT_HEIGHT, static_cast<uint64_t>(s.KH)));
      RKD_TRY(r.set(CNA_WEIGHT_SIZE2_WEIGHT_KERNELS, static_cast<uint64_t>(kernels)));
      RKD_TRY(r.set(CNA_CBUF_CON0_DATA_BANK, static_cast<uint64_t>(tiling.data_banks)));
      RKD_TRY(r.set(CNA_CBUF_CON0_WEIGHT_BANK, static_cast<uint64_t>(tiling.weight_banks)));
      RKD_TRY(r.set(CNA_CBUF_CON0_WEIGHT_REUSE, si > 0 ? 1 : 0));  // the group's weights stay in CBUF
      RKD_TRY(r.set(CNA_CVT_CON0_CVT_BYPASS, 1));
      RKD_TRY(r.set(CNA_PAD_CON0_PAD_TOP, static_cast<uint64_t>(sl.pad_top)));
      RKD_TRY(r.set(CNA_PAD_CON0_PAD_LEFT, static_cast<uint64_t>(s.pad_left)));
      r.set(CNA_PAD_CON1, static_cast<uint32_t>(static_cast<uint8_t>(static_cast<int8_t>(zx))));
      r.set(CNA_FEATURE_DATA_ADDR, task_input + static_cast<uint32_t>(sl.in_row0 * s.W * 16));
      RKD_TRY(r.set(CNA_DMA_CON1_LINE_STRIDE, static_cast<uint64_t>(4 * s.W)));
      RKD_TRY(r.set(CNA_DMA_CON2_SURF_STRIDE, static_cast<uint64_t>(s.W * (stored_height(s) - 4))));
      r.set(CNA_DCOMP_ADDR0, waddr);
      RKD_TRY(r.set(CORE_MISC_CFG_DW_EN, s.depthwise ? 1 : 0));
      RKD_TRY(r.set(CORE_DATAOUT_SIZE_0_DATAOUT_WIDTH, static_cast<uint64_t>(OW - 1)));
      RKD_TRY(r.set(CORE_DATAOUT_SIZE_0_DATAOUT_HEIGHT, static_cast<uint64_t>(sl.out_rows - 1)));
      RKD_TRY(r.set(CORE_DATAOUT_SIZE_1_DATAOUT_CHANNEL, static_cast<uint64_t>(written - 1)));
      RKD_TRY(r.set(CORE_CLIP_TRUNCATE_CLIP_TRUNCATE, static_cast<uint64_t>(truncate)));
      r.set(DPU_DST_BASE_ADDR, region.address + static_cast<uint32_t>(sl.out_row0 * OW * 16));
      RKD_TRY(r.set(DPU_DST_SURF_STRIDE_DST_SURF_STRIDE, static_cast<uint64_t>(OH * OW)));
      RKD_TRY(r.set(DPU_DATA_CUBE_WIDTH_WIDTH, static_cast<uint64_t>(OW - 1)));
      RKD_TRY(r.set(DPU_DATA_CUBE_HEIGHT_HEIGHT, static_cast<uint64_t>(sl.out_rows - 1)));
      RKD_TRY(r.set(DPU_DATA_CUBE_CHANNEL_CHANNEL, static_cast<uint64_t>(written - 1)));
      RKD_TRY(r.set(DPU_DATA_CUBE_CHANNEL_ORIG_CHANNEL, static_cast<uint64_t>(n - 1)));
      // BS: ALU adds bias' from BRDMA; MUL per strategy; ReLU when fused.
      const bool relu = s.residual ? s.conv_relu : s.act_min == s.y_zero_point && s.act_min != (s.dtype == DType::i8 ? -128 : 0);
      RKD_TRY(r.set(DPU_BS_CFG_BS_ALU_ALGO, 2));
      RKD_TRY(r.set(DPU_BS_CFG_BS_ALU_SRC, 1));
      RKD_TRY(r.set(DPU_BS_CFG_BS_MUL_BYPASS, p.use_mul ? 0 : 1));
      RKD_TRY(r.set(DPU_BS_CFG_BS_RELU_BYPASS, relu ? 0 : 1));
      // An upper bound below the type's maximum (ReLU6): BS ReLUX clips the value before
      // OUT_CVT at the largest v whose output does not exceed act_max, which makes
      // OUT_CVT(min(v, X)) = min(OUT_CVT(v), act_max) exactly (OUT_CVT is monotonic).
      const int32_t qmax_t = s.dtype == DType::i8 ? 127 : 255;
      if (s.act_max < qmax_t) {
        RKD_ASSIGN(int64_t x, relux_bound(p.cvt, stored(s.act_max, s.dtype) - stored(s.y_zero_point, s.dtype)));
        RKD_TRY(r.set(DPU_BS_CFG_BS_RELUX_EN, 1));
        r.set(DPU_BS_RELUX_CMP_VALUE, static_cast<uint32_t>(static_cast<int32_t>(x)));
      }
      if (p.use_mul) {
        RKD_TRY(r.set(DPU_BS_MUL_CFG_BS_MUL_SRC, 1));
        RKD_TRY(r.set(DPU_BS_MUL_CFG_BS_MUL_SHIFT_VALUE, static_cast<uint64_t>(p.bs_shift)));
        RKD_TRY(r.set(DPU_DATA_FORMAT_BS_MUL_SHIFT_VALUE_NEG, static_cast<uint64_t>(p.bs_shift)));
      }
      RKD_TRY(r.set(DPU_BS_OW_CFG_OD_BYPASS, ow_op == 0 ? 1 : 0));
      RKD_TRY(r.set(DPU_BS_OW_OP_OW_OP, static_cast<uint64_t>(static_cast<uint16_t>(static_cast<int16_t>(ow_op)))));
      RKD_TRY(r.set(DPU_BN_CFG_BN_BYPASS, 1));
      if (s.residual) {
        // EW: add the residual read by ERDMA (one int8 per element), converted by the EW
        // operand converter; no EW ReLU / LUT.
        RKD_TRY(r.set(DPU_EW_CFG_EW_OP_SRC, 1));
        RKD_TRY(r.set(DPU_EW_CFG_EW_ALU_ALGO, 2));
        RKD_TRY(r.set(DPU_EW_CFG_EW_LUT_BYPASS, 1));
        RKD_TRY(r.set(DPU_EW_CFG_EW_RELU_BYPASS, 1));
        RKD_TRY(r.set(DPU_EW_CFG_EDATA_SIZE, 1));
        RKD_TRY(r.set(DPU_EW_CFG_EW_DATA_MODE, 1));
        r.set(DPU_EW_CVT_OFFSET_VALUE, static_cast<uint32_t>(-stored(s.r_zero_point, s.dtype)));
        RKD_TRY(r.set(DPU_EW_CVT_SCALE_VALUE_EW_OP_CVT_SCALE, static_cast<uint64_t>(ew.scale)));
        RKD_TRY(r.set(DPU_EW_CVT_SCALE_VALUE_EW_OP_CVT_SHIFT, static_cast<uint64_t>(ew.shift)));
        RKD_TRY(r.set(DPU_RDMA_RDMA_ERDMA_CFG_ERDMA_DATA_MODE, 1));
        RKD_TRY(r.set(DPU_RDMA_RDMA_ERDMA_CFG_ERDMA_DATA_SIZE, 1));
        r.set(DPU_RDMA_RDMA_EW_BASE_ADDR, region.residual_address + static_cast<uint32_t>(sl.out_row0 * OW * 16));
        RKD_TRY(r.set(DPU_RDMA_RDMA_EW_SURF_STRIDE_EW_SURF_STRIDE, static_cast<uint64_t>(region.residual_surface_bytes / 16)));
      } else {
        RKD_TRY(r.set(DPU_EW_CFG_EW_BYPASS, 1));
      }
      RKD_TRY(r.set(DPU_WDMA_SIZE_0_CHANNEL_WDMA, static_cast<uint64_t>(written - 1)));
      RKD_TRY(r.set(DPU_WDMA_SIZE_1_WIDTH_WDMA, static_cast<uint64_t>(OW - 1)));
      RKD_TRY(r.set(DPU_WDMA_SIZE_1_HEIGHT_WDMA, static_cast<uint64_t>(sl.out_rows - 1)));
      r.set(DPU_OUT_CVT_OFFSET, static_cast<uint32_t>(stored(s.y_zero_point, s.dtype)));
      RKD_TRY(r.set(DPU_OUT_CVT_SCALE_OUT_CVT_SCALE, static_cast<uint64_t>(p.cvt.scale)));
      RKD_TRY(r.set(DPU_OUT_CVT_SHIFT_OUT_CVT_SHIFT, static_cast<uint64_t>(p.cvt.shift)));
      RKD_TRY(r.set(DPU_RDMA_RDMA_DATA_CUBE_WIDTH_WIDTH, static_cast<uint64_t>(OW - 1)));
      RKD_TRY(r.set(DPU_RDMA_RDMA_DATA_CUBE_HEIGHT_HEIGHT, static_cast<uint64_t>(sl.out_rows - 1)));
      RKD_TRY(r.set(DPU_RDMA_RDMA_DATA_CUBE_CHANNEL_CHANNEL, static_cast<uint64_t>(written - 1)));
      RKD_TRY(r.set(DPU_RDMA_RDMA_BRDMA_CFG_BRDMA_DATA_USE, data_use));
      r.set(DPU_RDMA_RDMA_BS_BASE_ADDR, baddr);
      if (!s.residual) {
        RKD_TRY(r.set(DPU_RDMA_RDMA_ERDMA_CFG_ERDMA_DISABLE, 1));
      }
      RKD_TRY(r.set(DPU_RDMA_RDMA_FEATURE_MODE_CFG_MRDMA_DISABLE, 1));  // no elementwise operand
      out.tasks.push_back(std::move(t));
      out.task_info.push_back(TaskInfo{out.outputs.size(), sl, tiling.data_banks, tiling.weight_banks});
    }
    out.outputs.push_back(std::move(region));
  }
  return out;
}

Result<PlacedRegcmd> place_regcmd(DeviceMemory& mem, const Lowered& l) {
  PlacedRegcmd p;
  p.address = mem.alloc(0, 16);  // the encoder needs the address before the size is known
  RKD_ASSIGN(p.words, regcmd::encode(l.tasks, p.address, &p.spans));
  const uint32_t at = mem.alloc(p.words.size() * 8, 16);
  if (at != p.address) return Error{ErrorKind::internal, "regcmd placement moved"};
  RKD_TRY(mem.write(at, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(p.words.data()), p.words.size() * 8)));
  return p;
}

Status write_residual(DeviceMemory& mem, const ConvSpec& s, const Lowered& l, const Tensor& r0) {
  if (!s.residual) return invalid("npu lowering: the convolution has no residual");
  if (r0.shape() != Shape{1, s.OC, l.OH, l.OW} || r0.dtype() != s.dtype)
    return invalid("npu residual: expected [1, OC, OH, OW] of the convolution's type");
  const Tensor r = r0.contiguous();
  const int64_t plane = l.OH * l.OW;
  const uint8_t flip = s.dtype == DType::u8 ? 0x80 : 0;  // uint8 -> stored int8: x - 128
  const uint8_t* src = static_cast<const uint8_t*>(r.raw());
  for (const OutputRegion& reg : l.outputs) {
    const int64_t n = static_cast<int64_t>(reg.channels.size());
    RKD_ASSIGN(std::span<uint8_t> b, mem.span(reg.residual_address, static_cast<size_t>((n - 1) / 16 * reg.residual_surface_bytes + plane * 16)));
    std::vector<const uint8_t*> planes(static_cast<size_t>(n), nullptr);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t oc = reg.channels[static_cast<size_t>(j)];
      if (oc >= 0) planes[static_cast<size_t>(j)] = src + oc * plane;
    }
    planes_to_blocks(planes, plane, 0, flip, b.data(), reg.residual_surface_bytes);  // lanes past n (padding channels): 0
  }
  return {};
}

Status gather_output_into(const DeviceMemory& mem, const ConvSpec& s, const Lowered& l, Tensor& y) {
  if (y.shape() != Shape{1, s.OC, l.OH, l.OW} || y.dtype() != s.dtype || !y.is_contiguous()) {
    return invalid("npu output: expected a contiguous [1, OC, OH, OW] of the convolution's type");
  }
  const int64_t plane = l.OH * l.OW;
  const uint8_t flip = s.dtype == DType::u8 ? 0x80 : 0;  // stored int8 -> uint8: v + 128
  uint8_t* out = static_cast<uint8_t*>(y.raw());
  for (const OutputRegion& r : l.outputs) {
    const int64_t n = static_cast<int64_t>(r.channels.size());
    RKD_ASSIGN(auto b, mem.read(r.address, static_cast<size_t>((n - 1) / 16 * r.surface_bytes + plane * 16)));
    std::vector<uint8_t*> planes(static_cast<size_t>(n), nullptr);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t oc = r.channels[static_cast<size_t>(j)];
      if (oc >= 0) planes[static_cast<size_t>(j)] = out + oc * plane;  // oc < 0: a depthwise window's channel another task computes
    }
    blocks_to_planes(b.data(), r.surface_bytes, plane, flip, planes);
  }
  return {};
}

Result<Tensor> gather_output(const DeviceMemory& mem, const ConvSpec& s, const Lowered& l) {
  Tensor y = Tensor::empty(s.dtype, {1, s.OC, l.OH, l.OW});
  RKD_TRY(gather_output_into(mem, s, l, y));
  return y;
}

}  // namespace rkd::npu::lower
