// libFuzzer target for the .rkd artifact (runtime/artifact.h, runtime/load_artifact.h): the
// input's digest is stamped first (an edited artifact would stop at the digest: stamping lets
// the mutations reach the checks behind it), then it is parsed; an artifact that parses is
// loaded as `rkdeploy run MODEL.rkd --backend sim` loads it (the executor's preparation and
// the NPU lowering) and run once on zero inputs of its declared shapes. Any byte string must
// give a result or an Error: no crash, sanitizer report, uncaught exception or allocation
// beyond libFuzzer's -rss_limit_mb.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/npy.h"
#include "ir/passes/shape_inference.h"
#include "npu/lower/spec.h"
#include "runtime/artifact.h"
#include "runtime/load_artifact.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  (void)rkd::runtime::stamp_artifact_digest(bytes);  // fails on what the verifier refuses anyway
  auto r = rkd::runtime::parse_artifact(bytes, "fuzz.rkd");
  if (!r.ok()) return 0;
  if (!r.value().graph->validate().ok()) std::abort();
  std::map<std::string, rkd::Tensor> inputs;
  for (const rkd::ir::Value* v : r.value().graph->inputs) {
    const auto shape = rkd::ir::static_shape(v);
    if (!shape || !v->dtype) std::abort();  // verify_declared_shapes guarantees both
    auto b = rkd::checked_shape_bytes(*shape, *v->dtype, v->name);
    if (!b.ok() || *b > (uint64_t{1} << 20)) return 0;
    auto t = rkd::Tensor::zeros(*v->dtype, *shape);
    if (!t.ok()) return 0;
    inputs[v->name] = std::move(t).value();
  }
  static const std::string path = "/tmp/rkd_fuzz_artifact_" + std::to_string(::getpid()) + ".rkd";
  if (!rkd::write_file_atomic(path, bytes).ok()) return 0;
  rkd::runtime::LoadOptions lo;
  lo.compile.int8 = true;
  lo.compile.npu_strategy = rkd::npu::lower::kDefaultStrategy;
  lo.exec.threads = 1;
  lo.inputs = &inputs;
  auto m = rkd::runtime::load_artifact(path, lo);
  if (m.ok()) (void)m.value().executor->run(inputs);
  return 0;
}
