// Max pooling as a PPU-only task: lowered (npu/lower/eltwise.h lower_max_pool), encoded as
// regcmd, executed by the simulator from device memory, against the executor's integer
// MaxPool (the int8 backend's kernel) and a direct loop over the window, bit for bit, on the
// detectors' pooling geometries and the register fields' limits, under both readings of how
// the PPU pads a maximum (sim knob ppu_max_padding); the channel Pad that follows those pools
// in blazeface and handdetect, as one DPU-only task; and the nearest x2 Resize of YOLO's and
// CenterNet's necks as scattering copy tasks, against the executor's Resize.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <tuple>

#include "kernels/tensor_ops.h"
#include "npu/arch/arch.h"
#include "npu/lower/eltwise.h"
#include "npu/regcmd/regcmd.h"
#include "npu/sim/sim.h"

namespace rkd::npu {
namespace {

struct Geometry {
  const char* name;
  int64_t C, H, W, k_h, k_w, s_h, s_w, top, left, bottom, right;
};

// blazeface / handdetect (2x2 stride 2), nanodet (3x3 stride 2 after its Pad), centernet (3x3
// stride 1, SAME), YOLOv8's SPPF (5x5 stride 1, pads 2), an odd SAME_UPPER map, and the
// fields' limits (kernel and stride 16, pads 7).
const Geometry kGeometries[] = {
    {"blazeface_2x2_s2", 28, 64, 64, 2, 2, 2, 2, 0, 0, 0, 0},   {"nanodet_3x3_s2", 24, 18, 18, 3, 3, 2, 2, 0, 0, 0, 0},
    {"centernet_3x3_same", 20, 12, 10, 3, 3, 1, 1, 1, 1, 1, 1}, {"sppf_5x5_p2", 48, 10, 10, 5, 5, 1, 1, 2, 2, 2, 2},
    {"same_upper_odd", 17, 7, 9, 2, 2, 2, 2, 0, 0, 1, 1},       {"kernel_16_stride_16", 16, 32, 48, 16, 16, 16, 16, 0, 0, 0, 0},
    {"pads_7_kernel_8", 33, 9, 11, 8, 8, 1, 1, 7, 7, 7, 7},     {"asymmetric", 40, 13, 6, 3, 4, 2, 3, 2, 0, 1, 3},
};

lower::MaxPoolSpec spec_of(const Geometry& g, DType t) {
  lower::MaxPoolSpec s;
  static_cast<lower::MapShape&>(s) = lower::MapShape{t, g.C, g.H, g.W};
  s.kernel_h = g.k_h;
  s.kernel_w = g.k_w;
  s.stride_h = g.s_h;
  s.stride_w = g.s_w;
  s.pad_top = g.top;
  s.pad_left = g.left;
  s.pad_bottom = g.bottom;
  s.pad_right = g.right;
  return s;
}

void put(Tensor& t, int64_t i, int32_t v) {
  if (t.dtype() == DType::i8) t.data<int8_t>()[i] = static_cast<int8_t>(v);
  else t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
}

// The maximum over each window's cells inside the map, element by element.
Tensor window_max(const lower::MaxPoolSpec& s, const Tensor& x) {
  const lower::MapShape o = s.output();
  Tensor y = Tensor::empty(s.dtype, {1, s.C, o.H, o.W});
  auto at = [&](int64_t c, int64_t h, int64_t w) { return static_cast<int32_t>(x.get_as_double((c * s.H + h) * s.W + w)); };
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t oy = 0; oy < o.H; ++oy)
      for (int64_t ox = 0; ox < o.W; ++ox) {
        int32_t m = INT32_MIN;
        for (int64_t ky = 0; ky < s.kernel_h; ++ky)
          for (int64_t kx = 0; kx < s.kernel_w; ++kx) {
            const int64_t iy = oy * s.stride_h - s.pad_top + ky, ix = ox * s.stride_w - s.pad_left + kx;
            if (iy >= 0 && iy < s.H && ix >= 0 && ix < s.W) m = std::max(m, at(c, iy, ix));
          }
        put(y, (c * o.H + oy) * o.W + ox, m);
      }
  return y;
}

struct Pooled {
  Tensor y;
  std::vector<uint64_t> words;
};

Result<Pooled> simulate_pool(const lower::MaxPoolSpec& s, const Tensor& x, const sim::Quirks& q, bool cache) {
  DeviceMemory mem;
  RKD_ASSIGN(lower::LoweredEltwise l, lower::lower_max_pool(s, mem));
  if (l.tasks.size() != 1 || l.tasks[0].enable_mask != arch::kPpuEnableMask) return invalid("expected one PPU-only task");
  RKD_ASSIGN(auto placed, lower::place_regcmd(mem, l.tasks));
  RKD_TRY(lower::write_max_pool_input(mem, s, l, x));
  sim::SimCache c;
  RKD_ASSIGN(auto stats, sim::run(mem, placed.address, placed.spans[0].word_count, q, cache ? &c : nullptr));
  if (stats.size() != 1) return invalid("expected one task");
  const lower::MapShape o = s.output();
  Pooled p{Tensor::empty(s.dtype, {1, s.C, o.H, o.W}), placed.words};
  RKD_TRY(lower::gather_eltwise_output(mem, o, l, p.y));
  return p;
}

// Places element-wise tasks' register commands (every word free of decode problems), writes the
// input with `write`, runs the chain from its first task (`cache`: the simulator's cached path)
// and gathers the output map `o`; `tasks_run`: the tasks the simulator ran.
Result<Tensor> simulate_tasks(DeviceMemory& mem, const lower::LoweredEltwise& l, const lower::MapShape& o, bool cache,
                              const std::function<Status()>& write, size_t* tasks_run = nullptr) {
  RKD_ASSIGN(auto placed, lower::place_regcmd(mem, l.tasks));
  for (const auto& d : regcmd::decode(placed.words)) {
    if (!d.problems.empty()) return invalid("regcmd: " + d.problems.front());
  }
  RKD_TRY(write());
  sim::SimCache c;
  RKD_ASSIGN(auto st, sim::run(mem, placed.address, placed.spans[0].word_count, sim::Quirks{}, cache ? &c : nullptr));
  if (tasks_run) *tasks_run = st.size();
  Tensor y = Tensor::empty(o.dtype, {1, o.C, o.H, o.W});
  RKD_TRY(lower::gather_eltwise_output(mem, o, l, y));
  return y;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::equal(static_cast<const uint8_t*>(a.raw()), static_cast<const uint8_t*>(a.raw()) + a.numel(), static_cast<const uint8_t*>(b.raw()));
}

TEST(NpuPool, MaxPoolTaskEqualsTheIntegerMaxPool) {
  std::mt19937 rng(19);
  for (const Geometry& g : kGeometries) {
    for (DType t : {DType::i8, DType::u8}) {
      const lower::MaxPoolSpec s = spec_of(g, t);
      Tensor x = Tensor::empty(t, {1, s.C, s.H, s.W});
      auto* p = static_cast<uint8_t*>(x.raw());
      // Random codes with runs of the type's extremes (a window of minima must give the minimum,
      // which is also the pad value the lowering writes).
      for (int64_t i = 0; i < x.numel(); ++i) {
        const uint32_t r = rng();
        p[i] = static_cast<uint8_t>(r % 7 == 0 ? (t == DType::i8 ? 0x80 : 0) : r % 11 == 0 ? (t == DType::i8 ? 0x7f : 0xff) : r >> 8);
      }
      ops::PoolParams pp;
      pp.kernel = {g.k_h, g.k_w};
      pp.strides = {g.s_h, g.s_w};
      pp.dilations = {1, 1};
      pp.pads = {g.top, g.left, g.bottom, g.right};
      const lower::MapShape o = s.output();
      Tensor ref = Tensor::empty(t, {1, s.C, o.H, o.W});
      ops::max_pool(x, pp, ref);
      ASSERT_TRUE(same_bytes(ref, window_max(s, x))) << g.name << ": the executor's MaxPool and the window loop differ";
      for (const char* knob : {"ppu_max_padding=ignored", "ppu_max_padding=value"}) {
        sim::Quirks q;
        ASSERT_TRUE(sim::set_knob(q, knob).ok());
        for (bool cache : {false, true}) {
          auto got = simulate_pool(s, x, q, cache);
          ASSERT_TRUE(got.ok()) << g.name << ": " << got.error().to_string();
          for (const auto& d : regcmd::decode(got->words)) EXPECT_TRUE(d.problems.empty()) << g.name << ": " << d.problems.front();
          EXPECT_TRUE(same_bytes(got->y, ref)) << g.name << " " << dtype_name(t) << " " << knob << (cache ? " (cache)" : "");
        }
      }
    }
  }
}

// The knob acts: with the pad value raised to the type's maximum, `value` puts it into every
// window that reaches the padding and `ignored` does not; and what the simulator does not
// simulate is refused by register name.
TEST(NpuPool, PaddingKnobAndRefusalsFollowTheRegisters) {
  const lower::MaxPoolSpec s = spec_of(kGeometries[2], DType::i8);  // 3x3, pads 1
  Tensor x = Tensor::empty(DType::i8, {1, s.C, s.H, s.W});
  for (int64_t i = 0; i < x.numel(); ++i) put(x, i, static_cast<int32_t>(-100 + i % 50));
  auto run_with = [&](const char* knob, uint32_t pad_value, const arch::Field* field, uint64_t value) -> Result<Tensor> {
    DeviceMemory mem;
    RKD_ASSIGN(lower::LoweredEltwise l, lower::lower_max_pool(s, mem));
    l.tasks[0].regs.set(arch::PPU_PADDING_VALUE_1_CFG, pad_value);
    if (field) RKD_TRY(l.tasks[0].regs.set(*field, value));
    RKD_ASSIGN(auto placed, lower::place_regcmd(mem, l.tasks));
    RKD_TRY(lower::write_max_pool_input(mem, s, l, x));
    sim::Quirks q;
    RKD_TRY(sim::set_knob(q, knob));
    RKD_TRY(sim::run(mem, placed.address, placed.spans[0].word_count, q));
    Tensor y = Tensor::empty(DType::i8, {1, s.C, s.H, s.W});
    RKD_TRY(lower::gather_eltwise_output(mem, s.output(), l, y));
    return y;
  };
  const Tensor ref = window_max(s, x);
  auto ignored = run_with("ppu_max_padding=ignored", 127, nullptr, 0);
  auto value = run_with("ppu_max_padding=value", 127, nullptr, 0);
  ASSERT_TRUE(ignored.ok() && value.ok());
  EXPECT_TRUE(same_bytes(*ignored, ref));
  int border = 0, at_max = 0;
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t w = 0; w < s.W; ++w) {
        const bool edge = h == 0 || w == 0 || h == s.H - 1 || w == s.W - 1;
        const int64_t i = (c * s.H + h) * s.W + w;
        border += edge;
        at_max += edge && value->get_as_double(i) == 127;
        if (!edge) {
          EXPECT_EQ(value->get_as_double(i), ref.get_as_double(i));
        }
      }
  EXPECT_EQ(at_max, border);
  // The map's storage width is PPU_RDMA's IN_PRECISION: 8-bit is 1 (0 reads 4-bit values).
  {
    DeviceMemory mem;
    auto l = lower::lower_max_pool(s, mem);
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(l->tasks[0].regs.get(arch::PPU_RDMA_RDMA_DATA_FORMAT_IN_PRECISION), 1u);
    EXPECT_EQ(l->tasks[0].regs.get(arch::PPU_DATA_FORMAT_PROC_PRECISION), 0u);
  }
  // Average pooling, the DPU's on-the-fly input, window indices and another storage width
  // are refused by name.
  const std::tuple<const arch::Field*, const char*, uint64_t> refused[] = {{&arch::PPU_OPERATION_MODE_CFG_POOLING_METHOD, "POOLING_METHOD", 0},
                                                                           {&arch::PPU_OPERATION_MODE_CFG_INDEX_EN, "INDEX_EN", 1},
                                                                           {&arch::PPU_DATA_FORMAT_DPU_FLYIN, "DPU_FLYIN", 1},
                                                                           {&arch::PPU_RDMA_RDMA_DATA_FORMAT_IN_PRECISION, "IN_PRECISION", 0}};
  for (const auto& [f, name, v] : refused) {
    auto r = run_with("ppu_max_padding=ignored", 0xffffff80u, f, v);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.error().kind, ErrorKind::unsupported) << name;
    EXPECT_NE(r.error().message.find(name), std::string::npos) << r.error().message;
  }
}

