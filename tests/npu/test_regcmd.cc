// regcmd: word packing, the register map's fields against register values the facts sheet
// quotes from hardware captures, encode -> decode -> encode identity, trailers and chaining,
// the decoder's problem reports, file parsing, and register-level diffs.
#include <gtest/gtest.h>

#include <random>

#include "npu/regcmd/regcmd.h"

namespace rkd::npu::regcmd {
namespace {

using namespace arch;  // NOLINT: register and field constants

TEST(Regcmd, WordPackingMatchesTheDocumentedBitPositions) {
  // target 63..48, value 47..16, offset 15..0.
  EXPECT_EQ(pack(Word{0x0201, 0x100c, 0x12345678}), 0x020112345678100cull);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t w = rng();
    EXPECT_EQ(pack(unpack(w)), w);
  }
}

TEST(RegisterMap, FieldsDecodeTheVendorsPerChannelConfiguration) {
  // Values captured from the vendor runtime on YOLOv5s (facts sheet, section 4): BS_CFG =
  // 0x20140 (ALU add from DMA, MUL active), BS_MUL_CFG = 0xE01 (MUL from DMA, shift 14),
  // DATA_FORMAT = 0xE0 (negative-product shift 14), BRDMA_CFG = 0xE, BN_CFG = 0x12.
  EXPECT_EQ(DPU_BS_CFG_BS_ALU_ALGO.get(0x20140), 2u);
  EXPECT_EQ(DPU_BS_CFG_BS_ALU_SRC.get(0x20140), 1u);
  EXPECT_EQ(DPU_BS_CFG_BS_MUL_BYPASS.get(0x20140), 0u);
  EXPECT_EQ(DPU_BS_CFG_BS_RELU_BYPASS.get(0x20140), 1u);
  EXPECT_EQ(DPU_BS_CFG_BS_BYPASS.get(0x20140), 0u);
  EXPECT_EQ(DPU_BS_MUL_CFG_BS_MUL_SRC.get(0xE01), 1u);
  EXPECT_EQ(DPU_BS_MUL_CFG_BS_MUL_SHIFT_VALUE.get(0xE01), 14u);
  EXPECT_EQ(DPU_DATA_FORMAT_BS_MUL_SHIFT_VALUE_NEG.get(0xE0), 14u);
  EXPECT_EQ(DPU_RDMA_RDMA_BRDMA_CFG_BRDMA_DATA_USE.get(0xE), 7u);  // ALU, CPEND, MUL
  EXPECT_EQ(DPU_BN_CFG_BN_RELU_BYPASS.get(0x12), 0u);
  EXPECT_EQ(DPU_BN_CFG_BN_ALU_BYPASS.get(0x12), 1u);
  EXPECT_EQ(DPU_BN_CFG_BN_MUL_BYPASS.get(0x12), 1u);
  // OUT_CVT (section 3.6): SCALE [15:0], SHIFT [11:0], round bit 30, type bit 31.
  EXPECT_EQ(DPU_OUT_CVT_SHIFT_CVT_ROUND.lo, 30);
  EXPECT_EQ(DPU_OUT_CVT_SHIFT_CVT_TYPE.lo, 31);
  EXPECT_EQ(DPU_OUT_CVT_SCALE_OUT_CVT_SCALE.width(), 16u);
  EXPECT_EQ(DPU_OUT_CVT_SHIFT_OUT_CVT_SHIFT.width(), 12u);
  // Every register's fields lie inside 32 bits and do not overlap.
  for (const RegisterDesc& r : kRegisters) {
    uint64_t used = 0;
    for (uint16_t f = r.first_field; f < r.first_field + r.field_count; ++f) {
      const uint64_t m = ((uint64_t{1} << (kFields[f].hi - kFields[f].lo + 1)) - 1) << kFields[f].lo;
      EXPECT_EQ(used & m, 0u) << kBlocks[r.block].name << "." << r.name << "." << kFields[f].name;
      used |= m;
    }
    EXPECT_LE(used, 0xffffffffull);
    EXPECT_EQ(block_of_offset(r.offset), &kBlocks[r.block]) << r.name;
  }
}

TEST(RegisterFile, FieldSettersCheckTheWidthAndNameTheField) {
  RegisterFile rf;
  ASSERT_TRUE(rf.set(CNA_CONV_CON3_CONV_X_STRIDE, 7).ok());
  ASSERT_TRUE(rf.set(CNA_CONV_CON3_CONV_Y_STRIDE, 2).ok());
  EXPECT_EQ(rf.get(CNA_CONV_CON3), 7u | (2u << 3));
  auto s = rf.set(CNA_CONV_CON3_CONV_X_STRIDE, 8);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("CNA.CONV_CON3.CONV_X_STRIDE"), std::string::npos) << s.error().message;
  EXPECT_EQ(rf.get(CNA_CONV_CON3), 7u | (2u << 3)) << "a refused value leaves the register unchanged";
}

