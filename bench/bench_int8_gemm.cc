// Exact int8 products: the candidates for one int8 engine on every ISA (issue 17), measured
// on convolution-sized GEMMs (M = output pixels, N = output channels, K = C x KH x KW).
// Every candidate's int32 result is compared with an int64 evaluation first; `wrong` counts the
// outputs that differ (0 = exact). Run the oneDNN rows under ONEDNN_MAX_CPU_ISA=AVX2 (this
// binary calls oneDNN directly, RKD_MAX_ISA does not apply) and OMP_NUM_THREADS=1. gemmlowp
// and the loops are compiled code, so the file is built twice (gemmlowp's templates compiled
// for two ISAs in one binary would be one ODR-merged copy): bench_int8_gemm with the project's
// baseline flags (gemmlowp's portable kernels), bench_int8_gemm_avx2 with -march=x86-64-v3
// -DGEMMLOWP_ENABLE_AVX2 (its AVX2 kernels). BM_RkdHighway is rkdeploy's own engine
// (kernels/tensor_ops_int8.cc) through ops::QMatMulAccumulator, A widened on every call; its
// Highway target follows RKD_MAX_ISA (avx512, avx2, sse4); baseline binary only.
//   OMP_NUM_THREADS=1 ./build/bench/bench_int8_gemm --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <dnnl.h>
#include <gemmlowp/public/gemmlowp.h>

#include <cstdint>
#include <random>
#include <vector>

#ifdef RKD_BENCH_HIGHWAY
#include "kernels/tensor_ops.h"
#endif

namespace {

struct Problem {
  int M, N, K;
  std::vector<uint8_t> a;    // activations as uint8 (int8 + 128), row-major M x K
  std::vector<int8_t> b;     // weights, row-major K x N
  std::vector<int32_t> ref;  // exact int32 products (checked against int64)
};

// Random values plus a block of extremes (a = 255, b = -128), where a pair of products
// exceeds int16: a kernel that adds pairs in 16 bits (vpmaddubsw) saturates there.
const Problem& problem(int M, int N, int K) {
  static std::vector<Problem*> cache;
  for (Problem* p : cache) {
    if (p->M == M && p->N == N && p->K == K) return *p;
  }
  auto* p = new Problem{M, N, K, std::vector<uint8_t>(size_t(M) * K), std::vector<int8_t>(size_t(K) * N), std::vector<int32_t>(size_t(M) * N)};
  std::mt19937 rng(1);
  for (auto& x : p->a) x = static_cast<uint8_t>(rng() % 256);
  for (auto& x : p->b) x = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  for (size_t i = 0; i < p->a.size() / 8; ++i) p->a[i] = 255;
  for (size_t i = 0; i < p->b.size() / 8; ++i) p->b[i] = -128;
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      int64_t s = 0;
      for (int k = 0; k < K; ++k) s += int64_t{p->a[size_t(m) * K + k]} * p->b[size_t(k) * N + n];
      p->ref[size_t(m) * N + n] = static_cast<int32_t>(s);
    }
  }
  cache.push_back(p);
  return *p;
}

int64_t wrong(const Problem& p, const std::vector<int32_t>& c) {
  int64_t w = 0;
  for (size_t i = 0; i < c.size(); ++i) w += c[i] != p.ref[i];
  return w;
}

void report(benchmark::State& st, const Problem& p, const std::vector<int32_t>& c) {
  st.counters["wrong"] = static_cast<double>(wrong(p, c));
  st.counters["GOPs"] = benchmark::Counter(2.0 * p.M * p.N * p.K * static_cast<double>(st.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

// The readable loop (what the int8 path runs without VNNI today, less its blocking).
void BM_Loops(benchmark::State& st) {
  const Problem& p = problem(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)), static_cast<int>(st.range(2)));
  std::vector<int32_t> c(p.ref.size());
  for (auto _ : st) {
    for (int m = 0; m < p.M; ++m) {
      int32_t* row = c.data() + size_t(m) * p.N;
      for (int n = 0; n < p.N; ++n) row[n] = 0;
      for (int k = 0; k < p.K; ++k) {
        const int32_t a = p.a[size_t(m) * p.K + k];
        const int8_t* b = p.b.data() + size_t(k) * p.N;
        for (int n = 0; n < p.N; ++n) row[n] += a * b[n];
      }
    }
    benchmark::DoNotOptimize(c.data());
  }
  report(st, p, c);
}

void BM_OneDnnGemmU8S8S32(benchmark::State& st) {
  const Problem& p = problem(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)), static_cast<int>(st.range(2)));
  std::vector<int32_t> c(p.ref.size());
  const int32_t co = 0;
  for (auto _ : st) {
    dnnl_gemm_u8s8s32('N', 'N', 'F', p.M, p.N, p.K, 1.f, p.a.data(), p.K, 0, p.b.data(), p.N, 0, 0.f, c.data(), p.N, &co);
    benchmark::DoNotOptimize(c.data());
  }
  report(st, p, c);
}