TEST(NpuPool, LimitsComeFromTheRegisterFields) {
  // One past each field's reach is refused with the rule; at the reach it lowers (above).
  lower::MaxPoolSpec s = spec_of(kGeometries[5], DType::i8);
  s.kernel_h = 17;
  s.H = 40;
  DeviceMemory mem;
  auto r = lower::lower_max_pool(s, mem);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("kernel <= 16"), std::string::npos) << r.error().message;
  s = spec_of(kGeometries[6], DType::i8);
  s.pad_top = 8;
  s.kernel_h = 9;
  r = lower::lower_max_pool(s, mem);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("pads <= 7"), std::string::npos) << r.error().message;
  s = spec_of(kGeometries[5], DType::i8);
  s.pad_top = 1;
  r = lower::lower_max_pool(s, mem);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no padding with a kernel of 16"), std::string::npos) << r.error().message;
  s = spec_of(kGeometries[2], DType::i8);
  s.pad_left = 3;
  r = lower::lower_max_pool(s, mem);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("pads below the kernel"), std::string::npos) << r.error().message;
}

// A Pad of the channels' end (blazeface's and handdetect's channel padding) as one DPU-only
// task: the map, then the pad code in every added channel, whether the padding starts inside
// a 16-channel block or at its start and on both simulator paths.
TEST(NpuEltwise, ChannelPadTaskAppendsTheCode) {
  struct PadCase {
    int64_t C, pad;
    int32_t value;
  };
  const PadCase cases[] = {{24, 24, 0}, {48, 48, -3}, {5, 3, 127}, {16, 1, -128}};
  std::mt19937 rng(23);
  for (DType t : {DType::i8, DType::u8}) {
    for (const PadCase& k : cases) {
      lower::ChannelPadSpec s;
      static_cast<lower::MapShape&>(s) = lower::MapShape{t, k.C, 7, 9};
      s.pad_end = k.pad;
      s.value = t == DType::u8 ? k.value + 128 : k.value;
      Tensor x = Tensor::empty(t, {1, s.C, s.H, s.W});
      auto* p = static_cast<uint8_t*>(x.raw());
      for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<uint8_t>(rng());
      const lower::MapShape o = s.output();
      for (bool cache : {false, true}) {
        DeviceMemory mem;
        auto l = lower::lower_channel_pad(s, mem);
        ASSERT_TRUE(l.ok()) << l.error().to_string();
        ASSERT_EQ(l->tasks.size(), 1u);
        auto y = simulate_tasks(mem, *l, o, cache, [&] { return lower::write_channel_pad_input(mem, s, *l, x); });
        ASSERT_TRUE(y.ok()) << y.error().to_string();
        const auto* yo = static_cast<const uint8_t*>(y->raw());
        const int64_t plane = s.H * s.W;
        int wrong = 0;
        for (int64_t i = 0; i < y->numel(); ++i) {
          const int64_t ch = i / plane;
          const uint8_t want = ch < s.C ? p[i] : static_cast<uint8_t>(s.value);
          wrong += yo[i] != want;
        }
        EXPECT_EQ(wrong, 0) << dtype_name(t) << " C " << k.C << " + " << k.pad << (cache ? " (cache)" : "");
      }
    }
  }
  lower::ChannelPadSpec bad;
  static_cast<lower::MapShape&>(bad) = lower::MapShape{DType::i8, 8, 4, 4};
  bad.pad_end = 8;
  bad.value = 200;
  DeviceMemory mem;
  EXPECT_EQ(lower::lower_channel_pad(bad, mem).error().kind, ErrorKind::invalid);
}

