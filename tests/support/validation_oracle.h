// tests/support/validation_oracle.h — a predictor for models::validate that needs no model: it
// "detects" every label of the batch exactly, on the canvas, so that validation must score
// YOLOv5's perfect 0.995 through whatever letterboxing and mapping back the batches take.
#pragma once

#include <vector>

#include "models/eval/validate.h"

namespace bareyolo::testing {

// Every label of the batch as a detection of confidence 0.9, of class (its class + class_shift)
// mod classes: a shift of 0 is a perfect detector, any other one confuses every class.
inline models::BatchPredictor validation_oracle(int class_shift, int classes) {
  return [=](const data::Batch& batch) {
    std::vector<std::vector<models::Detection>> detections(size_t(batch.size));
    for (int64_t r = 0; r < batch.num_targets(); ++r) {
      const float* row = batch.targets.data() + r * 6;
      const models::BoxXYXY box =
          models::xywh_to_xyxy({row[2] * batch.width, row[3] * batch.height, row[4] * batch.width,
                                row[5] * batch.height});
      detections[size_t(row[0])].push_back({box, 0.9f, (int(row[1]) + class_shift) % classes});
    }
    return detections;
  };
}

}  // namespace bareyolo::testing
