// models/train/outputs/tensorboard.h — the run's TensorBoard events file (engine/tfevents.h),
// on by default (--no-tensorboard: off), as YOLOv5's train.py logs: one set of scalars per
// epoch, step = the epoch (0-based), under YOLOv5's tags
//   train/box_loss, train/obj_loss, train/cls_loss, x/lr0, x/lr1, x/lr2
//   metrics/precision, metrics/recall, metrics/mAP_0.5, metrics/mAP_0.5:0.95,
//   val/box_loss, val/obj_loss, val/cls_loss   (epochs that were validated)
// `tensorboard --logdir runs/train` shows every run. A resumed run starts a new file in the
// same directory; TensorBoard reads the files of a directory as one run.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "models/train/callbacks.h"

namespace bareyolo::models {

// The epoch's scalars under YOLOv5's tags, in the order above.
std::vector<std::pair<std::string, float>> tensorboard_scalars(const EpochMetrics& m);

// Writes <run_dir>/events.out.tfevents.<seconds>.<host>.<pid>.
TrainCallbacks tensorboard_writer();

}  // namespace bareyolo::models