// Nearest x2: the executor's own Resize (the int8 backend's kernel, ONNX's asymmetric / floor and
// half_pixel / round_prefer_floor, which both repeat each cell in a 2 x 2 block) equals the
// tasks' output; the shapes reach several tasks per pass (512 cells or lines each), odd sizes,
// one channel and a part of a 16-channel block.
TEST(NpuEltwise, Upsample2TasksEqualTheNearestResize) {
  struct UpCase {
    int64_t C, H, W;
  };
  const UpCase cases[] = {{1, 1, 1}, {3, 5, 7}, {64, 20, 20}, {40, 9, 33}, {16, 1, 600}};
  std::mt19937 rng(29);
  for (DType t : {DType::i8, DType::u8}) {
    for (const UpCase& k : cases) {
      lower::Upsample2Spec s;
      static_cast<lower::MapShape&>(s) = lower::MapShape{t, k.C, k.H, k.W};
      Tensor x = Tensor::empty(t, {1, s.C, s.H, s.W});
      auto* p = static_cast<uint8_t*>(x.raw());
      for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<uint8_t>(rng());
      const lower::MapShape o = s.output();
      Tensor repeated = Tensor::empty(t, {1, o.C, o.H, o.W});  // each cell in a 2 x 2 block, directly
      for (int64_t c = 0; c < o.C; ++c)
        for (int64_t h = 0; h < o.H; ++h)
          for (int64_t w = 0; w < o.W; ++w) static_cast<uint8_t*>(repeated.raw())[(c * o.H + h) * o.W + w] = p[(c * s.H + h / 2) * s.W + w / 2];
      for (const auto& [transform, nearest] : {std::pair{"asymmetric", "floor"}, std::pair{"half_pixel", "round_prefer_floor"}}) {
        ops::ResizeParams rp;
        rp.mode = ops::ResizeParams::Mode::nearest;
        rp.coordinate_transformation = transform;
        rp.nearest_mode = nearest;
        rp.scales = {1.f, 1.f, 2.f, 2.f};
        Tensor ref = Tensor::empty(t, {1, o.C, o.H, o.W});
        ASSERT_TRUE(ops::resize(x, rp, ref).ok());
        ASSERT_TRUE(same_bytes(ref, repeated)) << transform << ": the executor's Resize does not repeat each cell";
        for (bool cache : {false, true}) {
          DeviceMemory mem;
          auto l = lower::lower_upsample2(s, mem);
          ASSERT_TRUE(l.ok()) << l.error().to_string();
          const int64_t cells = (s.C + 15) / 16 * s.H * s.W, lines = (s.C + 15) / 16 * s.H;
          EXPECT_EQ(l->tasks.size(), static_cast<size_t>(2 * ((cells + 511) / 512 + (lines + 511) / 512)));
          size_t ran = 0;
          auto y = simulate_tasks(
              mem, *l, o, cache, [&] { return lower::write_upsample2_input(mem, s, *l, x); }, &ran);
          ASSERT_TRUE(y.ok()) << y.error().to_string();
          EXPECT_EQ(ran, l->tasks.size());
          EXPECT_TRUE(same_bytes(*y, ref)) << dtype_name(t) << " " << k.C << "x" << k.H << "x" << k.W << " " << transform
                                           << (cache ? " (cache)" : "");
        }
      }
    }
  }
  lower::Upsample2Spec wide;
  static_cast<lower::MapShape&>(wide) = lower::MapShape{DType::i8, 16, 2, 4097};  // the output's 8194 columns exceed DATA_CUBE_WIDTH
  DeviceMemory mem;
  EXPECT_EQ(lower::lower_upsample2(wide, mem).error().kind, ErrorKind::unsupported);
}

