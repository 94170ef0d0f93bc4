#include "npu/lower/emit.h"

namespace rkd::npu::lower {

using namespace arch;  // NOLINT: register fields

namespace {
uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }
}  // namespace

Status emit_cna(regcmd::RegisterFile& r, const CnaConv& c) {
  RKD_TRY(r.set(CNA_CONV_CON1_CONV_MODE, c.depthwise ? 3 : 0));
  RKD_TRY(r.set(CNA_CONV_CON3_CONV_X_STRIDE, u(c.stride_x)));
  RKD_TRY(r.set(CNA_CONV_CON3_CONV_Y_STRIDE, u(c.stride_y)));
  RKD_TRY(r.set(CNA_DATA_SIZE0_DATAIN_WIDTH, u(c.map_width)));
  RKD_TRY(r.set(CNA_DATA_SIZE0_DATAIN_HEIGHT, u(c.in_rows)));
  RKD_TRY(r.set(CNA_DATA_SIZE1_DATAIN_CHANNEL, u(c.in_channels)));
  RKD_TRY(r.set(CNA_DATA_SIZE1_DATAIN_CHANNEL_REAL, u(c.in_channels_real - 1)));
  RKD_TRY(r.set(CNA_DATA_SIZE2_DATAOUT_WIDTH, u(c.out_width)));
  RKD_TRY(r.set(CNA_DATA_SIZE3_DATAOUT_ATOMICS, u(c.out_width * c.out_rows)));
  RKD_TRY(r.set(CNA_WEIGHT_SIZE0_WEIGHT_BYTES, u(c.weight_bytes)));
  RKD_TRY(r.set(CNA_WEIGHT_SIZE1_WEIGHT_BYTES_PER_KERNEL, u(c.weight_bytes_per_kernel)));
  RKD_TRY(r.set(CNA_WEIGHT_SIZE2_WEIGHT_WIDTH, u(c.kernel_w)));
  RKD_TRY(r.set(CNA_WEIGHT_SIZE2_WEIGHT_HEIGHT, u(c.kernel_h)));
  RKD_TRY(r.set(CNA_WEIGHT_SIZE2_WEIGHT_KERNELS, u(c.kernels)));
  RKD_TRY(r.set(CNA_CBUF_CON0_DATA_BANK, u(c.data_banks)));
  RKD_TRY(r.set(CNA_CBUF_CON0_WEIGHT_BANK, u(c.weight_banks)));
  RKD_TRY(r.set(CNA_CBUF_CON0_WEIGHT_REUSE, c.weight_reuse ? 1 : 0));
  RKD_TRY(r.set(CNA_CVT_CON0_CVT_BYPASS, 1));  // int8 features: no input conversion
  RKD_TRY(r.set(CNA_PAD_CON0_PAD_TOP, u(c.pad_top)));
  RKD_TRY(r.set(CNA_PAD_CON0_PAD_LEFT, u(c.pad_left)));
  r.set(CNA_PAD_CON1, static_cast<uint32_t>(static_cast<uint8_t>(static_cast<int8_t>(c.pad_value))));
  r.set(CNA_FEATURE_DATA_ADDR, c.feature_address);
  // Line stride in 4-byte units (a line of W 16-byte pixels: 4 W); surface stride in 16-byte
  // units less the 4 lines already counted: W (H - 4), H the stored map's height (facts §2).
  RKD_TRY(r.set(CNA_DMA_CON1_LINE_STRIDE, u(4 * c.map_width)));
  RKD_TRY(r.set(CNA_DMA_CON2_SURF_STRIDE, u(c.map_width * (c.map_height - 4))));
  r.set(CNA_DCOMP_ADDR0, c.weight_address);
  return {};
}

Status emit_core(regcmd::RegisterFile& r, const CoreConv& c) {
  RKD_TRY(r.set(CORE_MISC_CFG_DW_EN, c.depthwise ? 1 : 0));
  RKD_TRY(r.set(CORE_DATAOUT_SIZE_0_DATAOUT_WIDTH, u(c.out_width - 1)));
  RKD_TRY(r.set(CORE_DATAOUT_SIZE_0_DATAOUT_HEIGHT, u(c.out_rows - 1)));
  RKD_TRY(r.set(CORE_DATAOUT_SIZE_1_DATAOUT_CHANNEL, u(c.channels - 1)));
  RKD_TRY(r.set(CORE_CLIP_TRUNCATE_CLIP_TRUNCATE, u(c.truncate)));
  return {};
}

