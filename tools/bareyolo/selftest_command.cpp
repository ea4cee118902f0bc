// tools/bareyolo/selftest_command.cpp — `selftest` (see selftest_command.h). The checks are in
// tools/selftest/selftest.h and nccl_checks.h; this file picks the GPUs, orders the two halves
// (the NCCL workers are forked before this process touches CUDA) and prints the verdict.
#include "tools/bareyolo/selftest_command.h"

#include <cstdio>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/distributed/launch/device_spec.h"
#include "engine/distributed/launch/launcher.h"
#include "kernels/devices.h"
#include "tools/selftest/nccl_checks.h"
#include "tools/selftest/selftest.h"

namespace bareyolo {

namespace {

// ctest's SKIP_RETURN_CODE, as the CUDA test runner returns it without a GPU.
constexpr int kSkippedExitCode = 77;

struct SelftestOptions {
  std::string device = "auto";
  bool cpu_reference_only = false, every_row = false;
} options;

// The GPUs --device names on a machine with `gpus` of them, each once: every NCCL rank needs a
// GPU of its own.
std::vector<Device> chosen_gpus(int gpus) {
  const dist::DeviceSpec spec = dist::DeviceSpec::parse(options.device, gpus);
  if (spec.kind != dist::DeviceKind::cuda)
    throw std::invalid_argument("selftest --device " + options.device +
                                ": the selftest checks GPUs; `bareyolo selftest "
                                "--cpu-reference-only` checks the CPU kernels");
  if (spec.repeats_a_gpu())
    throw std::invalid_argument("selftest --device " + options.device +
                                " names a GPU twice; each NCCL rank needs its own: list each once");
  std::vector<Device> devices;
  for (int index : spec.cuda_indices) devices.push_back(Device::cuda(index));
  return devices;
}

// "cuda:0 (NVIDIA H200, sm_90)": the verdict's readers need to know what was checked. Only
// after the NCCL workers have forked: asking initialises CUDA.
std::string describe_gpu(const Device& gpu) {
  try {
    const GpuProperties p = gpu_properties(gpu.index);
    return gpu.str() + " (" + p.name + ", sm_" + std::to_string(p.compute_major) +
           std::to_string(p.compute_minor) + ")";
  } catch (const std::exception& error) {  // the op checks will fail with the same cause
    return gpu.str() + " (its properties are unreadable: " + error.what() + ")";
  }
}

// The devices, each as `describe` says, separated by commas.
std::string joined(const std::vector<Device>& devices,
                   const std::function<std::string(const Device&)>& describe) {
  std::string text;
  for (const Device& device : devices) text += (text.empty() ? "" : ", ") + describe(device);
  return text;
}

int print_verdict(const std::vector<selftest::CheckResult>& results) {
  std::printf("%s%s\n", selftest::format_report(results, options.every_row).c_str(),
              selftest::verdict_line(results).c_str());
  return selftest::all_passed(results) ? 0 : 1;
}

int run_selftest() {
  if (options.cpu_reference_only) {
    std::printf("selftest: %zu op checks, the CPU's kernels as the device under test\n",
                selftest::op_checks().size());
    std::fflush(stdout);
    return print_verdict(selftest::run_checks(selftest::op_checks(), {Device::cpu()}));
  }
  // Counted in a probe child: this process must not initialise CUDA before the NCCL workers fork.
  const int gpus = dist::count_gpus_without_initializing();
  if (gpus == 0) {
    std::printf("selftest: no usable GPU: %s\n", gpu_unavailable_reason().c_str());
    if (const std::string required = gpu_required_reason(); !required.empty()) {
      std::printf("selftest: FAIL (a GPU is required here: %s)\n", required.c_str());
      return 1;
    }
    std::printf(
        "selftest: SKIPPED (no GPU to check; `bareyolo selftest --cpu-reference-only` checks the "
        "CPU kernels)\n");
    return kSkippedExitCode;
  }
  const std::vector<Device> devices = chosen_gpus(gpus);
  std::printf("selftest: NCCL collectives across %s, one worker per GPU\n",
              joined(devices, [](const Device& d) { return d.str(); }).c_str());
  std::fflush(stdout);
  std::vector<selftest::CheckResult> results =
      selftest::run_collective_checks(devices, dist::Backend::nccl);
  std::printf(
      "selftest: %zu op checks on each of %s against the CPU (in double where an op has it)\n",
      selftest::op_checks().size(), joined(devices, describe_gpu).c_str());
  for (const LibraryVersion& library : gpu_library_versions())
    if (const std::optional<std::string> warning = library.warning())
      std::printf("selftest: %s\n", warning->c_str());
  std::fflush(stdout);
  const std::vector<selftest::CheckResult> ops =
      selftest::run_checks(selftest::op_checks(), devices);
  results.insert(results.end(), ops.begin(), ops.end());
  return print_verdict(results);
}

}  // namespace

void add_selftest_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "selftest",
      "Check NCCL and every op on this machine's GPUs against the CPU (about a minute)");
  command
      ->add_option("--device", options.device,
                   "GPUs to check: auto (every GPU), 0, 0,1 or cuda:1; one NCCL rank each")
      ->capture_default_str();
  command->add_flag("--cpu-reference-only", options.cpu_reference_only,
                    "Run the op checks with the CPU's kernels as the device under test "
                    "(no GPU needed: what CI runs)");
  command->add_flag("--verbose", options.every_row, "One line per check instead of per group");
}

std::optional<int> run_selftest_command(const CLI::App& app) {
  if (app.got_subcommand("selftest")) return run_selftest();
  return std::nullopt;
}

}  // namespace bareyolo
