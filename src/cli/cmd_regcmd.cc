// rkdeploy regcmd decode|diff: register-command buffers (ours, or captured from a driver)
// as blocks, registers and named fields.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "npu/regcmd/regcmd.h"

namespace rkd::cli {

namespace {

struct RegcmdArgs {
  std::string file, a, b;
  bool json = false;
};

}  // namespace

void add_regcmd_command(CLI::App& app) {
  CLI::App* c = app.add_subcommand("regcmd", "RK3588 NPU register commands: decode a buffer, or diff two (docs/regcmd.md)");
  c->require_subcommand(1);
  auto args = std::make_shared<RegcmdArgs>();

  CLI::App* d = c->add_subcommand("decode", "Disassemble a regcmd file into tasks, registers and fields: rkdeploy regcmd decode FILE");
  d->add_option("file", args->file, "raw little-endian 64-bit words, or text with one hexadecimal word per line")->required();
  d->add_flag("--json", args->json, "print JSON (docs/regcmd.md)");
  d->callback([args] {
    const auto words = take(npu::regcmd::read_regcmd_file(args->file));
    const auto tasks = npu::regcmd::decode(words);
    const std::string s = args->json ? npu::regcmd::to_json(tasks) : npu::regcmd::disassemble(tasks);
    std::fwrite(s.data(), 1, s.size(), stdout);
  });

  CLI::App* f = c->add_subcommand("diff",
                                  "Register-level differences of two regcmd files, task by task: rkdeploy regcmd diff A B "
                                  "(exit status 0 when they program the same values, 1 when not)");
  f->add_option("a", args->a, "first regcmd file")->required();
  f->add_option("b", args->b, "second regcmd file")->required();
  f->add_flag("--json", args->json, "print JSON (docs/regcmd.md)");
  f->callback([args] {
    const auto ta = npu::regcmd::decode(take(npu::regcmd::read_regcmd_file(args->a)));
    const auto tb = npu::regcmd::decode(take(npu::regcmd::read_regcmd_file(args->b)));
    const auto diffs = npu::regcmd::diff(ta, tb);
    const std::string s = args->json ? npu::regcmd::diff_json(diffs, ta.size(), tb.size()) : npu::regcmd::diff_text(diffs, ta.size(), tb.size());
    std::fwrite(s.data(), 1, s.size(), stdout);
    if (!diffs.empty() || ta.size() != tb.size()) throw CommandFailed(1);
  });
}

}  // namespace rkd::cli