// Nearest x2 edge-padded by one cell (a bilinear x2's first half, the depthwise convolution its
// second): the tasks' output equals the definition y[u, v] = x[clamp((u - 1) / 2), clamp((v - 1)
// / 2)] (floor division) and, inside the border, the executor's nearest Resize; one cell, one
// row or column, odd sizes, a part of a 16-channel block, several tasks per pass.
TEST(NpuEltwise, EdgePaddedUpsample2TasksEqualTheReplicatedNearestMap) {
  struct UpCase {
    int64_t C, H, W;
  };
  const UpCase cases[] = {{1, 1, 1}, {3, 5, 7}, {16, 1, 9}, {40, 9, 1}, {128, 13, 13}, {16, 3, 300}};
  std::mt19937 rng(37);
  for (DType t : {DType::i8, DType::u8}) {
    for (const UpCase& k : cases) {
      lower::Upsample2Spec s;
      static_cast<lower::MapShape&>(s) = lower::MapShape{t, k.C, k.H, k.W};
      s.edge = true;
      Tensor x = Tensor::empty(t, {1, s.C, s.H, s.W});
      auto* p = static_cast<uint8_t*>(x.raw());
      for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<uint8_t>(rng());
      const lower::MapShape o = s.output();
      ASSERT_EQ(o.H, 2 * s.H + 2);
      ASSERT_EQ(o.W, 2 * s.W + 2);
      ops::ResizeParams rp;
      rp.scales = {1.f, 1.f, 2.f, 2.f};
      rp.coordinate_transformation = "asymmetric";
      rp.nearest_mode = "floor";
      Tensor nearest = Tensor::empty(t, {1, s.C, 2 * s.H, 2 * s.W});
      ASSERT_TRUE(ops::resize(x, rp, nearest).ok());
      auto floor_half = [](int64_t v) { return v < 0 ? -1 : v / 2; };
      Tensor want = Tensor::empty(t, {1, o.C, o.H, o.W});
      int inner_differs = 0;
      for (int64_t c = 0; c < o.C; ++c)
        for (int64_t u = 0; u < o.H; ++u)
          for (int64_t v = 0; v < o.W; ++v) {
            const int64_t i = std::clamp<int64_t>(floor_half(u - 1), 0, s.H - 1), j = std::clamp<int64_t>(floor_half(v - 1), 0, s.W - 1);
            const uint8_t w = p[(c * s.H + i) * s.W + j];
            static_cast<uint8_t*>(want.raw())[(c * o.H + u) * o.W + v] = w;
            if (u >= 1 && u <= 2 * s.H && v >= 1 && v <= 2 * s.W)
              inner_differs += static_cast<const uint8_t*>(nearest.raw())[(c * 2 * s.H + u - 1) * 2 * s.W + v - 1] != w;
          }
      ASSERT_EQ(inner_differs, 0) << "the definition's inside is not the nearest map";
      for (bool cache : {false, true}) {
        DeviceMemory mem;
        auto l = lower::lower_upsample2(s, mem);
        ASSERT_TRUE(l.ok()) << l.error().to_string();
        size_t ran = 0;
        auto y = simulate_tasks(
            mem, *l, o, cache, [&] { return lower::write_upsample2_input(mem, s, *l, x); }, &ran);
        ASSERT_TRUE(y.ok()) << y.error().to_string();
        EXPECT_EQ(ran, l->tasks.size());
        EXPECT_TRUE(same_bytes(*y, want)) << dtype_name(t) << " " << k.C << "x" << k.H << "x" << k.W << (cache ? " (cache)" : "");
      }
    }
  }
}

