#include "npu/lower/eltwise.h"

#include <cstring>

#include "npu/lower/emit.h"
#include "npu/lower/pack.h"

namespace rkd::npu::lower {

namespace {

int64_t blocks_of(const MapShape& s) { return align(s.C, kC2) / kC2; }
size_t map_bytes(const MapShape& s, int64_t surface) { return static_cast<size_t>((blocks_of(s) - 1) * surface + s.H * s.W * kC2); }

// NCHW planes of x ([1, C, H, W]) into NC1HWC2 blocks at `at` (surface bytes apart); lanes
// past C hold 0, up to the buffer's `stored_channels` (at least align(C, 16)).
Status write_map(DeviceMemory& mem, uint32_t at, int64_t surface, const MapShape& s, const Tensor& x0, const char* what,
                 int64_t stored_channels = 0) {
  if (x0.shape() != Shape{1, s.C, s.H, s.W} || x0.dtype() != s.dtype) {
    return invalid(std::string("npu element-wise task: ") + what + " must be [1, C, H, W] of the operands' type");
  }
  MapShape buffer = s;
  buffer.C = std::max(s.C, stored_channels);
  const Tensor x = x0.contiguous();
  const int64_t plane = s.H * s.W;
  RKD_ASSIGN(std::span<uint8_t> b, mem.span(at, map_bytes(buffer, surface)));
  const auto* src = static_cast<const uint8_t*>(x.raw());
  std::vector<const uint8_t*> planes(static_cast<size_t>(blocks_of(buffer) * kC2), nullptr);
  for (int64_t c = 0; c < s.C; ++c) planes[static_cast<size_t>(c)] = src + c * plane;
  planes_to_blocks(planes, plane, 0, s.dtype == DType::u8 ? 0x80 : 0, b.data(), surface);
  return {};
}

Status check_map(const MapShape& s, const char* what) {
  if (s.C < 1 || s.H < 1 || s.W < 1) return invalid(std::string(what) + "empty map");
  return {};
}

EltwiseGeometry map_geometry(const MapShape& s) {
  EltwiseGeometry g;
  g.dtype = s.dtype;
  g.C = s.C;
  g.H = s.H;
  g.W = s.W;
  return g;
}

// Data input i's buffer: at[i] when chained, else a new map of `shape` with `surface` (at
// least `stored` channels stored), listed as a buffer of `kind` used first by `task`; either
// way recorded in l.input_maps[i].
uint32_t input_buffer(LoweredEltwise& l, DeviceMemory& mem, const InputsAt& at, size_t i, const MapShape& shape, int64_t surface, int64_t stored = 0,
                      size_t task = 0, BufferKind kind = BufferKind::input) {
  MapShape buffer = shape;
  buffer.C = std::max(shape.C, stored);
  const bool chained = i < at.size() && at[i].has_value();
  uint32_t a = 0;
  if (chained) {
    a = *at[i];
  } else {
    const size_t bytes = map_bytes(buffer, surface);
    a = mem.alloc(bytes);
    l.buffers.push_back(Buffer{kind, task, a, bytes});
  }
  if (l.input_maps.size() <= i) l.input_maps.resize(i + 1);
  l.input_maps[i].push_back(DeviceMap{a, surface, align(buffer.C, kC2), shape, chained});
  return a;
}

// An output map of `shape` with `surface` (at least `stored` channels stored), recorded in
// l.output_maps and listed as an "output" buffer of `task`.
uint32_t output_buffer(LoweredEltwise& l, DeviceMemory& mem, const MapShape& shape, int64_t surface, int64_t stored = 0, size_t task = 0) {
  MapShape buffer = shape;
  buffer.C = std::max(shape.C, stored);
  const size_t bytes = map_bytes(buffer, surface);
  const uint32_t a = mem.alloc(bytes);
  l.buffers.push_back(Buffer{BufferKind::output, task, a, bytes});
  l.output_maps.push_back(DeviceMap{a, surface, align(buffer.C, kC2), shape, false});
  return a;
}

// Where a task's EW operand lives: a map of its own, the main input's buffer when the strides
// agree (else its own), or one value per channel (a vector of align(C, 16) bytes, one 16-byte
// atom a surface: EW_DATA_MODE 0).
enum class EwMap { own, share_main, per_channel };

// The maps of a task and its DPU description but the stages. Data inputs: the main one (0)
// and, unless `ew` shares it, the EW operand (1); an Add's larger-scale operand is the main
// one (`b_main`: data input 1 in the main buffer).
DpuTask place_maps(const MapShape& s, DeviceMemory& mem, EwMap ew, LoweredEltwise& l, const InputsAt& at, bool b_main = false) {
  const int64_t pixels = s.H * s.W;
  l.main_surface_bytes = pixels * kC2;
  l.ew_surface_bytes = ew == EwMap::per_channel ? kC2 : std::max<int64_t>(pixels, arch::kRk3588.ew_surface_min_pixels) * kC2;
  l.output_surface_bytes = pixels * kC2;
  MapShape vector = s;
  vector.H = vector.W = 1;
  const size_t main_input = b_main ? 1 : 0, ew_input = b_main ? 0 : 1;
  l.main_address = input_buffer(l, mem, at, main_input, s, l.main_surface_bytes);
  if (ew == EwMap::share_main && l.ew_surface_bytes == l.main_surface_bytes) {
    l.ew_address = l.main_address;
  } else if (ew == EwMap::share_main) {
    // The same x in a second buffer of the EW surface stride (the host writes it too).
    l.ew_address = input_buffer(l, mem, {}, 0, s, l.ew_surface_bytes);
  } else {
    l.ew_address = input_buffer(l, mem, at, ew_input, ew == EwMap::per_channel ? vector : s, l.ew_surface_bytes);
  }
  l.output_address = output_buffer(l, mem, s, l.output_surface_bytes);
  DpuTask d;
  d.input_address = l.main_address;
  d.dst_address = l.output_address;
  d.dst_surface_pixels = pixels;
  d.width = s.W;
  d.rows = s.H;
  d.channels = align(s.C, kC2);
  d.orig_channels = s.C;
  d.bs.layout = BsOperands::registers;
  return d;
}

Status emit(const DpuTask& d, LoweredEltwise& l) {
  regcmd::Task t;
  t.enable_mask = arch::kDpuEnableMask;
  if (d.lut) {
    RKD_ASSIGN(t.stream, lut_upload(*d.lut));
  }
  RKD_TRY(emit_dpu(t.regs, d));
  RKD_TRY(emit_dpu_rdma(t.regs, d));
  l.tasks.push_back(std::move(t));
  return {};
}

// A copy of `channels` channels of an H x W map from src to dst (dense surfaces both): BS
// ALU + 0 with the MUL bypassed and OUT_CVT x 1, the stored byte itself.
DpuTask copy_task(const MapShape& s, int64_t channels, uint32_t src, uint32_t dst) {
  DpuTask d;
  d.input_address = src;
  d.dst_address = dst;
  d.dst_surface_pixels = s.H * s.W;
  d.width = s.W;
  d.rows = s.H;
  d.channels = align(channels, kC2);
  d.orig_channels = channels;
  d.bs.layout = BsOperands::registers;
  d.out_cvt = OutCvt{1, 0};
  return d;
}

}  // namespace

EltwiseGeometry geometry_of(const AddSpec& s) {
  EltwiseGeometry g = map_geometry(s);
  g.fused_activation = s.q.act_min != qmin_of(s.dtype) || s.q.act_max != qmax_of(s.dtype);
  g.broadcast = s.b != BOperand::map;
  g.per_channel_operand = g.broadcast;
  return g;
}
EltwiseGeometry geometry_of(const MulSpec& s) {
  EltwiseGeometry g = map_geometry(s);
  g.fused_activation = s.q.act_min != qmin_of(s.dtype) || s.q.act_max != qmax_of(s.dtype);
  g.broadcast = s.b != MulSpec::Operand::map;
  g.per_channel_operand = g.broadcast;
  return g;
}
EltwiseGeometry geometry_of(const LeakyReluSpec& s) { return map_geometry(s); }
EltwiseGeometry geometry_of(const LutSpec& s) { return map_geometry(s); }
EltwiseGeometry geometry_of(const ConcatSpec& s) {
  EltwiseGeometry g = map_geometry(s);
  g.unaligned_part_offset = unaligned_part_offset(s.parts);
  return g;
}

Status check_add(const AddSpec& s) {
  const std::string what = std::string("npu ") + quant::to_string(s.alu) + ": ";
  RKD_TRY(check_map(s, what.c_str()));
  if (!(s.q.a_scale > 0) || !(s.q.b_scale > 0) || !(s.q.out_scale > 0)) return invalid(what + "scales must be positive");
  RKD_TRY(eltwise_supported(geometry_of(s), what));
  auto k = quant::rknpu_binary_plan(s.q, s.alu, s.b != BOperand::map);
  if (!k.ok()) return unsupported(what + k.error().message);
  return {};
}

Status check_mul(const MulSpec& s) {
  RKD_TRY(check_map(s, "npu Mul: "));
  if (!(s.q.a_scale > 0) || !(s.q.b_scale > 0) || !(s.q.out_scale > 0)) return invalid("npu Mul: scales must be positive");
  RKD_TRY(eltwise_supported(geometry_of(s), "npu Mul: "));
  auto k = quant::rknpu_mul_plan(s.q);
  if (!k.ok()) return unsupported("npu Mul: " + k.error().message);
  return {};
}

Status check_leaky_relu(const LeakyReluSpec& s) {
  RKD_TRY(check_map(s, "npu LeakyRelu: "));
  if (!(s.x_scale > 0) || !(s.y_scale > 0)) return invalid("npu LeakyRelu: scales must be positive");
  RKD_TRY(eltwise_supported(geometry_of(s), "npu LeakyRelu: "));
  auto k = quant::rknpu_leaky_relu_plan(s.x_scale, s.y_scale, s.alpha);
  if (!k.ok()) return unsupported("npu LeakyRelu: " + k.error().message);
  return {};
}

Status check_lut(const LutSpec& s) {
  RKD_TRY(check_map(s, "npu Lut: "));
  if (s.table.size() != 256) return invalid("npu Lut: the table must have 256 entries");
  for (int32_t v : s.table) {
    if (v < qmin_of(s.dtype) || v > qmax_of(s.dtype)) return invalid("npu Lut: table entry " + std::to_string(v) + " outside the map's type");
  }
  return eltwise_supported(geometry_of(s), "npu Lut: ");
}

Result<LutTable> lut_table_of(const LutSpec& s) {
  RKD_TRY(check_lut(s));
  LutTable t;
  t.start = -128;  // the lowest stored value: entry i holds the result for stored input i - 128
  t.entries.assign(static_cast<size_t>(arch::kRk3588.lut_entries), 0);
  for (size_t i = 0; i < t.entries.size(); ++i) t.entries[i] = static_cast<int16_t>(stored(s.table[std::min<size_t>(i, 255)], s.dtype));
  return t;
}

namespace {

// A Concat's or Split's parts: non-empty, adding up to the joined map's channels.
Status check_parts(const ConcatSpec& s, const std::string& what, const char* joined) {
  RKD_TRY(check_map(s, what.c_str()));
  int64_t sum = 0;
  for (int64_t c : s.parts) {
    if (c < 1) return invalid(what + "an empty part");
    sum += c;
  }
  if (s.parts.empty() || sum != s.C) return invalid(what + "the parts' channels do not add up to the " + joined + "'s");
  return eltwise_supported(geometry_of(s), what);
}

}  // namespace

Status check_concat(const ConcatSpec& s) { return check_parts(s, "npu Concat: ", "output"); }
Status check_split(const SplitSpec& s) { return check_parts(s, "npu Split: ", "input"); }

Result<LoweredEltwise> lower_add(const AddSpec& s, DeviceMemory& mem, const InputsAt& at) {
  RKD_TRY(check_add(s));
  RKD_ASSIGN(quant::RknpuAdd plan, quant::rknpu_binary_plan(s.q, s.alu, s.b != BOperand::map));
  LoweredEltwise l;
  l.b_is_main = plan.b_is_main;
  const int algo = s.alu == quant::BinaryAlu::sub ? 4 : s.alu == quant::BinaryAlu::max ? 0 : s.alu == quant::BinaryAlu::min ? 1 : 2;
  DpuTask d = place_maps(s, mem, s.b == BOperand::map ? EwMap::own : EwMap::per_channel, l, at, l.b_is_main);
  const int32_t zm = l.b_is_main ? s.q.b_zero_point : s.q.a_zero_point, ze = l.b_is_main ? s.q.a_zero_point : s.q.b_zero_point;
  d.bs.alu_value = -stored(zm, s.dtype);
  d.bs.mul_value = static_cast<int16_t>(plan.main_mul);
  d.ew = EwOperand{l.ew_address, l.ew_surface_bytes / kC2, -stored(ze, s.dtype), plan.ew, algo};
  d.ew->per_channel = s.b != BOperand::map;
  d.out_offset = stored(s.q.out_zero_point, s.dtype);
  d.out_cvt = OutCvt{plan.out.scale, plan.out.shift};
  RKD_TRY(emit(d, l));
  return l;
}

Result<LoweredEltwise> lower_mul(const MulSpec& s, DeviceMemory& mem, const InputsAt& at) {
  RKD_TRY(check_mul(s));
  RKD_ASSIGN(quant::RknpuMul plan, quant::rknpu_mul_plan(s.q));
  LoweredEltwise l;
  DpuTask d = place_maps(s, mem, s.b == MulSpec::Operand::map ? EwMap::own : EwMap::per_channel, l, at);
  d.bs.alu_value = -stored(s.q.a_zero_point, s.dtype);
  d.ew = EwOperand{l.ew_address, l.ew_surface_bytes / kC2, -stored(s.q.b_zero_point, s.dtype), quant::Multiplier15{1, 0}, 2};
  d.ew->mul = true;
  d.ew->per_channel = s.b != MulSpec::Operand::map;
  d.out_offset = stored(s.q.out_zero_point, s.dtype);
  d.out_cvt = OutCvt{plan.out.scale, plan.out.shift};
  RKD_TRY(emit(d, l));
  return l;
}

Result<LoweredEltwise> lower_leaky_relu(const LeakyReluSpec& s, DeviceMemory& mem, const InputsAt& at) {
  RKD_TRY(check_leaky_relu(s));
  RKD_ASSIGN(quant::RknpuLeakyRelu plan, quant::rknpu_leaky_relu_plan(s.x_scale, s.y_scale, s.alpha));
  LoweredEltwise l;
  DpuTask d = place_maps(s, mem, EwMap::share_main, l, at);
  d.bs.alu_value = -stored(s.x_zero_point, s.dtype);
  d.bs.mul_value = static_cast<int16_t>(plan.main_mul);
  d.ew = EwOperand{l.ew_address, l.ew_surface_bytes / kC2, -stored(s.x_zero_point, s.dtype), plan.alpha, 0};
  d.out_offset = stored(s.y_zero_point, s.dtype);
  d.out_cvt = OutCvt{plan.out.scale, plan.out.shift};
  RKD_TRY(emit(d, l));
  return l;
}

Result<LoweredEltwise> lower_lut(const LutSpec& s, DeviceMemory& mem, const InputsAt& at) {
  RKD_ASSIGN(LutTable table, lut_table_of(s));
  LoweredEltwise l;
  const int64_t pixels = s.H * s.W;
  l.main_surface_bytes = l.output_surface_bytes = pixels * kC2;
  l.main_address = input_buffer(l, mem, at, 0, s, l.main_surface_bytes);
  l.output_address = output_buffer(l, mem, s, l.output_surface_bytes);
  DpuTask d = copy_task(s, s.C, l.main_address, l.output_address);
  d.lut = std::move(table);
  RKD_TRY(emit(d, l));
  return l;
}

Status write_lut_input(DeviceMemory& mem, const LutSpec& s, const LoweredEltwise& l, const Tensor& x) { return write_eltwise_input(mem, l, 0, x); }

MapShape MaxPoolSpec::output() const {
  MapShape o = *this;
  o.H = (H + pad_top + pad_bottom - kernel_h) / stride_h + 1;
  o.W = (W + pad_left + pad_right - kernel_w) / stride_w + 1;
  return o;
}

PoolGeometry geometry_of(const MaxPoolSpec& s) {
  PoolGeometry g;
  g.dtype = s.dtype;
  g.C = s.C;
  g.H = s.H;
  g.W = s.W;
  const MapShape o = s.output();
  g.OH = o.H;
  g.OW = o.W;
  g.KH = s.kernel_h;
  g.KW = s.kernel_w;
  g.stride_h = s.stride_h;
  g.stride_w = s.stride_w;
  g.pad_top = s.pad_top;
  g.pad_left = s.pad_left;
  g.pad_bottom = s.pad_bottom;
  g.pad_right = s.pad_right;
  return g;
}

Status check_max_pool(const MaxPoolSpec& s) {
  RKD_TRY(check_map(s, "npu MaxPool: "));
  if (s.kernel_h < 1 || s.kernel_w < 1 || s.stride_h < 1 || s.stride_w < 1 || s.pad_top < 0 || s.pad_left < 0 || s.pad_bottom < 0 ||
      s.pad_right < 0 || s.H + s.pad_top + s.pad_bottom < s.kernel_h || s.W + s.pad_left + s.pad_right < s.kernel_w)
    return invalid("npu MaxPool: kernel, strides and pads must be positive (pads non-negative) and the window must fit the padded map");
  return pool_supported(geometry_of(s), "npu MaxPool: ");
}

Result<LoweredEltwise> lower_max_pool(const MaxPoolSpec& s, DeviceMemory& mem, const InputsAt& at) {
  RKD_TRY(check_max_pool(s));
  const MapShape o = s.output();
  LoweredEltwise l;
  l.main_surface_bytes = s.H * s.W * kC2;
  l.output_surface_bytes = o.H * o.W * kC2;
  l.main_address = input_buffer(l, mem, at, 0, s, l.main_surface_bytes);
  l.output_address = output_buffer(l, mem, o, l.output_surface_bytes);
  PpuPool p;
  p.src_address = l.main_address;
  p.dst_address = l.output_address;
  p.width = s.W;
  p.height = s.H;
  p.channels = align(s.C, kC2);
  p.src_line_bytes = s.W * kC2;
  p.src_surface_bytes = l.main_surface_bytes;
  p.dst_surface_bytes = l.output_surface_bytes;
  p.out_width = o.W;
  p.out_height = o.H;
  p.kernel_w = s.kernel_w;
  p.kernel_h = s.kernel_h;
  p.stride_w = s.stride_w;
  p.stride_h = s.stride_h;
  p.pad_left = s.pad_left;
  p.pad_top = s.pad_top;
  p.pad_right = s.pad_right;
  p.pad_bottom = s.pad_bottom;
  p.pad_value = -128;  // the stored domain's minimum (int8; uint8 - 128)
  regcmd::Task t;
  t.enable_mask = arch::kPpuEnableMask;
  RKD_TRY(emit_ppu(t.regs, p));
  l.tasks.push_back(std::move(t));
  return l;
}

Status write_max_pool_input(DeviceMemory& mem, const MaxPoolSpec& s, const LoweredEltwise& l, const Tensor& x) {
  return write_eltwise_input(mem, l, 0, x);
}

MapShape ChannelPadSpec::output() const {
  MapShape o = *this;
  o.C = C + pad_end;
  return o;
}

EltwiseGeometry geometry_of(const ChannelPadSpec& s) { return map_geometry(s.output()); }

Status check_channel_pad(const ChannelPadSpec& s) {
  RKD_TRY(check_map(s, "npu channel Pad: "));
  if (s.pad_end < 1) return invalid("npu channel Pad: no channel to add");
  if (s.value < qmin_of(s.dtype) || s.value > qmax_of(s.dtype)) return invalid("npu channel Pad: the value is not a code of the map's type");
  return eltwise_supported(geometry_of(s), "npu channel Pad: ");
}

Result<LoweredEltwise> lower_channel_pad(const ChannelPadSpec& s, DeviceMemory& mem, const InputsAt& at) {
  RKD_TRY(check_channel_pad(s));
  const MapShape o = s.output();
  const int64_t pixels = s.H * s.W, written = align(o.C, kC2);
  LoweredEltwise l;
  // The input in a buffer of the output's surfaces: the task reads every output lane there
  // (the padding channels' lanes are multiplied by 0).
  l.main_surface_bytes = l.output_surface_bytes = pixels * kC2;
  l.main_address = input_buffer(l, mem, at, 0, s, l.main_surface_bytes, o.C);
  l.output_address = output_buffer(l, mem, o, l.output_surface_bytes);
  // BS: ALU + 0, MUL 1 (the input's channels) or 0 (the padding), shift 0.
  std::vector<int32_t> zero(static_cast<size_t>(written), 0), mul(static_cast<size_t>(written), 0);
  for (int64_t c = 0; c < s.C; ++c) mul[static_cast<size_t>(c)] = 1;
  const PackedOperands ops = pack_bs_operands(zero, mul, written);
  const uint32_t ops_at = mem.alloc(ops.bytes.size());
  l.buffers.push_back(Buffer{BufferKind::operands, 0, ops_at, ops.bytes.size()});
  RKD_TRY(mem.write(ops_at, ops.bytes));
  // EW: + the constant map (stored pad code in the padding channels, 0 elsewhere).
  l.ew_surface_bytes = std::max<int64_t>(pixels, arch::kRk3588.ew_surface_min_pixels) * kC2;
  const size_t ew_bytes = map_bytes(o, l.ew_surface_bytes);
  l.ew_address = mem.alloc(ew_bytes);
  l.buffers.push_back(Buffer{BufferKind::operands, 0, l.ew_address, ew_bytes});
  std::vector<uint8_t> e(ew_bytes, 0);
  const uint8_t code = static_cast<uint8_t>(static_cast<int8_t>(s.dtype == DType::u8 ? s.value - 128 : s.value));
  for (int64_t c = s.C; c < o.C; ++c)
    for (int64_t p = 0; p < pixels; ++p) e[static_cast<size_t>(c / kC2 * l.ew_surface_bytes + p * kC2 + c % kC2)] = code;
  RKD_TRY(mem.write(l.ew_address, e));
  DpuTask d = copy_task(o, o.C, l.main_address, l.output_address);
  d.bs.layout = BsOperands::alu_mul;
  d.bs.operand_address = ops_at;
  d.bs.mul_shift = 0;
  EwOperand ew;
  ew.address = l.ew_address;
  ew.surface_pixels = l.ew_surface_bytes / kC2;
  ew.offset = 0;
  ew.cvt = quant::Multiplier15{1, 0};
  ew.alu_algo = 2;
  d.ew = ew;
  RKD_TRY(emit(d, l));
  return l;
}

Status write_channel_pad_input(DeviceMemory& mem, const ChannelPadSpec& s, const LoweredEltwise& l, const Tensor& x) {
  return write_eltwise_input(mem, l, 0, x);
}

MapShape Upsample2Spec::output() const {
  MapShape o = *this;
  o.H = 2 * H + (edge ? 2 : 0);
  o.W = 2 * W + (edge ? 2 : 0);
  return o;
}

EltwiseGeometry geometry_of(const Upsample2Spec& s) { return map_geometry(s.output()); }

Status check_upsample2(const Upsample2Spec& s) {
  RKD_TRY(check_map(s, "npu Upsample2: "));
  return eltwise_supported(geometry_of(s), "npu Upsample2: ");
}

namespace {

constexpr int64_t kCell = kC2;  // bytes of one NC1HWC2 cell (16 int8 channels)

// At most this many 16-channel surfaces per task (DATA_CUBE_CHANNEL, PPU CUBE_IN_CHANNEL: 13 bits).
int64_t surfaces_per_task() { return (static_cast<int64_t>(arch::DPU_DATA_CUBE_CHANNEL_CHANNEL.max()) + 1) / kC2; }

uint32_t cells(int64_t n) { return static_cast<uint32_t>(n * kCell); }

// One copy task: `units` units of `unit_cells` dense cells from src, unit k written at dst + k
// stride_cells cells (each unit a 16-channel surface of a unit_cells x 1 cube, DST_SURF_STRIDE
// = stride_cells).
Status scatter_task(LoweredEltwise& l, const MapShape& s, uint32_t src, uint32_t dst, int64_t units, int64_t unit_cells, int64_t stride_cells) {
  MapShape cube = s;
  cube.H = 1;
  cube.W = unit_cells;
  DpuTask d = copy_task(cube, units * kC2, src, dst);
  d.dst_surface_pixels = stride_cells;
  return emit(d, l);
}

// scatter_task over any number of units.
Status scatter(LoweredEltwise& l, const MapShape& s, uint32_t src, uint32_t dst, int64_t units, int64_t unit_cells, int64_t stride_cells) {
  for (int64_t k0 = 0; k0 < units; k0 += surfaces_per_task()) {
    RKD_TRY(scatter_task(l, s, src + cells(k0 * unit_cells), dst + cells(k0 * stride_cells), std::min(surfaces_per_task(), units - k0), unit_cells,
                         stride_cells));
  }
  return {};
}

// PPU tasks copying `units` units of `unit_cells` dense cells, unit k read at src + k
// src_stride cells and written at dst + k dst_stride cells: 1 x 1 max pools (the cells
// themselves) of unit_cells x 1 cubes, one 16-channel surface per unit.
Status gather(LoweredEltwise& l, uint32_t src, int64_t src_stride, uint32_t dst, int64_t dst_stride, int64_t units, int64_t unit_cells) {
  for (int64_t k0 = 0; k0 < units; k0 += surfaces_per_task()) {
    PpuPool p;
    p.src_address = src + cells(k0 * src_stride);
    p.dst_address = dst + cells(k0 * dst_stride);
    p.width = p.out_width = unit_cells;
    p.height = p.out_height = 1;
    p.channels = std::min(surfaces_per_task(), units - k0) * kC2;
    p.src_line_bytes = unit_cells * kCell;
    p.src_surface_bytes = src_stride * kCell;
    p.dst_surface_bytes = dst_stride * kCell;
    regcmd::Task t;
    t.enable_mask = arch::kPpuEnableMask;
    RKD_TRY(emit_ppu(t.regs, p));
    l.tasks.push_back(std::move(t));
  }
  return {};
}

// Copy tasks interleaving two maps' units of `unit_cells` dense cells: unit k of src0 goes to
// dst + 2 k unit, unit k of src1 to dst + (2 k + 1) unit, in tasks of at most
// DATA_CUBE_CHANNEL's surfaces (each unit one 16-channel surface of a unit_cells x 1 cube,
// written DST_SURF_STRIDE = 2 units apart).
Status interleave(LoweredEltwise& l, const MapShape& s, uint32_t src0, uint32_t src1, uint32_t dst, int64_t units, int64_t unit_cells) {
  for (int64_t k0 = 0; k0 < units; k0 += surfaces_per_task()) {
    const int64_t k = std::min(surfaces_per_task(), units - k0);
    for (int64_t copy = 0; copy < 2; ++copy) {
      RKD_TRY(scatter_task(l, s, (copy ? src1 : src0) + cells(k0 * unit_cells), dst + cells((2 * k0 + copy) * unit_cells), k, unit_cells,
                           2 * unit_cells));
    }
  }
  return {};
}

// A map of m's shape with dense surfaces allocated in `mem` and listed as a buffer of `kind`.
uint32_t place_map(LoweredEltwise& l, DeviceMemory& mem, BufferKind kind, const MapShape& m) {
  const size_t bytes = map_bytes(m, m.H * m.W * kC2);
  const uint32_t a = mem.alloc(bytes);
  l.buffers.push_back(Buffer{kind, 0, a, bytes});
  return a;
}

}  // namespace

Result<LoweredEltwise> lower_upsample2(const Upsample2Spec& s, DeviceMemory& mem, const InputsAt& at) {
  RKD_TRY(check_upsample2(s));
  const MapShape o = s.output();
  MapShape wide = s;  // the columns doubled: [C, H, 2 W]
  wide.W = 2 * s.W;
  LoweredEltwise l;
  l.main_surface_bytes = s.H * s.W * kC2;
  l.output_surface_bytes = o.H * o.W * kC2;
  l.main_address = input_buffer(l, mem, at, 0, s, l.main_surface_bytes);
  const uint32_t mid = place_map(l, mem, BufferKind::scratch, wide);
  const int64_t blocks = blocks_of(s), H = s.H, W = s.W;
  if (!s.edge) {
    l.output_address = output_buffer(l, mem, o, l.output_surface_bytes);
    RKD_TRY(interleave(l, s, l.main_address, l.main_address, mid, blocks * H * W, 1));  // cells -> both cells of [C, H, 2 W]
    RKD_TRY(interleave(l, s, mid, mid, l.output_address, blocks * H, o.W));             // lines of 2 W cells -> both lines
    return l;
  }
  // The padded map [C, Hd, Wd] (eltwise.h).
  const int64_t Hd = o.H, Wd = o.W;
  MapShape rows = s;  // the columns done: [C, H, Wd]
  rows.W = Wd;
  const uint32_t r = place_map(l, mem, BufferKind::scratch, rows);
  const uint32_t e = l.output_address = output_buffer(l, mem, o, l.output_surface_bytes);
  RKD_TRY(interleave(l, s, l.main_address, l.main_address, mid, blocks * H * W, 1));           // cells -> both cells of [C, H, 2 W]
  RKD_TRY(scatter(l, s, mid, r + cells(1), blocks * H, 2 * W, Wd));                            // lines of 2 W cells, 1 cell in
  RKD_TRY(gather(l, l.main_address, W, r, Wd, blocks * H, 1));                                 // column 0 -> cell 0
  RKD_TRY(gather(l, l.main_address + cells(W - 1), W, r + cells(Wd - 1), Wd, blocks * H, 1));  // column W - 1 -> cell Wd - 1
  for (int64_t b = 0; b < blocks; ++b) {
    const uint32_t rb = r + cells(b * H * Wd), eb = e + cells(b * Hd * Wd);
    RKD_TRY(interleave(l, s, rb, rb, eb + cells(Wd), H, Wd));  // line i -> lines 2 i + 1, 2 i + 2
  }
  RKD_TRY(gather(l, r, H * Wd, e, Hd * Wd, blocks, Wd));                                               // line 0 -> line 0
  RKD_TRY(gather(l, r + cells((H - 1) * Wd), H * Wd, e + cells((Hd - 1) * Wd), Hd * Wd, blocks, Wd));  // line H - 1 -> Hd - 1
  return l;
}

MapShape DepthToSpace2Spec::output() const {
  MapShape o = *this;
  o.C = C / 4;
  o.H = 2 * H;
  o.W = 2 * W;
  return o;
}

EltwiseGeometry geometry_of(const DepthToSpace2Spec& s) {
  EltwiseGeometry g = map_geometry(s.output());
  g.unaligned_part_offset = unaligned_part_offset(std::vector<int64_t>(4, s.C / 4));  // the four groups MRDMA reads
  return g;
}

Status check_depth_to_space2(const DepthToSpace2Spec& s) {
  RKD_TRY(check_map(s, "npu DepthToSpace: "));
  if (s.C % 4 != 0) return invalid("npu DepthToSpace: the channels are not a multiple of 4");
  return eltwise_supported(geometry_of(s), "npu DepthToSpace: ");
}

Result<LoweredEltwise> lower_depth_to_space2(const DepthToSpace2Spec& s, DeviceMemory& mem, const InputsAt& at) {
  RKD_TRY(check_depth_to_space2(s));
  const MapShape o = s.output();
  MapShape wide = o;  // one row parity's columns interleaved: [C / 4, H, 2 W]
  wide.H = s.H;
  LoweredEltwise l;
  l.main_surface_bytes = s.H * s.W * kC2;
  l.output_surface_bytes = o.H * o.W * kC2;
  l.main_address = input_buffer(l, mem, at, 0, s, l.main_surface_bytes);
  const uint32_t wide0 = place_map(l, mem, BufferKind::scratch, wide), wide1 = place_map(l, mem, BufferKind::scratch, wide);
  l.output_address = output_buffer(l, mem, o, l.output_surface_bytes);
  const int64_t blocks = blocks_of(o);  // per group
  auto group = [&](int64_t g) { return l.main_address + static_cast<uint32_t>(g * blocks * l.main_surface_bytes); };
  RKD_TRY(interleave(l, o, group(0), group(1), wide0, blocks * s.H * s.W, 1));   // row parity 0: columns b = 0, 1
  RKD_TRY(interleave(l, o, group(2), group(3), wide1, blocks * s.H * s.W, 1));   // row parity 1
  RKD_TRY(interleave(l, o, wide0, wide1, l.output_address, blocks * s.H, o.W));  // lines a = 0, 1
  return l;
}

Status write_depth_to_space2_input(DeviceMemory& mem, const DepthToSpace2Spec& s, const LoweredEltwise& l, const Tensor& x) {
  return write_eltwise_input(mem, l, 0, x);
}

Status write_upsample2_input(DeviceMemory& mem, const Upsample2Spec& s, const LoweredEltwise& l, const Tensor& x) {
  return write_eltwise_input(mem, l, 0, x);
}

Result<LoweredEltwise> lower_concat(const ConcatSpec& s, DeviceMemory& mem, const InputsAt& at) {
  RKD_TRY(check_concat(s));
  LoweredEltwise l;
  const int64_t pixels = s.H * s.W;
  l.main_surface_bytes = l.output_surface_bytes = pixels * kC2;
  for (size_t i = 0; i < s.parts.size(); ++i) {
    MapShape part = s;
    part.C = s.parts[i];
    l.part_addresses.push_back(input_buffer(l, mem, at, i, part, l.main_surface_bytes, 0, i));
  }
  l.main_address = l.part_addresses[0];
  const size_t out_bytes = map_bytes(s, l.output_surface_bytes);
  l.output_address = output_buffer(l, mem, s, l.output_surface_bytes);
  int64_t c0 = 0;
  for (size_t i = 0; i < s.parts.size(); ++i) {
    if (i > 0) l.buffers.push_back(Buffer{BufferKind::output, i, l.output_address, out_bytes});
    RKD_TRY(emit(copy_task(s, s.parts[i], l.part_addresses[i], l.output_address + static_cast<uint32_t>(c0 / kC2 * l.output_surface_bytes)), l));
    c0 += s.parts[i];
  }
  return l;
}

Result<LoweredEltwise> lower_split(const SplitSpec& s, DeviceMemory& mem, const InputsAt& at) {
  RKD_TRY(check_split(s));
  LoweredEltwise l;
  const int64_t pixels = s.H * s.W;
  l.main_surface_bytes = l.output_surface_bytes = pixels * kC2;
  const size_t in_bytes = map_bytes(s, l.main_surface_bytes);
  l.main_address = input_buffer(l, mem, at, 0, s, l.main_surface_bytes);
  for (size_t i = 0; i < s.parts.size(); ++i) {
    MapShape part = s;
    part.C = s.parts[i];
    l.part_addresses.push_back(output_buffer(l, mem, part, l.output_surface_bytes, 0, i));
  }
  l.output_address = l.part_addresses[0];
  int64_t c0 = 0;
  for (size_t i = 0; i < s.parts.size(); ++i) {
    if (i > 0 && !l.input_maps[0][0].chained) l.buffers.push_back(Buffer{BufferKind::input, i, l.main_address, in_bytes});
    RKD_TRY(emit(copy_task(s, s.parts[i], l.main_address + static_cast<uint32_t>(c0 / kC2 * l.main_surface_bytes), l.part_addresses[i]), l));
    c0 += s.parts[i];
  }
  return l;
}

Status write_split_input(DeviceMemory& mem, const SplitSpec& s, const LoweredEltwise& l, const Tensor& x) {
  return write_eltwise_input(mem, l, 0, x);
}

Status write_concat_inputs(DeviceMemory& mem, const ConcatSpec& s, const LoweredEltwise& l, const std::vector<const Tensor*>& parts) {
  if (parts.size() != s.parts.size()) return invalid("npu Concat: one tensor per part");
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!parts[i]) return invalid("npu Concat: part " + std::to_string(i) + " missing");
    RKD_TRY(write_eltwise_input(mem, l, i, *parts[i]));
  }
  return {};
}

