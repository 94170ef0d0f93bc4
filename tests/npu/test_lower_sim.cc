// Lowering + simulator against the int8 reference (quant::qlinear_conv): random
// convolutions (conv and depthwise, strides, padding, non-square maps, int8 per-channel and
// uint8 per-tensor) lowered with every strategy, encoded as regcmd, executed by the simulator
// from device memory, compacted, and compared value by value.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels/tensor_ops.h"
#include "npu/arch/arch.h"
#include "npu/lower/constraints.h"
#include "npu/lower/lower.h"
#include "npu/regcmd/regcmd.h"
#include "npu/sim/conv_task.h"
#include "npu/sim/sim.h"
#include "quant/int8.h"
#include "npu/conv_lowering_tester.h"

namespace rkd::npu {
namespace {

// Channel counts around the atomic sizes (1, 15, 16, 17, 33), widths around 16, both strides,
// dense and depthwise: in the NPU's own convention the per-channel strategy (one OUT_CVT per
// channel, scales spread over two decades) and, on uint8 per-tensor models, the per-tensor one
// are the int8 reference bit for bit.
TEST(NpuLowerSim, EdgeGeometriesEqualTheReferenceBitForBit) {
  unsigned seed = 100;
  for (int64_t C : {1, 15, 16, 17, 33}) {
    for (int64_t W : {4, 15, 17}) {
      for (bool dw : {false, true}) {
        ConvLoweringTester()
            .channels(dw && C < 3 ? 3 : C)
            .output_channels(C + 2)
            .height(5)
            .width(W)
            .kernel(3)
            .stride(1 + W % 2)
            .depthwise(dw)
            .scale_decades(2)
            .strategy(lower::Strategy::per_channel)
            .seed(seed++)
            .Test();
        ConvLoweringTester()
            .channels(dw && C < 3 ? 3 : C)
            .output_channels(C)
            .height(W)
            .width(6)
            .kernel(dw ? 3 : 1)
            .stride(1)
            .depthwise(dw)
            .dtype(DType::u8)
            .relu(true)
            .strategy(lower::Strategy::per_tensor)
            .seed(seed++)
            .Test();
      }
    }
  }
}

TEST(NpuLowerSim, SingleOutCvtStrategiesAreExactWhenEveryChannelHasOneScale) {
  // uint8 per-tensor models (Mesa's arithmetic: OW_OP, padding zero point, folded bias) and
  // int8 models whose channels share one scale: every strategy computes the same integers as
  // the reference up to the OUT_CVT's 15-bit multiplier, which the ONNX convention's float
  // product matches except on near-ties.
  std::mt19937 rng(3);
  for (int trial = 0; trial < 24; ++trial) {
    Case c = random_case(rng, trial % 3 == 0, trial % 2 ? DType::u8 : DType::i8, 0.0, trial % 4 == 1);
    const Tensor ref = reference(c, quant::Requant::onnx_float);
    // In the NPU's own convention (quant::Requant::rknpu_out_cvt: the OUT_CVT's 15-bit
    // multiplier, half to even) every single-OUT_CVT strategy is the reference bit for bit:
    // packing, zero points, padding lanes and rows, folded bias and ReLU/ReLUX all exact.
    const Tensor ref_npu = reference(c, quant::Requant::rknpu_out_cvt);
    for (lower::Strategy st :
         {lower::Strategy::per_tensor, lower::Strategy::group16, lower::Strategy::per_channel, lower::Strategy::bs_multiplier_opt}) {
      auto y = simulate(c, st);
      ASSERT_TRUE(y.ok()) << "trial " << trial << " " << lower::strategy_name(st) << ": " << y.error().to_string();
      const Diff d = compare(*y, ref);
      EXPECT_LE(d.max, 1) << "trial " << trial << " " << lower::strategy_name(st);
      EXPECT_GE(static_cast<double>(d.exact) / static_cast<double>(d.n), 0.99) << "trial " << trial << " " << lower::strategy_name(st);
      if (st != lower::Strategy::bs_multiplier_opt) {
        EXPECT_EQ(compare(*y, ref_npu).max, 0) << "trial " << trial << " " << lower::strategy_name(st);
      }
    }
  }
}

TEST(NpuLowerSim, SortedBsMultiplierSplitsPastItsSpreadAndStaysWithinOneStep) {
  // Weight scales over four decades (a 10^4 spread, past the default's 2^7 per task): several
  // tasks, each within the bound, so at most one step everywhere.
  std::mt19937 rng(12);
  for (int trial = 0; trial < 8; ++trial) {
    Case c = random_case(rng, trial % 4 == 0, DType::i8, 4.0, trial % 3 == 1);
    const Tensor ref = reference(c, quant::Requant::onnx_float);
    size_t tasks = 0, one = 0;
    auto y = simulate(c, lower::Strategy::sorted_bs_multiplier, &tasks);
    ASSERT_TRUE(y.ok()) << "trial " << trial << ": " << y.error().to_string();
    ASSERT_TRUE(simulate(c, lower::Strategy::bs_multiplier_opt, &one).ok());
    EXPECT_LE(compare(*y, ref).max, 1) << "trial " << trial;
    EXPECT_GT(tasks, one) << "trial " << trial;
  }
}

TEST(NpuLowerSim, PerAxisStrategiesOnScalesSpreadOverTwoDecades) {
  std::mt19937 rng(4);
  std::map<std::string, Diff> total;
  std::map<std::string, size_t> task_count;
  // sorted-bs-multiplier at a spread of 4 per task (13 bits per multiplier), beside the default's.
  lower::LowerOptions narrow;
  narrow.sorted_bs_spread_log2 = 2;
  const std::string narrow_name = "sorted-bs-multiplier (spread 4)";
  for (int trial = 0; trial < 16; ++trial) {
    Case c = random_case(rng, trial % 4 == 0, DType::i8, 2.0, trial % 3 == 1);
    const Tensor ref = reference(c, quant::Requant::onnx_float);
    const Tensor ref_npu = reference(c, quant::Requant::rknpu_out_cvt);
    std::vector<std::pair<std::string, lower::Strategy>> runs;
    for (lower::Strategy st : lower::all_strategies()) runs.emplace_back(lower::strategy_name(st), st);
    runs.emplace_back(narrow_name, lower::Strategy::sorted_bs_multiplier);
    for (const auto& [name, st] : runs) {
      size_t tasks = 0;
      auto y = simulate(c, st, &tasks, name == narrow_name ? narrow : lower::LowerOptions{});
      ASSERT_TRUE(y.ok()) << "trial " << trial << " " << name << ": " << y.error().to_string();
      // One OUT_CVT per channel: the NPU convention's reference bit for bit.
      if (st == lower::Strategy::per_channel) {
        EXPECT_EQ(compare(*y, ref_npu).max, 0) << "trial " << trial;
      }
      const Diff d = compare(*y, ref);
      Diff& t = total[name];
      t.max = std::max(t.max, d.max);
      t.exact += d.exact;
      t.n += d.n;
      task_count[name] += tasks;
    }
  }
  for (const auto& [name, d] : total) {
    std::printf("%-22s max |diff| %3lld LSB, %6.2f%% exact\n", name.c_str(), static_cast<long long>(d.max),
                100.0 * static_cast<double>(d.exact) / static_cast<double>(d.n));
  }
  auto share = [&](const char* n) { return static_cast<double>(total[n].exact) / static_cast<double>(total[n].n); };
  // One OUT_CVT for channels whose scales differ: the small-scale channels are garbage.
  for (const char* n : {"per-tensor", "group16", "sorted-groups"}) EXPECT_GT(total[n].max, 20) << n;
  // One OUT_CVT per channel (or per group of equal scales): within one step, nearly all exact.
  for (const char* n : {"per-channel", "hybrid"}) {
    EXPECT_LE(total[n].max, 1) << n;
    EXPECT_GE(share(n), 0.999) << n;
  }
  // int16 multipliers in the BS stage: a channel at 1/100 of the largest scale keeps about 9
  // bits, so near-ties flip more often; never beyond one step. The joint choice beats the
  // vendor's per-channel ratio. The default sorted-bs-multiplier splits only past a spread of
  // 2^7, so two decades are one task: bs-multiplier-opt's values at its task count. Tasks of
  // spread <= 4 restore 13 bits, at more tasks.
  for (const char* n : {"bs-multiplier", "bs-multiplier-opt", "sorted-bs-multiplier"}) {
    EXPECT_LE(total[n].max, 1) << n;
    EXPECT_GE(share(n), 0.98) << n;
  }
  EXPECT_GT(share("bs-multiplier-opt"), share("bs-multiplier"));
  EXPECT_EQ(total["sorted-bs-multiplier"].exact, total["bs-multiplier-opt"].exact);
  EXPECT_EQ(task_count["sorted-bs-multiplier"], task_count["bs-multiplier-opt"]);
  EXPECT_LE(total[narrow_name].max, 1);
  EXPECT_GE(share(narrow_name.c_str()), 0.995);
  EXPECT_GT(task_count[narrow_name], task_count["sorted-bs-multiplier"]);
}

// Inputs taller than the data banks hold (row slices, overlapping by KH - stride rows, the
// first with the top padding, the last with the bottom) and weights larger than the weight
// banks (kernel chunks): the tiled tasks write, bit for bit, what one whole task would (the
// simulator does not model CBUF capacity), and match the reference within one step. One
// test per geometry, so that CTest runs them side by side.
struct TilingCase {
  bool depthwise;
  DType t;
  Dims d;
  int64_t min_slices;
  size_t min_tasks;
  const char* name;
};
const TilingCase kTilingCases[] = {
    {false, DType::i8, {64, 40, 70, 128, 3, 1}, 2, 2, "rows_8KiB"},          // 8 KiB rows: 40 fit in 10 banks
    {false, DType::u8, {48, 24, 97, 160, 3, 2}, 2, 2, "stride2_uint8"},      // stride 2, uint8
    {false, DType::i8, {32, 16, 200, 150, 5, 1}, 3, 3, "kernel5_overlap4"},  // 5x5 kernel, overlap 4 rows
    {false, DType::i8, {16, 8, 300, 90, 1, 1}, 2, 2, "kernel1"},             // 1x1: no overlap
    {true, DType::i8, {40, 40, 120, 700, 3, 1}, 2, 6, "depthwise_windows"},  // depthwise 16-channel windows
    {true, DType::u8, {16, 16, 90, 600, 3, 2}, 2, 2, "depthwise_uint8"},
    {false, DType::i8, {512, 256, 6, 7, 3, 1}, 1, 4, "weight_chunks"},  // 4.5 KiB kernels: weights in chunks
    // A 16 x 16 window over 720 channels (centernet's squeeze-excite average as a depthwise
    // convolution): weights and input each need 6 banks; split into channel ranges.
    {true, DType::i8, {720, 720, 16, 16, 16, 1}, 1, 2, "depthwise_channel_ranges"},
    {true, DType::u8, {720, 720, 16, 16, 16, 1}, 1, 2, "depthwise_channel_ranges_uint8"},
};

class CbufTiling : public ::testing::TestWithParam<size_t> {};

TEST_P(CbufTiling, ComputesWhatTheWholeLoweringComputes) {
  const TilingCase& c0 = kTilingCases[GetParam()];
  std::mt19937 rng(static_cast<unsigned>(11 + GetParam()));
  {
    Case c = random_case(rng, c0.depthwise, c0.t, c0.t == DType::i8 ? 1.0 : 0.0, false, c0.d);
    const std::string what = std::string(c0.depthwise ? "dw " : "conv ") + std::to_string(c0.d.C) + "x" + std::to_string(c0.d.H) + "x" +
                             std::to_string(c0.d.W) + " k" + std::to_string(c0.d.K) + " s" + std::to_string(c0.d.stride);
    size_t tasks = 0, whole_tasks = 0, mac_runs = 0;
    int64_t slices = 0;
    auto tiled = simulate(c, lower::Strategy::sorted_bs_multiplier, &tasks, {}, &slices, {}, nullptr, &mac_runs);
    ASSERT_TRUE(tiled.ok()) << what << ": " << tiled.error().to_string();
    lower::LowerOptions whole;
    whole.cbuf_tiling = false;
    auto ref_whole = simulate(c, lower::Strategy::sorted_bs_multiplier, &whole_tasks, whole);
    ASSERT_TRUE(ref_whole.ok()) << what << ": " << ref_whole.error().to_string();
    EXPECT_GE(slices, c0.min_slices) << what;
    EXPECT_GE(tasks, c0.min_tasks) << what;
    EXPECT_GT(tasks, whole_tasks) << what;
    // The row slices, channel groups and kernel chunks of one map: one exact int8 convolution
    // (ops::QConvAccumulator, where w + OW_OP fits int8: not for uint8, where w - z_w needs 9
    // bits; otherwise the loops, none).
    if (c0.t == DType::i8) {
      EXPECT_EQ(mac_runs, 1u) << what;
    }
    EXPECT_EQ(std::memcmp(tiled->raw(), ref_whole->raw(), tiled->nbytes()), 0) << what;
    const Diff d = compare(*tiled, reference(c, quant::Requant::onnx_float));
    EXPECT_LE(d.max, 1) << what;
    EXPECT_GE(static_cast<double>(d.exact) / static_cast<double>(d.n), 0.99) << what;
    auto per_channel = simulate(c, lower::Strategy::per_channel);
    ASSERT_TRUE(per_channel.ok()) << what << ": " << per_channel.error().to_string();
    EXPECT_EQ(compare(*per_channel, reference(c, quant::Requant::rknpu_out_cvt)).max, 0) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(NpuLowerSim, CbufTiling, ::testing::Range<size_t>(0, std::size(kTilingCases)),
                         [](const ::testing::TestParamInfo<size_t>& i) { return std::string(kTilingCases[i.param].name); });

// A case's input placed and its convolution lowered into fresh device memory.
struct InMemory {
  DeviceMemory mem;
  uint32_t input = 0;
  lower::Lowered l;
};
Result<InMemory> lower_in_memory(const Case& c, lower::Strategy st) {
  InMemory m;
  RKD_ASSIGN(m.input, lower::place_input(m.mem, c.spec, c.x));
  RKD_ASSIGN(m.l, lower::lower_conv(c.spec, st, m.mem, m.input));
  return m;
}

// The compaction of out-of-order regions on the NPU (lower::compaction_spec: a 1 x 1
// permutation convolution after the convolution's tasks, in the same register-command chain):
// its output, one map in channel order, equals the host's compaction of the regions
// (gather_output) byte for byte, for every strategy whose regions are out of order, int8 and
// uint8, dense and depthwise, with row slices; and lanes the regions leave unwritten or
// discard (padding, a depthwise window's neighbours) do not leak into it.
TEST(NpuLowerSim, CompactionOnTheNpuEqualsTheHostsCompaction) {
  std::mt19937 rng(21);
  int compacted = 0, refused = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const DType t = trial % 3 == 2 ? DType::u8 : DType::i8;
    Dims d;
    d.H = trial == 5 ? 90 : 0;  // row slices
    d.W = trial == 5 ? 300 : 0;
    d.C = trial == 5 ? 32 : 0;
    Case c = random_case(rng, trial % 4 == 1, t, t == DType::i8 ? 2.0 : 0.0, trial % 3 == 0, d);
    if (c.spec.H < arch::kRk3588.min_height) c.spec.H = arch::kRk3588.min_height;  // the compaction reads at least min_height rows
    c.x = Tensor::empty(t, {1, c.spec.C, c.spec.H, c.spec.W});
    for (int64_t i = 0; i < c.x.numel(); ++i) static_cast<uint8_t*>(c.x.raw())[i] = static_cast<uint8_t>(rng());
    for (lower::Strategy st : lower::all_strategies()) {
      const std::string what = "trial " + std::to_string(trial) + " " + lower::strategy_name(st);
      auto m = lower_in_memory(c, st);
      ASSERT_TRUE(m.ok()) << what << ": " << m.error().to_string();
      auto cs = lower::compaction_spec(c.spec, m->l);
      if (lower::conv_output_map(c.spec, m->l)) {
        EXPECT_FALSE(cs) << what << ": in order already";
        continue;
      }
      if (c.spec.OH() < arch::kRk3588.min_height) {
        EXPECT_FALSE(cs) << what;
        continue;
      }
      ASSERT_TRUE(cs) << what;
      // Garbage where no task writes: the compaction must not read it.
      auto rm = lower::regions_map(c.spec, m->l);
      ASSERT_TRUE(rm);
      auto region_bytes = m->mem.span(rm->map.address, static_cast<size_t>(rm->map.channels / 16 * rm->map.surface_bytes));
      ASSERT_TRUE(region_bytes.ok());
      for (uint8_t& b : *region_bytes) b = static_cast<uint8_t>(rng());
      auto cl = lower::lower_conv(*cs, lower::Strategy::per_tensor, m->mem, rm->map.address);
      if (!cl.ok() && st != lower::Strategy::sorted_bs_multiplier && cl.error().kind == ErrorKind::unsupported) {
        // One 16-channel region per output channel (per-channel: 16 OC stored channels) can
        // outgrow the CBUF's rows; the runtime then compacts on the host.
        ++refused;
        continue;
      }
      ASSERT_TRUE(cl.ok()) << what << ": " << cl.error().to_string();
      ASSERT_TRUE(lower::conv_output_map(*cs, *cl)) << what;
      std::vector<regcmd::Task> tasks = m->l.tasks;
      tasks.insert(tasks.end(), cl->tasks.begin(), cl->tasks.end());
      auto placed = lower::place_regcmd(m->mem, tasks);
      ASSERT_TRUE(placed.ok());
      auto stats = sim::run(m->mem, placed->address, placed->spans[0].word_count, {});
      ASSERT_TRUE(stats.ok()) << what << ": " << stats.error().to_string();
      EXPECT_EQ(stats->size(), tasks.size()) << what;
      auto host = lower::gather_output(m->mem, c.spec, m->l);
      auto npu = lower::gather_output(m->mem, *cs, *cl);
      ASSERT_TRUE(host.ok() && npu.ok()) << what;
      ASSERT_EQ(host->nbytes(), npu->nbytes());
      EXPECT_EQ(std::memcmp(host->raw(), npu->raw(), host->nbytes()), 0) << what;
      ++compacted;
    }
  }
  EXPECT_GE(compacted, 30);
  EXPECT_LE(refused, 3);
}

// A dense convolution reading its producer's out-of-order regions map in place, its weights
// permuted to match (lower::permuted_input: the weight zero point on lanes that hold nothing),
// computes what it computes on the host-compacted input, byte for byte - int8 and uint8, any
// reader geometry, garbage in the unwritten lanes.
TEST(NpuLowerSim, ConvolutionReadsAPermutedRegionsMapExactly) {
  std::mt19937 rng(33);
  int checked = 0;
  for (int trial = 0; trial < 16; ++trial) {
    const DType t = trial % 4 == 3 ? DType::u8 : DType::i8;
    Dims pd;
    pd.H = 4 + trial % 5;
    pd.W = 5 + trial % 7;
    pd.stride = 1;
    // Scales over four decades: past the default's spread per task, so several tasks whose
    // regions hold the channels out of order.
    Case prod = random_case(rng, false, t, t == DType::i8 ? 4.0 : 0.0, false, pd);
    auto m = lower_in_memory(prod, lower::Strategy::sorted_bs_multiplier);
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    auto rm = lower::regions_map(prod.spec, m->l);
    ASSERT_TRUE(rm);
    if (lower::conv_output_map(prod.spec, m->l)) continue;  // in order already
    auto placed = lower::place_regcmd(m->mem, m->l);
    ASSERT_TRUE(placed.ok());
    auto region_bytes = m->mem.span(rm->map.address, static_cast<size_t>(rm->map.channels / 16 * rm->map.surface_bytes));
    ASSERT_TRUE(region_bytes.ok());
    for (uint8_t& b : *region_bytes) b = static_cast<uint8_t>(rng());  // unwritten lanes keep this
    ASSERT_TRUE(sim::run(m->mem, placed->address, placed->spans[0].word_count, {}).ok());
    auto x = lower::gather_output(m->mem, prod.spec, m->l);
    ASSERT_TRUE(x.ok());
    Dims rd;
    rd.C = prod.spec.OC;
    rd.H = m->l.OH;
    rd.W = m->l.OW;
    Case reader = random_case(rng, false, t, t == DType::i8 ? 1.0 : 0.0, trial % 2 == 0, rd);
    reader.x = *x;
    auto want = simulate(reader, lower::Strategy::sorted_bs_multiplier);
    ASSERT_TRUE(want.ok()) << want.error().to_string();
    auto p = lower::permuted_input(reader.spec, rm->channels);
    ASSERT_TRUE(p.ok()) << p.error().to_string();
    EXPECT_TRUE(lower::chainable(rm->map, lower::conv_input_map(*p, 0)));
    auto l = lower::lower_conv(*p, lower::Strategy::sorted_bs_multiplier, m->mem, rm->map.address);
    ASSERT_TRUE(l.ok()) << l.error().to_string();
    auto rp = lower::place_regcmd(m->mem, *l);
    ASSERT_TRUE(rp.ok());
    ASSERT_TRUE(sim::run(m->mem, rp->address, rp->spans[0].word_count, {}).ok());
    auto got = lower::gather_output(m->mem, *p, *l);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(std::memcmp(got->raw(), want->raw(), want->nbytes()), 0) << "trial " << trial;
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

TEST(NpuSim, SharedMacsOnlyWhereNoTaskWritesTheInputInBetween) {
  // Three tasks over one map (group16: 16 output channels each), the first redirected to
  // write its output over the input's first channel block: the later two read what it wrote.
  // The prepared path may compute one convolution for the tasks over one map only while that
  // map stays as it is: here the first task alone, the other two together - and the device
  // memory afterwards is the loops' byte for byte.
  std::mt19937 rng(5);
  Case c = random_case(rng, false, DType::i8, 1.0, false, {32, 48, 9, 10, 3, 1});
  auto lowered = lower_in_memory(c, lower::Strategy::group16);
  ASSERT_TRUE(lowered.ok()) << lowered.error().to_string();
  DeviceMemory& mem = lowered->mem;
  const uint32_t* in = &lowered->input;
  lower::Lowered* l = &lowered->l;
  ASSERT_EQ(l->tasks.size(), 3u);
  const DeviceMemory untouched = mem;
  l->tasks[0].regs.set(arch::DPU_DST_BASE_ADDR, *in);
  auto placed = lower::place_regcmd(mem, *l);
  ASSERT_TRUE(placed.ok());
  auto image = [](const DeviceMemory& m) {
    auto b = m.read(m.base(), m.size());
    return std::vector<uint8_t>(b->begin(), b->end());
  };
  DeviceMemory by_loops = mem, cached = mem;
  ASSERT_TRUE(sim::run(by_loops, placed->address, placed->spans[0].word_count, {}).ok());
  sim::SimCache cache;
  ASSERT_TRUE(sim::run(cached, placed->address, placed->spans[0].word_count, {}, &cache).ok());
  EXPECT_TRUE(image(cached) == image(by_loops)) << "the device memory after the cached run differs from the loops'";
  EXPECT_EQ(cache.last_mac_runs, 2u);
  // The redirection matters: the last task's output differs from the unmodified chain's.
  DeviceMemory plain = untouched;
  auto l2 = lower::lower_conv(c.spec, lower::Strategy::group16, plain, *in);
  ASSERT_TRUE(l2.ok());
  auto placed2 = lower::place_regcmd(plain, *l2);
  ASSERT_TRUE(placed2.ok());
  ASSERT_TRUE(sim::run(plain, placed2->address, placed2->spans[0].word_count, {}).ok());
  const auto& last = l->outputs.back();
  auto a = by_loops.read(last.address, static_cast<size_t>(last.surface_bytes));
  auto b = plain.read(l2->outputs.back().address, static_cast<size_t>(last.surface_bytes));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(std::memcmp(a->data(), b->data(), a->size()), 0);
}

TEST(DeviceMemory, WrittenSinceTracksMutableAccessesWithinItsHorizon) {
  DeviceMemory m;
  const uint32_t a = m.alloc(64), b = m.alloc(64);
  const uint64_t t0 = m.sequence();
  EXPECT_FALSE(m.written_since(t0, a, 64));
  const std::vector<uint8_t> bytes(8, 1);
  ASSERT_TRUE(m.write(b, bytes).ok());
  EXPECT_FALSE(m.written_since(t0, a, 64));  // another range
  EXPECT_TRUE(m.written_since(t0, b + 4, 1));
  ASSERT_TRUE(m.read(a, 64).ok());  // reads are not changes
  EXPECT_FALSE(m.written_since(t0, a, 64));
  ASSERT_FALSE(m.span(b + 60, 8).ok());  // past the end: refused, not recorded
  EXPECT_FALSE(m.written_since(t0, a, 64));
  ASSERT_TRUE(m.span(a + 63, 1).ok());  // a mutable view counts as a change
  EXPECT_TRUE(m.written_since(t0, a, 64));
  // Past the record's horizon the answer is "maybe".
  const uint64_t t1 = m.sequence();
  for (size_t i = 0; i < DeviceMemory::kHistory + 1; ++i) ASSERT_TRUE(m.write(b, bytes).ok());
  EXPECT_TRUE(m.written_since(t1, a, 64));
  const uint64_t t2 = m.sequence();
  ASSERT_TRUE(m.write(b, bytes).ok());
  EXPECT_FALSE(m.written_since(t2, a, 64));
  // A copy is another memory: a cache keyed on identity() checks it afresh.
  const DeviceMemory copy = m;
  EXPECT_NE(copy.identity(), m.identity());
}

TEST(NpuSim, CacheFollowsChangedCommandWordsAndWeights) {
  // One cache across runs of a buffer whose command words, then weights, change in place:
  // each run must give what the loops give on the buffer as it is then.
  std::mt19937 rng(8);
  Case c = random_case(rng, false, DType::i8, 1.5, false, {32, 40, 12, 9, 3, 1});
  auto lowered = lower_in_memory(c, lower::Strategy::sorted_bs_multiplier);
  ASSERT_TRUE(lowered.ok()) << lowered.error().to_string();
  DeviceMemory& mem = lowered->mem;
  lower::Lowered* l = &lowered->l;
  auto placed = lower::place_regcmd(mem, *l);
  ASSERT_TRUE(placed.ok());
  sim::SimCache cache;
  auto check = [&](const char* what) {
    DeviceMemory by_loops = mem;
    ASSERT_TRUE(sim::run(by_loops, placed->address, placed->spans[0].word_count, {}).ok()) << what;
    ASSERT_TRUE(sim::run(mem, placed->address, placed->spans[0].word_count, {}, &cache).ok()) << what;
    auto a = lower::gather_output(by_loops, c.spec, *l), b = lower::gather_output(mem, c.spec, *l);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(std::memcmp(a->raw(), b->raw(), a->nbytes()), 0) << what;
  };
  check("first run");
  check("same buffer");
  // New OUT_CVT offsets, written over the same command words.
  for (auto& t : l->tasks) t.regs.set(arch::DPU_OUT_CVT_OFFSET, static_cast<uint32_t>(t.regs.get(arch::DPU_OUT_CVT_OFFSET) + 9));
  auto words = regcmd::encode(l->tasks, placed->address);
  ASSERT_TRUE(words.ok());
  std::vector<uint8_t> bytes(words->size() * 8);
  std::memcpy(bytes.data(), words->data(), bytes.size());
  ASSERT_TRUE(mem.write(placed->address, bytes).ok());
  check("changed command words");
  // New weights for the first task, written over its weight buffer.
  const uint32_t waddr = l->tasks[0].regs.get(arch::CNA_DCOMP_ADDR0);
  const size_t wbytes = l->tasks[0].regs.get(arch::CNA_WEIGHT_SIZE0_WEIGHT_BYTES);
  std::vector<uint8_t> w(wbytes);
  for (auto& b : w) b = static_cast<uint8_t>(std::uniform_int_distribution<int>(-100, 100)(rng));
  ASSERT_TRUE(mem.write(waddr, w).ok());
  check("changed weights");
}

TEST(NpuSim, PreparedPathEqualsTheDefinitionOnRandomStageRegisters) {
  // The lowering emits few of the epilogue's variants. Here each task's stage registers are
  // redrawn - BS shifts different per sign, OUT_CVT scale, shift and offset, CORE truncation,
  // ReLU / ReLUX on and off - and the prepared path (shared oneDNN MAC, SIMD epilogue) must
  // write what the stage-by-stage definition writes, value for value.
  std::mt19937 rng(31);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int64_t compared = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const bool depthwise = trial % 3 == 0;
    Case c = random_case(rng, depthwise, DType::i8, 2.0, trial % 2 == 0);
    auto lowered = lower_in_memory(c, trial % 4 == 1 ? lower::Strategy::per_tensor : lower::Strategy::sorted_bs_multiplier);
    ASSERT_TRUE(lowered.ok()) << lowered.error().to_string();
    DeviceMemory& mem = lowered->mem;
    lower::Lowered* l = &lowered->l;
    for (auto& t : l->tasks) {
      ASSERT_TRUE(t.regs.set(arch::DPU_BS_MUL_CFG_BS_MUL_SHIFT_VALUE, static_cast<uint64_t>(pick(1, 40))).ok());
      ASSERT_TRUE(t.regs.set(arch::DPU_DATA_FORMAT_BS_MUL_SHIFT_VALUE_NEG, static_cast<uint64_t>(pick(1, 40))).ok());
      ASSERT_TRUE(t.regs.set(arch::DPU_OUT_CVT_SHIFT_OUT_CVT_SHIFT, static_cast<uint64_t>(pick(1, 45))).ok());
      ASSERT_TRUE(t.regs.set(arch::DPU_OUT_CVT_SCALE_OUT_CVT_SCALE, static_cast<uint64_t>(pick(0, 0xffff))).ok());
      t.regs.set(arch::DPU_OUT_CVT_OFFSET, static_cast<uint32_t>(pick(-300, 300)));
      ASSERT_TRUE(t.regs.set(arch::CORE_CLIP_TRUNCATE_CLIP_TRUNCATE, static_cast<uint64_t>(pick(0, 1) ? 0 : pick(1, 12))).ok());
      ASSERT_TRUE(t.regs.set(arch::DPU_BS_CFG_BS_RELU_BYPASS, static_cast<uint64_t>(pick(0, 1))).ok());
      ASSERT_TRUE(t.regs.set(arch::DPU_BS_CFG_BS_RELUX_EN, static_cast<uint64_t>(pick(0, 1))).ok());
      t.regs.set(arch::DPU_BS_RELUX_CMP_VALUE, static_cast<uint32_t>(pick(-1000, 100000)));
    }
    auto placed = lower::place_regcmd(mem, *l);
    ASSERT_TRUE(placed.ok());
    DeviceMemory by_loops = mem, cached = mem;
    ASSERT_TRUE(sim::run(by_loops, placed->address, placed->spans[0].word_count, {}).ok());
    sim::SimCache cache;
    ASSERT_TRUE(sim::run(cached, placed->address, placed->spans[0].word_count, {}, &cache).ok());
    auto a = lower::gather_output(by_loops, c.spec, *l), b = lower::gather_output(cached, c.spec, *l);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(std::memcmp(a->raw(), b->raw(), a->nbytes()), 0) << "trial " << trial;
    compared += a->numel();
  }
  EXPECT_GT(compared, 10000);
}

TEST(NpuSim, SimdEpilogueEqualsTheStageByStageDefinition) {
  // The epilogue alone, on accumulators over the whole int32 range and operands drawn from
  // every field's range (BS shifts per sign, CORE truncation, ReLU / ReLUX, the EW add, OUT_CVT
  // scale, shift and offset), at every configuration common_epilogue() accepts: the SIMD
  // lanes must give the definition's bytes. Ties of every rounding are forced by small
  // shifts and accumulators near multiples of their powers of two.
  // Every Highway target this CPU runs (AVX-512, AVX2, SSE4, SSSE3, scalar ... on x86; NEON
  // on arm64), each made current by SetSupportedTargetsForTest.
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  std::mt19937 rng(77);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int64_t compared = 0, accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t pixels = pick(1, 40), OCw = pick(1, 40), M = OCw + pick(0, 20);
    sim::detail::Epilogue e{};
    e.truncate = pick(0, 1) ? 0 : static_cast<int>(pick(1, 8));
    e.core_round = sim::Rounding::half_to_even;
    e.bs_round = sim::Rounding::half_up;
    e.out_round = sim::Rounding::half_to_even;
    e.bs = sim::detail::Stage{false,
                              false,
                              pick(0, 1) == 0,
                              false,
                              pick(0, 1) == 0,
                              pick(0, 3) == 0,
                              true,
                              true,
                              2,
                              0,
                              0,
                              static_cast<int>(pick(1, 20)),
                              static_cast<int>(pick(1, 20)),
                              static_cast<int32_t>(pick(-50, 100000))};
    if (pick(0, 5) == 0) e.bs.shift_pos = static_cast<int>(pick(40, 62));  // shifts around the SIMD path's kMaxShift (48)
    if (pick(0, 5) == 0) e.bs.shift_neg = static_cast<int>(pick(40, 62));
    if (pick(0, 1)) e.bs.shift_neg = e.bs.shift_pos;
    e.bn = sim::detail::Stage{};
    e.bn.bypass = true;
    const bool small = pick(0, 1);  // small values: every rounding's ties and saturation edges are hit
    std::vector<int32_t> alu(static_cast<size_t>(M)), acc(static_cast<size_t>(pixels * M));
    std::vector<int16_t> mul(static_cast<size_t>(M));
    std::vector<int64_t> wsum(static_cast<size_t>(M));
    const bool small_alu = small && pick(0, 3) != 0;  // small MACs with a large ALU operand: the add may saturate
    for (auto& a : alu) {                             // large: anywhere, or within a few thousand of int32's limits (MAC + ALU saturates)
      const int64_t edge = pick(0, 1) ? INT32_MAX - pick(0, 3000) : INT32_MIN + pick(0, 3000);
      a = static_cast<int32_t>(small_alu ? pick(-300, 300) : pick(0, 1) ? pick(INT32_MIN, INT32_MAX) : edge);
    }
    for (auto& m : mul) m = static_cast<int16_t>(small ? pick(-8, 8) : pick(-32768, 32767));
    for (auto& w : wsum) w = small ? pick(-4, 4) : pick(-2000000, 2000000);
    for (auto& a : acc) a = static_cast<int32_t>(small ? pick(-2000, 2000) : pick(INT32_MIN, INT32_MAX));
    e.mac_bound = small ? 2000 + 128 * 4 : std::numeric_limits<int64_t>::max();  // |acc - 128 wsum|
    e.alu = alu.data();
    e.mul = mul.data();
    e.scale = small ? pick(-40, 40) : pick(-32768, 65535);
    e.shift = static_cast<int>(small ? pick(1, 6) : pick(1, 50));
    e.offset = pick(-200, 200);
    std::vector<uint8_t> ew_bytes(static_cast<size_t>((M + 15) / 16 * pixels * 16));
    for (auto& b : ew_bytes) b = static_cast<uint8_t>(pick(0, 255));
    e.ew.on = pick(0, 2) == 0;
    e.ew.scale = pick(0, 0xffff);
    e.ew.shift = static_cast<int>(pick(0, 4) ? pick(0, 30) : pick(40, 62));
    e.ew.offset = pick(-100000, 100000);
    e.ew.surface = pixels * 16;
    e.ew.e = ew_bytes.data();
    if (!sim::detail::common_epilogue(e)) continue;
    ++accepted;
    const sim::detail::MacView v{acc.data(), M, static_cast<int64_t>(acc.size()), wsum.data(), -128};
    const int64_t surface = pixels * 16, bytes = (OCw + 15) / 16 * surface;
    std::vector<uint8_t> want(static_cast<size_t>(bytes), 0), got(static_cast<size_t>(bytes), 0);
    sim::detail::reference_epilogue(e, pixels, OCw, surface, want.data(), v);
    for (const auto target : targets) {
      hwy::SetSupportedTargetsForTest(target);
      std::fill(got.begin(), got.end(), uint8_t{0});
      sim::detail::run_common_epilogue(e, pixels, OCw, surface, got.data(), v);
      hwy::SetSupportedTargetsForTest(0);
      for (int64_t p = 0; p < pixels; ++p)
        for (int64_t k = 0; k < OCw; ++k) {
          const size_t at = static_cast<size_t>((k / 16) * surface + p * 16 + k % 16);
          ASSERT_EQ(static_cast<int>(static_cast<int8_t>(got[at])), static_cast<int>(static_cast<int8_t>(want[at])))
              << "target " << hwy::TargetName(target) << " trial " << trial << " pixel " << p << " channel " << k;
          ++compared;
        }
    }
  }
  EXPECT_GT(accepted, 2500);
  EXPECT_GT(compared, 1000000 * static_cast<int64_t>(targets.size()));
}

// The convolution's int64 accumulators sum (x - z_x)(w - z_w) + bias, [OC][OH][OW].
std::vector<int64_t> accumulators(const Case& c) {
  const auto& s = c.spec;
  const int64_t OH = s.OH(), OW = s.OW(), Cg = s.depthwise ? 1 : s.C;
  std::vector<int64_t> acc(static_cast<size_t>(s.OC * OH * OW));
  auto xv = [&](int64_t i) { return s.dtype == DType::i8 ? int64_t{c.x.data<int8_t>()[i]} : int64_t{c.x.data<uint8_t>()[i]}; };
  auto wv = [&](int64_t i) { return s.dtype == DType::i8 ? int64_t{s.weights.data<int8_t>()[i]} : int64_t{s.weights.data<uint8_t>()[i]}; };
  for (int64_t k = 0; k < s.OC; ++k)
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        int64_t a = s.bias.empty() ? 0 : s.bias[static_cast<size_t>(k)];
        for (int64_t ci = 0; ci < Cg; ++ci)
          for (int64_t ky = 0; ky < s.KH; ++ky)
            for (int64_t kx = 0; kx < s.KW; ++kx) {
              const int64_t iy = oy * s.stride_h + ky - s.pad_top, ix = ox * s.stride_w + kx - s.pad_left;
              if (iy < 0 || ix < 0 || iy >= s.H || ix >= s.W) continue;  // padding: x = z_x contributes 0
              const int64_t cin = s.depthwise ? k : ci;
              a += (xv((cin * s.H + iy) * s.W + ix) - s.x_zero_point) * (wv(((k * Cg + ci) * s.KH + ky) * s.KW + kx) - s.w_zero_points[0]);
            }
        acc[static_cast<size_t>((k * OH + oy) * OW + ox)] = a;
      }
  return acc;
}

TEST(NpuLowerSim, FusedResidualAddInTheEwStage) {
  // Convolution + Add lowered into one task chain (EW stage, the residual read by ERDMA):
  // one rounding of (conv + residual) / s_y, against that value computed in double from the
  // int64 accumulators - within one step, nearly always exact, for both EW arithmetics the
  // sources dispute (integer converter, float32), with ReLU before the add, uint8, strided,
  // depthwise and row-sliced maps.
  std::mt19937 rng(21);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int64_t n = 0, exact = 0, worst = 0, truncated_tasks = 0;
  for (int trial = 0; trial < 18; ++trial) {
    const bool dw = trial % 3 == 2, u8 = trial % 4 == 3;
    Dims d;
    if (trial == 5) d = Dims{32, 8, 60, 200, 3, 1};  // 2 row slices
    // Trials 12+: weight scales over 4 decades and a residual scale far above the output's
    // steps, so that tasks of small-scale channels need CORE truncation for the EW
    // converter's range (lower.cc).
    const bool coarse = trial >= 12 && !u8;
    Case c = random_case(rng, dw, u8 ? DType::u8 : DType::i8, u8 ? 0.0 : coarse ? 4.0 : 1.0, false, d);
    auto& s = c.spec;
    s.residual = true;
    s.conv_relu = trial % 2 == 1;
    s.r_scale = s.y_scale * static_cast<float>(std::uniform_real_distribution<double>(0.4, 2.5)(rng)) * (coarse ? 40.f : 1.f);
    s.r_zero_point = u8 ? pick(100, 150) : pick(-20, 20);
    s.y_scale *= 1.7f;
    Tensor r = Tensor::empty(s.dtype, {1, s.OC, s.OH(), s.OW()});
    for (int64_t i = 0; i < r.numel(); ++i) {
      if (u8) r.data<uint8_t>()[i] = static_cast<uint8_t>(pick(0, 255));
      else r.data<int8_t>()[i] = static_cast<int8_t>(pick(-128, 127));
    }
    const auto acc = accumulators(c);
    const int32_t qmin = u8 ? 0 : -128, qmax = u8 ? 255 : 127;
    for (bool as_float : {false, true}) {
      sim::Quirks q;
      q.ew_float = as_float;
      for (lower::Strategy st : {lower::Strategy::per_channel, lower::Strategy::sorted_bs_multiplier}) {
        auto y = simulate(c, st, nullptr, {}, nullptr, q, &r);
        ASSERT_TRUE(y.ok()) << "trial " << trial << ": " << y.error().to_string();
        if (!as_float) {
          DeviceMemory mem;
          auto l = lower::lower_conv(s, st, mem, mem.alloc(16));
          ASSERT_TRUE(l.ok());
          for (const auto& t : l->tasks) truncated_tasks += t.regs.get(arch::CORE_CLIP_TRUNCATE_CLIP_TRUNCATE) > 0;
        }
        const int64_t plane = s.OH() * s.OW();
        for (int64_t i = 0; i < y->numel(); ++i) {
          const int64_t k = i / plane;
          const double m = static_cast<double>(s.x_scale) * (s.w_scales.size() == 1 ? s.w_scales[0] : s.w_scales[static_cast<size_t>(k)]);
          double conv = m * static_cast<double>(acc[static_cast<size_t>(i)]);
          if (s.conv_relu) conv = std::max(conv, 0.0);
          const double rv = u8 ? r.data<uint8_t>()[i] : r.data<int8_t>()[i];
          const double want = std::clamp(std::nearbyint((conv + s.r_scale * (rv - s.r_zero_point)) / s.y_scale) + s.y_zero_point,
                                         static_cast<double>(qmin), static_cast<double>(qmax));
          const int64_t e = std::llabs(static_cast<int64_t>(y->get_as_double(i)) - static_cast<int64_t>(want));
          worst = std::max(worst, e);
          exact += e == 0;
          ++n;
        }
      }
    }
  }
  EXPECT_GT(truncated_tasks, 0);
  std::printf("fused residual add: %lld tasks with CORE truncation; max |diff| %lld, %.3f%% exact of %lld\n", static_cast<long long>(truncated_tasks),
              static_cast<long long>(worst), 100.0 * static_cast<double>(exact) / static_cast<double>(n), static_cast<long long>(n));
  EXPECT_LE(worst, 1);
  EXPECT_GE(static_cast<double>(exact) / static_cast<double>(n), 0.99);
}

TEST(NpuLower, RowSlicesCoverTheOutputAndFitTheirBanks) {
  std::mt19937 rng(5);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int sliced = 0;
  for (int trial = 0; trial < 400; ++trial) {
    lower::TileGeometry g;
    g.C = 16 * pick(1, 32);
    g.W = pick(4, 400);
    g.H = pick(4, 600);
    g.KH = pick(1, 7);
    g.stride_h = pick(1, 2);
    g.pad_top = pick(0, g.KH / 2);
    const int64_t pad_bottom = g.KH / 2;
    if (g.H + g.pad_top + pad_bottom < g.KH) continue;
    g.OH = (g.H + g.pad_top + pad_bottom - g.KH) / g.stride_h + 1;
    g.weight_bytes = pick(0, 200000);
    auto t = lower::plan_tiling(g);
    if (!t.ok()) {
      EXPECT_EQ(t.error().kind, ErrorKind::unsupported) << t.error().to_string();
      continue;
    }
    ASSERT_FALSE(t->slices.empty());
    EXPECT_LE(t->data_banks + t->weight_banks, 12);
    EXPECT_GE(t->weight_banks * 32768, g.weight_bytes);
    sliced += t->slices.size() > 1;
    int64_t next = 0;
    for (size_t i = 0; i < t->slices.size(); ++i) {
      const lower::Slice& s = t->slices[i];
      EXPECT_EQ(s.out_row0, next);
      next += s.out_rows;
      EXPECT_GE(s.in_rows, 4);
      EXPECT_LE(s.in_row0 + s.in_rows, g.H);
      // The slice holds every row its outputs' taps reach inside the map; the rows above it
      // are padding (the first slice's, or a later one's still inside the top padding).
      const int64_t first = s.out_row0 * g.stride_h - g.pad_top, last = (s.out_row0 + s.out_rows - 1) * g.stride_h + g.KH - 1 - g.pad_top;
      EXPECT_EQ(s.pad_top, std::max<int64_t>(0, -first));
      EXPECT_EQ(s.in_row0, std::max<int64_t>(first, 0));
      EXPECT_GE(s.in_row0 + s.in_rows - 1, std::min(last, g.H - 1));
      if (t->slices.size() > 1) {
        EXPECT_LE(s.in_rows * g.W * g.C, (t->data_banks - g.spare_banks) * 32768) << "slice " << i;
        // Consecutive slices overlap by KH - stride rows (when the stride leaves any).
        if (i > 0 && s.pad_top == 0) {
          const lower::Slice& p = t->slices[i - 1];
          EXPECT_EQ(s.in_row0, p.out_row0 * g.stride_h - g.pad_top + p.out_rows * g.stride_h);
        }
      }
    }
    EXPECT_EQ(next, g.OH);
    // Greedy: every slice but the last two holds as many output rows as fit.
    for (size_t i = 0; i + 2 < t->slices.size(); ++i) {
      const lower::Slice& s = t->slices[i];
      const int64_t next_rows = (s.out_rows * g.stride_h + g.KH - g.stride_h) + g.stride_h;  // one more output row
      EXPECT_GT(std::min(next_rows, g.H), (t->data_banks - g.spare_banks) * 32768 / (g.W * g.C)) << "slice " << i;
    }
  }
  EXPECT_GT(sliced, 50);
}

TEST(NpuSim, RoundShiftConventions) {
  using sim::Rounding;
  EXPECT_EQ(sim::round_shift(5, 1, Rounding::half_to_even), 2);    // 2.5
  EXPECT_EQ(sim::round_shift(7, 1, Rounding::half_to_even), 4);    // 3.5
  EXPECT_EQ(sim::round_shift(-5, 1, Rounding::half_to_even), -2);  // -2.5
  EXPECT_EQ(sim::round_shift(-5, 1, Rounding::half_away), -3);
  EXPECT_EQ(sim::round_shift(-5, 1, Rounding::half_up), -2);
  EXPECT_EQ(sim::round_shift(-5, 1, Rounding::truncate), -3);  // floor
  EXPECT_EQ(sim::round_shift(6, 2, Rounding::half_up), 2);     // 1.5
}

// constraints.h: the limits are the register fields' widths, a convolution at each limit lowers
// and simulates bit for bit as the reference computes it, and one step past a limit is refused
// naming what was found and the rule.
TEST(NpuConstraints, EveryLimitLowersExactlyAndOnePastItIsRefusedByName) {
  const auto& l = lower::conv_limits();
  EXPECT_EQ(l.max_kernel_w, static_cast<int64_t>(arch::CNA_WEIGHT_SIZE2_WEIGHT_WIDTH.max()));
  EXPECT_EQ(l.max_stride_h, static_cast<int64_t>(arch::CNA_CONV_CON3_CONV_Y_STRIDE.max()));
  EXPECT_EQ(l.max_pad_top, static_cast<int64_t>(arch::CNA_PAD_CON0_PAD_TOP.max()));
  EXPECT_EQ(l.max_width, static_cast<int64_t>(arch::CNA_DATA_SIZE0_DATAIN_WIDTH.max()));
  EXPECT_EQ(l.max_height, arch::kRk3588.size_field_max);
  std::mt19937 rng(11);
  // uint8 per tensor: the NPU's convention is the reference bit for bit (see above).
  const std::vector<Dims> edges = {
      {4, 8, 36, 36, l.max_kernel_w, 1},  // the largest kernel, padded by the largest padding (K / 2)
      {4, 8, 40, 29, 9, l.max_stride_w},  // the largest stride
      {16, 16, 6, l.max_width, 1, 1},     // the widest map
  };
  for (const Dims& d : edges) {
    Case c = random_case(rng, false, DType::u8, 0.0, false, d);
    ASSERT_TRUE(lower::check_conv(lower::geometry_of(c.spec)).empty());
    auto y = simulate(c, lower::Strategy::per_tensor);
    ASSERT_TRUE(y.ok()) << "K " << d.K << " stride " << d.stride << " W " << d.W << ": " << y.error().to_string();
    EXPECT_EQ(compare(*y, reference(c, quant::Requant::rknpu_out_cvt)).max, 0) << "K " << d.K << " stride " << d.stride << " W " << d.W;
  }
  struct Past {
    std::function<void(lower::ConvSpec&)> change;
    std::string found, rule;
  };
  const std::vector<Past> past = {
      {[&](lower::ConvSpec& s) { s.stride_h = s.stride_w = l.max_stride_w + 1; }, "stride 8x8", "stride <= 7"},
      {[&](lower::ConvSpec& s) { s.pad_top = l.max_pad_top + 1; }, "padding 16x", "top and left padding <= 15"},
      {[&](lower::ConvSpec& s) { s.W = l.max_width + 1; }, "width 2048", "width <= 2047"},
      {[&](lower::ConvSpec& s) { s.H = l.max_height + 1; }, "height 8192", "height <= 8191"},
      {[&](lower::ConvSpec& s) { s.w_zero_points.assign(static_cast<size_t>(s.OC), 3), s.w_zero_points[0] = 4; }, "per-channel weight zero points",
       "one weight zero point"},
  };
  for (const Past& p : past) {
    Case c = random_case(rng, false, DType::u8, 0.0, false, {4, 8, 8, 8, 3, 1});
    p.change(c.spec);
    const auto v = lower::check_conv(lower::geometry_of(c.spec));
    ASSERT_FALSE(v.empty()) << p.rule;
    EXPECT_EQ(v[0].found.rfind(p.found, 0), 0u) << v[0].text();
    EXPECT_EQ(v[0].rule, p.rule) << v[0].text();
    EXPECT_FALSE(v[0].reason.empty());
    const Status st = lower::check_spec(c.spec);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().kind, ErrorKind::unsupported);
    EXPECT_NE(st.error().message.find(v[0].text()), std::string::npos) << st.error().message;
  }
  lower::ConvGeometry g;
  g.C = g.OC = 8;
  g.H = g.W = 8;
  g.groups = 4;
  EXPECT_EQ(lower::check_conv(g).at(0).rule, "dense or depthwise (groups = C = OC)");
  g.groups = 8;
  EXPECT_TRUE(lower::check_conv(g).empty());
  g.dilation_h = 2;
  EXPECT_EQ(lower::check_conv(g).at(0).found, "dilation 2x1");
  // docs/npu.md's table is the list, rule and reason.
  std::ifstream f(std::string(RKD_SOURCE_DIR) + "/docs/npu.md");
  const std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (const auto& [rule, reason] : lower::conv_rules()) {
    EXPECT_NE(doc.find("| " + rule + " | " + reason + " |"), std::string::npos) << "docs/npu.md lacks the row: | " << rule << " | " << reason << " |";
  }
}

}  // namespace
}  // namespace rkd::npu
