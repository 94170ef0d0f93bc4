// libFuzzer target for the .npy and .npz parsers: any byte string must give a tensor or
// an Error, never a crash, a sanitizer report or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  (void)rkd::parse_npy(bytes, "fuzz.npy");
  (void)rkd::parse_npz(bytes, "fuzz.npz");
  return 0;
}
