// libFuzzer target for the planner's readers: the first byte chooses the reader (mod 3: a
// target profile, the measurements of --calibrate, the board CPU times of --cpu-times), the
// rest is the file. Any bytes must load or give an Error naming the file, never crash or trip
// a sanitizer. The bytes go through a file because the readers take paths (a profile's
// "extends" is resolved relative to it).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "plan/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/rkd_fuzz_plan_" + std::to_string(::getpid()) + ".json";
  if (size == 0) return 0;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data + 1, 1, size - 1, f);
  std::fclose(f);
  if (data[0] % 3 == 1) {
    auto m = rkd::plan::read_measurements(path);
    if (!m.ok() && m.error().message.find(path) == std::string::npos) __builtin_trap();
  } else if (data[0] % 3 == 2) {
    auto b = rkd::plan::read_board_times(path);
    if (!b.ok() && b.error().message.find(path) == std::string::npos) __builtin_trap();
  } else {
    auto t = rkd::plan::load_target(path);
    if (!t.ok() && t.error().message.find(path) == std::string::npos) __builtin_trap();
    if (t.ok()) (void)rkd::plan::supported_ops_markdown({*t});
  }
  return 0;
}
