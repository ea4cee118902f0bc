// tools/bareyolo/selftest_command.h — `bareyolo selftest`: does bareyolo work on this machine's
// GPUs?
//
//   bareyolo selftest [--device auto|0|0,1|cuda:1] [--cpu-reference-only] [--verbose]
//
// In about a minute: the NCCL communicator contract across the GPUs, one forked worker per GPU
// (tools/selftest/nccl_checks.h), then every op, the loss, the Detect decode, NMS and three
// training steps of the tiny model on each GPU against the CPU reference in double
// (tools/selftest/selftest.h). Prints a table that fits one screen, every failure in full, and a
// last line "selftest: PASS (N checks on cuda:0, cuda:1)" or "selftest: FAIL (k of N checks
// failed: ...)"; exits 0 or 1. Without a usable GPU it says why and exits 77 (skipped), or 1 where
// a GPU is required (BAREYOLO_REQUIRE_GPU=1, or /dev/nvidia0 exists: a broken driver must not
// read as skipped). --cpu-reference-only runs the op checks with the CPU's float kernels as the
// device under test instead: what CI runs, with no GPU.
//
// main() calls add_selftest_command(app) before parsing and run_selftest_command(app) after.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

namespace bareyolo {

void add_selftest_command(CLI::App& app);

// The selftest's exit code when `selftest` was given, or nothing.
std::optional<int> run_selftest_command(const CLI::App& app);

}  // namespace bareyolo
