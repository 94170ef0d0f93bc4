// rkdeploy compile QUANT_MODEL -o FILE.rkd: the deployable artifact (docs/artifact.md); -o DIR:
// the NPU's register commands, buffers and manifest.json (workflows/compile.h; docs/npu.md,
// "compile").
#include <cstdio>

#include "cli/commands.h"
#include "core/output.h"
#include "npu/arch/arch.h"
#include "npu/lower/strategy.h"
#include "runtime/artifact.h"
#include "runtime/npu_conv.h"
#include "workflows/compile.h"

namespace rkd::cli {

void add_compile_command(CLI::App& app) {
  struct Args {
    std::string model, target = npu::arch::kRk3588.name, strategy, out, config;
    bool force = false, mainline = false;
    int cores = static_cast<int>(npu::arch::kRk3588.cores);
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("compile",
                                   "Lower a quantized model for the RK3588 NPU (what its operation table takes): one deployable artifact, "
                                   "rkdeploy compile QUANT_MODEL -o MODEL.rkd (run and bench take it; docs/artifact.md), or the register "
                                   "commands, buffers and manifest.json, -o DIR (docs/npu.md)");
  c->add_option("model", a->model, "quantized model (ONNX QDQ/QOperator or int8 TFLite)")->required();
  c->add_option("--target", a->target, "the NPU (" + a->target + ")")->check(CLI::IsMember({a->target}));
  c->add_option("--strategy", a->strategy, strategy_help());
  c->add_option("-o,--output", a->out, "MODEL.rkd: the artifact; else an output folder, new or empty (published once complete; docs/cli.md)")
      ->required();
  c->add_option("--config", a->config, "with -o MODEL.rkd: the detector config (docs/detector-config.md) the artifact carries for its photos");
  c->add_flag("--force", a->force, "replace a previous compile output: only the files its manifest lists, and only if the folder holds nothing else");
  c->add_option("--cores", a->cores,
                "NPU cores a convolution's tasks are split over as jobs (manifest \"jobs\"; 1-" + std::to_string(a->cores) + ", default " +
                    std::to_string(a->cores) + ")")
      ->check(CLI::Range(1, a->cores));
  c->add_flag("--mainline", a->mainline,
              "the placement of run --backend device on a mainline rocket kernel: no PPU-only tasks (MaxPool on the CPU; docs/device.md)");
  c->callback([a] {
    const auto st = a->strategy.empty() ? npu::lower::kDefaultStrategy : take(npu::lower::parse_strategy(a->strategy));
    if (runtime::is_artifact_path(a->out)) {
      if (a->cores != static_cast<int>(npu::arch::kRk3588.cores)) fail(invalid("--cores describes the folder's jobs: not with -o MODEL.rkd"));
      OutputTransaction out_tx({a->model}, a->force);
      const std::string tmp = take(out_tx.file(a->out));
      const auto s = take(workflows::compile_artifact(a->model, st, tmp, a->mainline, a->config));
      check(out_tx.publish());
      std::printf("%s: %d NPU node(s), %d CPU node(s) and %d view(s) for %s (%s%s), %zu bytes of device memory; %zu bytes\n", a->out.c_str(),
                  s.npu_nodes, s.cpu_nodes, s.views, a->target.c_str(), npu::lower::strategy_name(st), a->mainline ? ", mainline" : "",
                  s.device_bytes, s.file_bytes);
      return;
    }
    if (!a->config.empty()) fail(invalid("--config goes into an artifact: with -o MODEL.rkd"));
    OutputTransaction out_tx({a->model}, a->force);
    const std::string dir = take(out_tx.folder(a->out, workflows::compile_output_files));
    const auto s = take(workflows::compile_for_npu(a->model, st, dir, a->cores, a->mainline));
    check(out_tx.publish());
    std::printf("%s: %d convolution(s) and %d element-wise op(s) in %d task(s) for %s (%s), %d node(s) on the CPU, %d view(s)\n", a->out.c_str(),
                s.convs_on_npu, s.eltwise_on_npu, s.tasks, a->target.c_str(), npu::lower::strategy_name(st), s.nodes_on_cpu, s.views);
    for (const auto& r : s.cpu_candidates) std::printf("  on the CPU: %s\n", r.c_str());
    std::printf("  %zu register-command words, %zu bytes of weights, %zu bytes of BS operands; manifest.json lists them\n", s.regcmd_words,
                s.weight_bytes, s.operand_bytes);
    std::printf("  device memory: %s\n", runtime::npu_chaining_text(s.chaining).c_str());
  });
}

}  // namespace rkd::cli
