#include "runtime/load_artifact.h"

#include <cstdio>

#include "runtime/detect.h"

#include "runtime/npu_conv.h"
#include "runtime/npu_ops.h"

namespace rkd::runtime {

void carry_artifact_config(const Artifact& a, ir::Graph& g) {
  if (!a.preprocess.empty()) g.metadata[kArtifactConfigKey] = a.preprocess;
}

namespace {

std::string device_address(uint64_t a) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(a));
  return buf;
}

}  // namespace

Result<LoadedModel> load_artifact(const std::string& path, const LoadOptions& opt) {
  RKD_ASSIGN(LoadedArtifact a, read_artifact(path));
  if (!opt.compile.int8 || !opt.compile.npu_strategy) {
    return invalid(path + ": an artifact of rkdeploy compile runs its NPU nodes on the NPU's back ends: --backend sim or device");
  }
  if (opt.compile.npu_mainline && !a.info.mainline) {
    return invalid(path + ": compiled with PPU-only tasks, which a mainline rocket device cannot run; compile it with --mainline");
  }
  if (opt.batch > 1) return invalid(path + ": an artifact runs at the batch it was compiled for (1)");
  LoadedModel m;
  m.graph = std::move(a.graph);
  carry_artifact_config(a.info, *m.graph);
  m.notes.push_back(path + ": " + a.info.written_by + ", compiled from " + a.info.source_model + " for " + a.info.target + " (strategy " +
                    a.info.strategy + ")");
  if (opt.inputs) RKD_TRY(check_graph_inputs(*m.graph, *opt.inputs));
  // The placement as compile left it (its reasons for the CPU's candidates are not stored).
  for (const auto& n : m.graph->nodes()) {
    if (const NpuOpFamily* f = npu_family_of(*n)) {
      ++m.fusion.npu[f->name].placed;
      continue;
    }
    for (const NpuOpFamily& f : npu_op_families())
      if (f.candidate(*n)) m.fusion.npu[f.name].on_cpu.push_back(n->name + ": left on the CPU when compiled");
  }
  auto e = Executor::create(*m.graph, opt.exec);
  if (!e.ok()) return e.error().with_context(path);
  m.executor = std::move(e).value();
  const NpuSession* s = m.executor->npu_session();
  if (s && !opt.exec.npu_device) {
    const npu::DeviceMemory& mem = npu_session_memory(*s);
    RKD_ASSIGN(auto bytes, mem.read(mem.base(), mem.size()));
    const auto diff = device_memory_difference(a.info, bytes);
    if (mem.base() != a.info.device_base || diff) {
      return invalid(path + ": the NPU nodes lowered by this rkdeploy differ from the artifact's device memory (" +
                     std::to_string(a.info.device_size) + " bytes at device address " + device_address(a.info.device_base) +
                     "; first difference at byte " + std::to_string(diff.value_or(0)) + " of " + std::to_string(bytes.size()) + "): compiled by " +
                     a.info.written_by + "; compile the model again");
    }
  }
  return m;
}

}  // namespace rkd::runtime
