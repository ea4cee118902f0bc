// tools/bareyolo/eval_commands.h — evaluation and inference subcommands of the bareyolo CLI:
//
//   bareyolo val     --weights W --data D [--cfg CFG --imgsz 640 --batch 32 --conf 0.001
//                    --iou 0.6 --split val | --task val|train|test|speed --no-rect --single-cls
//                    --workers 0 --save-json F --project runs/val --name exp --exist-ok]
//       mAP@0.5 and mAP@0.5:0.95 as YOLOv5's val.py computes them, with a per-class table, its
//       pictures and the Speed line
//   bareyolo predict --weights W --source IMG_OR_DIR [--cfg CFG --conf 0.25 --iou 0.45
//                    --imgsz 640 --project runs/predict --name exp --exist-ok | --out DIR,
//                    --names D --save-txt --save-conf --save-crop --save-raw F ...]
//       images with labelled boxes drawn, and detections.json, in runs/predict/exp, exp2, ...
//       (docs/evaluation.md lists every option)
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
