// tools/bareyolo/train_command.h — `bareyolo train`: YOLOv5's recipe (models/train/trainer.h).
//
//   bareyolo train [--data D] [--cfg CFG] [--weights W] [--epochs 100] [--batch 16]
//                  [--imgsz 640] [--workers 2] [--project runs/train] [--name exp]
//                  [--exist-ok] [--seed 0] [--nbs 64] [--patience 100] [--optimizer SGD|Adam|AdamW]
//                  [--cos-lr] [--freeze N] [--hyp FILE] [--save-period N] [--save-steps N]
//                  [--save-total-limit N] [--resume [PATH]] [--max-steps N] [--no-val]
//                  [--config FILE]
// Without --data it trains on the built-in shapes dataset, generated on first use in
// datasets/shapes. Outputs go to <project>/<name> (exp, exp2, ... unless --exist-ok).
// --config FILE holds the same flags as yaml keys; the command line wins over it.
// YOLOv5's train.py flags work under their names where bareyolo has them (--img, --batch-size,
// --noval, a bare --cache, --freeze 0 1 2) and are refused by name where not (yolov5_flags.h).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

namespace bareyolo {

void add_train_command(CLI::App& app);

// The exit code of `train` if it was given, or nothing.
std::optional<int> run_train_command(const CLI::App& app);

}  // namespace bareyolo
