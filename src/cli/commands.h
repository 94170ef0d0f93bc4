// Subcommand registration for the rkdeploy binary. Each add_* function attaches its
// subcommands to the app; their callbacks throw CommandFailed after printing an error.
#pragma once

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>

#include "core/limits.h"
#include "core/result.h"

namespace rkd::cli {

// Thrown by a command callback to end the process with `code` (message already printed).
struct CommandFailed : std::runtime_error {
  explicit CommandFailed(int c) : std::runtime_error("command failed"), code(c) {}
  int code;
};

// The exit status of an error (docs/cli.md): 1 I/O (and internal), 2 invalid input or usage,
// 3 unsupported (valid input this version cannot take).
constexpr int exit_code(ErrorKind k) { return k == ErrorKind::invalid ? 2 : k == ErrorKind::unsupported ? 3 : 1; }
// Prints "rkdeploy: <kind>: <message>" to stderr (one JSON object instead when --json is
// set: set_json_errors) and throws CommandFailed(exit_code(kind)).
[[noreturn]] void fail(const Error& e);
// With --json anywhere on the command line, errors are printed as
// {"error": {"kind": K, "message": M, "exit_code": N}} (docs/cli-json.md).
void set_json_errors(bool on);
// Prints one error in the current style: "rkdeploy: KIND: MESSAGE" or the JSON object.
void print_error(const std::string& kind, const std::string& message, int exit_code);

template <typename T>
T take(Result<T> r) {
  if (!r.ok()) fail(r.error());
  return std::move(r).value();
}
inline void check(const Status& s) {
  if (!s.ok()) fail(s.error());
}
// The largest --threads any subcommand takes (core/limits.h, shared with the C API and Python).
using rkd::kMaxThreads;
// A floating-point option's check: a finite number in [lo, hi] (CLI::Range lets NaN through,
// since every comparison with NaN is false).
CLI::Validator finite_range(double lo, double hi);
// The largest count of runs, rows or samples any option takes.
constexpr int kMaxCount = 1000000;
// `--allow-nonfinite`: pass NaN and infinities in the inputs (or calibration data) through
// instead of refusing them (runtime::check_finite_inputs).
CLI::Option* add_nonfinite_option(CLI::App* c, bool& allow);
// `--threads N` with 0 <= N <= kMaxThreads checked while parsing (a usage error otherwise).
CLI::Option* add_threads_option(CLI::App* c, int& threads, const std::string& description);
// The files a command reads, protected from its outputs: `files` plus the FILE of every
// --input NAME=FILE.
std::vector<std::string> read_paths(std::vector<std::string> files, const std::vector<std::string>& input_specs = {});
// "the per-axis lowering strategy: per-tensor, group16, ... (default sorted-bs-multiplier)", from
// the lowering's own list (npu::lower::all_strategies).
std::string strategy_help();
// Writes text to a file (an OutputTransaction's temporary; core/output.h publishes it).
void write_text(const std::string& path, const std::string& text);

void add_sample_commands(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_accuracy_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_regcmd_command(CLI::App& app);
void add_analyze_command(CLI::App& app);
void add_compile_command(CLI::App& app);
void add_plan_commands(CLI::App& app);  // plan, bench
// `rkdeploy help sim`: the simulator's quirk knobs, their values, defaults and sources.
std::string sim_help();

}  // namespace rkd::cli
