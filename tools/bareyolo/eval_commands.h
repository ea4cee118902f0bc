// tools/bareyolo/eval_commands.h — evaluation and inference subcommands of the bareyolo CLI:
//
//   bareyolo val     --cfg CFG --weights W --data D [--imgsz 640 --batch 32 --conf 0.001
//                    --iou 0.6 --split val --no-rect --workers 0 --save-json F]
//       mAP@0.5 and mAP@0.5:0.95 as YOLOv5's val.py computes them, with a per-class table
//   bareyolo predict --cfg CFG --weights W --source IMG_OR_DIR [--conf 0.25 --iou 0.45
//                    --imgsz 640 --out runs/predict --names D --save-raw F]
//       images with labelled boxes drawn, and detections.json (--save-raw: eval_commands.cpp)
//
// main() calls add_eval_commands(app) before parsing and run_eval_command(app) after.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

namespace bareyolo {

void add_eval_commands(CLI::App& app);

// The exit code of the eval subcommand that was given, or nothing if none was.
std::optional<int> run_eval_command(const CLI::App& app);

}  // namespace bareyolo
