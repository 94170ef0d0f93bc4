#include "npu/lower/eltwise.h"

#include "npu/lower/emit.h"
#include "npu/lower/pack.h"

namespace rkd::npu::lower {

namespace {

int32_t qmin_of(DType t) { return t == DType::i8 ? -128 : 0; }
int32_t qmax_of(DType t) { return t == DType::i8 ? 127 : 255; }

// NCHW planes of x ([1, C, H, W]) into NC1HWC2 blocks at `at` (surface bytes apart); lanes
// past C hold 0.
Status write_map(DeviceMemory& mem, uint32_t at, int64_t surface, const AddSpec& s, const Tensor& x0, const char* what) {
  if (x0.shape() != Shape{1, s.C, s.H, s.W} || x0.dtype() != s.dtype) {
    return invalid(std::string("npu add: ") + what + " must be [1, C, H, W] of the operands' type");
  }
  const Tensor x = x0.contiguous();
  const int64_t plane = s.H * s.W, blocks = align(s.C, kC2) / kC2;
  RKD_ASSIGN(std::span<uint8_t> b, mem.span(at, static_cast<size_t>((blocks - 1) * surface + plane * kC2)));
  const auto* src = static_cast<const uint8_t*>(x.raw());
  std::vector<const uint8_t*> planes(static_cast<size_t>(blocks * kC2), nullptr);
  for (int64_t c = 0; c < s.C; ++c) planes[static_cast<size_t>(c)] = src + c * plane;
  planes_to_blocks(planes, plane, 0, s.dtype == DType::u8 ? 0x80 : 0, b.data(), surface);
  return {};
}

}  // namespace

EltwiseGeometry geometry_of(const AddSpec& s) {
  EltwiseGeometry g;
  g.dtype = s.dtype;
  g.C = s.C;
  g.H = s.H;
  g.W = s.W;
  g.fused_activation = s.q.act_min != qmin_of(s.dtype) || s.q.act_max != qmax_of(s.dtype);
  return g;
}

Status check_add(const AddSpec& s) {
  if (s.C < 1 || s.H < 1 || s.W < 1) return invalid("npu add: empty map");
  if (!(s.q.a_scale > 0) || !(s.q.b_scale > 0) || !(s.q.out_scale > 0)) return invalid("npu add: scales must be positive");
  RKD_TRY(eltwise_supported(geometry_of(s), "npu add: "));
  auto k = quant::rknpu_add_plan(s.q);
  if (!k.ok()) return unsupported("npu add: " + k.error().message);
  return {};
}

Result<LoweredAdd> lower_add(const AddSpec& s, DeviceMemory& mem) {
  RKD_TRY(check_add(s));
  LoweredAdd l;
  RKD_ASSIGN(l.plan, quant::rknpu_add_plan(s.q));
  const int64_t pixels = s.H * s.W, channels = align(s.C, kC2), blocks = channels / kC2;
  l.main_surface_bytes = pixels * kC2;
  l.ew_surface_bytes = std::max<int64_t>(pixels, arch::kRk3588.ew_surface_min_pixels) * kC2;
  l.output_surface_bytes = pixels * kC2;
  auto place = [&](const char* kind, int64_t surface) {
    const size_t bytes = static_cast<size_t>((blocks - 1) * surface + pixels * kC2);
    const uint32_t a = mem.alloc(bytes);
    l.buffers.push_back(Buffer{kind, 0, a, bytes});
    return a;
  };
  l.main_address = place("input", l.main_surface_bytes);
  l.ew_address = place("input", l.ew_surface_bytes);
  l.output_address = place("output", l.output_surface_bytes);

  const bool b_main = l.plan.b_is_main;
  const int32_t zm = b_main ? s.q.b_zero_point : s.q.a_zero_point, ze = b_main ? s.q.a_zero_point : s.q.b_zero_point;
  DpuTask d;
  d.input_address = l.main_address;
  d.dst_address = l.output_address;
  d.dst_surface_pixels = pixels;
  d.width = s.W;
  d.rows = s.H;
  d.channels = channels;
  d.orig_channels = s.C;
  d.bs.layout = BsOperands::registers;
  d.bs.alu_value = -stored(zm, s.dtype);
  d.bs.mul_value = static_cast<int16_t>(l.plan.main_mul);
  d.bs.mul_shift = 0;
  d.ew = EwOperand{l.ew_address, l.ew_surface_bytes / kC2, -stored(ze, s.dtype), l.plan.ew};
  d.out_offset = stored(s.q.out_zero_point, s.dtype);
  d.out_cvt = OutCvt{l.plan.out.scale, l.plan.out.shift};
  regcmd::Task t;
  t.enable_mask = arch::kDpuEnableMask;
  RKD_TRY(emit_dpu(t.regs, d));
  RKD_TRY(emit_dpu_rdma(t.regs, d));
  l.tasks.push_back(std::move(t));
  return l;
}

Status write_add_inputs(DeviceMemory& mem, const AddSpec& s, const LoweredAdd& l, const Tensor& a, const Tensor& b) {
  const Tensor& m = l.plan.b_is_main ? b : a;
  const Tensor& e = l.plan.b_is_main ? a : b;
  RKD_TRY(write_map(mem, l.main_address, l.main_surface_bytes, s, m, l.plan.b_is_main ? "B" : "A"));
  return write_map(mem, l.ew_address, l.ew_surface_bytes, s, e, l.plan.b_is_main ? "A" : "B");
}

Status gather_add_output(const DeviceMemory& mem, const AddSpec& s, const LoweredAdd& l, Tensor& y) {
  if (y.shape() != Shape{1, s.C, s.H, s.W} || y.dtype() != s.dtype || !y.is_contiguous()) {
    return invalid("npu add: the output must be a contiguous [1, C, H, W] of the operands' type");
  }
  const int64_t plane = s.H * s.W, blocks = align(s.C, kC2) / kC2;
  RKD_ASSIGN(auto b, mem.read(l.output_address, static_cast<size_t>((blocks - 1) * l.output_surface_bytes + plane * kC2)));
  auto* dst = static_cast<uint8_t*>(y.raw());
  std::vector<uint8_t*> planes(static_cast<size_t>(blocks * kC2), nullptr);
  for (int64_t c = 0; c < s.C; ++c) planes[static_cast<size_t>(c)] = dst + c * plane;
  blocks_to_planes(b.data(), l.output_surface_bytes, plane, s.dtype == DType::u8 ? 0x80 : 0, planes);
  return {};
}

}  // namespace rkd::npu::lower
