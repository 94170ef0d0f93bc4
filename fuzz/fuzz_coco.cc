// libFuzzer target for the COCO annotation and results readers of `rkdeploy eval`
// (workflows/eval.h) and the metrics over what they accept: the input is an annotation file,
// a NUL byte, and a results file. Any bytes must give data or an Error naming the file, never
// a crash or a sanitizer report; accepted data must evaluate to metrics in [0, 1] or -1.
#include <cstdint>
#include <string>

#include "workflows/eval.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  const size_t cut = all.find('\0');
  const std::string gt_text = all.substr(0, cut), dt_text = cut == std::string::npos ? "[]" : all.substr(cut + 1);
  auto gt = rkd::workflows::parse_coco_annotations(gt_text, "gt.json");
  if (!gt.ok()) {
    if (gt.error().message.find("gt.json") == std::string::npos) __builtin_trap();
    return 0;
  }
  auto dt = rkd::workflows::parse_coco_results(dt_text, "dt.json");
  if (!dt.ok()) {
    if (dt.error().message.find("dt.json") == std::string::npos) __builtin_trap();
    return 0;
  }
  const auto m = rkd::workflows::evaluate_results(*gt, *dt);
  for (double v : m.summary.values()) {
    if (!(v == -1 || (v >= 0 && v <= 1))) __builtin_trap();
  }
  return 0;
}
