// libFuzzer target for the planner's readers: the first byte chooses the reader (mod 4: a
// target profile, the measurements of --calibrate, the board CPU times of --cpu-times, a SoC
// description read through a fixed profile of chip "FZ"), the rest is the file. Any bytes must
// load or give an Error naming the file, never crash or trip a sanitizer. The bytes go through
// a file because the readers take paths (a profile's "extends" and its SoC description are
// resolved relative to it).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "plan/plan.h"

namespace {

bool write(const std::string& path, const void* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  std::fwrite(data, 1, size, f);
  return std::fclose(f) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = "/tmp/rkd_fuzz_plan_" + std::to_string(::getpid());
  static const std::string path = dir + "/fuzz.json", soc = dir + "/soc/fz.json", profile = dir + "/fz-profile.json";
  static const bool made = [] {
    std::error_code ec;
    std::filesystem::create_directories(dir + "/soc", ec);
    const std::string p = R"({"schema": "rkdeploy-target/1", "name": "fz", "soc": "FZ", "runtime": "r", "version": "1", "sources": [],
      "npu": {"bytes_per_element": 1}, "boundary": {"sync_us": 1}, "custom_op_devices": [], "zero_cost_ops": [],
      "default": {"device": "cpu", "reason": "r"}, "ops": [{"op": "Conv", "device": "npu", "reason": "r"}]})";
    return !ec && write(dir + "/fz-profile.json", p.data(), p.size());
  }();
  if (size == 0 || !made) return 0;
  if (data[0] % 4 == 3) {
    if (!write(soc, data + 1, size - 1)) return 0;
    auto t = rkd::plan::load_target(profile);
    if (!t.ok() && t.error().message.find(soc) == std::string::npos && t.error().message.find(profile) == std::string::npos) __builtin_trap();
    return 0;
  }
  if (!write(path, data + 1, size - 1)) return 0;
  if (data[0] % 4 == 1) {
    auto m = rkd::plan::read_measurements(path);
    if (!m.ok() && m.error().message.find(path) == std::string::npos) __builtin_trap();
  } else if (data[0] % 4 == 2) {
    auto b = rkd::plan::read_board_times(path);
    if (!b.ok() && b.error().message.find(path) == std::string::npos) __builtin_trap();
  } else {
    auto t = rkd::plan::load_target(path);
    if (!t.ok() && t.error().message.find(path) == std::string::npos) __builtin_trap();
    if (t.ok()) (void)rkd::plan::supported_ops_markdown({*t});
  }
  return 0;
}
