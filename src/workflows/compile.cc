#include "workflows/compile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "core/json_style.h"
#include "core/npy.h"
#include "ir/op_info.h"
#include "npu/regcmd/regcmd.h"
#include "plan/plan.h"
#include "runtime/artifact.h"
#include "runtime/detect.h"
#include "runtime/executor.h"
#include "runtime/model.h"
#include "runtime/npu_conv.h"
#include "runtime/npu_ops.h"
#include "workflows/plan.h"

namespace rkd::workflows {

using namespace runtime;  // NOLINT: the layer below (executor, model loading, detector pre- and post-processing)

namespace {

namespace fs = std::filesystem;
using Manifest = nlohmann::ordered_json;

// The graph `run --backend sim` (or device, mainline) executes: compile lists on the NPU exactly
// what the runtime's placement puts there, and every other node with the placement's reason.
Result<ir::Graph> placed_graph(const std::string& model, npu::lower::Strategy strategy, bool mainline, ir::FusionReport& placement) {
  RKD_ASSIGN(ImportedModel imp, import_model(model, 1));
  ir::Graph g = std::move(imp.graph);
  CompileOptions co;
  co.int8 = true;
  co.channels_last = false;  // the NPU nodes' NCHW geometry is what the manifest describes
  co.npu_strategy = strategy;
  co.npu_mainline = mainline;
  RKD_TRY(optimize(g, co, &placement));
  const bool any_npu = std::any_of(g.nodes().begin(), g.nodes().end(), [](const auto& np) { return npu_family_of(*np) != nullptr; });
  bool any_candidate = any_npu;
  for (const NpuOpFamily& f : npu_op_families())
    for (const auto& np : g.nodes()) any_candidate = any_candidate || f.candidate(*np);
  if (!any_candidate) {
    return unsupported(model + ": no int8 operation to lower (a float model? rkdeploy quantize writes a QDQ model; docs/quantization.md)");
  }
  return g;
}

// An Identity: the value under another name, no computation (a dropped DequantizeLinear ->
// QuantizeLinear pair leaves one between two NPU nodes as readily as between CPU ones).
bool is_view(const ir::Node& n) { return ir::op_has(n, ir::kView) && n.op_type == "Identity"; }

// The manifest's fields before the nodes.
Manifest manifest_header(const std::string& model, npu::lower::Strategy strategy, uint64_t device_base, int cores, bool mainline) {
  Manifest man;
  man["written_by"] = kCompileWrittenBy;
  man["target"] = npu::arch::kRk3588.name;
  man["strategy"] = npu::lower::strategy_name(strategy);
  man["model"] = model;
  man["device_base"] = device_base;
  man["cores"] = cores;
  man["mainline"] = mainline;
  man["convolutions"] = Manifest::array();
  man["cpu"] = Manifest::array();
  man["views"] = Manifest::array();
  man["elementwise"] = Manifest::array();
  return man;
}

// An NPU node: lowered into the session (the runtime's own lowering, in graph order), its entry
// in its family's section with its files under ENTRYnnn/.
Status add_npu_node(const ir::Node& n, const NpuOpFamily& f, const std::shared_ptr<NpuSession>& session, const fs::path& dir, int cores,
                    Manifest& man, std::vector<std::pair<std::string, std::function<bool()>>>& host_reads, NpuCompileSummary& sum) {
  RKD_ASSIGN(auto ln, lower_npu_node(n, session));
  Manifest& section = man[f.section];
  const size_t index = section.size();
  NpuManifestContext c;
  c.mem = &npu_session_memory(*session);
  c.directory = npu_numbered(f.entry_prefix, index);
  c.cores = cores;
  std::error_code ec;
  fs::create_directories(dir / c.directory, ec);
  c.write = [&dir](const std::string& relative, std::span<const uint8_t> bytes) { return write_file_atomic((dir / relative).string(), bytes); };
  const std::string at = "/" + std::string(f.section) + "/" + std::to_string(index);
  c.host_reads = [&host_reads, &at](const std::string& rel, std::function<bool()> reads) { host_reads.emplace_back(at + rel, std::move(reads)); };
  RKD_ASSIGN(Manifest entry, f.manifest(n, *ln, c));
  // Its work against the least it needs (plan::npu_work, as `plan` reports it; the lowering's
  // elements are int8: one byte each): the next inefficiency.
  RKD_ASSIGN(const plan::NpuNodeCost cost, npu_node_cost(*session, *ln, cores));
  const plan::NpuWork w = plan::npu_work(plan::node_macs(n).value_or(0), plan::node_traffic(n, 1), cost);
  entry["work"] = {{"macs", w.macs},   {"padded_macs", w.padded_macs}, {"mac_utilization", w.mac_utilization()},
                   {"bytes", w.bytes}, {"min_bytes", w.min_bytes},     {"traffic_ratio", w.traffic_ratio()}};
  section.push_back(std::move(entry));
  (ln->conv ? sum.convs_on_npu : sum.eltwise_on_npu) += 1;
  sum.tasks += static_cast<int>(ln->regcmd.spans.size());
  sum.regcmd_words += ln->regcmd.words.size();
  sum.weight_bytes += ln->conv_lowered.weight_bytes + ln->compaction_lowered.weight_bytes;
  sum.operand_bytes += ln->conv_lowered.operand_bytes + ln->compaction_lowered.operand_bytes;
  return {};
}

// A node on the CPU: the placement's reason, or what the NPU back end lowers at all.
void add_cpu_node(const ir::Node& n, const ir::FusionReport& placement, Manifest& man, NpuCompileSummary& sum) {
  std::string reason = npu_cpu_reason(placement, n.name);
  if (reason.empty()) reason = "the NPU back end lowers " + npu_lowered_ops_text() + " only (yet)";
  man["cpu"].push_back({{"node", n.name}, {"op", (n.domain.empty() ? "" : n.domain + ".") + n.op_type}, {"reason", reason}});
  for (const NpuOpFamily& f : npu_op_families())
    if (f.candidate(n)) sum.cpu_candidates.push_back(std::string(f.name) + " " + n.name + ": " + reason);
  ++sum.nodes_on_cpu;
}

// The manifest once every node is lowered: who reads what back, the device memory's size, and
// every file of the folder (the manifest too: what `compile --force` may remove).
Status finish_manifest(const fs::path& dir, const std::string& out_dir, const NpuSession& session,
                       const std::vector<std::pair<std::string, std::function<bool()>>>& host_reads, Manifest& man, NpuCompileSummary& sum) {
  for (const auto& [at, f] : host_reads) man[Manifest::json_pointer(at)] = f();
  sum.chaining = npu_chaining(session);
  man["device_bytes"] = npu_session_memory(session).size();
  std::vector<std::string> files{"manifest.json"};
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path().lexically_relative(dir).generic_string());
  }
  if (ec) return io_error(out_dir + ": cannot list the folder: " + ec.message());
  std::sort(files.begin(), files.end());
  man["files"] = files;
  const std::string text = json_text(man);
  return write_file_atomic((dir / "manifest.json").string(), std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace

Result<NpuCompileSummary> compile_for_npu(const std::string& model, npu::lower::Strategy strategy, const std::string& out_dir, int cores,
                                          bool mainline) {
  ir::FusionReport placement;
  RKD_ASSIGN(ir::Graph g, placed_graph(model, strategy, mainline, placement));
  const fs::path dir(out_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return io_error(out_dir + ": not a folder");
  // Every NPU node into one session's device memory in graph order, an input another NPU node's
  // output holds in the reader's layout read there (npu_conv.h).
  std::shared_ptr<NpuSession> session = make_npu_session(g.outputs);
  Manifest man = manifest_header(model, strategy, npu_session_memory(*session).base(), cores, mainline);
  std::vector<std::pair<std::string, std::function<bool()>>> host_reads;  // decided once every node is lowered
  NpuCompileSummary sum;
  for (const auto& np : g.nodes()) {
    const ir::Node& n = *np;
    if (const NpuOpFamily* f = npu_family_of(n)) {
      RKD_TRY(add_npu_node(n, *f, session, dir, cores, man, host_reads, sum));
    } else if (is_view(n)) {
      man["views"].push_back({{"node", n.name}, {"op", n.op_type}, {"of", n.inputs.empty() || !n.inputs[0] ? "" : n.inputs[0]->name}});
      ++sum.views;
    } else {
      add_cpu_node(n, placement, man, sum);
    }
  }
  RKD_TRY(finish_manifest(dir, out_dir, *session, host_reads, man, sum));
  return sum;
}

Result<ArtifactSummary> compile_artifact(const std::string& model, npu::lower::Strategy strategy, const std::string& path, bool mainline,
                                         const std::string& config) {
  LoadOptions lo;
  lo.compile.int8 = true;
  lo.compile.npu_strategy = strategy;
  lo.compile.npu_mainline = mainline;
  RKD_ASSIGN(LoadedModel m, load_model(model, lo));
  const ir::Graph& g = *m.graph;
  ArtifactSummary sum;
  // Counted as the folder form counts them.
  for (const auto& n : g.nodes()) {
    if (npu_family_of(*n)) ++sum.npu_nodes;
    else if (is_view(*n)) ++sum.views;
    else ++sum.cpu_nodes;
  }
  if (sum.npu_nodes == 0) {
    return unsupported(model + ": no int8 operation to lower (a float model? rkdeploy quantize writes a QDQ model; docs/quantization.md)");
  }
  Artifact a;
  a.written_by = std::string("rkdeploy ") + RKD_VERSION;
  a.source_model = fs::path(model).filename().string();
  a.target = npu::arch::kRk3588.name;
  a.strategy = npu::lower::strategy_name(strategy);
  a.mainline = mainline;
  if (const NpuSession* s = m.executor->npu_session()) {
    const npu::DeviceMemory& mem = npu_session_memory(*s);
    a.device_base = mem.base();
    RKD_ASSIGN(auto bytes, mem.read(mem.base(), mem.size()));
    a.device_size = bytes.size();
    a.device_chunks = device_chunks_of(bytes);
  }
  if (!config.empty()) {
    RKD_ASSIGN(a.preprocess, read_file_bytes(config));
    auto cfg = parse_config(a.preprocess, config, default_config(g));
    if (!cfg.ok()) return cfg.error();
  }
  auto bytes = serialize_artifact(a, g);
  if (!bytes.ok()) return bytes.error().with_context(model);
  sum.device_bytes = a.device_size;
  sum.file_bytes = bytes.value().size();
  RKD_TRY(write_file_atomic(path, bytes.value()));
  return sum;
}

Result<std::vector<std::string>> compile_output_files(const std::string& dir) {
  const std::string path = (fs::path(dir) / "manifest.json").string();
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(path, ec))) return invalid("it has no manifest.json of rkdeploy compile");
  RKD_ASSIGN(const std::string text, read_file_bytes(path));
  const auto man = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (man.is_discarded() || !man.is_object()) return invalid(path + ": not JSON");
  if (!man.contains("written_by") || man["written_by"] != kCompileWrittenBy || !man.contains("files") || !man["files"].is_array()) {
    return invalid(path + ": not a manifest of rkdeploy compile (no \"written_by\": \"" + std::string(kCompileWrittenBy) + "\" with its \"files\")");
  }
  std::vector<std::string> files;
  for (const auto& f : man["files"]) {
    if (!f.is_string()) return invalid(path + ": \"files\" must hold strings");
    files.push_back(f.get<std::string>());
  }
  return files;
}

}  // namespace rkd::workflows
