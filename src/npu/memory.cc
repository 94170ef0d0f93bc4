#include "npu/memory.h"

#include <algorithm>
#include <atomic>
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
uint64_t next_identity() {
  static std::atomic<uint64_t> next{1};
  return next++;
}
}  // namespace

DeviceMemory::DeviceMemory(uint32_t base) : base_(base), id_(next_identity()) {}
DeviceMemory::DeviceMemory(const DeviceMemory& o) { *this = o; }
DeviceMemory& DeviceMemory::operator=(const DeviceMemory& o) {
  if (this != &o) {
    // A copy owns its bytes, whoever owned the original's.
    base_ = o.base_;
    bytes_.assign(o.data_, o.data_ + o.size_);
    data_ = bytes_.data();
    size_ = bytes_.size();
    external_ = false;
    mapped_check_ = o.mapped_check_;
    mapped_ctx_ = o.mapped_ctx_;
    id_ = next_identity();
    seq_ = o.seq_;
    history_ = o.history_;
  }
  return *this;
}

uint32_t DeviceMemory::alloc(size_t bytes, size_t align) {
  if (external_) return 0;
  size_t at = (bytes_.size() + align - 1) / align * align;
  bytes_.resize(at + bytes, 0);
  data_ = bytes_.data();
  size_ = bytes_.size();
  return base_ + static_cast<uint32_t>(at);
}

void DeviceMemory::adopt(std::span<uint8_t> external) {
  if (size_ > 0) std::memcpy(external.data(), data_, std::min(size_, external.size()));
  bytes_.clear();
  bytes_.shrink_to_fit();
  data_ = external.data();
  size_ = external.size();
  external_ = true;
  record(base_, size_);
}

DeviceMemory DeviceMemory::external(uint32_t base, std::span<uint8_t> bytes) {
  DeviceMemory m(base);
  m.data_ = bytes.data();
  m.size_ = bytes.size();
  m.external_ = true;
  return m;
}

Result<size_t> DeviceMemory::offset_of(uint32_t address, size_t bytes) const {
  if (address < base_ || static_cast<uint64_t>(address - base_) + bytes > size_) {
    return invalid("device memory: " + std::to_string(bytes) + " bytes at " + hex32(address) + " lie outside [" + hex32(base_) + ", " +
                   hex32(static_cast<uint64_t>(base_) + size_) + ")");
  }
  if (mapped_check_ && !mapped_check_(mapped_ctx_, address, static_cast<uint64_t>(address) + bytes)) {
    return invalid("device memory: " + std::to_string(bytes) + " bytes at " + hex32(address) + " lie outside every mapped buffer object");
  }
  return static_cast<size_t>(address - base_);
}

void DeviceMemory::record(uint32_t address, size_t bytes) {
  ++seq_;
  const Access a{seq_, address, static_cast<uint64_t>(address) + bytes};
  if (history_.size() < kHistory) history_.push_back(a);  // seq s at index (s - 1) % kHistory
  else history_[static_cast<size_t>((seq_ - 1) % kHistory)] = a;
}

bool DeviceMemory::written_since(uint64_t since, uint32_t address, size_t bytes) const {
  if (since >= seq_) return false;
  if (seq_ - since > history_.size()) return true;  // older than the record
  const uint64_t lo = address, hi = lo + bytes;
  for (uint64_t q = seq_; q > since; --q) {  // the accesses after `since`, newest first
    const Access& a = history_[static_cast<size_t>((q - 1) % kHistory)];
    if (a.lo < hi && lo < a.hi) return true;
  }
  return false;
}

Result<std::span<uint8_t>> DeviceMemory::span(uint32_t address, size_t bytes) {
  RKD_ASSIGN(size_t at, offset_of(address, bytes));
  record(address, bytes);
  return std::span<uint8_t>(data_ + at, bytes);
}

Result<std::span<const uint8_t>> DeviceMemory::read(uint32_t address, size_t bytes) const {
  RKD_ASSIGN(size_t at, offset_of(address, bytes));
  return std::span<const uint8_t>(data_ + at, bytes);
}

Status DeviceMemory::write(uint32_t address, std::span<const uint8_t> data) {
  RKD_ASSIGN(auto s, span(address, data.size()));
  std::memcpy(s.data(), data.data(), data.size());
  return {};
}

}  // namespace rkd::npu
