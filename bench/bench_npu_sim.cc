// The NPU simulator's per-run work on one lowered convolution (Google Benchmark): the input
// written to device memory as NC1HWC2, the chain simulated (the shared oneDNN MAC and the
// epilogue), the output compacted back to NCHW - the three parts `run --backend sim` repeats
// per convolution per run. Shapes from the five detectors (bench/run_int8.sh).
#include <benchmark/benchmark.h>

#include <random>

#include "npu/lower/lower.h"
#include "npu/sim/sim.h"

namespace {

using namespace rkd;

struct Conv {
  npu::lower::ConvSpec spec;
  Tensor x, y;
  npu::DeviceMemory mem;
  npu::lower::Lowered l;
  uint32_t regcmd = 0;
  size_t words = 0;
  npu::sim::SimCache cache;
};

// int8, per-channel weight scales over two decades (the lowering's sorted groups).
std::unique_ptr<Conv> make(int64_t C, int64_t OC, int64_t H, int64_t K, bool depthwise) {
  auto c = std::make_unique<Conv>();
  std::mt19937 rng(1);
  auto s8 = [&] { return static_cast<int8_t>(std::uniform_int_distribution<int>(-100, 100)(rng)); };
  auto& s = c->spec;
  s.C = C;
  s.H = s.W = H;
  s.OC = depthwise ? C : OC;
  s.KH = s.KW = K;
  s.pad_top = s.pad_left = s.pad_bottom = s.pad_right = K / 2;
  s.depthwise = depthwise;
  s.weights = Tensor::empty(DType::i8, {s.OC, depthwise ? 1 : C, K, K});
  for (int64_t i = 0; i < s.weights.numel(); ++i) s.weights.data<int8_t>()[i] = s8();
  s.w_zero_points = {0};
  for (int64_t k = 0; k < s.OC; ++k) s.w_scales.push_back(static_cast<float>(0.01 * std::pow(10.0, -2.0 * (k % 7) / 6.0)));
  s.x_scale = 0.05f;
  s.y_scale = 0.02f;
  s.bias.assign(static_cast<size_t>(s.OC), 100);
  c->x = Tensor::empty(DType::i8, {1, C, H, H});
  for (int64_t i = 0; i < c->x.numel(); ++i) c->x.data<int8_t>()[i] = s8();
  c->y = Tensor::empty(DType::i8, {1, s.OC, s.OH(), s.OW()});
  auto in = npu::lower::place_input(c->mem, s, c->x);
  auto l = npu::lower::lower_conv(s, npu::lower::kDefaultStrategy, c->mem, *in);
  if (!l.ok()) return nullptr;
  c->l = std::move(l).value();
  auto placed = npu::lower::place_regcmd(c->mem, c->l);
  c->regcmd = placed->address;
  c->words = placed->spans[0].word_count;
  return c;
}

const int64_t kShapes[][5] = {{64, 64, 128, 1, 0}, {128, 128, 64, 3, 1}, {32, 192, 64, 1, 0}, {192, 192, 32, 3, 1}};

std::unique_ptr<Conv> from(const benchmark::State& st) {
  const auto& d = kShapes[st.range(0)];
  return make(d[0], d[1], d[2], d[3], d[4] != 0);
}

void BM_WriteInput(benchmark::State& st) {
  auto c = from(st);
  for (auto _ : st) benchmark::DoNotOptimize(npu::lower::write_input(c->mem, c->l.input_address, c->spec, c->x));
  st.SetBytesProcessed(st.iterations() * c->x.numel());
}
void BM_Simulate(benchmark::State& st) {
  auto c = from(st);
  for (auto _ : st) benchmark::DoNotOptimize(npu::sim::run(c->mem, c->regcmd, c->words, {}, &c->cache));
  st.counters["tasks"] = static_cast<double>(c->l.tasks.size());
  st.counters["oneDNN"] = static_cast<double>(c->cache.last_mac_runs);
}
void BM_GatherOutput(benchmark::State& st) {
  auto c = from(st);
  for (auto _ : st) benchmark::DoNotOptimize(npu::lower::gather_output_into(c->mem, c->spec, c->l, c->y));
  st.SetBytesProcessed(st.iterations() * c->y.numel());
}
BENCHMARK(BM_WriteInput)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Simulate)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GatherOutput)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
