#include "npu/regcmd/regcmd.h"

#include <cctype>

#include "core/npy.h"

namespace rkd::npu::regcmd {

namespace {

constexpr uint16_t kPcEnableOffset = 0x0008;

bool is_enable(Word w) { return w.target == arch::kOpEnableTarget && w.offset == kPcEnableOffset; }

}  // namespace

uint64_t pack(Word w) { return (static_cast<uint64_t>(w.target) << 48) | (static_cast<uint64_t>(w.value) << 16) | w.offset; }

Word unpack(uint64_t bits) {
  return Word{static_cast<uint16_t>(bits >> 48), static_cast<uint16_t>(bits & 0xffff), static_cast<uint32_t>((bits >> 16) & 0xffffffffu)};
}

Status RegisterFile::set(const arch::Field& f, uint64_t v) {
  auto it = values_.find(f.offset);
  const uint32_t old = it == values_.end() ? 0 : it->second.second;
  RKD_ASSIGN(uint32_t nv, arch::with_field(old, f, v));
  values_[f.offset] = {f.target, nv};
  return {};
}

void RegisterFile::set(const arch::Reg& r, uint32_t value) { values_[r.offset] = {r.target, value}; }

uint32_t RegisterFile::get(const arch::Reg& r) const {
  auto it = values_.find(r.offset);
  return it == values_.end() ? 0 : it->second.second;
}

uint32_t register_amount(size_t words) { return static_cast<uint32_t>((words + 1) / 2 - 1); }

Result<std::vector<uint64_t>> encode(const std::vector<Task>& tasks, uint32_t base, std::vector<TaskSpan>* spans) {
  if (base % 16 != 0) return invalid("regcmd: base address " + std::to_string(base) + " is not 16-byte aligned");
  // Sizes first: every task's trailer needs the next task's address and size.
  std::vector<size_t> sizes;
  for (size_t t = 0; t < tasks.size(); ++t) {
    if (tasks[t].regs.values().empty()) return invalid("regcmd: task " + std::to_string(t) + " writes no register");
    const size_t body = tasks[t].stream.size() + tasks[t].regs.values().size();
    sizes.push_back((body + 1) / 2 * 2 + 4);
  }
  std::vector<uint64_t> out;
  std::vector<TaskSpan> local;
  uint64_t address = base;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const size_t first = out.size();
    for (const Word& w : tasks[t].stream) out.push_back(pack(w));
    for (const auto& [offset, tv] : tasks[t].regs.values()) out.push_back(pack(Word{tv.first, offset, tv.second}));
    while ((out.size() - first) % 2 != 0) out.push_back(0);
    const uint64_t next = address + sizes[t] * 8;
    if (next > 0xffffffffull) return invalid("regcmd: the chain does not fit a 32-bit device address");
    const bool last = t + 1 == tasks.size();
    out.push_back(last ? 0 : pack(Word{arch::PC_BASE_ADDRESS.target, arch::PC_BASE_ADDRESS.offset, static_cast<uint32_t>(next)}));
    out.push_back(pack(Word{arch::PC_REGISTER_AMOUNTS.target, arch::PC_REGISTER_AMOUNTS.offset, last ? 0 : register_amount(sizes[t + 1])}));
    out.push_back(arch::kTrailerConstantWord);
    out.push_back(pack(Word{arch::kOpEnableTarget, kPcEnableOffset, tasks[t].enable_mask}));
    local.push_back(TaskSpan{first, out.size() - first, static_cast<uint32_t>(address)});
    address = next;
  }
  if (spans) *spans = std::move(local);
  return out;
}

std::map<uint16_t, uint32_t> DecodedTask::final_values() const {
  std::map<uint16_t, uint32_t> v;
  for (const auto& [i, w] : writes) v[w.offset] = w.value;
  return v;
}

std::vector<DecodedTask> decode(std::span<const uint64_t> words) {
  std::vector<DecodedTask> tasks;
  size_t start = 0;
  auto hex = [](uint64_t v, int digits) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
    return std::string(buf);
  };
  for (size_t i = 0; i <= words.size(); ++i) {
    const bool end = i == words.size();
    if (!end && !is_enable(unpack(words[i]))) continue;
    if (end && start == words.size()) break;
    DecodedTask t;
    t.first_word = start;
    t.word_count = (end ? words.size() : i + 1) - start;
    t.has_trailer = !end;
    // The trailer: the 3 words before the enable word.
    size_t body_end = end ? words.size() : i;
    if (t.has_trailer) {
      t.enable_mask = unpack(words[i]).value;
      if (i >= start + 3 && words[i - 1] == arch::kTrailerConstantWord) {
        const Word amount = unpack(words[i - 2]);
        const Word next = unpack(words[i - 3]);
        const bool amount_ok = amount.target == arch::PC_REGISTER_AMOUNTS.target && amount.offset == arch::PC_REGISTER_AMOUNTS.offset;
        const bool next_ok = words[i - 3] == 0 || (next.target == arch::PC_BASE_ADDRESS.target && next.offset == arch::PC_BASE_ADDRESS.offset);
        if (amount_ok && next_ok) {
          t.next_amount = amount.value;
          t.next_address = words[i - 3] == 0 ? 0 : next.value;
          t.next_is_zero_word = words[i - 3] == 0;
          body_end = i - 3;
        } else {
          t.problems.push_back("word " + std::to_string(i) + ": the enable word's trailer is not PC.BASE_ADDRESS, PC.REGISTER_AMOUNTS, " +
                               hex(arch::kTrailerConstantWord, 16));
        }
      } else {
        t.problems.push_back("word " + std::to_string(i) + ": enable word without the 4-word trailer");
      }
    } else {
      t.problems.push_back("words " + std::to_string(start) + ".." + std::to_string(words.size() - 1) + ": no enable word ends this task");
    }
    for (size_t k = start; k < body_end; ++k) {
      if (words[k] == 0) {
        ++t.padding_words;
        continue;
      }
      const Word w = unpack(words[k]);
      t.writes.emplace_back(k, w);
      const arch::BlockDesc* tb = arch::block_of_target(w.target);
      const arch::BlockDesc* ob = arch::block_of_offset(w.offset);
      if (!tb) {
        t.problems.push_back("word " + std::to_string(k) + ": unknown target " + hex(w.target, 4));
      } else if (ob && ob != tb) {
        t.problems.push_back("word " + std::to_string(k) + ": target " + tb->name + " writes " + ob->name + "'s offset " + hex(w.offset, 4));
      }
      if (!arch::register_at(w.offset)) t.problems.push_back("word " + std::to_string(k) + ": no register at " + hex(w.offset, 4) + " in the map");
    }
    tasks.push_back(std::move(t));
    start = i + 1;
  }
  return tasks;
}