Status emit_dpu(regcmd::RegisterFile& r, const DpuTask& d) {
  r.set(DPU_DST_BASE_ADDR, d.dst_address);
  RKD_TRY(r.set(DPU_DST_SURF_STRIDE_DST_SURF_STRIDE, u(d.dst_surface_pixels)));
  RKD_TRY(r.set(DPU_DATA_CUBE_WIDTH_WIDTH, u(d.width - 1)));
  RKD_TRY(r.set(DPU_DATA_CUBE_HEIGHT_HEIGHT, u(d.rows - 1)));
  RKD_TRY(r.set(DPU_DATA_CUBE_CHANNEL_CHANNEL, u(d.channels - 1)));
  RKD_TRY(r.set(DPU_DATA_CUBE_CHANNEL_ORIG_CHANNEL, u(d.orig_channels - 1)));
  if (d.input_address) {
    RKD_TRY(r.set(DPU_FEATURE_MODE_CFG_FLYING_MODE, 1));
    RKD_TRY(r.set(DPU_FEATURE_MODE_CFG_OUTPUT_MODE, 2));
    RKD_TRY(r.set(DPU_FEATURE_MODE_CFG_BURST_LEN, 15));
  }
  // BS: the ALU adds the per-channel operand from BRDMA (or BS_ALU_CFG's); MUL from the
  // operands, from BS_MUL_CFG, or bypassed.
  const bool regs = d.bs.layout == BsOperands::registers;
  const bool mul = d.bs.layout == BsOperands::alu_mul || (regs && d.bs.mul_value != 0);
  RKD_TRY(r.set(DPU_BS_CFG_BS_ALU_ALGO, 2));
  RKD_TRY(r.set(DPU_BS_CFG_BS_ALU_SRC, regs ? 0 : 1));
  if (regs) r.set(DPU_BS_ALU_CFG, static_cast<uint32_t>(d.bs.alu_value));
  RKD_TRY(r.set(DPU_BS_CFG_BS_MUL_BYPASS, mul ? 0 : 1));
  RKD_TRY(r.set(DPU_BS_CFG_BS_RELU_BYPASS, d.bs.relu ? 0 : 1));
  if (d.bs.relux) {
    RKD_TRY(r.set(DPU_BS_CFG_BS_RELUX_EN, 1));
    r.set(DPU_BS_RELUX_CMP_VALUE, static_cast<uint32_t>(*d.bs.relux));
  }
  if (mul) {
    RKD_TRY(r.set(DPU_BS_MUL_CFG_BS_MUL_SRC, regs ? 0 : 1));
    if (regs) RKD_TRY(r.set(DPU_BS_MUL_CFG_BS_MUL_OPERAND, static_cast<uint16_t>(d.bs.mul_value)));
    RKD_TRY(r.set(DPU_BS_MUL_CFG_BS_MUL_SHIFT_VALUE, u(d.bs.mul_shift)));
    RKD_TRY(r.set(DPU_DATA_FORMAT_BS_MUL_SHIFT_VALUE_NEG, u(d.bs.mul_shift)));
  }
  RKD_TRY(r.set(DPU_BS_OW_CFG_OD_BYPASS, d.bs.ow_op == 0 ? 1 : 0));
  RKD_TRY(r.set(DPU_BS_OW_OP_OW_OP, static_cast<uint64_t>(static_cast<uint16_t>(static_cast<int16_t>(d.bs.ow_op)))));
  RKD_TRY(r.set(DPU_BN_CFG_BN_BYPASS, 1));
  if (d.ew && d.lut) return invalid("emit_dpu: an EW operand and the lookup table in one task are not emitted");
  if (d.ew) {
    // EW: add (or max / min / minus) the operand read by ERDMA (one int8 per element) after its
    // converter; no EW ReLU or LUT.
    RKD_TRY(r.set(DPU_EW_CFG_EW_OP_SRC, 1));
    if (d.ew->mul) {
      RKD_TRY(r.set(DPU_EW_CFG_EW_OP_TYPE, 1));
    } else {
      RKD_TRY(r.set(DPU_EW_CFG_EW_ALU_ALGO, static_cast<uint64_t>(d.ew->alu_algo)));
      if (d.ew->alu_algo == 0 || d.ew->alu_algo == 1) RKD_TRY(r.set(DPU_EW_CFG_EW_EQUAL_EN, 1));
    }
    RKD_TRY(r.set(DPU_EW_CFG_EW_LUT_BYPASS, 1));
    RKD_TRY(r.set(DPU_EW_CFG_EW_RELU_BYPASS, 1));
    RKD_TRY(r.set(DPU_EW_CFG_EDATA_SIZE, 1));
    RKD_TRY(r.set(DPU_EW_CFG_EW_DATA_MODE, d.ew->per_channel ? 0 : 1));
    r.set(DPU_EW_CVT_OFFSET_VALUE, static_cast<uint32_t>(d.ew->offset));
    RKD_TRY(r.set(DPU_EW_CVT_SCALE_VALUE_EW_OP_CVT_SCALE, u(d.ew->cvt.scale)));
    RKD_TRY(r.set(DPU_EW_CVT_SCALE_VALUE_EW_OP_CVT_SHIFT, u(d.ew->cvt.shift)));
  } else if (d.lut) {
    // EW with its operand bypassed, the lookup table on (LutTable).
    const auto n = static_cast<int64_t>(d.lut->entries.size());
    if (n != kRk3588.lut_entries)
      return invalid("emit_dpu: a lookup table of " + std::to_string(n) + " entries (the DPU's have " + std::to_string(kRk3588.lut_entries) + ")");
    RKD_TRY(r.set(DPU_EW_CFG_EW_OP_BYPASS, 1));
    RKD_TRY(r.set(DPU_EW_CFG_EW_OP_CVT_BYPASS, 1));
    RKD_TRY(r.set(DPU_EW_CFG_EW_RELU_BYPASS, 1));
    RKD_TRY(r.set(DPU_EW_CFG_EW_LUT_BYPASS, 0));
    RKD_TRY(r.set(DPU_LUT_CFG_LUT_LO_LE_MUX, 2));
    RKD_TRY(r.set(DPU_LUT_CFG_LUT_HYBRID_PRIORITY, 1));
    RKD_TRY(r.set(DPU_LUT_CFG_LUT_OFLOW_PRIORITY, 1));
    RKD_TRY(r.set(DPU_LUT_INFO_LUT_LE_INDEX_SELECT, 0));
    RKD_TRY(r.set(DPU_LUT_INFO_LUT_LO_INDEX_SELECT, 0));
    const auto start = static_cast<uint32_t>(d.lut->start), end = static_cast<uint32_t>(static_cast<int64_t>(d.lut->start) + n - 1);
    r.set(DPU_LUT_LE_START, start);
    r.set(DPU_LUT_LO_START, start);
    r.set(DPU_LUT_LE_END, end);
    r.set(DPU_LUT_LO_END, end);
    for (const Reg& slope : {DPU_LUT_LE_SLOPE_SCALE, DPU_LUT_LE_SLOPE_SHIFT, DPU_LUT_LO_SLOPE_SCALE, DPU_LUT_LO_SLOPE_SHIFT}) r.set(slope, 0);
  } else {
    RKD_TRY(r.set(DPU_EW_CFG_EW_BYPASS, 1));
  }
  RKD_TRY(r.set(DPU_WDMA_SIZE_0_CHANNEL_WDMA, u(d.channels - 1)));
  RKD_TRY(r.set(DPU_WDMA_SIZE_1_WIDTH_WDMA, u(d.width - 1)));
  RKD_TRY(r.set(DPU_WDMA_SIZE_1_HEIGHT_WDMA, u(d.rows - 1)));
  r.set(DPU_OUT_CVT_OFFSET, static_cast<uint32_t>(d.out_offset));
  RKD_TRY(r.set(DPU_OUT_CVT_SCALE_OUT_CVT_SCALE, u(d.out_cvt.scale)));
  RKD_TRY(r.set(DPU_OUT_CVT_SHIFT_OUT_CVT_SHIFT, u(d.out_cvt.shift)));
  return {};
}

