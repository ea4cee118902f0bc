// tools/bareyolo/bareyolo.cpp — the bareyolo command line.
//
//   bareyolo devices      the CPU, the GPUs and the CUDA libraries this binary loads
//   bareyolo demo         train a small network end to end with the CPU kernels
//   bareyolo make-shapes, data-check, show-batch     datasets (tools/bareyolo/data_commands.h)
//   bareyolo init, grads  weights and the golden check (tools/bareyolo/model_commands.h)
//   bareyolo val, predict evaluation and inference (tools/bareyolo/eval_commands.h)
//   bareyolo export       the model as an ONNX graph (tools/bareyolo/export_command.h)
//   bareyolo train        YOLOv5's recipe on one process, CPU ranks or GPUs, spawned or under
//                         torchrun/srun/mpirun (tools/bareyolo/train_command.h; docs/ddp.md)
//   bareyolo trace-summary  the anatomy of a step from a `train --trace` file
//                         (tools/bareyolo/trace_command.h)
//   bareyolo selftest     NCCL and every op on the GPUs against the CPU
//                         (tools/bareyolo/selftest_command.h)
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "engine/distributed/comm/nccl_communicator.h"  // defines: dist::nccl_version
#include "kernels/cpu/host_memory.h"                    // defines: HostOutOfMemory
#include "kernels/cpu/thread_pool.h"          // defines: ThreadPool (CPU kernels' threads)
#include "kernels/devices.h"                  // defines: usable_gpu_count, gpu_library_versions
#include "tools/bareyolo/data_commands.h"     // defines: add_data_commands, run_data_command
#include "tools/bareyolo/demo.h"              // defines: run_demo
#include "tools/bareyolo/eval_commands.h"     // defines: add_eval_commands, run_eval_command
#include "tools/bareyolo/export_command.h"    // defines: add_export_command, run_export_command
#include "tools/bareyolo/model_commands.h"    // defines: add_model_commands, run_model_command
#include "tools/bareyolo/selftest_command.h"  // defines: add_selftest_command, run_selftest_command
#include "tools/bareyolo/trace_command.h"     // defines: add_trace_command, run_trace_command
#include "tools/bareyolo/train_command.h"     // defines: add_train_command, run_train_command
#include "tools/bareyolo/validators.h"

namespace {

// The CPU, each GPU, and the CUDA libraries actually loaded beside those compiled against, with
// a warning for each that is older. Exit 1 where a GPU is required but none is usable.
int print_devices() {
  using namespace bareyolo;
  std::printf("cpu: %d threads, AVX2+FMA%s\n", ThreadPool::global().num_threads(),
              __builtin_cpu_supports("avx512f") ? ", AVX-512" : "");
  const int gpus = usable_gpu_count();
  if (gpus > 0)
    std::printf("cuda: %d device(s)\n", gpus);
  else
    std::printf("cuda: none (%s)\n", gpu_unavailable_reason().c_str());
  for (int i = 0; i < gpus; ++i) {
    const GpuProperties p = gpu_properties(i);
    std::printf("cuda:%d: %s, %.1f GiB, compute capability %d.%d\n", i, p.name.c_str(),
                p.memory_gib, p.compute_major, p.compute_minor);
  }
  std::vector<LibraryVersion> libraries = gpu_library_versions();
  if (std::optional<LibraryVersion> nccl = dist::nccl_version()) libraries.push_back(*nccl);
  for (const LibraryVersion& library : libraries) {
    std::printf("library: %s\n", library.str().c_str());
    if (std::optional<std::string> warning = library.warning())
      std::printf("%s\n", warning->c_str());
  }
  if (const std::string required = gpu_required_reason(); gpus == 0 && !required.empty()) {
    std::printf("error: a GPU is required here (%s), but none is usable\n", required.c_str());
    return 1;
  }
  return 0;
}

// The refusal of a first argument that names no command ("" when it names one, or is a flag):
// CLI11 alone answers `bareyolo trace --help` with the top-level help and `bareyolo trace`
// with "A subcommand is required", neither naming the mistake nor the command meant.
std::string unknown_command_message(const CLI::App& app, const std::string& word) {
  if (word.empty() || word[0] == '-') return "";
  std::string near;  // the commands whose name holds the word, or is held by it
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
    const std::string& name = command->get_name();
    if (name == word) return "";
    if (name.find(word) != std::string::npos || word.find(name) != std::string::npos)
      near += (near.empty() ? "" : " or ") + name;
  }
  return "'" + word + "' is not a bareyolo command" +
         (near.empty() ? "" : "; did you mean " + near + "?") + " (bareyolo --help lists them)";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bareyolo: a framework-free YOLOv5 training engine"};
  app.set_version_flag("--version", "bareyolo 0.1.0");
  app.require_subcommand(1);

  app.add_subcommand("devices", "List the CPU and CUDA devices this binary can use");

  bareyolo::DemoOptions demo;
  CLI::App* demo_cmd =
      app.add_subcommand("demo", "Train a small conv/BN/SiLU network on synthetic images (CPU)");
  demo_cmd->add_option("--steps", demo.steps, "Optimizer steps")->check(bareyolo::cli::kPositive);
  demo_cmd->add_option("--batch", demo.batch, "Images per step")->check(bareyolo::cli::kPositive);
  demo_cmd->add_option("--imgsz", demo.image_size, "Image side in pixels")
      ->check(CLI::Range(3, 512));
  demo_cmd->add_option("--lr", demo.learning_rate, "SGD learning rate")
      ->check(bareyolo::cli::kPositive);
  demo_cmd->add_option("--seed", demo.seed, "Random seed")->check(bareyolo::cli::kNonNegative);

  bareyolo::add_data_commands(app);
  bareyolo::add_model_commands(app);
  bareyolo::add_eval_commands(app);
  bareyolo::add_export_command(app);
  bareyolo::add_train_command(app);
  bareyolo::add_trace_command(app);
  bareyolo::add_selftest_command(app);

  if (argc > 1) {
    if (const std::string unknown = unknown_command_message(app, argv[1]); !unknown.empty()) {
      std::fprintf(stderr, "bareyolo: error: %s\n", unknown.c_str());
      return 1;
    }
  }
  CLI11_PARSE(app, argc, argv);
  try {
    if (app.got_subcommand("devices")) return print_devices();
    if (std::optional<int> code = bareyolo::run_data_command(app)) return *code;
    if (std::optional<int> code = bareyolo::run_model_command(app)) return *code;
    if (std::optional<int> code = bareyolo::run_eval_command(app)) return *code;
    if (std::optional<int> code = bareyolo::run_export_command(app)) return *code;
    if (std::optional<int> code = bareyolo::run_train_command(app)) return *code;
    if (std::optional<int> code = bareyolo::run_trace_command(app)) return *code;
    if (std::optional<int> code = bareyolo::run_selftest_command(app)) return *code;
    if (app.got_subcommand("demo")) {
      double accuracy = bareyolo::run_demo(demo);
      std::printf("demo finished: pixel accuracy %.3f (chance is about 0.5)\n", accuracy);
      return 0;
    }
  } catch (const bareyolo::HostOutOfMemory& error) {  // says what it was allocating
    std::fprintf(stderr, "bareyolo: error: %s\n", error.what());
    return 1;
  } catch (const std::bad_alloc&) {  // a container's growth: no size to tell
    std::fprintf(stderr,
                 "bareyolo: error: out of host memory; try a smaller --batch or --imgsz, or "
                 "fewer --workers\n");
    return 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bareyolo: error: %s\n", error.what());
    return 1;
  }
  return 0;
}
