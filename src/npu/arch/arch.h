// The RK3588 NPU as data: register map and parameters (generated into npu/arch/rk3588_regs.h
// from rk3588_registers.json and rk3588.json), with look-ups for the encoder, the decoder
// and the simulator.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "npu/arch/arch_types.h"
#include "npu/arch/rk3588_regs.h"

namespace rkd::npu::arch {

// The block whose registers live at `offset` (by offset range), or nullptr.
const BlockDesc* block_of_offset(uint16_t offset);
// The block a regcmd target word names, or nullptr.
const BlockDesc* block_of_target(uint16_t target);
// The register at an absolute offset, or nullptr when the map has none there.
const RegisterDesc* register_at(uint16_t offset);
// "CNA.CONV_CON1", or "CNA+0x1234" for an offset the map does not describe.
std::string register_name(uint16_t offset);

// A block's bit in PC_OPERATION_ENABLE (a task's enable mask): its regcmd target's block bit
// (bits 15..8: 0x02 CNA, 0x08 CORE, 0x10 DPU, ...) shifted down by one (0x01 CNA, 0x04 CORE,
// 0x08 DPU, 0x10 DPU_RDMA, 0x20 PPU, 0x40 PPU_RDMA: kConvEnableMask and its siblings).
constexpr uint32_t enable_bit(uint16_t target) { return static_cast<uint32_t>(target >> 9); }
// The DPU, whose end raises the interrupt mainline's rocket driver completes a task on.
inline constexpr uint32_t kDpuEnableBit = enable_bit(DPU_OPERATION_ENABLE.target);
static_assert((kConvEnableMask & kDpuEnableBit) != 0 && (kDpuEnableMask & kDpuEnableBit) != 0 && (kPpuEnableMask & kDpuEnableBit) == 0);

// v placed into `field` of reg; an error naming the field when v does not fit its width.
Result<uint32_t> with_field(uint32_t reg, const Field& field, uint64_t v);

}  // namespace rkd::npu::arch