Status write_add_inputs(DeviceMemory& mem, const AddSpec& s, const LoweredEltwise& l, const Tensor& a, const Tensor& b) {
  RKD_TRY(write_eltwise_input(mem, l, 0, a));
  return write_eltwise_input(mem, l, 1, b);
}

Status write_mul_inputs(DeviceMemory& mem, const MulSpec& s, const LoweredEltwise& l, const Tensor& a, const Tensor& b) {
  RKD_TRY(write_eltwise_input(mem, l, 0, a));
  return write_eltwise_input(mem, l, 1, b);
}

Status write_leaky_relu_input(DeviceMemory& mem, const LeakyReluSpec& s, const LoweredEltwise& l, const Tensor& x) {
  return write_eltwise_input(mem, l, 0, x);
}

Status gather_eltwise_output(const DeviceMemory& mem, const MapShape& s, const LoweredEltwise& l, Tensor& y) {
  if (y.shape() != Shape{1, s.C, s.H, s.W} || y.dtype() != s.dtype || !y.is_contiguous()) {
    return invalid("npu element-wise task: the output must be a contiguous [1, C, H, W] of the operands' type");
  }
  const int64_t plane = s.H * s.W;
  RKD_ASSIGN(auto b, mem.read(l.output_address, map_bytes(s, l.output_surface_bytes)));
  auto* dst = static_cast<uint8_t*>(y.raw());
  std::vector<uint8_t*> planes(static_cast<size_t>(blocks_of(s) * kC2), nullptr);
  for (int64_t c = 0; c < s.C; ++c) planes[static_cast<size_t>(c)] = dst + c * plane;
  blocks_to_planes(b.data(), l.output_surface_bytes, plane, s.dtype == DType::u8 ? 0x80 : 0, planes);
  return {};
}

