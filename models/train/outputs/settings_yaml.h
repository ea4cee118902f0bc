// models/train/outputs/settings_yaml.h — hyp.yaml and opt.yaml in the run directory, as YOLOv5
// writes them, to diff one run's settings against another's (or against a YOLOv5 run's):
//
//   hyp.yaml   every hyperparameter the run trains with, under YOLOv5's hyp names and in its
//              order; `--hyp` reads it back
//   opt.yaml   the rest of the run's saved configuration (options.h) as `bareyolo train
//              --config` keys, YOLOv5's names where bareyolo has them (batch_size, imgsz,
//              noval, cos_lr, ...); `hyp:` names the hyp.yaml beside it, so `--config opt.yaml`
//              configures a new run the same way
//
// Rank 0 writes both, atomically, when a run starts (again on resume: the same settings but
// more --epochs).
#pragma once

#include <string>

#include "models/train/options.h"

namespace bareyolo::models {

std::string hyp_yaml_text(const TrainOptions& options);
std::string opt_yaml_text(const TrainOptions& options, const std::string& hyp_yaml_path);
// <run_dir>/hyp.yaml and <run_dir>/opt.yaml.
void write_settings_yamls(const TrainOptions& options, const std::string& run_dir);

}  // namespace bareyolo::models
