// libFuzzer target for the regcmd reader and decoder: any byte string (raw words or text)
// must give words or an Error, and any words must decode, disassemble, print as JSON and
// diff against themselves without a crash or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <span>

#include "npu/regcmd/regcmd.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto words = rkd::npu::regcmd::parse_regcmd_bytes(std::span<const uint8_t>(data, size), "fuzz.regcmd");
  if (!words.ok()) return 0;
  const auto tasks = rkd::npu::regcmd::decode(*words);
  (void)rkd::npu::regcmd::disassemble(tasks);
  (void)rkd::npu::regcmd::to_json(tasks);
  if (!rkd::npu::regcmd::diff(tasks, tasks).empty()) __builtin_trap();
  return 0;
}
