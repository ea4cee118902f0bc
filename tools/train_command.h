// tools/train_command.h — `bareyolo train`: YOLOv5's recipe on one process (models/trainer.h).
//
//   bareyolo train [--data D] [--cfg CFG] [--weights W] [--epochs 100] [--batch 16]
//                  [--imgsz 640] [--workers 2] [--project runs/train] [--name exp]
//                  [--exist-ok] [--seed 0] [--nbs 64] [--patience 100] [--max-steps N]
//                  [--no-val] [--cos-lr]
// Without --data it trains on the built-in shapes dataset, generated on first use in
// datasets/shapes. Outputs go to <project>/<name> (exp, exp2, ... unless --exist-ok).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

namespace bareyolo {

void add_train_command(CLI::App& app);

// The exit code of `train` if it was given, or nothing.
std::optional<int> run_train_command(const CLI::App& app);

}  // namespace bareyolo
