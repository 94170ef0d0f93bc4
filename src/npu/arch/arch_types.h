// The types of the generated hardware description (rk3588_regs.h, from the data files
// rk3588_registers.json and rk3588.json by scripts/npu/gen_arch.py).
#pragma once

#include <cstdint>

namespace rkd::npu::arch {

// A register as a regcmd word addresses it: the block's target and the absolute offset.
struct Reg {
  uint16_t target;
  uint16_t offset;
};

// A bit field of a register, bits [lo, hi] inclusive.
struct Field {
  uint16_t target;
  uint16_t offset;
  uint8_t lo, hi;
  const char* name;  // "CNA.CONV_CON1.CONV_MODE"
  constexpr uint32_t width() const { return static_cast<uint32_t>(hi - lo + 1); }
  constexpr uint64_t max() const { return (uint64_t{1} << width()) - 1; }
  constexpr uint32_t mask() const { return static_cast<uint32_t>(max() << lo); }
  constexpr uint32_t get(uint32_t reg) const { return (reg & mask()) >> lo; }
};

struct BlockDesc {
  const char* name;
  uint16_t target;  // regcmd target word (block bit + 1)
  uint16_t base;    // first register offset
};
struct FieldDesc {
  const char* name;
  uint8_t lo, hi;
};
struct RegisterDesc {
  uint16_t block;  // index into kBlocks
  uint16_t offset;
  const char* name;
  uint32_t reset;
  const char* meaning;
  uint16_t first_field, field_count;  // range of kFields
};

// Hardware parameters (rk3588.json; units in the names).
struct Params {
  const char* name;
  int64_t cores, int8_macs_per_cycle_per_core, clock_hz, cbuf_banks, cbuf_bank_bytes, cbuf_spare_feature_banks, feature_atomic_bytes,
      weight_atomic_kernels, depthwise_weight_atomic_channels, feature_c2_int8, input_channel_alignment, output_channel_alignment,
      depthwise_output_channel_alignment, weight_input_group, weight_output_group, bs_operand_bytes_per_8_channels, size_field_max, min_height,
      ew_surface_min_pixels, lut_entries, ppu_rdma_int8_in_precision, regcmd_alignment_bytes;
};

}  // namespace rkd::npu::arch
