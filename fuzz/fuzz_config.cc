// libFuzzer target for the detector-config reader (docs/detector-config.md): any bytes must
// give a config or an Error naming the file, never a crash or a sanitizer report. A config
// that loads must also hold the reader's own invariants (sizes positive, thresholds finite).
#include <cmath>
#include <cstdint>
#include <string>

#include "runtime/detector_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto c = rkd::runtime::parse_config(text, "fuzz.json");
  if (!c.ok()) {
    if (c.error().message.find("fuzz.json") == std::string::npos) __builtin_trap();
    return 0;
  }
  if (c->width <= 0 || c->height <= 0 || !std::isfinite(c->score_threshold) || !std::isfinite(c->nms_iou)) __builtin_trap();
  return 0;
}