// A task shaped like a convolution's: registers of CNA, CORE, DPU and DPU_RDMA.
Task conv_task(uint32_t feature, uint32_t weights, uint32_t out, int stride) {
  Task t;
  EXPECT_TRUE(t.regs.set(CNA_CONV_CON1_CONV_MODE, 0).ok());
  EXPECT_TRUE(t.regs.set(CNA_CONV_CON3_CONV_X_STRIDE, static_cast<uint64_t>(stride)).ok());
  EXPECT_TRUE(t.regs.set(CNA_CONV_CON3_CONV_Y_STRIDE, static_cast<uint64_t>(stride)).ok());
  EXPECT_TRUE(t.regs.set(CNA_DATA_SIZE0_DATAIN_WIDTH, 40).ok());
  EXPECT_TRUE(t.regs.set(CNA_DATA_SIZE0_DATAIN_HEIGHT, 30).ok());
  t.regs.set(CNA_FEATURE_DATA_ADDR, feature);
  t.regs.set(CNA_DCOMP_ADDR0, weights);
  EXPECT_TRUE(t.regs.set(CORE_CLIP_TRUNCATE_CLIP_TRUNCATE, 0).ok());
  t.regs.set(DPU_BS_CFG, 0x20140);
  t.regs.set(DPU_BS_MUL_CFG, 0xE01);
  t.regs.set(DPU_DST_BASE_ADDR, out);
  EXPECT_TRUE(t.regs.set(DPU_OUT_CVT_SCALE_OUT_CVT_SCALE, 0x5a3c).ok());
  t.regs.set(DPU_RDMA_RDMA_BRDMA_CFG, 0xE);
  return t;
}

TEST(Regcmd, EncodeDecodeEncodeIsTheIdentityAndTrailersChainTheTasks) {
  std::vector<Task> tasks = {conv_task(0x1000, 0x20000, 0x40000, 1), conv_task(0x40000, 0x21000, 0x50000, 2),
                             conv_task(0x50000, 0x22000, 0x60000, 1)};
  tasks[1].regs.set(PC_TASK_CON, 1);  // 12 registers; the others have 11 and get a padding word
  std::vector<TaskSpan> spans;
  auto words = encode(tasks, 0x8000, &spans);
  ASSERT_TRUE(words.ok()) << words.error().to_string();
  ASSERT_EQ(spans.size(), 3u);
  const auto dec = decode(*words);
  ASSERT_EQ(dec.size(), 3u);
  for (size_t t = 0; t < 3; ++t) {
    EXPECT_TRUE(dec[t].problems.empty()) << dec[t].problems.front();
    EXPECT_TRUE(dec[t].has_trailer);
    EXPECT_EQ(dec[t].word_count % 2, 0u);
    EXPECT_EQ(spans[t].address % 16, 0u);
    EXPECT_EQ(dec[t].enable_mask, kConvEnableMask);
    EXPECT_EQ(dec[t].writes.size(), tasks[t].regs.values().size());
    if (t + 1 < 3) {
      EXPECT_EQ(dec[t].next_address, spans[t + 1].address);
      EXPECT_EQ(dec[t].next_amount, register_amount(spans[t + 1].word_count));
      EXPECT_FALSE(dec[t].next_is_zero_word);
    } else {
      EXPECT_TRUE(dec[t].next_is_zero_word);
    }
  }
  EXPECT_EQ(dec[0].padding_words, 1u);
  EXPECT_EQ(dec[1].padding_words, 0u);
  // Re-encode from what the decoder read: the same words.
  std::vector<Task> again;
  for (const DecodedTask& d : dec) {
    Task t;
    t.enable_mask = d.enable_mask;
    for (const auto& [i, w] : d.writes) t.regs.set(Reg{w.target, w.offset}, w.value);
    again.push_back(t);
  }
  auto words2 = encode(again, 0x8000);
  ASSERT_TRUE(words2.ok());
  EXPECT_EQ(*words2, *words);
  EXPECT_EQ(register_amount(20), 9u);  // (20 + 1) / 2 - 1
}

