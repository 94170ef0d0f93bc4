#include "npu/memory.h"

#include <cstdio>
#include <cstring>
#include <string>

namespace rkd::npu {

namespace {
std::string hex32(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%08llx", static_cast<unsigned long long>(v));
  return b;
}
}  // namespace

uint32_t DeviceMemory::alloc(size_t bytes, size_t align) {
  size_t at = (bytes_.size() + align - 1) / align * align;
  bytes_.resize(at + bytes, 0);
  return base_ + static_cast<uint32_t>(at);
}

Result<std::span<uint8_t>> DeviceMemory::span(uint32_t address, size_t bytes) {
  if (address < base_ || static_cast<uint64_t>(address - base_) + bytes > bytes_.size()) {
    return invalid("device memory: " + std::to_string(bytes) + " bytes at " + hex32(address) + " lie outside [" + hex32(base_) + ", " +
                   hex32(base_ + bytes_.size()) + ")");
  }
  return std::span<uint8_t>(bytes_.data() + (address - base_), bytes);
}

Result<std::span<const uint8_t>> DeviceMemory::read(uint32_t address, size_t bytes) const {
  auto self = const_cast<DeviceMemory*>(this);
  RKD_ASSIGN(auto s, self->span(address, bytes));
  return std::span<const uint8_t>(s.data(), s.size());
}

Status DeviceMemory::write(uint32_t address, std::span<const uint8_t> data) {
  RKD_ASSIGN(auto s, span(address, data.size()));
  std::memcpy(s.data(), data.data(), data.size());
  return {};
}

}  // namespace rkd::npu
