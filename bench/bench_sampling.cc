// Google Benchmark for the sampling kernels at DEIMv2-S shapes (B=1, 8 heads, head_dim 24,
// levels 80x80/40x40/20x20, 300 queries, points 3,6,3). Thread counts 1 and 2.
// Peers (PyTorch, ONNX Runtime) are timed by bench/peers/*, in the same run, by
// bench/run_bench.sh, which writes the comparison table of BENCHMARKS.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstring>
#include <random>
#include <unordered_set>
#include <vector>

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

// Sustained read bandwidth of this machine (bytes/s), measured once per process by
// summing a 512 MiB buffer (best of 5): the denominator of the physical bounds below.
double read_bandwidth() {
  static const double bw = [] {
    const size_t n = (size_t{512} << 20) / sizeof(float);
    std::vector<float> buf(n, 1.0f);
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      float acc[16] = {};
      for (size_t i = 0; i < n; i += 16)
        for (int k = 0; k < 16; ++k) acc[k] += buf[i + static_cast<size_t>(k)];
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      float total = 0;
      for (float a : acc) total += a;
      benchmark::DoNotOptimize(total);
      best = std::max(best, static_cast<double>(n * sizeof(float)) / s);
    }
    return best;
  }();
  return bw;
}

// Distinct 64-byte lines of `base` that bilinear sampling at these (x, y) grid points reads
// in every channel plane, times the channel count: the input bytes a kernel must touch.
double touched_input_bytes(const Tensor& grid, int64_t n_items, int64_t channels, int64_t H, int64_t W) {
  double lines = 0;
  const int64_t pts = grid.numel() / 2 / n_items;
  for (int64_t n = 0; n < n_items; ++n) {
    std::unordered_set<int64_t> seen;
    for (int64_t p = 0; p < pts; ++p) {
      const float gx = grid.data<float>()[(n * pts + p) * 2], gy = grid.data<float>()[(n * pts + p) * 2 + 1];
      const int64_t x0 = static_cast<int64_t>(std::floor((gx + 1) * W / 2 - 0.5f));
      const int64_t y0 = static_cast<int64_t>(std::floor((gy + 1) * H / 2 - 0.5f));
      for (int64_t dy = 0; dy < 2; ++dy)
        for (int64_t dx = 0; dx < 2; ++dx) {
          const int64_t x = x0 + dx, y = y0 + dy;
          if (x >= 0 && x < W && y >= 0 && y < H) seen.insert((y * W + x) * 4 / 64);
        }
    }
    lines += static_cast<double>(seen.size());
  }
  return lines * 64.0 * static_cast<double>(channels);
}

void report_bound(benchmark::State& state, double bytes) {
  state.counters["bytes_touched"] = bytes;
  state.counters["bound_us"] = bytes / read_bandwidth() * 1e6;
  state.counters["read_GBps"] = read_bandwidth() / 1e9;
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
  const double out_bytes = static_cast<double>(kHeads * kHeadDim * kQueries * kPoints[static_cast<size_t>(level)]) * 4;
  report_bound(state, touched_input_bytes(g, kHeads, kHeadDim, lv.h, lv.w) + static_cast<double>(g.nbytes()) + out_bytes);
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
  // Each sampled corner reads one head_dim row (96 bytes for hd = 24) of the prepared
  // value; distinct rows are counted per head, plus locations, weights and the output.
  double value_bytes = 0;
  const int64_t P = 12;
  for (int64_t m = 0; m < kHeads; ++m) {
    std::unordered_set<int64_t> rows;
    for (int64_t q = 0; q < kQueries; ++q)
      for (int64_t k = 0; k < P; ++k) {
        const int64_t l = k < 3 ? 0 : (k < 9 ? 1 : 2);
        const auto& lv = kLevels[static_cast<size_t>(l)];
        const int64_t start = l == 0 ? 0 : (l == 1 ? 6400 : 8000);
        const float* lp = loc.data<float>() + ((q * kHeads + m) * P + k) * 2;
        const int64_t x0 = static_cast<int64_t>(std::floor(lp[0] * lv.w - 0.5f));
        const int64_t y0 = static_cast<int64_t>(std::floor(lp[1] * lv.h - 0.5f));
        for (int64_t c = 0; c < (method == MsdaMethod::bilinear ? 4 : 1); ++c) {
          const int64_t x = std::clamp<int64_t>(x0 + (c & 1), 0, lv.w - 1), y = std::clamp<int64_t>(y0 + (c >> 1), 0, lv.h - 1);
          rows.insert(start + y * lv.w + x);
        }
      }
    value_bytes += static_cast<double>(rows.size()) * kHeadDim * 4;
  }
  report_bound(state, value_bytes + static_cast<double>(loc.nbytes() + w.nbytes()) + kQueries * kHeads * kHeadDim * 4.0);
}
BENCHMARK(BM_DeformAttnLayer)->ArgNames({"threads", "method"})->ArgsProduct({{1, 2}, {0, 1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();

// The decoder's whole sampling work per forward: prepare the value once, then the fused
// core for each of the 4 decoder layers (each with its own locations and weights) - the
// 12 GridSample calls of a DEIMv2-S forward.
void BM_DecoderSamplingForward(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const Tensor v = uniform({1, 8400, kHeads, kHeadDim}, -1, 1, 3);
  std::vector<Tensor> locs, ws;
  for (uint32_t l = 0; l < 4; ++l) {
    locs.push_back(uniform({1, kQueries, kHeads, 12, 2}, 0, 1, 10 + l));
    ws.push_back(uniform({1, kQueries, kHeads, 12}, 0, 1.0f / 6, 20 + l));
  }
  ThreadPool pool(threads);
  MsdaValue pv;  // reused across forwards, as a runtime would
  for (auto _ : state) {
    (void)msda_prepare_from_tokens(v, kLevels, &pv, &pool);
    for (size_t l = 0; l < 4; ++l) {
      auto y = msda(pv, locs[l], ws[l], kPoints, MsdaOptions{}, &pool);
      benchmark::DoNotOptimize(y->raw());
    }
  }
}
BENCHMARK(BM_DecoderSamplingForward)->ArgNames({"threads"})->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Value preparation (once per forward, shared by all decoder layers).
void BM_DeformAttnPrepare(benchmark::State& state) {
  const Tensor v = uniform({1, 8400, kHeads, kHeadDim}, -1, 1, 3);
  ThreadPool pool(static_cast<int>(state.range(0)));
  MsdaValue pv;
  const bool reuse = state.range(1) != 0;
  for (auto _ : state) {
    if (!reuse) pv = MsdaValue{};
    (void)msda_prepare_from_tokens(v, kLevels, &pv, &pool);
    benchmark::DoNotOptimize(pv.data.raw());
  }
}
BENCHMARK(BM_DeformAttnPrepare)->ArgNames({"threads", "reuse"})->ArgsProduct({{1, 2}, {0, 1}})->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
