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
  explicit DeviceMemory(uint32_t base = 0x10000000u);
  // A copy holds the same bytes and history under a new identity().
  DeviceMemory(const DeviceMemory& o);
  DeviceMemory& operator=(const DeviceMemory& o);
  // Reserves `bytes` (aligned to `align`, zero-filled); returns the device address.
  uint32_t alloc(size_t bytes, size_t align = 64);
  Status write(uint32_t address, std::span<const uint8_t> data);
  Result<std::span<const uint8_t>> read(uint32_t address, size_t bytes) const;
  Result<std::span<uint8_t>> span(uint32_t address, size_t bytes);
  uint32_t base() const { return base_; }
  size_t size() const { return bytes_.size(); }

  // Change tracking for caches: every mutable access (write(), span()) is counted and its
  // range recorded (the last kHistory of them). A cache that checked some bytes at
  // (identity(), sequence()) may skip checking them again while written_since() says no.
  uint64_t identity() const { return id_; }
  uint64_t sequence() const { return seq_; }
  // False only when certainly no mutable access after sequence `since` touched
  // [address, address + bytes): true when one did or the record does not reach back to it.
  bool written_since(uint64_t since, uint32_t address, size_t bytes) const;
  static constexpr size_t kHistory = 4096;

 private:
  struct Access {
    uint64_t seq;
    uint64_t lo, hi;
  };
  Result<size_t> offset_of(uint32_t address, size_t bytes) const;
  void record(uint32_t address, size_t bytes);

  uint32_t base_;
  std::vector<uint8_t> bytes_;
  uint64_t id_ = 0, seq_ = 0;
  std::vector<Access> history_;  // a ring of the last kHistory accesses
};

}  // namespace rkd::npu