Result<std::vector<regcmd::Word>> lut_upload(const LutTable& t) {
  if (static_cast<int64_t>(t.entries.size()) != kRk3588.lut_entries)
    return invalid("lut_upload: the table needs " + std::to_string(kRk3588.lut_entries) + " entries");
  std::vector<regcmd::Word> w;
  for (uint32_t id : {0u, 1u}) {
    RKD_ASSIGN(uint32_t cfg, with_field(0, DPU_LUT_ACCESS_CFG_LUT_ACCESS_TYPE, 1));
    RKD_ASSIGN(cfg, with_field(cfg, DPU_LUT_ACCESS_CFG_LUT_TABLE_ID, id));
    w.push_back(regcmd::Word{DPU_LUT_ACCESS_CFG.target, DPU_LUT_ACCESS_CFG.offset, cfg});
    for (int16_t e : t.entries)
      w.push_back(regcmd::Word{DPU_LUT_ACCESS_DATA.target, DPU_LUT_ACCESS_DATA.offset, static_cast<uint32_t>(static_cast<int32_t>(e))});
  }
  return w;
}

Status emit_dpu_rdma(regcmd::RegisterFile& r, const DpuTask& d) {
  RKD_TRY(r.set(DPU_RDMA_RDMA_DATA_CUBE_WIDTH_WIDTH, u(d.width - 1)));
  RKD_TRY(r.set(DPU_RDMA_RDMA_DATA_CUBE_HEIGHT_HEIGHT, u(d.rows - 1)));
  RKD_TRY(r.set(DPU_RDMA_RDMA_DATA_CUBE_CHANNEL_CHANNEL, u(d.channels - 1)));
  // BRDMA_DATA_USE is a bitmask (bit0 ALU, bit1 CPEND, bit2 MUL): 1 ALU operands only; 7 the
  // 64-byte blocks with CPEND and MUL (the vendor's BRDMA_CFG 0xE).
  // 0: no BS operands read (register operands).
  const int use = d.bs.layout == BsOperands::alu_mul ? 7 : d.bs.layout == BsOperands::alu ? 1 : 0;
  RKD_TRY(r.set(DPU_RDMA_RDMA_BRDMA_CFG_BRDMA_DATA_USE, static_cast<uint64_t>(use)));
  if (use != 0) r.set(DPU_RDMA_RDMA_BS_BASE_ADDR, d.bs.operand_address);
  if (d.ew) {
    RKD_TRY(r.set(DPU_RDMA_RDMA_ERDMA_CFG_ERDMA_DATA_MODE, d.ew->per_channel ? 0 : 1));
    RKD_TRY(r.set(DPU_RDMA_RDMA_ERDMA_CFG_ERDMA_DATA_SIZE, 1));
    r.set(DPU_RDMA_RDMA_EW_BASE_ADDR, d.ew->address);
    RKD_TRY(r.set(DPU_RDMA_RDMA_EW_SURF_STRIDE_EW_SURF_STRIDE, u(d.ew->surface_pixels)));
  } else {
    RKD_TRY(r.set(DPU_RDMA_RDMA_ERDMA_CFG_ERDMA_DISABLE, 1));
  }
  if (d.input_address) {
    // The main input from memory: int8 in and processed (IN_PRECISION, PROC_PRECISION 0).
    r.set(DPU_RDMA_RDMA_SRC_BASE_ADDR, *d.input_address);
    RKD_TRY(r.set(DPU_RDMA_RDMA_FEATURE_MODE_CFG_FLYING_MODE, 1));
    RKD_TRY(r.set(DPU_RDMA_RDMA_FEATURE_MODE_CFG_BURST_LEN, 15));
  } else {
    RKD_TRY(r.set(DPU_RDMA_RDMA_FEATURE_MODE_CFG_MRDMA_DISABLE, 1));  // the main input comes from CORE, not memory
  }
  return {};
}

