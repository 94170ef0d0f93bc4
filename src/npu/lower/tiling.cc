#include "npu/lower/tiling.h"

#include <algorithm>
#include <string>

#include "npu/arch/arch.h"

namespace rkd::npu::lower {

using arch::kRk3588;

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

// The fewest input rows a row slice reads: the kernel's (one output row), at least the
// hardware's minimum height, at most the stored map.
int64_t min_slice_rows(const ConvSpec& s) { return std::min(stored_height(s), std::max<int64_t>(s.KH, kRk3588.min_height)); }

// Depthwise: a task reads only the 16-channel blocks of its channels (channel_window), so a task
// whose window's weights and fewest input rows overflow the CBUF is split by channel ranges:
// the largest multiple of 64 channels (one depthwise weight atom) whose window fits, each range
// of the channel axis one task (the plan's channels in that range, in the plan's order).
Result<std::vector<TaskPlan>> split_depthwise(const ConvSpec& s, std::vector<TaskPlan> plans) {
  const int64_t bank = kRk3588.cbuf_bank_bytes, banks = kRk3588.cbuf_banks, spare = kRk3588.cbuf_spare_feature_banks;
  const int64_t taps = s.KH * s.KW;
  const int64_t min_rows = min_slice_rows(s);
  // CBUF banks a window of n channels needs: its packed weights, its fewest input rows, the spare.
  auto banks_for = [&](int64_t n) {
    const int64_t weights = align(n, kDepthwiseWeightLanes) * taps, rows = min_rows * align(n, kC2) * s.W;
    return (weights + bank - 1) / bank + (rows + bank - 1) / bank + spare;
  };
  int64_t per = 0;
  for (int64_t n = align(s.C, kDepthwiseWeightLanes); n >= kDepthwiseWeightLanes; n -= kDepthwiseWeightLanes)
    if (banks_for(n) <= banks) {
      per = n;
      break;
    }
  if (per == 0)
    return unsupported("npu lowering: " + std::to_string(kDepthwiseWeightLanes) + " depthwise channels of a " + std::to_string(s.KH) + "x" +
                       std::to_string(s.KW) + " kernel and " + std::to_string(min_rows) +
                       " input rows do not fit the CBUF (width splitting is not implemented)");
  std::vector<TaskPlan> split;
  for (TaskPlan& p : plans) {
    const int64_t lo = *std::min_element(p.channels.begin(), p.channels.end()) / kC2 * kC2;
    const int64_t hi = *std::max_element(p.channels.begin(), p.channels.end()) + 1;
    if (banks_for(hi - lo) <= banks) {
      split.push_back(std::move(p));
      continue;
    }
    for (int64_t r0 = 0; r0 < s.C; r0 += per) {
      TaskPlan c = p;
      c.channels.clear();
      c.mul.clear();
      for (size_t j = 0; j < p.channels.size(); ++j) {
        if (p.channels[j] < r0 || p.channels[j] >= r0 + per) continue;
        c.channels.push_back(p.channels[j]);
        if (p.use_mul) c.mul.push_back(p.mul[j]);
      }
      if (!c.channels.empty()) split.push_back(std::move(c));
    }
  }
  return split;
}

}  // namespace

Result<std::vector<TaskPlan>> split_kernels(const ConvSpec& s, std::vector<TaskPlan> plans) {
  if (s.depthwise) return split_depthwise(s, std::move(plans));
  const int64_t bank = kRk3588.cbuf_bank_bytes, banks = kRk3588.cbuf_banks, spare = kRk3588.cbuf_spare_feature_banks;
  const int64_t row = stored_channels(s.C) * s.W, kernel = s.KH * s.KW * stored_channels(s.C);
  const int64_t min_rows = min_slice_rows(s);
  const int64_t min_data = (min_rows * row + bank - 1) / bank + spare;
  const int64_t whole_data = (stored_height(s) * row + bank - 1) / bank + spare;
  constexpr int64_t kMaxInputBanks = 7;  // the input banks Mesa keeps when it splits kernels
  const int64_t weight_budget = banks - std::max(min_data, std::min<int64_t>(whole_data, kMaxInputBanks));
  int64_t per = weight_budget > 0 ? weight_budget * bank / kernel : 0;
  per = per >= kWeightOutputGroup ? per / kWeightOutputGroup * kWeightOutputGroup : per / 2 * 2;
  if (per < 2)
    return unsupported("npu lowering: two kernels of " + std::to_string(kernel) + " bytes and " + std::to_string(min_rows) +
                       " input rows do not fit the CBUF (width or channel splitting is not implemented)");
  std::vector<TaskPlan> chunked;
  for (TaskPlan& p : plans) {
    if (align(static_cast<int64_t>(p.channels.size()), 2) * kernel <= (banks - min_data) * bank) {
      chunked.push_back(std::move(p));
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
  return chunked;
}

ChannelWindow channel_window(const ConvSpec& s, const TaskPlan& p, uint32_t input_address) {
  ChannelWindow w;
  w.plan = p;
  w.input_address = input_address;
  w.keep = p.channels;
  w.in_channels = s.C;
  if (!s.depthwise) return w;
  const int64_t lo = *std::min_element(p.channels.begin(), p.channels.end()) / kC2 * kC2;
  const int64_t hi = std::min(align(*std::max_element(p.channels.begin(), p.channels.end()) + 1, kC2), s.C);
  w.input_address = input_address + static_cast<uint32_t>(lo / kC2 * stored_height(s) * s.W * kC2);
  std::vector<int32_t> mul(static_cast<size_t>(hi - lo), 1);
  w.keep.assign(static_cast<size_t>(hi - lo), -1);
  for (size_t j = 0; j < p.channels.size(); ++j) {
    w.keep[static_cast<size_t>(p.channels[j] - lo)] = p.channels[j];
    if (p.use_mul) mul[static_cast<size_t>(p.channels[j] - lo)] = p.mul[j];
  }
  w.plan.channels.clear();
  for (int64_t c = lo; c < hi; ++c) w.plan.channels.push_back(c);
  w.plan.mul = std::move(mul);
  w.in_channels = hi - lo;
  return w;
}

Result<Tiling> conv_tiling(const ConvSpec& s, int64_t stored_in_channels, int64_t weight_bytes, bool cbuf_tiling) {
  TileGeometry g;
  g.C = stored_in_channels;
  g.H = stored_height(s);
  g.W = s.W;
  g.KH = s.KH;
  g.stride_h = s.stride_h;
  g.pad_top = s.pad_top;
  g.OH = s.OH();
  g.weight_bytes = weight_bytes;
  g.spare_banks = kRk3588.cbuf_spare_feature_banks;
  if (cbuf_tiling) return plan_tiling(g);
  Tiling t;
  t.data_banks = kRk3588.cbuf_banks - 1;
  t.weight_banks = 1;
  t.slices.push_back(Slice{0, g.H, 0, g.OH, s.pad_top});
  return t;
}

}  // namespace rkd::npu::lower
