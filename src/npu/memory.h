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
  // The simulator's device address of the first byte (compile's manifest "device_base").
  static constexpr uint32_t kDefaultBase = 0x10000000u;
  explicit DeviceMemory(uint32_t base = kDefaultBase);
  // A copy holds the same bytes and history under a new identity().
  DeviceMemory(const DeviceMemory& o);
  DeviceMemory& operator=(const DeviceMemory& o);
  // A move keeps the bytes where they are (adopted ones too) and the identity.
  DeviceMemory(DeviceMemory&&) noexcept = default;
  DeviceMemory& operator=(DeviceMemory&&) noexcept = default;
  // Reserves `bytes` (aligned to `align`, zero-filled); returns the device address.
  uint32_t alloc(size_t bytes, size_t align = 64);
  Status write(uint32_t address, std::span<const uint8_t> data);
  Result<std::span<const uint8_t>> read(uint32_t address, size_t bytes) const;
  Result<std::span<uint8_t>> span(uint32_t address, size_t bytes);
  uint32_t base() const { return base_; }
  size_t size() const { return size_; }

  // Device memory that is not this object's: a board's buffer object mapped into the process
  // (the device back end), or a test double's mapped buffers. adopt() copies the bytes
  // allocated so far to `external` (at least size() bytes) and from then on reads and writes
  // there; alloc() fails (returns 0) once adopted. The addresses stay: the buffer's device
  // address must be the base the bytes were placed at (the device back end lowers at it).
  void adopt(std::span<uint8_t> external);
  // A window over bytes someone else owns, [base, base + bytes.size()).
  static DeviceMemory external(uint32_t base, std::span<uint8_t> bytes);
  bool is_external() const { return external_; }
  // An optional check that [address, address + bytes) is backed (a double's mapped buffers):
  // an access it refuses is an error naming the address, as an IOMMU fault.
  void set_mapped_check(bool (*check)(const void* ctx, uint64_t lo, uint64_t hi), const void* ctx) {
    mapped_check_ = check;
    mapped_ctx_ = ctx;
  }
  // Records an access made around this object (a CPU write through a mapping, made visible
  // to the device by a cache flush) so that caches see it (written_since).
  void mark_written(uint32_t address, size_t bytes) { record(address, bytes); }

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
  std::vector<uint8_t> bytes_;  // owned bytes (not adopted)
  uint8_t* data_ = nullptr;     // bytes_.data() or the adopted bytes
  size_t size_ = 0;
  bool external_ = false;
  bool (*mapped_check_)(const void*, uint64_t, uint64_t) = nullptr;
  const void* mapped_ctx_ = nullptr;
  uint64_t id_ = 0, seq_ = 0;
  std::vector<Access> history_;  // a ring of the last kHistory accesses
};

}  // namespace rkd::npu
