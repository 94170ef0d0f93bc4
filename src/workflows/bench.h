// rkdeploy bench: latency of one model on this host, as percentiles of repeated runs.
//
// Contract:
//  - bench() loads the model for `backend` (workflows/backend.h: cpu, int8, sim or device),
//    runs `warmup` untimed and `runs` timed forward passes on the inputs (model_inputs(): a
//    photo through the detector config, or NAME=FILE.npy specs), and, given a photo, as many
//    end-to-end runs (preprocessing, forward pass, decoding).
//  - Inputs must be real (check_real_inputs) and finite unless allow_nonfinite.
//  - Percentiles are nearest-rank over the timed runs, in milliseconds.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "npu/lower/strategy.h"
#include "workflows/backend.h"

namespace rkd::workflows {

struct BenchOptions {
  std::string model, image, config;
  BackendChoice backend;  // configure_backend(): cpu, int8, sim or device (opened here)
  std::vector<std::string> inputs;
  int warmup = 3, runs = 20, threads = 1;
  bool allow_nonfinite = false;
};

// The 95th percentile needs at least this many samples: of fewer, the smallest sample with 95 %
// at or below it is the maximum.
inline constexpr int kMinRunsForP95 = 20;

struct LatencyStats {
  double p50 = 0, min = 0, max = 0, mean = 0;
  std::optional<double> p95;  // nullopt with fewer than kMinRunsForP95 samples
};
LatencyStats latency_stats(std::vector<double> ms);  // ms not empty

struct BenchResult {
  LatencyStats forward;
  std::optional<LatencyStats> end_to_end;  // with a photo only
  std::map<std::string, std::string> environment;
};

Result<BenchResult> bench(const BenchOptions& o);

// What `bench --json` reports of a result (docs/cli-json.md, "bench"), as JSON text:
// forward_ms and end_to_end_ms (p50, p95, min, max, mean; null without a photo) and the
// environment (core/json_style.h json_record: digit-only values as numbers).
std::string bench_json(const BenchResult& r);

}  // namespace rkd::workflows
