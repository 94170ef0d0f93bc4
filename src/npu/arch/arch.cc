#include "npu/arch/arch.h"

#include <cstdio>

namespace rkd::npu::arch {

const BlockDesc* block_of_target(uint16_t target) {
  for (const BlockDesc& b : kBlocks) {
    if (b.target == target) return &b;
  }
  return nullptr;
}

const BlockDesc* block_of_offset(uint16_t offset) {
  // Blocks own 4 KiB offset windows starting at their base (PC 0x0xxx, CNA 0x1xxx, ...).
  for (const BlockDesc& b : kBlocks) {
    if (offset >= b.base && offset < b.base + 0x1000) return &b;
  }
  return nullptr;
}

const RegisterDesc* register_at(uint16_t offset) {
  for (const RegisterDesc& r : kRegisters) {
    if (r.offset == offset) return &r;
  }
  return nullptr;
}

std::string register_name(uint16_t offset) {
  if (const RegisterDesc* r = register_at(offset)) return std::string(kBlocks[r->block].name) + "." + r->name;
  char buf[32];
  const BlockDesc* b = block_of_offset(offset);
  std::snprintf(buf, sizeof buf, "%s+0x%04x", b ? b->name : "?", offset);
  return buf;
}

Result<uint32_t> with_field(uint32_t reg, const Field& field, uint64_t v) {
  if (v > field.max()) {
    return invalid(std::string(field.name) + ": value " + std::to_string(v) + " does not fit " + std::to_string(field.width()) + " bits");
  }
  return (reg & ~field.mask()) | (static_cast<uint32_t>(v) << field.lo);
}

}  // namespace rkd::npu::arch
