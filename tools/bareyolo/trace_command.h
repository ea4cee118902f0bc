// tools/bareyolo/trace_command.h — `bareyolo trace-summary FILE`: the anatomy of a traced step
// (engine/trace_analysis.h) from a `train --trace` file — per rank, the collectives of a step
// by kind with their count and bytes, each gradient bucket of the last traced step with its
// size, how long before backward's end it left, how long its all-reduce took and the node
// whose backward closed it, and the shares of communication hidden behind backward and of time
// spent waiting for the loader. With --svg OUT.svg it also draws the last traced step of every
// rank as a timeline (engine/trace_svg.h).
//
// main() calls add_trace_command(app) before parsing and run_trace_command(app) after.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

namespace bareyolo {

void add_trace_command(CLI::App& app);

// The exit code of `trace-summary` when it was given, or nothing if it was not.
std::optional<int> run_trace_command(const CLI::App& app);

}  // namespace bareyolo
