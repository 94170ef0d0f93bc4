// Subcommand registration for the rkdeploy binary. Each add_* function attaches its
// subcommands to the app; their callbacks throw CommandFailed after printing an error.
#pragma once

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>

#include "core/result.h"

namespace rkd::cli {

// Thrown by a command callback to end the process with `code` (message already printed).
struct CommandFailed : std::runtime_error {
  explicit CommandFailed(int c) : std::runtime_error("command failed"), code(c) {}
  int code;
};

// Prints "rkdeploy: <kind>: <message>" to stderr and throws CommandFailed(2 for invalid
// or unsupported input, 1 otherwise).
[[noreturn]] void fail(const Error& e);

template <typename T>
T take(Result<T> r) {
  if (!r.ok()) fail(r.error());
  return std::move(r).value();
}
inline void check(const Status& s) {
  if (!s.ok()) fail(s.error());
}
// The largest --threads any subcommand takes: more workers than this is a typo, and creating them
// can fail at the OS's thread limit after the work has begun.
constexpr int kMaxThreads = 1024;
// `--threads N` with 0 <= N <= kMaxThreads checked while parsing (a usage error otherwise).
CLI::Option* add_threads_option(CLI::App* c, int& threads, const std::string& description);
// Writes text to path through path.tmp and a rename (an earlier file stays intact on failure).
void write_atomically(const std::string& path, const std::string& text);

void add_sample_commands(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_accuracy_command(CLI::App& app);
void add_regcmd_command(CLI::App& app);
void add_analyze_command(CLI::App& app);
void add_compile_command(CLI::App& app);
void add_plan_commands(CLI::App& app);  // plan, bench
// `rkdeploy help sim`: the simulator's quirk knobs, their values, defaults and sources.
std::string sim_help();

}  // namespace rkd::cli
