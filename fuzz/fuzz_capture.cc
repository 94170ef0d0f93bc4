// libFuzzer target for the capture-directory reader (tools/intercept's index.json, docs/device.md):
// any bytes as index.json (with one task file beside it) must give tasks or an Error, and any
// tasks must decode and summarise without a crash or a sanitizer report.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "npu/regcmd/capture.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/fuzz_capture.XXXXXX";
    const char* d = mkdtemp(tmpl);
    std::filesystem::create_directories(std::string(d) + "/s0000");
    std::ofstream(std::string(d) + "/s0000/j00-t0000.regcmd", std::ios::binary).write("\0\0\0\0\0\0\0\0", 8);
    return std::string(d);
  }();
  std::ofstream(dir + "/index.json", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  auto tasks = rkd::npu::regcmd::read_tasks(dir);
  if (!tasks.ok()) return 0;
  const auto decoded = rkd::npu::regcmd::decode(rkd::npu::regcmd::concatenated(*tasks));
  (void)rkd::npu::regcmd::summary_json(decoded, dir);
  return 0;
}