Result<std::vector<uint64_t>> parse_regcmd_bytes(std::span<const uint8_t> bytes, const std::string& what) {
  // Text when every byte is printable or whitespace and the first token is hexadecimal.
  bool text = !bytes.empty();
  for (uint8_t c : bytes) text = text && (std::isprint(c) || std::isspace(c));
  std::vector<uint64_t> words;
  if (text) {
    std::string line;
    size_t line_no = 0;
    auto flush = [&]() -> Status {
      ++line_no;
      std::string s = line.substr(0, line.find('#'));
      size_t a = 0;
      while (a < s.size() && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
      size_t b = s.size();
      while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
      s = s.substr(a, b - a);
      if (s.empty()) return {};
      if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s = s.substr(2);
      if (s.empty() || s.size() > 16) return invalid(what + ": line " + std::to_string(line_no) + ": expected one 64-bit hexadecimal word");
      uint64_t v = 0;
      for (char c : s) {
        if (!std::isxdigit(static_cast<unsigned char>(c))) {
          return invalid(what + ": line " + std::to_string(line_no) + ": '" + s + "' is not a hexadecimal word");
        }
        v = v * 16 + static_cast<uint64_t>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : std::tolower(c) - 'a' + 10);
      }
      words.push_back(v);
      return {};
    };
    for (uint8_t c : bytes) {
      if (c == '\n') {
        RKD_TRY(flush());
        line.clear();
      } else {
        line.push_back(static_cast<char>(c));
      }
    }
    if (!line.empty()) RKD_TRY(flush());
    return words;
  }
  if (bytes.size() % 8 != 0) {
    return invalid(what + ": " + std::to_string(bytes.size()) + " bytes is not a whole number of 64-bit words");
  }
  for (size_t i = 0; i < bytes.size(); i += 8) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; --k) v = (v << 8) | bytes[i + static_cast<size_t>(k)];
    words.push_back(v);
  }
  return words;
}

Status check_register_commands(std::span<const uint64_t> words, const std::string& what) {
  if (words.empty()) return invalid(what + ": holds no register-command words");
  size_t known = 0, unknown = 0;
  for (const auto& t : decode(words)) {
    for (const auto& [k, w] : t.writes) {
      const bool ok = arch::block_of_target(w.target) && arch::register_at(w.offset);
      ++(ok ? known : unknown);
    }
  }
  if (unknown > known) {
    return invalid(what + ": " + std::to_string(unknown) + " of its " + std::to_string(known + unknown) +
                   " register writes name no RK3588 NPU block or register: not a register-command buffer");
  }
  return {};
}

Result<std::vector<uint64_t>> read_regcmd_file(const std::string& path) {
  RKD_ASSIGN(const std::string data, read_file_bytes(path));
  RKD_ASSIGN(auto words, parse_regcmd_bytes(std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()), path));
  RKD_TRY(check_register_commands(words, path));
  return words;
}

std::vector<RegisterDiff> diff(const std::vector<DecodedTask>& a, const std::vector<DecodedTask>& b) {
  std::vector<RegisterDiff> out;
  for (size_t t = 0; t < std::max(a.size(), b.size()); ++t) {
    const auto va = t < a.size() ? a[t].final_values() : std::map<uint16_t, uint32_t>{};
    const auto vb = t < b.size() ? b[t].final_values() : std::map<uint16_t, uint32_t>{};
    std::map<uint16_t, RegisterDiff> m;
    for (const auto& [o, v] : va) m[o] = RegisterDiff{t, o, true, false, v, 0};
    for (const auto& [o, v] : vb) {
      RegisterDiff& d = m[o];
      d.task = t;
      d.offset = o;
      d.in_b = true;
      d.b = v;
    }
    for (const auto& [o, d] : m) {
      if (d.in_a != d.in_b || d.a != d.b) out.push_back(d);
    }
  }
  return out;
}

}  // namespace rkd::npu::regcmd
