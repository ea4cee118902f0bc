// tools/bareyolo/export_command.cpp — see export_command.h.
#include "tools/bareyolo/export_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "tools/bareyolo/export_options.h"
#include "tools/bareyolo/output_paths.h"

namespace bareyolo {

namespace {

namespace fs = std::filesystem;

cli::ExportOptions options;

int run_export() {
  cli::require_outputs_spare_inputs(
      {{options.out, "the --out file"}},
      {{options.weights, "the --weights file"}, {options.cfg, "the --cfg model yaml"}},
      "give --out a new file name");
  const fs::path exporter = fs::read_symlink("/proc/self/exe").parent_path() / "bareyolo-export";
  if (!fs::exists(exporter))
    throw std::runtime_error(
        "this bareyolo was built without ONNX export (there is no " + exporter.string() +
        "): install Debian's libonnx-dev and libprotobuf-dev (tools/setup.sh does) and build "
        "again; cmake then says \"bareyolo: ONNX export: bareyolo-export\"");
  std::vector<std::string> arguments = cli::export_arguments(options);
  arguments.insert(arguments.begin(), exporter.string());
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execv(exporter.c_str(), argv.data());
  throw std::runtime_error("cannot run " + exporter.string() + ": " + std::strerror(errno));
}

}  // namespace

void add_export_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "export", "Write the model with its decode as an ONNX graph (for ONNX Runtime, TensorRT)");
  cli::add_export_options(*command, options);
}

std::optional<int> run_export_command(const CLI::App& app) {
  if (app.got_subcommand("export")) return run_export();
  return std::nullopt;
}

}  // namespace bareyolo
