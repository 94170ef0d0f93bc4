// Simulated device memory: the bytes a board's NPU would read and write, at 32-bit device
// addresses. The lowering places buffers in it; the simulator executes against it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"

namespace rkd::npu {

// Device memory: a window of bytes at device address `base`. Reads and writes outside it
// are errors naming the address.
class DeviceMemory {
 public:
  explicit DeviceMemory(uint32_t base = 0x10000000u) : base_(base) {}
  // Reserves `bytes` (aligned to `align`, zero-filled); returns the device address.
  uint32_t alloc(size_t bytes, size_t align = 64);
  Status write(uint32_t address, std::span<const uint8_t> data);
  Result<std::span<const uint8_t>> read(uint32_t address, size_t bytes) const;
  Result<std::span<uint8_t>> span(uint32_t address, size_t bytes);
  uint32_t base() const { return base_; }
  size_t size() const { return bytes_.size(); }

 private:
  uint32_t base_;
  std::vector<uint8_t> bytes_;
};

}  // namespace rkd::npu
