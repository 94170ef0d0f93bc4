// rkdeploy: one binary, subcommands. `rkdeploy help [SUBCOMMAND...]` documents each.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/json_style.h"
#include "core/npy.h"
#include "core/output.h"
#include "core/progress.h"
#include "npu/lower/lower.h"
#include "workflows/plan.h"

namespace rkd::cli {
namespace {
bool g_json_errors = false;
}  // namespace

void set_json_errors(bool on) { g_json_errors = on; }

// A message as a terminal should show it: control characters other than newline and tab (an
// escape sequence inside a tensor or file name) as \xNN.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void print_error(const std::string& kind, const std::string& message, int code) {
  if (g_json_errors) {
    nlohmann::ordered_json j;
    j["error"] = {{"kind", kind}, {"message", message}, {"exit_code", code}};
    std::cerr << json_text(j);
  } else {
    std::cerr << "rkdeploy: " << kind << ": " << printable(message) << "\n";
  }
}

void fail(const Error& e) {
  print_error(error_kind_name(e.kind), e.message, exit_code(e.kind));
  throw CommandFailed(exit_code(e.kind));
}

CLI::Option* add_threads_option(CLI::App* c, int& threads, const std::string& description) {
  return c->add_option("--threads", threads, description)->check(CLI::Range(0, kMaxThreads));
}

CLI::Validator finite_range(double lo, double hi) {
  const std::string range = "[" + CLI::detail::to_string(lo) + ", " + CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        double v = 0;
        size_t used = 0;
        try {
          v = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size()) return "'" + text + "' is not a number";
        if (!std::isfinite(v) || v < lo || v > hi) return "Value " + text + " not in range " + range + " (finite)";
        return {};
      },
      "FLOAT in " + range);
}

CLI::Option* add_nonfinite_option(CLI::App* c, bool& allow) {
  return c->add_flag("--allow-nonfinite", allow, "run with NaN or infinite input values (refused by default; IEEE semantics in every kernel)");
}

std::vector<std::string> read_paths(std::vector<std::string> files, const std::vector<std::string>& input_specs) {
  for (const std::string& spec : input_specs) files.push_back(spec.substr(spec.find('=') + 1));
  return files;
}

std::string strategy_help() {
  std::string names;
  for (const auto st : npu::lower::all_strategies()) names += (names.empty() ? "" : ", ") + std::string(npu::lower::strategy_name(st));
  return "the per-axis lowering strategy: " + names + " (default " + npu::lower::strategy_name(npu::lower::kDefaultStrategy) + "; docs/npu.md)";
}

void write_text(const std::string& path, const std::string& text) {
  check(write_file_atomic(path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size())));
}

namespace {

// Levenshtein distance, for "did you mean" on a mistyped subcommand.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// One line on stderr, rewritten in place, at most ten times a second; erased when its
// stage ends, so the command's own output follows on a clean line.
void terminal_progress(const std::string& stage, int64_t done, int64_t total) {
  static auto last = std::chrono::steady_clock::time_point{};
  const auto now = std::chrono::steady_clock::now();
  if (done >= total) {
    std::fprintf(stderr, "\r\033[K");
    return;
  }
  if (now - last < std::chrono::milliseconds(100)) return;
  last = now;
  std::fprintf(stderr, "\r\033[K%s: %lld/%lld", stage.c_str(), static_cast<long long>(done), static_cast<long long>(total));
}

// `rkdeploy --version`: version and commit, build type, compiler, and what the run-time
// dispatchers choose on this CPU (the same record as `bench --json`'s environment).
std::string version_text() {
  auto e = rkd::workflows::environment();
  return "rkdeploy " + e["rkdeploy"] + " (" + e["build_type"] + ", " + e["compiler"] + ")\n" + "cpu: " + e["cpu"] + "\ndispatch: Highway " +
         e["highway_target"] + ", oneDNN " + e["onednn"] + " " + e["onednn_isa"] + ", int8 products " + e["int8_products"] + ", vectorised loops " +
         e["vectorised_loops"] + " (ISA ceiling " + e["isa_ceiling"] + ")";
}

// Usage lines name the whole command, as typed: "Usage: rkdeploy sample grid [OPTIONS] ...".
class CommandPathFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string) const override {
    std::string path;
    for (const CLI::App* a = app; a; a = a->get_parent()) path = a->get_name() + (path.empty() ? "" : " " + path);
    return CLI::Formatter::make_usage(app, path);
  }
};

}  // namespace

}  // namespace rkd::cli

