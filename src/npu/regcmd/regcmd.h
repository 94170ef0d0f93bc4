// Register commands (regcmd): the 64-bit words the NPU's front end (PC) fetches.
//
// Word format (little-endian uint64): bits 63..48 target (the block: 0x0101 PC, 0x0201 CNA,
// 0x0801 CORE, 0x1001 DPU, 0x2001 DPU_RDMA, 0x4001 PPU, 0x8001 PPU_RDMA), bits 47..16 the
// 32-bit value, bits 15..0 the absolute register offset.
//
// A task is its register writes followed by a 4-word trailer:
//   1. PC.BASE_ADDRESS = device address of the next task's words (16-byte aligned), or an
//      all-zero word for the last task;
//   2. PC.REGISTER_AMOUNTS = the next task's size, (words + 1) / 2 - 1 (0 for the last);
//   3. the constant word 0x0041000000000000;
//   4. target 0x0081, offset 0x0008 (PC.OPERATION_ENABLE) = the enable mask (0x1D for a
//      convolution: CNA, CORE, DPU, DPU_RDMA).
// Every task is padded with all-zero words before its trailer to a multiple of two words,
// so that the next task starts 16-byte aligned (rkdeploy's choice [INF]; the PC reads
// 128-bit units). Tasks carry full register sets: the hardware does not keep values from
// the previous task's writes [HW], so the encoder writes every register of a task's shadow
// register file, in offset order, whether or not it changed.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "npu/arch/arch.h"

namespace rkd::npu::regcmd {

struct Word {
  uint16_t target = 0;
  uint16_t offset = 0;
  uint32_t value = 0;
  bool operator==(const Word&) const = default;
};
uint64_t pack(Word w);
Word unpack(uint64_t bits);

// A task's shadow register file: offset -> value, every register the task needs.
class RegisterFile {
 public:
  // Sets a field (other bits of the register kept); fails naming the field when v does not fit.
  Status set(const arch::Field& f, uint64_t v);
  void set(const arch::Reg& r, uint32_t value);
  uint32_t get(const arch::Reg& r) const;
  uint32_t get(const arch::Field& f) const { return f.get(get(arch::Reg{f.target, f.offset})); }
  bool has(uint16_t offset) const { return values_.count(offset) > 0; }
  // offset -> (target, value), in offset order.
  const std::map<uint16_t, std::pair<uint16_t, uint32_t>>& values() const { return values_; }

 private:
  std::map<uint16_t, std::pair<uint16_t, uint32_t>> values_;
};

struct Task {
  RegisterFile regs;
  uint32_t enable_mask = arch::kConvEnableMask;
  // Writes that must reach the hardware in this order, before the register file's: the DPU
  // lookup-table upload (LUT_ACCESS_CFG, then one LUT_ACCESS_DATA word per entry), where
  // one register is written many times.
  std::vector<Word> stream;
};

// Where each task's words sit in an encoded buffer.
struct TaskSpan {
  size_t first_word = 0, word_count = 0;
  uint32_t address = 0;  // device address of the first word
};

// The chained buffer for tasks whose words start at device address `base` (16-byte aligned).
Result<std::vector<uint64_t>> encode(const std::vector<Task>& tasks, uint32_t base, std::vector<TaskSpan>* spans = nullptr);
// PC.REGISTER_AMOUNTS for a task of `words` 64-bit words.
uint32_t register_amount(size_t words);

// One decoded task. A buffer whose last words do not end with an enable word yields a final
// task with has_trailer = false.
struct DecodedTask {
  size_t first_word = 0, word_count = 0;
  std::vector<std::pair<size_t, Word>> writes;  // (word index, word): the register writes
  size_t padding_words = 0;                     // all-zero words before the trailer
  bool has_trailer = false;
  uint32_t next_address = 0, next_amount = 0, enable_mask = 0;
  bool next_is_zero_word = false;     // trailer word 1 was the all-zero word (end of chain)
  std::vector<std::string> problems;  // words out of place, unknown registers, wrong targets
  // The register values after the writes, in order (later writes win): offset -> value.
  std::map<uint16_t, uint32_t> final_values() const;
};

// Splits a buffer into tasks at their enable words and checks each word against the map.
// Never fails on content: what does not fit is listed in DecodedTask::problems.
std::vector<DecodedTask> decode(std::span<const uint64_t> words);

// Refuses (invalid, naming `what`) a buffer with no words, or one where more register writes
// name no block or register of the map than name one: random or unrelated bytes, not
// register commands (decoding them would list noise as register writes).
Status check_register_commands(std::span<const uint64_t> words, const std::string& what);

// Reads a regcmd file: raw little-endian 64-bit words (size a multiple of 8), or text with
// one hexadecimal word per line ("0x" optional; '#' starts a comment), that passes
// check_register_commands. Errors name the file and the line or byte count.
Result<std::vector<uint64_t>> read_regcmd_file(const std::string& path);
Result<std::vector<uint64_t>> parse_regcmd_bytes(std::span<const uint8_t> bytes, const std::string& what);

// Text disassembly: one line per word with block, register, value and named fields.
std::string disassemble(const std::vector<DecodedTask>& tasks);
// JSON (docs/regcmd.md): {"tasks": [{"index", "first_word", "words", "trailer", "writes":
// [{"word", "block", "register", "offset", "value", "fields": {name: value}}], "problems"}]}.
std::string to_json(const std::vector<DecodedTask>& tasks);

// Register-level differences of two buffers, task by task (final register values), with
// the fields that differ. Empty when the buffers program the same values.
struct RegisterDiff {
  size_t task = 0;
  uint16_t offset = 0;
  bool in_a = false, in_b = false;
  uint32_t a = 0, b = 0;
};
std::vector<RegisterDiff> diff(const std::vector<DecodedTask>& a, const std::vector<DecodedTask>& b);
std::string diff_text(const std::vector<RegisterDiff>& d, size_t tasks_a, size_t tasks_b);
std::string diff_json(const std::vector<RegisterDiff>& d, size_t tasks_a, size_t tasks_b);

}  // namespace rkd::npu::regcmd
