// bench/synthetic_batch.h — the batch the training benches time their steps on: made once, in
// memory, so that no loader or decode competes with the step (bench_train, bench_gpu_train).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "models/loss/loss.h"

namespace bareyolo::bench {

constexpr int kBoxesPerImage = 3;

struct SyntheticBatch {
  Tensor images;  // (batch, 3, imgsz, imgsz) on the device asked for, values in [0, 1)
  std::vector<models::LabelRow> labels;  // kBoxesPerImage per image, YOLOv5's normalised rows
};

// Random pixels and random boxes (centres in [0.2, 0.8), sides in [0.05, 0.4), random classes),
// the same for the same seed.
SyntheticBatch synthetic_batch(int batch, int imgsz, int classes, uint32_t seed,
                               const Device& device = Device::cpu());

}  // namespace bareyolo::bench
