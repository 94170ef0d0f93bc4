// What reading an artifact costs at load (runtime/artifact.h): the format alone (verifier and
// every field), with the SHA-256 digest over the whole file, and with the declared shapes
// derived again (ir::verify_declared_shapes) - the last is what rkd_open and `run MODEL.rkd` do.
//   RKD_BENCH_ARTIFACT=MODEL.rkd bench_artifact
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/npy.h"
#include "ir/passes/shape_inference.h"
#include "runtime/artifact.h"

namespace {

const std::vector<uint8_t>& artifact_bytes() {
  static const std::vector<uint8_t> bytes = [] {
    const char* p = std::getenv("RKD_BENCH_ARTIFACT");
    if (!p) return std::vector<uint8_t>{};
    auto s = rkd::read_file_bytes(p);
    return s.ok() ? std::vector<uint8_t>(s->begin(), s->end()) : std::vector<uint8_t>{};
  }();
  return bytes;
}

// 0: the format only (verifier, fields, digest); 1: and the declared shapes.
void BM_ParseArtifact(benchmark::State& state) {
  const auto& b = artifact_bytes();
  if (b.empty()) {
    state.SkipWithError("set RKD_BENCH_ARTIFACT to a .rkd file");
    return;
  }
  for (auto _ : state) {
    auto r = rkd::runtime::parse_artifact(b, "bench.rkd", state.range(0) != 0);
    if (!r.ok()) state.SkipWithError(r.error().message.c_str());
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(b.size()));
}
BENCHMARK(BM_ParseArtifact)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The digest alone: stamping computes the same SHA-256 over the file.
void BM_ArtifactDigest(benchmark::State& state) {
  std::vector<uint8_t> b = artifact_bytes();
  if (b.empty()) {
    state.SkipWithError("set RKD_BENCH_ARTIFACT to a .rkd file");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(rkd::runtime::stamp_artifact_digest(b));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(b.size()));
}
BENCHMARK(BM_ArtifactDigest)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
