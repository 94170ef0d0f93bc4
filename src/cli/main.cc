// rkdeploy: one binary, subcommands. `rkdeploy help [SUBCOMMAND...]` documents each.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include "cli/commands.h"

namespace rkd::cli {
void fail(const Error& e) {
  std::cerr << "rkdeploy: " << e.to_string() << "\n";
  throw CommandFailed(e.kind == ErrorKind::invalid || e.kind == ErrorKind::unsupported ? 2 : 1);
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

}  // namespace rkd::cli

int main(int argc, char** argv) {
  CLI::App app{"rkdeploy: take detection models to Rockchip NPUs and prove, on any host, that what "
               "runs there computes the right thing."};
  app.name("rkdeploy");
  app.require_subcommand(1);
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const rkd::cli::CommandFailed& e) {
    return e.code;
  }
  return 0;
}
