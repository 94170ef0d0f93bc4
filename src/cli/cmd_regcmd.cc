// rkdeploy regcmd decode|diff|summary: register-command buffers (ours, or captured from a
// driver by tools/intercept) as blocks, registers and named fields.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "npu/regcmd/capture.h"
#include "npu/regcmd/regcmd.h"

namespace rkd::cli {

namespace {

struct RegcmdArgs {
  std::string file, a, b;
  bool json = false;
};

}  // namespace

void add_regcmd_command(CLI::App& app) {
  CLI::App* c = app.add_subcommand(
      "regcmd", "RK3588 NPU register commands: decode a buffer or capture, diff two, or summarise the convolutions (docs/regcmd.md)");
  c->require_subcommand(1);
  auto args = std::make_shared<RegcmdArgs>();

  CLI::App* d = c->add_subcommand("decode", "Disassemble a regcmd file into tasks, registers and fields: rkdeploy regcmd decode FILE");
  d->add_option("file", args->file,
                "raw little-endian 64-bit words, text with one hexadecimal word per line, a capture directory (tools/intercept) or a "
                "compile directory")
      ->required();
  d->add_flag("--json", args->json, "print JSON (docs/regcmd.md)");
  d->callback([args] {
    const auto tasks = npu::regcmd::decode(npu::regcmd::concatenated(take(npu::regcmd::read_tasks(args->file))));
    const std::string s = args->json ? npu::regcmd::to_json(tasks) : npu::regcmd::disassemble(tasks);
    std::fwrite(s.data(), 1, s.size(), stdout);
  });

  CLI::App* f = c->add_subcommand("diff",
                                  "Register-level differences of two regcmd files, task by task: rkdeploy regcmd diff A B "
                                  "(exit status 0 when they program the same values, 1 when not)");
  f->add_option("a", args->a, "first regcmd file, capture directory or compile directory")->required();
  f->add_option("b", args->b, "second one")->required();
  f->add_flag("--json", args->json, "print JSON (docs/regcmd.md)");
  f->callback([args] {
    const auto ta = npu::regcmd::decode(npu::regcmd::concatenated(take(npu::regcmd::read_tasks(args->a))));
    const auto tb = npu::regcmd::decode(npu::regcmd::concatenated(take(npu::regcmd::read_tasks(args->b))));
    const auto diffs = npu::regcmd::diff(ta, tb);
    const std::string s = args->json ? npu::regcmd::diff_json(diffs, ta.size(), tb.size()) : npu::regcmd::diff_text(diffs, ta.size(), tb.size());
    std::fwrite(s.data(), 1, s.size(), stdout);
    if (!diffs.empty() || ta.size() != tb.size()) throw CommandFailed(1);
  });

  CLI::App* m = c->add_subcommand("summary",
                                  "Per-layer register summary of the convolution tasks (the fields of tests/data/npu/vendor_tiling.json: "
                                  "channels, width, kernel, stride, CBUF banks, rows per task): rkdeploy regcmd summary PATH");
  m->add_option("path", args->file, "a regcmd file, a capture directory (tools/intercept) or a compile directory")->required();
  m->callback([args] {
    const auto tasks = npu::regcmd::decode(npu::regcmd::concatenated(take(npu::regcmd::read_tasks(args->file))));
    const std::string s = npu::regcmd::summary_json(tasks, args->file);
    std::fwrite(s.data(), 1, s.size(), stdout);
  });
}

}  // namespace rkd::cli
