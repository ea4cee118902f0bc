// data/val_batches.h — the validation loader's batches: the dataset in order, in batches of
// `batch` (the last one shorter; nothing padded, so every image is scored once).
//
// Square: every batch imgsz x imgsz. Rectangular (YOLOv5's rect): images sorted by aspect
// ratio, each batch its own canvas (rect_batches.h) with pad = 0.5 as in YOLOv5's val (so 640
// gives 672-pixel sides).
#pragma once

#include <vector>

#include "data/dataset.h"
#include "data/sampler.h"

namespace bareyolo::data {

struct ValBatchOptions {
  int batch = 32;
  int imgsz = 640;
  bool rect = false;
  int stride = 32;
  double pad = 0.5;
};

std::vector<Step> validation_plan(const Dataset& dataset, const ValBatchOptions& options);

}  // namespace bareyolo::data
