// Float convolution engines on detector-sized layers (tensor_ops.h ConvEngine): oneDNN (what
// x86 and SVE CPUs run) and XNNPACK (what rkdeploy runs where oneDNN has only reference
// kernels: the boards' Cortex-A76/A55). On x86 both are measured for scale; on arm64 the same
// binary shows the reference kernels' cost (not under qemu: its times are not benchmarks).
//   OMP_NUM_THREADS=1 ./build/bench/bench_conv_engines
#include <benchmark/benchmark.h>

#include <random>

#include "kernels/tensor_ops.h"

namespace {

// args: engine (0 oneDNN, 1 XNNPACK), C, M, H (= W), kernel, group (0: depthwise)
void BM_Conv(benchmark::State& st) {
  const int64_t C = st.range(1), M = st.range(2), H = st.range(3), K = st.range(4);
  const int64_t group = st.range(5) == 0 ? C : st.range(5);
  rkd::Tensor x = rkd::Tensor::empty(rkd::DType::f32, {1, C, H, H}), w = rkd::Tensor::empty(rkd::DType::f32, {M, C / group, K, K});
  std::mt19937 rng(1);
  std::normal_distribution<float> v;
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = v(rng);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = v(rng);
  rkd::ops::ConvParams p;
  p.strides = {1, 1};
  p.dilations = {1, 1};
  p.pads = {K / 2, K / 2, K / 2, K / 2};
  p.group = group;
  const auto engine = st.range(0) == 0 ? rkd::ops::ConvEngine::onednn : rkd::ops::ConvEngine::xnnpack;
  auto c = rkd::ops::make_conv(x.shape(), w, nullptr, p, false, {1, M, H, H}, "", engine);
  if (!c.ok()) {
    st.SkipWithError(c.error().to_string().c_str());
    return;
  }
  rkd::Tensor y = rkd::Tensor::empty(rkd::DType::f32, {1, M, H, H});
  for (auto _ : st) {
    if (!(*c)->run(x, y).ok()) st.SkipWithError("run failed");
    benchmark::DoNotOptimize(y.raw());
  }
  st.SetLabel((*c)->implementation());
  st.counters["GFLOPs"] =
      benchmark::Counter(2.0 * M * (C / group) * K * K * H * H * static_cast<double>(st.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void Layers(benchmark::internal::Benchmark* b) {
  for (int e : {0, 1}) {
    b->Args({e, 64, 64, 80, 3, 1})->Args({e, 128, 256, 40, 1, 1})->Args({e, 128, 128, 40, 3, 0});
  }
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_Conv)->Apply(Layers);

}  // namespace

BENCHMARK_MAIN();
