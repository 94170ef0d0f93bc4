// Google Benchmark for the sampling kernels at DEIMv2-S shapes (B=1, 8 heads, head_dim 24,
// levels 80x80/40x40/20x20, 300 queries, points 3,6,3). Thread counts 1 and 2.
// Peers (PyTorch, ONNX Runtime) are timed by bench/peers/*, in the same run, by
// bench/run_bench.sh, which writes the comparison table of BENCHMARKS.md.
#include <benchmark/benchmark.h>

#include <random>

#include "core/thread_pool.h"
#include "kernels/deform_attn.h"
#include "kernels/grid_sample.h"

namespace {
using namespace rkd;

constexpr int64_t kHeads = 8, kHeadDim = 24, kQueries = 300;
const std::vector<MsdaLevelShape> kLevels = {{80, 80}, {40, 40}, {20, 20}};
const std::vector<int64_t> kPoints = {3, 6, 3};

Tensor uniform(const Shape& s, float lo, float hi, uint32_t seed) {
  Tensor t = Tensor::empty(DType::f32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// GridSample, one decoder call per level: value [8, 24, H, W], grid [8, 300, P_l, 2].
void BM_GridSample(benchmark::State& state) {
  const int level = static_cast<int>(state.range(0));
  const int threads = static_cast<int>(state.range(1));
  const auto mode = static_cast<GridSampleMode>(state.range(2));
  const auto& lv = kLevels[static_cast<size_t>(level)];
  const Tensor x = uniform({kHeads, kHeadDim, lv.h, lv.w}, -1, 1, 1);
  const Tensor g = uniform({kHeads, kQueries, kPoints[static_cast<size_t>(level)], 2}, -1, 1, 2);
  ThreadPool pool(threads);
  GridSampleOptions opt;
  opt.mode = mode;
  for (auto _ : state) {
    auto y = grid_sample(x, g, opt, KernelImpl::fast, &pool);
    benchmark::DoNotOptimize(y->raw());
  }
}
BENCHMARK(BM_GridSample)
    ->ArgNames({"level", "threads", "mode"})
    ->ArgsProduct({{0, 1, 2}, {1, 2}, {0}})
    ->Args({0, 1, 1})
    ->Args({0, 1, 2})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// One fused decoder layer: all three levels, attention-weighted sum, output [1, 300, 192].
void BM_DeformAttnLayer(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const auto method = static_cast<MsdaMethod>(state.range(1));
  const Tensor v = uniform({1, 8400, kHeads, kHeadDim}, -1, 1, 3);
  const Tensor loc = uniform({1, kQueries, kHeads, 12, 2}, 0, 1, 4);
  const Tensor w = uniform({1, kQueries, kHeads, 12}, 0, 1.0f / 6, 5);
  const MsdaValue pv = *msda_prepare_from_tokens(v, kLevels);
  ThreadPool pool(threads);
  MsdaOptions opt;
  opt.method = method;
  for (auto _ : state) {
    auto y = msda(pv, loc, w, kPoints, opt, &pool);
    benchmark::DoNotOptimize(y->raw());
  }
}
BENCHMARK(BM_DeformAttnLayer)
    ->ArgNames({"threads", "method"})
    ->ArgsProduct({{1, 2}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Value preparation (once per forward, shared by all decoder layers).
void BM_DeformAttnPrepare(benchmark::State& state) {
  const Tensor v = uniform({1, 8400, kHeads, kHeadDim}, -1, 1, 3);
  for (auto _ : state) {
    auto pv = msda_prepare_from_tokens(v, kLevels);
    benchmark::DoNotOptimize(pv->data.raw());
  }
}
BENCHMARK(BM_DeformAttnPrepare)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