TEST(Regcmd, DecoderReportsWhatDoesNotFitWithoutFailing) {
  std::vector<uint64_t> w = {
      pack(Word{0x0201, 0x100c, 0}),              // CNA.CONV_CON1, fine
      pack(Word{0x1001, 0x100c, 0}),              // DPU target writing CNA's offset
      pack(Word{0x0201, 0x1ffc, 0}),              // no register there
      pack(Word{0x7777, 0x4040, 0}),              // unknown target
      pack(Word{kOpEnableTarget, 0x0008, 0x1d}),  // enable without trailer
      pack(Word{0x0201, 0x1070, 0x1234}),         // a second task that never ends
  };
  const auto d = decode(w);
  ASSERT_EQ(d.size(), 2u);
  const std::string all = [&] {
    std::string s;
    for (const auto& t : d)
      for (const auto& p : t.problems) s += p + "\n";
    return s;
  }();
  EXPECT_NE(all.find("target DPU writes CNA's offset"), std::string::npos) << all;
  EXPECT_NE(all.find("no register at 0x1ffc"), std::string::npos) << all;
  EXPECT_NE(all.find("unknown target 0x7777"), std::string::npos) << all;
  EXPECT_NE(all.find("without the 4-word trailer"), std::string::npos) << all;
  EXPECT_NE(all.find("no enable word ends this task"), std::string::npos) << all;
  EXPECT_FALSE(d[1].has_trailer);
  EXPECT_NE(disassemble(d).find("CNA.FEATURE_DATA_ADDR"), std::string::npos);
}

TEST(Regcmd, FilesAreRawWordsOrHexTextWithClearErrors) {
  const std::vector<uint8_t> raw = {0x0c, 0x10, 0x78, 0x56, 0x34, 0x12, 0x01, 0x02};
  auto r = parse_regcmd_bytes(raw, "raw.bin");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0], 0x020112345678100cull);
  const std::string text = "# captured\n0x020112345678100c\n  0041000000000000  # constant\n\n";
  auto t = parse_regcmd_bytes(std::vector<uint8_t>(text.begin(), text.end()), "cap.txt");
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[1], kTrailerConstantWord);
  auto bad = parse_regcmd_bytes(std::vector<uint8_t>{1, 2, 3}, "short.bin");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("short.bin: 3 bytes"), std::string::npos);
  const std::string nothex = "0x12\nzz\n";
  auto bt = parse_regcmd_bytes(std::vector<uint8_t>(nothex.begin(), nothex.end()), "cap.txt");
  ASSERT_FALSE(bt.ok());
  EXPECT_NE(bt.error().message.find("cap.txt: line 2"), std::string::npos) << bt.error().message;
}

TEST(Regcmd, DiffNamesTheRegisterAndTheFieldsThatDiffer) {
  std::vector<Task> a = {conv_task(0x1000, 0x20000, 0x40000, 1)};
  std::vector<Task> b = a;
  ASSERT_TRUE(b[0].regs.set(CNA_CONV_CON3_CONV_X_STRIDE, 2).ok());
  b[0].regs.set(DPU_OUT_CVT_OFFSET, 5);
  const auto da = decode(*encode(a, 0));
  const auto db = decode(*encode(b, 0));
  const auto d = diff(da, db);
  ASSERT_EQ(d.size(), 2u);
  const std::string s = diff_text(d, 1, 1);
  EXPECT_NE(s.find("CNA.CONV_CON3"), std::string::npos) << s;
  EXPECT_NE(s.find("CONV_X_STRIDE 1 -> 2"), std::string::npos) << s;
  EXPECT_NE(s.find("DPU.OUT_CVT_OFFSET  only in B"), std::string::npos) << s;
  EXPECT_TRUE(diff(da, da).empty());
}

}  // namespace
}  // namespace rkd::npu::regcmd
