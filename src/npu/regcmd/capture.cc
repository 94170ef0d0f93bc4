#include "npu/regcmd/capture.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/json_fields.h"
#include "core/npy.h"

namespace rkd::npu::regcmd {

namespace fs = std::filesystem;

namespace {

Result<nlohmann::ordered_json> read_json(const fs::path& p) {
  RKD_ASSIGN(const std::string text, read_file_bytes(p.string()));
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid(p.string() + ": not JSON");
  return j;
}

Result<SourceTask> task_file(const fs::path& dir, const std::string& index, const std::string& rel) {
  if (rel.empty() || rel.find("..") != std::string::npos || rel.front() == '/')
    return invalid((dir / index).string() + ": task file '" + rel + "' is not a path inside the directory");
  RKD_ASSIGN(auto words, read_regcmd_file((dir / rel).string()));
  return SourceTask{rel, std::move(words)};
}

void collect_regcmd(const nlohmann::ordered_json& j, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "regcmd" && it.value().is_string()) out.push_back(it.value().get<std::string>());
      else collect_regcmd(it.value(), out);
    }
  } else if (j.is_array()) {
    for (const auto& x : j) collect_regcmd(x, out);
  }
}

}  // namespace

Result<std::vector<SourceTask>> read_tasks(const std::string& path) {
  const fs::path p(path);
  std::vector<SourceTask> tasks;
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "index.json")) {
      RKD_ASSIGN(nlohmann::ordered_json idx, read_json(p / "index.json"));
      const std::string where = (p / "index.json").string();
      // Typed reads: a field of another JSON type is this file's error, not an exception
      // (nlohmann's value() throws on a type mismatch; a fuzz_capture finding).
      std::string format;
      if (idx.is_object()) RKD_TRY(json_string(idx, "format", format, where + ": \"format\""));
      if (format != "rkdeploy-capture" || !idx.contains("submits") || !idx["submits"].is_array())
        return invalid(where + ": not a capture index (format \"rkdeploy-capture\" with \"submits\")");
      for (const auto& s : idx["submits"]) {
        if (!s.is_object() || !s.contains("jobs") || !s["jobs"].is_array()) return invalid(where + ": a submit without jobs");
        int64_t index = -1;
        RKD_TRY(json_integer(s, "index", index, where + ": a submit's \"index\""));
        for (const auto& j : s["jobs"]) {
          if (!j.is_object() || !j.contains("tasks") || !j["tasks"].is_array()) return invalid(where + ": a job without tasks");
          for (const auto& t : j["tasks"]) {
            if (!t.is_object() || !t.contains("file") || !t["file"].is_string()) {
              std::string problem = t.is_object() ? "no file" : "not an object";
              if (t.is_object()) RKD_TRY(json_string(t, "problem", problem, where + ": a task's \"problem\""));
              return invalid(where + ": submit " + std::to_string(index) + ": a task whose words were not captured (" + problem + ")");
            }
            RKD_ASSIGN(SourceTask st, task_file(p, "index.json", t["file"].get<std::string>()));
            tasks.push_back(std::move(st));
          }
        }
      }
      return tasks;
    }
    if (fs::exists(p / "manifest.json")) {
      RKD_ASSIGN(nlohmann::ordered_json m, read_json(p / "manifest.json"));
      std::vector<std::string> files;
      collect_regcmd(m, files);
      if (files.empty()) return invalid((p / "manifest.json").string() + ": names no regcmd files");
      for (const auto& f : files) {
        RKD_ASSIGN(SourceTask st, task_file(p, "manifest.json", f));
        tasks.push_back(std::move(st));
      }
      return tasks;
    }
    return io_error(path + ": is a directory, with neither index.json (a capture) nor manifest.json (rkdeploy compile)");
  }
  RKD_ASSIGN(auto words, read_regcmd_file(path));
  const auto decoded = decode(words);
  for (size_t i = 0; i < decoded.size(); ++i) {
    const auto& d = decoded[i];
    tasks.push_back(SourceTask{
        path + "#" + std::to_string(i),
        std::vector<uint64_t>(words.begin() + static_cast<long>(d.first_word), words.begin() + static_cast<long>(d.first_word + d.word_count))});
  }
  return tasks;
}

std::vector<uint64_t> concatenated(const std::vector<SourceTask>& tasks) {
  std::vector<uint64_t> w;
  for (const auto& t : tasks) w.insert(w.end(), t.words.begin(), t.words.end());
  return w;
}

std::string summary_json(const std::vector<DecodedTask>& tasks, const std::string& source) {
  using namespace arch;
  std::vector<nlohmann::ordered_json> layers;
  size_t other = 0;
  struct Key {
    uint32_t weights, C, W, K, stride, depthwise;
    bool operator==(const Key&) const = default;
  };
  Key last{};
  bool open = false;
  size_t first = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const auto& t = tasks[i];
    if (!t.has_trailer || t.enable_mask != kConvEnableMask) {
      ++other;
      open = false;
      continue;
    }
    const auto v = t.final_values();
    auto get = [&](const Field& f) -> uint32_t {
      auto it = v.find(f.offset);
      return it == v.end() ? 0 : f.get(it->second);
    };
    const Key k{get(CNA_DCOMP_ADDR0_DECOMPRESS_ADDR0), get(CNA_DATA_SIZE1_DATAIN_CHANNEL), get(CNA_DATA_SIZE0_DATAIN_WIDTH),
                get(CNA_WEIGHT_SIZE2_WEIGHT_WIDTH),    get(CNA_CONV_CON3_CONV_X_STRIDE),   get(CNA_CONV_CON1_CONV_MODE) == 3 ? 1u : 0u};
    if (!open || !(k == last)) {
      layers.push_back({{"tasks", ""},
                        {"C", k.C},
                        {"W", k.W},
                        {"K", k.K},
                        {"stride", k.stride},
                        {"pad", get(CNA_PAD_CON0_PAD_TOP)},
                        {"depthwise", k.depthwise == 1},
                        {"weight_bytes", get(CNA_WEIGHT_SIZE0_WEIGHT_BYTES)},
                        {"data_banks", get(CNA_CBUF_CON0_DATA_BANK)},
                        {"weight_banks", get(CNA_CBUF_CON0_WEIGHT_BANK)},
                        {"in_rows", nlohmann::json::array()},
                        {"out_rows", nlohmann::json::array()}});
      first = i;
      open = true;
      last = k;
    }
    auto& l = layers.back();
    l["tasks"] = std::to_string(first) + "-" + std::to_string(i);
    l["in_rows"].push_back(get(CNA_DATA_SIZE0_DATAIN_HEIGHT));
    l["out_rows"].push_back(get(DPU_DATA_CUBE_HEIGHT_HEIGHT) + 1);
  }
  // One line per layer (the vendor_tiling.json style).
  std::string out = "{\"source\": " + nlohmann::json(source).dump() + ", \"tasks\": " + std::to_string(tasks.size()) +
                    ", \"other_tasks\": " + std::to_string(other) + ",\n \"layers\": [";
  for (size_t i = 0; i < layers.size(); ++i) out += (i ? ",\n  " : "\n  ") + layers[i].dump();
  return out + (layers.empty() ? "]}\n" : "\n ]}\n");
}

}  // namespace rkd::npu::regcmd