Status emit_ppu(regcmd::RegisterFile& r, const PpuPool& p) {
  if (p.src_address % 16 != 0 || p.dst_address % 16 != 0 || p.src_line_bytes % 16 != 0 || p.src_surface_bytes % 16 != 0 ||
      p.dst_surface_bytes % 16 != 0)
    return invalid("PPU task: addresses and strides must be multiples of 16 bytes");
  for (const Field& f :
       {PPU_DATA_CUBE_IN_CHANNEL_CUBE_IN_CHANNEL, PPU_RDMA_RDMA_CUBE_IN_CHANNEL_CUBE_IN_CHANNEL, PPU_DATA_CUBE_OUT_CHANNEL_CUBE_OUT_CHANNEL})
    RKD_TRY(r.set(f, u(p.channels - 1)));
  for (const Field& f : {PPU_DATA_CUBE_IN_WIDTH_CUBE_IN_WIDTH, PPU_RDMA_RDMA_CUBE_IN_WIDTH_CUBE_IN_WIDTH}) RKD_TRY(r.set(f, u(p.width - 1)));
  for (const Field& f : {PPU_DATA_CUBE_IN_HEIGHT_CUBE_IN_HEIGHT, PPU_RDMA_RDMA_CUBE_IN_HEIGHT_CUBE_IN_HEIGHT}) RKD_TRY(r.set(f, u(p.height - 1)));
  RKD_TRY(r.set(PPU_DATA_CUBE_OUT_WIDTH_CUBE_OUT_WIDTH, u(p.out_width - 1)));
  RKD_TRY(r.set(PPU_DATA_CUBE_OUT_HEIGHT_CUBE_OUT_HEIGHT, u(p.out_height - 1)));
  RKD_TRY(r.set(PPU_OPERATION_MODE_CFG_FLYING_MODE, 1));
  RKD_TRY(r.set(PPU_OPERATION_MODE_CFG_POOLING_METHOD, 1));  // max
  RKD_TRY(r.set(PPU_POOLING_KERNEL_CFG_KERNEL_WIDTH, u(p.kernel_w - 1)));
  RKD_TRY(r.set(PPU_POOLING_KERNEL_CFG_KERNEL_HEIGHT, u(p.kernel_h - 1)));
  RKD_TRY(r.set(PPU_POOLING_KERNEL_CFG_KERNEL_STRIDE_WIDTH, u(p.stride_w - 1)));
  RKD_TRY(r.set(PPU_POOLING_KERNEL_CFG_KERNEL_STRIDE_HEIGHT, u(p.stride_h - 1)));
  RKD_TRY(r.set(PPU_POOLING_PADDING_CFG_PAD_LEFT, u(p.pad_left)));
  RKD_TRY(r.set(PPU_POOLING_PADDING_CFG_PAD_TOP, u(p.pad_top)));
  RKD_TRY(r.set(PPU_POOLING_PADDING_CFG_PAD_RIGHT, u(p.pad_right)));
  RKD_TRY(r.set(PPU_POOLING_PADDING_CFG_PAD_BOTTOM, u(p.pad_bottom)));
  r.set(PPU_PADDING_VALUE_1_CFG, static_cast<uint32_t>(p.pad_value));
  RKD_TRY(r.set(PPU_DST_BASE_ADDR_DST_BASE_ADDR, p.dst_address >> 4));
  RKD_TRY(r.set(PPU_DST_SURF_STRIDE_DST_SURF_STRIDE, u(p.dst_surface_bytes >> 4)));
  // INDEX_ADD as the measured programs set it (the output surface in 16-byte units); int8.
  RKD_TRY(r.set(PPU_DATA_FORMAT_INDEX_ADD, u(p.dst_surface_bytes >> 4)));
  RKD_TRY(r.set(PPU_DATA_FORMAT_PROC_PRECISION, 0));
  RKD_TRY(r.set(PPU_MISC_CTRL_BURST_LEN, 3));
  r.set(PPU_RDMA_RDMA_SRC_BASE_ADDR, p.src_address);
  RKD_TRY(r.set(PPU_RDMA_RDMA_SRC_LINE_STRIDE_SRC_LINE_STRIDE, u(p.src_line_bytes >> 4)));
  RKD_TRY(r.set(PPU_RDMA_RDMA_SRC_SURF_STRIDE_SRC_SURF_STRIDE, u(p.src_surface_bytes >> 4)));
  // The storage width of the map PPU_RDMA reads (8-bit: arch ppu_rdma_int8_in_precision), not
  // the processing precision.
  RKD_TRY(r.set(PPU_RDMA_RDMA_DATA_FORMAT_IN_PRECISION, static_cast<uint32_t>(arch::kRk3588.ppu_rdma_int8_in_precision)));
  return {};
}

}  // namespace rkd::npu::lower
