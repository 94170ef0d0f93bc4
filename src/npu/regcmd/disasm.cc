// Text and JSON views of decoded regcmd buffers, and register-level differences.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "npu/regcmd/regcmd.h"
#include "core/json_style.h"

namespace rkd::npu::regcmd {

namespace {

std::string hex(uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

// "CONV_MODE=0 IN_PRECISION=2": every described field of the register at `offset`.
std::string fields_text(uint16_t offset, uint32_t value) {
  const arch::RegisterDesc* r = arch::register_at(offset);
  if (!r) return "";
  std::string s;
  for (uint16_t f = r->first_field; f < r->first_field + r->field_count; ++f) {
    const arch::FieldDesc& fd = arch::kFields[f];
    const uint32_t width = static_cast<uint32_t>(fd.hi - fd.lo + 1);
    const uint64_t mask = (uint64_t{1} << width) - 1;
    const uint64_t v = (value >> fd.lo) & mask;
    if (!s.empty()) s += ' ';
    s += fd.name;
    s += '=';
    s += width > 8 ? hex(v, 1) : std::to_string(v);
  }
  return s;
}

nlohmann::ordered_json fields_json(uint16_t offset, uint32_t value) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (const arch::RegisterDesc* r = arch::register_at(offset)) {
    for (uint16_t f = r->first_field; f < r->first_field + r->field_count; ++f) {
      const arch::FieldDesc& fd = arch::kFields[f];
      const uint64_t mask = (uint64_t{1} << (fd.hi - fd.lo + 1)) - 1;
      j[fd.name] = (value >> fd.lo) & mask;
    }
  }
  return j;
}

}  // namespace

std::string disassemble(const std::vector<DecodedTask>& tasks) {
  std::string out;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const DecodedTask& d = tasks[t];
    out += "task " + std::to_string(t) + ": words " + std::to_string(d.first_word) + ".." + std::to_string(d.first_word + d.word_count - 1) + ", " +
           std::to_string(d.writes.size()) + " register writes";
    if (d.padding_words) out += ", " + std::to_string(d.padding_words) + " padding";
    out += "\n";
    for (const auto& [i, w] : d.writes) {
      char head[96];
      const arch::BlockDesc* b = arch::block_of_target(w.target);
      std::snprintf(head, sizeof head, "  %5zu  %-8s %-32s %s  ", i, b ? b->name : hex(w.target, 4).c_str(), arch::register_name(w.offset).c_str(),
                    hex(w.value, 8).c_str());
      out += head + fields_text(w.offset, w.value) + "\n";
    }
    if (d.has_trailer) {
      out += "  trailer: next " + (d.next_is_zero_word ? std::string("none (end of chain)") : hex(d.next_address, 8)) + ", next amount " +
             std::to_string(d.next_amount) + ", enable " + hex(d.enable_mask, 2) + "\n";
    }
    for (const std::string& p : d.problems) out += "  problem: " + p + "\n";
  }
  return out;
}

std::string to_json(const std::vector<DecodedTask>& tasks) {
  nlohmann::ordered_json j;
  j["tasks"] = nlohmann::ordered_json::array();
  for (size_t t = 0; t < tasks.size(); ++t) {
    const DecodedTask& d = tasks[t];
    nlohmann::ordered_json jt;
    jt["index"] = t;
    jt["first_word"] = d.first_word;
    jt["words"] = d.word_count;
    jt["padding_words"] = d.padding_words;
    if (d.has_trailer) {
      jt["trailer"] = {{"next_address", d.next_is_zero_word ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(d.next_address)},
                       {"next_amount", d.next_amount},
                       {"enable_mask", d.enable_mask}};
    } else {
      jt["trailer"] = nullptr;
    }
    jt["writes"] = nlohmann::ordered_json::array();
    for (const auto& [i, w] : d.writes) {
      const arch::BlockDesc* b = arch::block_of_target(w.target);
      const arch::RegisterDesc* r = arch::register_at(w.offset);
      jt["writes"].push_back({{"word", i},
                              {"target", w.target},
                              {"block", b ? nlohmann::ordered_json(b->name) : nlohmann::ordered_json(nullptr)},
                              {"offset", w.offset},
                              {"register", r ? nlohmann::ordered_json(r->name) : nlohmann::ordered_json(nullptr)},
                              {"value", w.value},
                              {"fields", fields_json(w.offset, w.value)}});
    }
    jt["problems"] = d.problems;
    j["tasks"].push_back(jt);
  }
  return json_text(j);
}

std::string diff_text(const std::vector<RegisterDiff>& d, size_t tasks_a, size_t tasks_b) {
  std::string out;
  if (tasks_a != tasks_b) out += "tasks: " + std::to_string(tasks_a) + " in A, " + std::to_string(tasks_b) + " in B\n";
  for (const RegisterDiff& r : d) {
    out += "task " + std::to_string(r.task) + "  " + arch::register_name(r.offset) + "  ";
    if (!r.in_a) {
      out += "only in B: " + hex(r.b, 8) + "  " + fields_text(r.offset, r.b) + "\n";
      continue;
    }
    if (!r.in_b) {
      out += "only in A: " + hex(r.a, 8) + "  " + fields_text(r.offset, r.a) + "\n";
      continue;
    }
    out += hex(r.a, 8) + " -> " + hex(r.b, 8);
    // The fields that differ.
    if (const arch::RegisterDesc* desc = arch::register_at(r.offset)) {
      for (uint16_t f = desc->first_field; f < desc->first_field + desc->field_count; ++f) {
        const arch::FieldDesc& fd = arch::kFields[f];
        const uint64_t mask = (uint64_t{1} << (fd.hi - fd.lo + 1)) - 1;
        const uint64_t fa = (r.a >> fd.lo) & mask, fb = (r.b >> fd.lo) & mask;
        if (fa != fb) out += "  " + std::string(fd.name) + " " + std::to_string(fa) + " -> " + std::to_string(fb);
      }
    }
    out += "\n";
  }
  if (d.empty() && tasks_a == tasks_b) out += "no register differences in " + std::to_string(tasks_a) + " tasks\n";
  return out;
}

std::string diff_json(const std::vector<RegisterDiff>& d, size_t tasks_a, size_t tasks_b) {
  nlohmann::ordered_json j;
  j["tasks_a"] = tasks_a;
  j["tasks_b"] = tasks_b;
  j["differences"] = nlohmann::ordered_json::array();
  for (const RegisterDiff& r : d) {
    const arch::RegisterDesc* desc = arch::register_at(r.offset);
    nlohmann::ordered_json jr = {{"task", r.task}, {"offset", r.offset}, {"register", arch::register_name(r.offset)}};
    jr["a"] = r.in_a ? nlohmann::ordered_json(r.a) : nlohmann::ordered_json(nullptr);
    jr["b"] = r.in_b ? nlohmann::ordered_json(r.b) : nlohmann::ordered_json(nullptr);
    nlohmann::ordered_json fields = nlohmann::ordered_json::object();
    if (desc && r.in_a && r.in_b) {
      for (uint16_t f = desc->first_field; f < desc->first_field + desc->field_count; ++f) {
        const arch::FieldDesc& fd = arch::kFields[f];
        const uint64_t mask = (uint64_t{1} << (fd.hi - fd.lo + 1)) - 1;
        const uint64_t fa = (r.a >> fd.lo) & mask, fb = (r.b >> fd.lo) & mask;
        if (fa != fb) fields[fd.name] = {fa, fb};
      }
    }
    jr["fields"] = fields;
    j["differences"].push_back(jr);
  }
  return json_text(j);
}

}  // namespace rkd::npu::regcmd
