// tools/bareyolo/export_command.h — `bareyolo export` (flags: tools/bareyolo/export_options.h):
// checks the flags, then runs `bareyolo-export` from this binary's folder with them. A build
// without Debian's libonnx-dev and libprotobuf-dev has no bareyolo-export, and the command says so.
//
// main() calls add_export_command(app) before parsing and run_export_command(app) after.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

namespace bareyolo {

void add_export_command(CLI::App& app);

// The exit code of `export` when it was given (it does not return when bareyolo-export runs),
// or nothing if it was not.
std::optional<int> run_export_command(const CLI::App& app);

}  // namespace bareyolo
