// libFuzzer target for the int8 and sim back ends' preparation: a TFLite model (the bytes after
// the first) loaded as `rkdeploy run MODEL --backend int8|sim --input ...` loads it (the first
// byte's low bit picks the back end), with zero-filled inputs of the declared shapes checked
// against the graph before any pass or kernel preparation, then run once. Any byte string must
// give a result or an Error: no crash, sanitizer report, uncaught exception or allocation
// beyond libFuzzer's -rss_limit_mb.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

#include "core/npy.h"
#include "core/tensor.h"
#include "ir/ir.h"
#include "ir/passes/shape_inference.h"
#include "runtime/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static const std::string path = "/tmp/rkd_fuzz_prepare_" + std::to_string(::getpid()) + ".tflite";
  if (!rkd::write_file_atomic(path, std::span<const uint8_t>(data + 1, size - 1)).ok()) return 0;
  // The inputs a user would give: one zero tensor per declared input (small ones only: the
  // point is preparation, and a declared shape the limits refuse is refused before this).
  auto imported = rkd::runtime::import_model(path, 1);
  if (!imported.ok()) return 0;
  std::map<std::string, rkd::Tensor> inputs;
  for (const rkd::ir::Value* v : imported->graph.inputs) {
    const auto shape = rkd::ir::static_shape(v);
    if (!shape || !v->dtype) return 0;
    auto bytes = rkd::checked_shape_bytes(*shape, *v->dtype, v->name);
    if (!bytes.ok() || *bytes > (uint64_t{1} << 20)) return 0;
    auto t = rkd::Tensor::zeros(*v->dtype, *shape);
    if (!t.ok()) return 0;
    inputs[v->name] = std::move(t).value();
  }
  rkd::runtime::LoadOptions lo;
  lo.batch = 1;
  lo.compile.int8 = true;
  if (data[0] & 1) lo.compile.npu_sim_strategy = "sorted-bs-multiplier";
  lo.exec.threads = 1;
  lo.inputs = &inputs;
  auto m = rkd::runtime::load_model(path, lo);
  if (!m.ok()) return 0;
  (void)m->executor->run(inputs);
  return 0;
}
