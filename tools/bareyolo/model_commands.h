// tools/bareyolo/model_commands.h — the model subcommands of the bareyolo CLI:
//
//   bareyolo init  --cfg CFG [--nc N] [--seed S] --out W.safetensors
//       freshly initialised weights (YOLOv5's from-scratch state) under YOLOv5's names
//   bareyolo grads --cfg CFG --weights W.safetensors --batch B.safetensors --out G.safetensors
//                  [--nc N] [--hyp H.yaml]
//       one training-mode forward, YOLOv5's loss and backward on a given batch: the golden
//       check against PyTorch YOLOv5 (docs/models.md, "Checking against PyTorch YOLOv5")
//   bareyolo convert --weights W.safetensors [--dtype bf16|fp32] --out W16.safetensors
//       the same file with its F32/BF16 tensors in the other dtype (bf16 weights load anywhere
//       fp32 ones do)
//
// main() calls add_model_commands(app) before parsing and run_model_command(app) after.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

namespace bareyolo {

void add_model_commands(CLI::App& app);

// The exit code of the model subcommand that was given, or nothing if none was.
std::optional<int> run_model_command(const CLI::App& app);

}  // namespace bareyolo
