// models/train/run_model.h — the model yaml a training run builds: --cfg when given, else the
// one its weights carry (a YOLOv5 .pt's, or a bareyolo file's "yaml" metadata), so that
// `train --weights yolov5s.pt` needs no --cfg. A resumed run builds its checkpoint's (with the
// anchors it trained with), or its --cfg where the checkpoint carries no yaml. A new
// run with the hyp file's `anchors: N` (TrainOptions::anchors) builds it with N placeholder
// anchors per level, for AutoAnchor to replace (autoanchor.h).
#pragma once

#include "models/train/options.h"
#include "models/yolo/model_config.h"

namespace bareyolo::models {

// Throws std::invalid_argument saying what to give when none of them names a model.
ModelConfig run_model_config(const TrainOptions& options);

}  // namespace bareyolo::models
