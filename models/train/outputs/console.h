// models/train/outputs/console.h — the run's lines in the log, as callbacks (callbacks.h):
//   on_train_start    "training <cfg> (<n> parameters) on <n> images, ... -> <run dir>"
//                     ("resuming ..." with where it continues)
//   on_val_end        YOLOv5's validation table (outputs/report.h)
//   on_fit_epoch_end  "epoch e/E  box ..  obj ..  cls ..  mAP50 ..  mAP50-95 ..  data_wait ..
//                     train <s> s  val <s> s  checkpoint <s> s  (<s> s)": where the epoch's
//                     seconds went (EpochMetrics), then the seconds since the logger was made
//   on_train_end      why the run stopped early, or how to continue one --max-steps ended
#pragma once

#include <functional>
#include <string>

#include "models/train/callbacks.h"

namespace bareyolo::models {

TrainCallbacks console_logger(std::function<void(const std::string&)> log);

}  // namespace bareyolo::models
