#include "npu/lower/lower.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "npu/lower/emit.h"
#include "npu/lower/pack.h"

namespace rkd::npu::lower {

const char* buffer_kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::input: return "input";
    case BufferKind::weights: return "weights";
    case BufferKind::operands: return "operands";
    case BufferKind::residual: return "residual";
    case BufferKind::scratch: return "scratch";
    case BufferKind::output: return "output";
  }
  return "?";
}

namespace {

// One channel group (a strategy task after the CBUF split, widened to its channel window):
// its weights, BS operands, output region and residual buffer placed in `mem` (in that
// order), then one task per row slice, each described block by block and emitted.
// region_address: where its output region goes (lower_conv places the regions one after the
// other, as one map).
Status lower_group(const ConvSpec& s, ChannelWindow w, uint32_t region_address, DeviceMemory& mem, const LowerOptions& opt, Lowered& out) {
  TaskPlan& p = w.plan;
  const int64_t n = static_cast<int64_t>(p.channels.size()), OH = out.OH, OW = out.OW;
  const size_t first_task = out.tasks.size();

  const PackedWeights wb = pack_weights(s, p.channels);
  const uint32_t waddr = mem.alloc(wb.bytes.size());
  RKD_TRY(mem.write(waddr, wb.bytes));
  out.weight_bytes += wb.bytes.size();
  out.buffers.push_back(Buffer{BufferKind::weights, first_task, waddr, wb.bytes.size()});

  int truncate = 0;
  if (s.residual) {
    RKD_ASSIGN(truncate, residual_truncation(s, p.cvt));
  }
  RKD_ASSIGN(std::vector<int32_t> bias, fold_bias(s, p.channels, truncate));
  const int64_t written = written_channels(s, n);
  const PackedOperands ops = pack_bs_operands(bias, p.use_mul ? p.mul : std::vector<int32_t>{}, written);
  const uint32_t baddr = mem.alloc(ops.bytes.size());
  RKD_TRY(mem.write(baddr, ops.bytes));
  out.operand_bytes += ops.bytes.size();
  out.buffers.push_back(Buffer{BufferKind::operands, first_task, baddr, ops.bytes.size()});

  OutputRegion region;
  region.surface_bytes = OH * OW * kC2;
  region.channels = w.keep;
  region.stored_channels = written;
  const size_t obytes = static_cast<size_t>(written / kC2 * region.surface_bytes);
  region.address = region_address;
  out.buffers.push_back(Buffer{BufferKind::output, first_task, region.address, obytes});

  std::optional<EwOperand> ew;
  if (s.residual) {
    region.residual_surface_bytes = std::max<int64_t>(OH * OW, arch::kRk3588.ew_surface_min_pixels) * kC2;
    const size_t rbytes = static_cast<size_t>((written / kC2 - 1) * region.residual_surface_bytes + OH * OW * kC2);
    region.residual_address = mem.alloc(rbytes);
    out.buffers.push_back(Buffer{BufferKind::residual, first_task, region.residual_address, rbytes});
    RKD_ASSIGN(quant::Multiplier15 cvt, residual_converter(s, p.cvt));
    ew = EwOperand{0, region.residual_surface_bytes / kC2, -stored(s.r_zero_point, s.dtype), cvt};
  }

  // BS ReLU for a fused ReLU (v >= 0 <=> y >= z_y); an upper bound below the type's maximum
  // (ReLU6) is BS ReLUX at the largest v whose output does not exceed act_max, which makes
  // OUT_CVT(min(v, X)) = min(OUT_CVT(v), act_max) exactly (OUT_CVT is monotonic).
  BsStage bs;
  bs.operand_address = baddr;
  bs.layout = ops.layout;
  bs.mul_shift = p.use_mul ? p.bs_shift : 0;
  bs.relu = s.residual ? s.conv_relu : s.act_min == s.y_zero_point && s.act_min != qmin_of(s.dtype);
  bs.ow_op = weight_offset(s);
  if (s.act_max < qmax_of(s.dtype)) {
    RKD_ASSIGN(int64_t x, relux_bound(p.cvt, stored(s.act_max, s.dtype) - stored(s.y_zero_point, s.dtype)));
    bs.relux = static_cast<int32_t>(x);
  }

  const int64_t in_channels = stored_channels(w.in_channels);
  RKD_ASSIGN(Tiling tiling, conv_tiling(s, in_channels, static_cast<int64_t>(wb.bytes.size()), opt.cbuf_tiling));
  out.row_slices = std::max(out.row_slices, static_cast<int64_t>(tiling.slices.size()));
  for (size_t si = 0; si < tiling.slices.size(); ++si) {
    const Slice& sl = tiling.slices[si];
    const uint32_t row_offset = static_cast<uint32_t>(sl.out_row0 * OW * kC2);
    CnaConv cna;
    cna.depthwise = s.depthwise;
    cna.stride_x = s.stride_w;
    cna.stride_y = s.stride_h;
    cna.map_width = s.W;
    cna.map_height = stored_height(s);
    cna.feature_address = w.input_address + static_cast<uint32_t>(sl.in_row0 * s.W * kC2);
    cna.in_rows = sl.in_rows;
    cna.in_channels = in_channels;
    cna.in_channels_real = w.in_channels;
    cna.pad_top = sl.pad_top;
    cna.pad_left = s.pad_left;
    cna.pad_value = stored(s.x_zero_point, s.dtype);
    cna.out_width = OW;
    cna.out_rows = sl.out_rows;
    cna.weight_address = waddr;
    cna.weight_bytes = static_cast<int64_t>(wb.bytes.size());
    cna.weight_bytes_per_kernel = wb.bytes_per_kernel;
    cna.kernel_w = s.KW;
    cna.kernel_h = s.KH;
    cna.kernels = wb.kernels;
    cna.data_banks = tiling.data_banks;
    cna.weight_banks = tiling.weight_banks;
    cna.weight_reuse = si > 0;  // the group's weights stay in the CBUF
    const CoreConv core{s.depthwise, OW, sl.out_rows, written, truncate};
    DpuTask dpu;
    dpu.dst_address = region.address + row_offset;
    dpu.dst_surface_pixels = OH * OW;
    dpu.width = OW;
    dpu.rows = sl.out_rows;
    dpu.channels = written;
    dpu.orig_channels = n;
    dpu.bs = bs;
    if (ew) {
      dpu.ew = *ew;
      dpu.ew->address = region.residual_address + row_offset;
    }
    dpu.out_offset = stored(s.y_zero_point, s.dtype);
    dpu.out_cvt = p.cvt;
    regcmd::Task t;
    RKD_TRY(emit_cna(t.regs, cna));
    RKD_TRY(emit_core(t.regs, core));
    RKD_TRY(emit_dpu(t.regs, dpu));
    RKD_TRY(emit_dpu_rdma(t.regs, dpu));
    out.tasks.push_back(std::move(t));
    out.task_info.push_back(TaskInfo{out.outputs.size(), sl, tiling.data_banks, tiling.weight_banks});
  }
  out.outputs.push_back(std::move(region));
  return {};
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
  const int32_t qmin = qmin_of(s.dtype), qmax = qmax_of(s.dtype);
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
    const int32_t qmin = qmin_of(s.dtype), qmax = qmax_of(s.dtype);
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

Result<Lowered> lower_conv(const ConvSpec& s, Strategy st, DeviceMemory& mem, uint32_t input_address, const LowerOptions& opt) {
  RKD_TRY(check_spec(s));
  RKD_ASSIGN(std::vector<TaskPlan> plans, plan_tasks(s, st, opt));
  if (opt.cbuf_tiling) {
    RKD_ASSIGN(plans, split_kernels(s, std::move(plans)));
  }
  Lowered out;
  out.input_address = input_address;
  out.OH = s.OH();
  out.OW = s.OW();
  // The groups' output regions one after the other: one NC1HWC2 map of every group's written
  // channels (regions_map), then each group's weights, operands and residual buffer.
  std::vector<ChannelWindow> windows;
  int64_t blocks = 0;
  for (const TaskPlan& p : plans) {
    windows.push_back(channel_window(s, p, input_address));
    blocks += written_channels(s, static_cast<int64_t>(windows.back().plan.channels.size())) / kC2;
  }
  const int64_t surface = out.OH * out.OW * kC2;
  uint32_t region = mem.alloc(static_cast<size_t>(blocks * surface));
  for (ChannelWindow& w : windows) {
    const int64_t written = written_channels(s, static_cast<int64_t>(w.plan.channels.size()));
    RKD_TRY(lower_group(s, std::move(w), region, mem, opt, out));
    region += static_cast<uint32_t>(written / kC2 * surface);
  }
  return out;
}

Status write_input(DeviceMemory& mem, uint32_t address, const ConvSpec& s, const Tensor& x0) {
  if (x0.shape() != Shape{1, s.C, s.H, s.W} || x0.dtype() != s.dtype) return invalid("npu input: expected [1, C, H, W] of the convolution's type");
  const Tensor x = x0.contiguous();
  const int64_t ICp = stored_channels(s.C), plane = stored_height(s) * s.W, real = s.H * s.W;
  RKD_ASSIGN(std::span<uint8_t> bytes, mem.span(address, static_cast<size_t>(input_bytes(s))));
  // Rows below the map (maps shorter than the hardware's minimum height) and padded channels
  // hold the input zero point: the same as the convolution's zero padding.
  const uint8_t zx = static_cast<uint8_t>(static_cast<int8_t>(stored(s.x_zero_point, s.dtype)));
  const uint8_t flip = s.dtype == DType::u8 ? 0x80 : 0;  // uint8 -> stored int8: x - 128
  const uint8_t* src = static_cast<const uint8_t*>(x.raw());
  std::vector<const uint8_t*> planes(static_cast<size_t>(ICp), nullptr);
  for (int64_t c = 0; c < s.C; ++c) planes[static_cast<size_t>(c)] = src + c * real;
  planes_to_blocks(planes, real, zx, flip, bytes.data(), plane * kC2);
  for (int64_t b = 0; b < ICp / kC2; ++b) std::memset(bytes.data() + (b * plane + real) * kC2, zx, static_cast<size_t>((plane - real) * kC2));
  return {};
}

Result<uint32_t> place_input(DeviceMemory& mem, const ConvSpec& s, const Tensor& x) {
  const uint32_t a = mem.alloc(static_cast<size_t>(input_bytes(s)));
  RKD_TRY(write_input(mem, a, s, x));
  return a;
}

DeviceMap conv_input_map(const ConvSpec& s, uint32_t address) {
  return DeviceMap{address, stored_height(s) * s.W * kC2, stored_channels(s.C), MapShape{s.dtype, s.C, s.H, s.W}, false};
}

std::optional<RegionsMap> regions_map(const ConvSpec& s, const Lowered& l) {
  if (l.outputs.empty()) return std::nullopt;
  RegionsMap m;
  const int64_t surface = l.OH * l.OW * kC2;
  uint32_t next = l.outputs[0].address;
  for (const OutputRegion& r : l.outputs) {
    if (r.address != next || r.surface_bytes != surface || r.stored_channels % kC2 != 0 ||
        static_cast<int64_t>(r.channels.size()) > r.stored_channels)
      return std::nullopt;
    m.channels.insert(m.channels.end(), r.channels.begin(), r.channels.end());
    m.channels.resize(m.channels.size() + static_cast<size_t>(r.stored_channels) - r.channels.size(), -1);
    next += static_cast<uint32_t>(r.stored_channels / kC2 * surface);
  }
  const int64_t stored = static_cast<int64_t>(m.channels.size());
  m.map = DeviceMap{l.outputs[0].address, surface, stored, MapShape{s.dtype, stored, l.OH, l.OW}, false};
  return m;
}

std::optional<DeviceMap> conv_output_map(const ConvSpec& s, const Lowered& l) {
  auto m = regions_map(s, l);
  if (!m) return std::nullopt;
  for (size_t j = 0; j < m->channels.size(); ++j) {
    if (m->channels[j] != (static_cast<int64_t>(j) < s.OC ? static_cast<int64_t>(j) : -1)) return std::nullopt;
  }
  m->map.shape.C = s.OC;
  return m->map;
}

Result<ConvSpec> permuted_input(const ConvSpec& s, const std::vector<int64_t>& channels) {
  if (s.depthwise) return unsupported("npu lowering: a depthwise convolution cannot read a permuted map");
  const int64_t C2 = static_cast<int64_t>(channels.size());
  std::vector<bool> seen(static_cast<size_t>(s.C), false);
  for (int64_t c : channels) {
    if (c >= s.C) return invalid("npu lowering: a permuted map's channel " + std::to_string(c) + " beyond the convolution's " + std::to_string(s.C));
    if (c >= 0) seen[static_cast<size_t>(c)] = true;
  }
  if (std::find(seen.begin(), seen.end(), false) != seen.end()) return invalid("npu lowering: the permuted map lacks an input channel");
  ConvSpec p = s;
  p.C = C2;
  p.weights = Tensor::empty(s.dtype, {s.OC, C2, s.KH, s.KW});
  const int64_t taps = s.KH * s.KW;
  const auto* src = static_cast<const uint8_t*>(s.weights.contiguous().raw());
  auto* dst = static_cast<uint8_t*>(p.weights.raw());
  std::vector<bool> taken(static_cast<size_t>(s.C), false);
  for (int64_t oc = 0; oc < s.OC; ++oc) {
    const auto zw = static_cast<uint8_t>(s.w_zero_points[s.w_zero_points.size() == 1 ? 0 : static_cast<size_t>(oc)]);
    std::fill(taken.begin(), taken.end(), false);
    for (int64_t j = 0; j < C2; ++j) {
      const int64_t c = channels[static_cast<size_t>(j)];
      uint8_t* d = dst + (oc * C2 + j) * taps;
      if (c < 0 || taken[static_cast<size_t>(c)]) {
        std::memset(d, zw, static_cast<size_t>(taps));  // nothing, or a channel two windows hold: once
        continue;
      }
      taken[static_cast<size_t>(c)] = true;
      std::memcpy(d, src + (oc * s.C + c) * taps, static_cast<size_t>(taps));
    }
  }
  RKD_TRY(check_spec(p));
  return p;
}

std::optional<ConvSpec> compaction_spec(const ConvSpec& s, const Lowered& l) {
  auto m = regions_map(s, l);
  if (!m || l.OH < arch::kRk3588.min_height || conv_output_map(s, l)) return std::nullopt;
  ConvSpec c;
  c.C = m->map.channels;
  c.H = l.OH;
  c.W = l.OW;
  c.OC = s.OC;
  c.dtype = s.dtype;
  c.weights = Tensor::empty(s.dtype, {c.OC, c.C, 1, 1});
  std::memset(c.weights.raw(), 0, c.weights.nbytes());
  uint8_t* w = static_cast<uint8_t*>(c.weights.raw());
  std::vector<bool> seen(static_cast<size_t>(s.OC), false);
  for (int64_t j = 0; j < c.C; ++j) {
    const int64_t oc = m->channels[static_cast<size_t>(j)];
    if (oc < 0 || seen[static_cast<size_t>(oc)]) continue;  // a discarded lane, or a channel two windows computed: the first
    seen[static_cast<size_t>(oc)] = true;
    w[oc * c.C + j] = 1;
  }
  if (std::find(seen.begin(), seen.end(), false) != seen.end()) return std::nullopt;
  c.w_zero_points = {0};
  c.w_scales = {1.0f};
  c.x_scale = c.y_scale = s.y_scale;
  c.x_zero_point = c.y_zero_point = s.y_zero_point;
  c.act_min = qmin_of(s.dtype);
  c.act_max = qmax_of(s.dtype);
  return c;
}

Result<PlacedRegcmd> place_regcmd(DeviceMemory& mem, const Lowered& l) { return place_regcmd(mem, l.tasks); }

Result<PlacedRegcmd> place_regcmd(DeviceMemory& mem, const std::vector<regcmd::Task>& tasks) {
  PlacedRegcmd p;
  p.address = mem.alloc(0, arch::kRk3588.regcmd_alignment_bytes);  // the encoder needs the address before the size is known
  RKD_ASSIGN(p.words, regcmd::encode(tasks, p.address, &p.spans));
  const uint32_t at = mem.alloc(p.words.size() * 8, arch::kRk3588.regcmd_alignment_bytes);
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
    RKD_ASSIGN(std::span<uint8_t> b, mem.span(reg.residual_address, static_cast<size_t>((n - 1) / kC2 * reg.residual_surface_bytes + plane * kC2)));
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
    RKD_ASSIGN(auto b, mem.read(r.address, static_cast<size_t>((n - 1) / kC2 * r.surface_bytes + plane * kC2)));
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
