// rkdeploy: one binary, subcommands. `rkdeploy help [SUBCOMMAND...]` documents each.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "cli/commands.h"
#include "runtime/plan_model.h"

namespace rkd::cli {
void fail(const Error& e) {
  std::cerr << "rkdeploy: " << e.to_string() << "\n";
  throw CommandFailed(e.kind == ErrorKind::invalid || e.kind == ErrorKind::unsupported ? 2 : 1);
}

CLI::Option* add_threads_option(CLI::App* c, int& threads, const std::string& description) {
  return c->add_option("--threads", threads, description)->check(CLI::Range(0, kMaxThreads));
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) fail(io_error(path + ": cannot write"));
    f << text;
    if (!f) fail(io_error(path + ": write failed"));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail(io_error(path + ": " + ec.message()));
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

// `rkdeploy --version`: version and commit, build type, compiler, and what the run-time
// dispatchers choose on this CPU (the same record as `bench --json`'s environment).
std::string version_text() {
  auto e = rkd::runtime::environment(0);
  return "rkdeploy " + e["rkdeploy"] + " (" + e["build_type"] + ", " + e["compiler"] + ")\n" + "cpu: " + e["cpu"] +
         "\ndispatch: Highway " + e["highway_target"] + ", oneDNN " + e["onednn"] + " " + e["onednn_isa"] + ", int8 products " +
         e["int8_products"] + ", vectorised loops " + e["vectorised_loops"] + " (ISA ceiling " + e["isa_ceiling"] + ")";
}

}  // namespace

}  // namespace rkd::cli

int main(int argc, char** argv) {
  CLI::App app{"rkdeploy: take detection models to Rockchip NPUs and prove, on any host, that what "
               "runs there computes the right thing."};
  app.name("rkdeploy");
  app.require_subcommand(1);
  app.set_version_flag("--version", std::function<std::string()>(rkd::cli::version_text), "Version, build and the CPU dispatch, then exit");
  rkd::cli::add_inspect_command(app);
  rkd::cli::add_run_command(app);
  rkd::cli::add_quantize_command(app);
  rkd::cli::add_accuracy_command(app);
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
        std::cerr << "rkdeploy: invalid: help: no subcommand '" << name << "'\n";
        throw rkd::cli::CommandFailed(2);
      }
      target = next;
    }
    // App::help() would describe the selected subcommand (this one); format the target.
    std::cout << target->get_formatter()->make_help(target, target->get_name(), CLI::AppFormatMode::Normal);
  });

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
      std::cerr << "rkdeploy: invalid: no subcommand '" << word << "'"
                << (nearest.empty() ? "" : "; did you mean '" + nearest + "'?") << " (subcommands: " << names << ")\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // A usage error: the README's convention (exit 2, "rkdeploy:"), not CLI11's own codes.
    std::cerr << "rkdeploy: invalid: " << e.what() << " (rkdeploy help [SUBCOMMAND] lists the options)\n";
    return 2;
  } catch (const rkd::cli::CommandFailed& e) {
    return e.code;
  } catch (const std::bad_alloc&) {
    std::cerr << "rkdeploy: io: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    // Nothing may end the process with an abort: an exception that no command turned into an
    // Error is reported as what it is (the OS refusing threads, a stream failure, a bug).
    std::cerr << "rkdeploy: internal: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
