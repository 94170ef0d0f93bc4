// rkdeploy compile: a quantized model as RK3588 NPU artifacts a device back end can submit
// unchanged.
//
// Contract:
//  - The model is compiled as `run --backend sim` compiles it: every node the NPU operation
//    table's placement takes (runtime/npu_ops.h) is lowered, convolutions with `strategy`, into
//    one simulated device address space (base 0x10000000) in graph order.
//  - DIR/manifest.json (docs/npu.md, "compile"): target, strategy, device base, each NPU node as
//    its family's entry (a convolution: node, geometry, input buffer and layout, tasks with their
//    regcmd file, device address and word count, buffers with kind, file, device offset and size,
//    output regions with the original channel of each region channel; an element-wise task: its
//    operands, output, tasks), and every node that stays on the CPU with the reason.
//    DIR/conv<NNN>/task<TTT>.regcmd (raw little-endian words), .weights.bin, .operands.bin and
//    DIR/eltwise<NNN>/task<TTT>.regcmd hold the bytes.
//  - The manifest's "written_by" is kCompileWrittenBy and its "files" lists every file of DIR
//    (the manifest too), so that `compile --force` removes only those when it replaces DIR.
//  - DIR must exist (the CLI passes an OutputTransaction's empty temporary folder, so the
//    artifacts appear all at once; core/output.h).
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "npu/lower/lower.h"
#include "runtime/npu_conv.h"

namespace rkd::workflows {

struct NpuCompileSummary {
  int convs_on_npu = 0, eltwise_on_npu = 0, nodes_on_cpu = 0, tasks = 0;
  int views = 0;  // Identity nodes (no computation), listed in the manifest's "views", not among the CPU's
  size_t regcmd_words = 0, weight_bytes = 0, operand_bytes = 0;
  std::vector<std::string> cpu_candidates;  // "Family node: reason" for each candidate of the NPU operation table left on the CPU
  runtime::NpuChaining chaining;            // the data inputs and outputs the manifest marks written_by "npu" / read_by_host
};

// The manifest's "written_by": how a later `compile --force` recognises an output it may replace.
inline constexpr const char* kCompileWrittenBy = "rkdeploy compile";

// The files DIR's manifest.json lists as written by compile (relative paths, the manifest
// among them), or an error when DIR holds no such manifest: OutputTransaction's OwnedFiles.
Result<std::vector<std::string>> compile_output_files(const std::string& dir);

// cores: the jobs each node's tasks form on a device (runtime::npu_node_jobs), listed per node as
// "jobs"; mainline: the placement of `run --backend device` (no PPU-only tasks: a mainline rocket
// kernel learns of a task's end only through the DPU's interrupt).
Result<NpuCompileSummary> compile_for_npu(const std::string& model, npu::lower::Strategy strategy, const std::string& out_dir,
                                          int cores = static_cast<int>(npu::arch::kRk3588.cores), bool mainline = false);

// rkdeploy compile MODEL -o FILE.rkd: the deployable artifact (runtime/artifact.h,
// docs/artifact.md) - the graph `run --backend sim` executes (every rewrite done, the NPU nodes
// placed with `strategy`; mainline: without PPU-only tasks) and the device memory its NPU nodes
// are lowered into, written to `path` (the caller's temporary: core/output.h). `config`: a
// detector config file whose JSON the artifact carries ("" none).
struct ArtifactSummary {
  int npu_nodes = 0, cpu_nodes = 0, views = 0;
  size_t device_bytes = 0, file_bytes = 0;
};
Result<ArtifactSummary> compile_artifact(const std::string& model, npu::lower::Strategy strategy, const std::string& path, bool mainline = false,
                                         const std::string& config = "");

}  // namespace rkd::workflows
