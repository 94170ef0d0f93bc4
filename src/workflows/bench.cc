#include "workflows/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/json_style.h"
#include "core/progress.h"
#include "npu/lower/lower.h"
#include "runtime/detect.h"
#include "runtime/model.h"
#include "runtime/npu_device.h"
#include "workflows/plan.h"

namespace rkd::workflows {

LatencyStats latency_stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  LatencyStats s;
  auto rank = [&](double p) {  // the smallest sample with at least p of the samples at or below it
    const size_t r = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::min(v.size(), std::max<size_t>(r, 1)) - 1];
  };
  s.p50 = rank(0.5);
  if (v.size() >= static_cast<size_t>(kMinRunsForP95)) s.p95 = rank(0.95);
  s.min = v.front();
  s.max = v.back();
  for (double x : v) s.mean += x / static_cast<double>(v.size());
  return s;
}

Result<BenchResult> bench(const BenchOptions& a) {
  if (a.runs < 1 || a.warmup < 0) return invalid("bench: --runs must be at least 1 and --warmup at least 0");
  runtime::LoadOptions lo;
  lo.batch = 1;
  RKD_TRY(configure_backend(a.backend, lo.compile, lo.exec));
  lo.exec.threads = a.threads;
  RKD_ASSIGN(const auto inputs, runtime::model_inputs(a.model, a.image, a.config, a.inputs));
  RKD_TRY(runtime::check_real_inputs(inputs));
  if (!a.allow_nonfinite) RKD_TRY(runtime::check_finite_inputs(inputs));
  lo.inputs = &inputs;
  RKD_ASSIGN(runtime::LoadedModel m, runtime::load_model(a.model, lo));
  // Milliseconds of each of `runs` calls of f after `warmup` untimed ones.
  auto timed = [&](auto f) -> Result<std::vector<double>> {
    std::vector<double> ms;
    for (int i = 0; i < a.warmup + a.runs; ++i) {
      RKD_TRY(report_progress(i < a.warmup ? "bench: warm-up" : "bench: measuring", i < a.warmup ? i + 1 : i + 1 - a.warmup,
                              i < a.warmup ? a.warmup : a.runs));
      const auto t0 = std::chrono::steady_clock::now();
      RKD_TRY(f());
      if (i >= a.warmup) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return ms;
  };
  BenchResult r;
  RKD_ASSIGN(const std::vector<double> fwd, timed([&]() -> Status {
               auto out = m.executor->run(inputs);
               return out.ok() ? Status{} : Status(out.error());
             }));
  r.forward = latency_stats(fwd);
  if (!a.image.empty()) {
    // End to end from the decoded photo: preprocessing, the forward pass, decoding the outputs.
    RKD_ASSIGN(const runtime::Image img, runtime::load_image(a.image));
    RKD_ASSIGN(const runtime::DetectorConfig cfg, runtime::detector_config(*m.graph, a.config));
    const bool deim = runtime::takes_target_sizes(*m.graph);
    RKD_ASSIGN(const std::vector<double> e2e, timed([&]() -> Status {
                 RKD_ASSIGN(const auto prep, runtime::preprocess(img, cfg, deim));
                 RKD_ASSIGN(const auto out, m.executor->run(prep.inputs));
                 RKD_ASSIGN(const auto det, runtime::postprocess(out, cfg, prep, img));
                 (void)det;
                 return {};
               }));
    r.end_to_end = latency_stats(e2e);
  }
  r.environment = environment();
  if (const auto& d = lo.exec.npu_device) {
    r.environment["npu_device"] = d->options().path + " (" + d->driver().name() + ", " + std::to_string(d->options().cores) + " core(s))";
  }
  return r;
}

std::string bench_json(const BenchResult& r) {
  auto stats = [](const LatencyStats& s) -> nlohmann::json {
    return {{"p50", s.p50}, {"p95", s.p95 ? nlohmann::json(*s.p95) : nlohmann::json(nullptr)}, {"min", s.min}, {"max", s.max}, {"mean", s.mean}};
  };
  nlohmann::json j;
  j["forward_ms"] = stats(r.forward);
  j["end_to_end_ms"] = r.end_to_end ? stats(*r.end_to_end) : nlohmann::json(nullptr);
  j["environment"] = json_record<nlohmann::json>(r.environment);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace rkd::workflows