// DepthToSpace (DCR, 2): channel (2 a + b) C' + c of cell (i, j) lands at (2 i + a, 2 j + b) of
// channel c, checked element by element against that definition; handdetect's two (256 -> 64 x
// 4 at 8 x 8 ... as 1 x 1 convolutions of a 2 x 2 stride-2 ConvTranspose), several tasks per
// pass, and an output channel count off the 16-channel grid refused by name.
TEST(NpuEltwise, DepthToSpaceTasksInterleaveTheFourGroups) {
  struct D2sCase {
    int64_t C, H, W;  // the output's channels; the input has 4 C
  };
  const D2sCase cases[] = {{16, 1, 1}, {32, 3, 5}, {256, 8, 8}, {128, 16, 16}, {16, 9, 70}};
  std::mt19937 rng(31);
  for (DType t : {DType::i8, DType::u8}) {
    for (const D2sCase& k : cases) {
      lower::DepthToSpace2Spec s;
      static_cast<lower::MapShape&>(s) = lower::MapShape{t, 4 * k.C, k.H, k.W};
      Tensor x = Tensor::empty(t, {1, s.C, s.H, s.W});
      auto* p = static_cast<uint8_t*>(x.raw());
      for (int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<uint8_t>(rng());
      const lower::MapShape o = s.output();
      ASSERT_EQ(o.C, k.C);
      for (bool cache : {false, true}) {
        DeviceMemory mem;
        auto l = lower::lower_depth_to_space2(s, mem);
        ASSERT_TRUE(l.ok()) << l.error().to_string();
        auto y = simulate_tasks(mem, *l, o, cache, [&] { return lower::write_depth_to_space2_input(mem, s, *l, x); });
        ASSERT_TRUE(y.ok()) << y.error().to_string();
        const auto* yo = static_cast<const uint8_t*>(y->raw());
        int wrong = 0;
        for (int64_t ch = 0; ch < o.C; ++ch)
          for (int64_t h = 0; h < o.H; ++h)
            for (int64_t w = 0; w < o.W; ++w) {
              const int64_t group = (h % 2) * 2 + w % 2;
              wrong += yo[(ch * o.H + h) * o.W + w] != p[((group * o.C + ch) * s.H + h / 2) * s.W + w / 2];
            }
        EXPECT_EQ(wrong, 0) << dtype_name(t) << " " << k.C << "x" << k.H << "x" << k.W << (cache ? " (cache)" : "");
      }
    }
  }
  lower::DepthToSpace2Spec off_grid;
  static_cast<lower::MapShape&>(off_grid) = lower::MapShape{DType::i8, 4 * 24, 4, 4};
  DeviceMemory mem;
  auto r = lower::lower_depth_to_space2(off_grid, mem);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::unsupported);
  EXPECT_NE(r.error().message.find("a part at channel 24: Concat, Split and DepthToSpace parts start at multiples of 16 channels"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace rkd::npu
