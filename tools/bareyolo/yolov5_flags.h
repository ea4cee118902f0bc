// tools/bareyolo/yolov5_flags.h — YOLOv5's flags (v7.0's train.py, val.py, detect.py) that
// bareyolo cannot honour, each refused by its name with the reason, so that a YOLOv5 command
// pasted here either runs as YOLOv5 would or stops at the first flag it cannot run: never a
// flag silently ignored. The flags bareyolo does honour carry YOLOv5's names as aliases where
// they are registered (--img, --batch-size, --noval, ...); docs/from_yolov5.md has the table.
#pragma once

#include <CLI/CLI.hpp>

#include <span>

namespace bareyolo::cli {

struct RefusedFlag {
  const char* name;  // "--quad"
  const char* why;   // what bareyolo lacks, and what to do instead
};

// YOLOv5's flags of each script that `bareyolo train`, `val` and `predict` refuse.
std::span<const RefusedFlag> yolov5_train_refusals();
std::span<const RefusedFlag> yolov5_val_refusals();
std::span<const RefusedFlag> yolov5_predict_refusals();

// Registers each flag `command` does not already have (hidden from --help) as one that takes
// any value or none and fails the parse naming itself and why. Call it after the command's own
// flags: a flag that becomes supported simply stops being refused.
void refuse_flags(CLI::App* command, std::span<const RefusedFlag> flags);

}  // namespace bareyolo::cli