Status gather_split_outputs(const DeviceMemory& mem, const SplitSpec& s, const LoweredEltwise& l, std::vector<Tensor>& ys) {
  if (ys.size() != s.parts.size()) return invalid("npu Split: one output per part");
  for (size_t i = 0; i < ys.size(); ++i) RKD_TRY(read_eltwise_output(mem, l, i, ys[i]));
  return {};
}

bool chainable(const DeviceMap& have, const DeviceMap& want) {
  return have.rows == want.rows && have.shape.dtype == want.shape.dtype && have.shape.C == want.shape.C && have.shape.H == want.shape.H &&
         have.shape.W == want.shape.W && have.surface_bytes == want.surface_bytes && have.channels >= want.channels;
}

Status write_eltwise_input(DeviceMemory& mem, const LoweredEltwise& l, size_t i, const Tensor& x) {
  if (i >= l.input_maps.size()) return invalid("npu element-wise task: no data input " + std::to_string(i));
  for (const DeviceMap& m : l.input_maps[i]) {
    if (m.chained) continue;
    if (x.numel() == 1 && m.shape.C > 1 && m.shape.H == 1 && m.shape.W == 1) {
      // One element for every channel (a Mul's scalar operand read per channel).
      if (x.dtype() != m.shape.dtype) return invalid("npu element-wise task: an operand of another type");
      Tensor full = Tensor::empty(m.shape.dtype, {1, m.shape.C, 1, 1});
      const Tensor xc = x.contiguous();
      std::memset(full.raw(), *static_cast<const uint8_t*>(xc.raw()), static_cast<size_t>(m.shape.C));
      RKD_TRY(write_map(mem, m.address, m.surface_bytes, m.shape, full, "an operand", m.channels));
    } else if (x.numel() == m.shape.C * m.shape.H * m.shape.W && x.shape() != Shape{1, m.shape.C, m.shape.H, m.shape.W}) {
      // The same values under other unit dimensions (a [C, 1, 1] per-channel operand).
      RKD_ASSIGN(Tensor v, x.contiguous().reshape({1, m.shape.C, m.shape.H, m.shape.W}));
      RKD_TRY(write_map(mem, m.address, m.surface_bytes, m.shape, v, "an operand", m.channels));
    } else {
      RKD_TRY(write_map(mem, m.address, m.surface_bytes, m.shape, x, "an operand", m.channels));
    }
  }
  return {};
}

Status read_eltwise_output(const DeviceMemory& mem, const LoweredEltwise& l, size_t i, Tensor& y) {
  if (i >= l.output_maps.size()) return invalid("npu element-wise task: no output " + std::to_string(i));
  const DeviceMap& m = l.output_maps[i];
  LoweredEltwise one;
  one.output_address = m.address;
  one.output_surface_bytes = m.surface_bytes;
  return gather_eltwise_output(mem, m.shape, one, y);
}

}  // namespace rkd::npu::lower