// gemmlowp's exact uint8 x uint8 -> int32 GEMM: B stored as uint8 (b + 128) with offset -128.
void BM_Gemmlowp(benchmark::State& st) {
  const Problem& p = problem(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)), static_cast<int>(st.range(2)));
  std::vector<int32_t> c(p.ref.size());
  gemmlowp::GemmContext ctx;
  ctx.set_max_num_threads(1);
  std::vector<uint8_t> bu(p.b.size());
  for (size_t i = 0; i < bu.size(); ++i) bu[i] = static_cast<uint8_t>(p.b[i] + 128);
  for (auto _ : st) {
    gemmlowp::MatrixMap<const uint8_t, gemmlowp::MapOrder::RowMajor> lhs(p.a.data(), p.M, p.K);
    gemmlowp::MatrixMap<const uint8_t, gemmlowp::MapOrder::RowMajor> rhs(bu.data(), p.K, p.N);
    gemmlowp::MatrixMap<int32_t, gemmlowp::MapOrder::RowMajor> res(c.data(), p.M, p.N);
    gemmlowp::GemmWithOutputPipeline<uint8_t, int32_t, gemmlowp::DefaultL8R8BitDepthParams>(&ctx, lhs, rhs, &res, 0, -128, std::make_tuple());
    benchmark::DoNotOptimize(c.data());
  }
  report(st, p, c);
}

#ifdef RKD_BENCH_HIGHWAY
void BM_RkdHighway(benchmark::State& st) {
  const Problem& p = problem(static_cast<int>(st.range(0)), static_cast<int>(st.range(1)), static_cast<int>(st.range(2)));
  rkd::Tensor a = rkd::Tensor::empty(rkd::DType::u8, {p.M, p.K}), b = rkd::Tensor::empty(rkd::DType::i8, {p.K, p.N});
  std::copy(p.a.begin(), p.a.end(), a.data<uint8_t>());
  std::copy(p.b.begin(), p.b.end(), b.data<int8_t>());
  rkd::Tensor acc = rkd::Tensor::empty(rkd::DType::i32, {p.M, p.N});
  auto q = rkd::ops::make_qmatmul_accumulator(p.M, rkd::DType::u8, 0, b, rkd::ops::Int8Engine::highway);
  if (!q.ok()) {
    st.SkipWithError(q.error().to_string().c_str());
    return;
  }
  for (auto _ : st) {
    if (!(*q)->run(a, acc).ok()) st.SkipWithError("run failed");
    benchmark::DoNotOptimize(acc.raw());
  }
  st.SetLabel(rkd::ops::dispatch_report()[1].second);
  report(st, p, std::vector<int32_t>(acc.data<int32_t>(), acc.data<int32_t>() + acc.numel()));
}
#endif

// Shapes of the detectors' convolutions: a 3x3 at 80x80 with 64 channels, a 3x3 at 40x40 with
// 128, a 1x1 at 20x20 with 256.
void Shapes(benchmark::internal::Benchmark* b) {
  b->Args({6400, 64, 576})->Args({1600, 128, 1152})->Args({400, 256, 256})->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK(BM_Loops)->Apply(Shapes);
BENCHMARK(BM_OneDnnGemmU8S8S32)->Apply(Shapes);
BENCHMARK(BM_Gemmlowp)->Apply(Shapes);
#ifdef RKD_BENCH_HIGHWAY
BENCHMARK(BM_RkdHighway)->Apply(Shapes);
#endif
BENCHMARK_MAIN();
