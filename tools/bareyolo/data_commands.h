// tools/bareyolo/data_commands.h — the data subcommands of the bareyolo CLI:
//
//   bareyolo make-shapes --out DIR [--n-train 512 --n-val 128 --imgsz 256 --classes 4 --seed 0]
//   bareyolo data-check --data D        verification summary and every problem, per split
//   bareyolo show-batch --data D --out batch.jpg [--imgsz 640 --batch 16 --epoch 0 --seed 0]
//
// main() calls add_data_commands(app) before parsing and run_data_command(app) after.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

namespace bareyolo {

void add_data_commands(CLI::App& app);

// The exit code of the data subcommand that was given, or nothing if none was.
std::optional<int> run_data_command(const CLI::App& app);

}  // namespace bareyolo