int main(int argc, char** argv) {
  // Before any thread exists: SIGINT/SIGTERM/SIGHUP remove unpublished outputs (core/output.h).
  if (const rkd::Status s = rkd::install_signal_cleanup(); !s.ok()) {
    std::fprintf(stderr, "rkdeploy: %s\n", s.error().to_string().c_str());
    return 1;
  }
  CLI::App app{
      "rkdeploy: take detection models to Rockchip NPUs and prove, on any host, that what "
      "runs there computes the right thing."};
  app.name("rkdeploy");
  app.formatter(std::make_shared<rkd::cli::CommandPathFormatter>());  // before the subcommands: they copy it
  app.require_subcommand(1);
  app.set_version_flag("--version", std::function<std::string()>(rkd::cli::version_text), "Version, build and the CPU dispatch, then exit");
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "no progress lines (they are printed only when stderr is a terminal anyway)");
  app.fallthrough();  // --quiet after the subcommand too
  rkd::cli::add_inspect_command(app);
  rkd::cli::add_run_command(app);
  rkd::cli::add_quantize_command(app);
  rkd::cli::add_accuracy_command(app);
  rkd::cli::add_eval_command(app);
  rkd::cli::add_export_command(app);
  rkd::cli::add_regcmd_command(app);
  rkd::cli::add_analyze_command(app);
  rkd::cli::add_compile_command(app);
  rkd::cli::add_plan_commands(app);
  rkd::cli::add_sample_commands(app);
  rkd::cli::add_demo_command(app);

  std::vector<std::string> help_path;
  CLI::App* help = app.add_subcommand("help", "Show help for rkdeploy or for a subcommand, e.g. 'rkdeploy help sample grid'");
  help->add_option("subcommand", help_path, "subcommand path");
  help->callback([&] {
    if (help_path.size() == 1 && help_path[0] == "sim") {
      std::cout << rkd::cli::sim_help();
      return;
    }
    CLI::App* target = &app;
    for (const auto& name : help_path) {
      CLI::App* next = nullptr;
      try {
        next = target->get_subcommand(name);
      } catch (const CLI::OptionNotFound&) {
        rkd::cli::print_error("invalid", "help: no subcommand '" + name + "'", 2);
        throw rkd::cli::CommandFailed(2);
      }
      target = next;
    }
    // App::help() would describe the selected subcommand (this one); format the target.
    std::cout << target->get_formatter()->make_help(target, target->get_name(), CLI::AppFormatMode::Normal);
  });

  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--json") rkd::cli::set_json_errors(true);
  }
  // An unknown subcommand (CLI11 would only say that one is required): name it, suggest the
  // nearest one.
  if (argc >= 2 && argv[1][0] != '-') {
    const std::string word = argv[1];
    std::string names, nearest;
    size_t best = 3;  // suggest only within two edits
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      const std::string& n = sub->get_name();
      known |= n == word;
      names += (names.empty() ? "" : ", ") + n;
      const size_t d = rkd::cli::edit_distance(word, n);
      if (d < best) best = d, nearest = n;
    }
    if (!known) {
      rkd::cli::print_error(
          "invalid", "no subcommand '" + word + "'" + (nearest.empty() ? "" : "; did you mean '" + nearest + "'?") + " (subcommands: " + names + ")",
          2);
      return 2;
    }
  }
  // Progress of long work: one rewritten line on a terminal (docs/cli.md, "Progress").
  if (::isatty(STDERR_FILENO)) {
    bool q = false;
    for (int i = 1; i < argc; ++i) q |= std::string(argv[i]) == "--quiet" || std::string(argv[i]) == "-q";
    if (!q) rkd::set_progress_sink(rkd::cli::terminal_progress);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // A usage error: the README's convention (exit 2, "rkdeploy:"), not CLI11's own codes.
    rkd::cli::print_error("invalid", std::string(e.what()) + " (rkdeploy help [SUBCOMMAND] lists the options)", 2);
    return 2;
  } catch (const rkd::cli::CommandFailed& e) {
    return e.code;
  } catch (const std::bad_alloc&) {
    rkd::cli::print_error("io", "out of memory", 1);
    return 1;
  } catch (const std::exception& e) {
    // Nothing may end the process with an abort: an exception that no command turned into an
    // Error is reported as what it is (the OS refusing threads, a stream failure, a bug).
    rkd::cli::print_error("internal", e.what(), 1);
    return 1;
  }
  return 0;
}
