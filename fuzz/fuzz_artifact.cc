// libFuzzer target for the .rkd artifact's reader (runtime/artifact.h): any byte string must
// give an artifact whose graph validates, or an invalid Error - never a crash, a sanitizer report
// or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "runtime/artifact.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = rkd::runtime::parse_artifact(std::span<const uint8_t>(data, size), "fuzz.rkd");
  if (r.ok() && !r.value().graph->validate().ok()) std::abort();
  return 0;
}
