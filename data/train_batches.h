// data/train_batches.h — the training loader's batches: one epoch of this rank's steps
// (the sampler's, sampler.h) with the shape of each batch.
//
//   square (the default): every sample imgsz x imgsz (a mosaic or a letterbox);
//   --rect (YOLOv5's rectangular training): the sampler takes the images in aspect-ratio order
//     (training_order) without shuffling, and global batch t gets the canvas of its images
//     (rect_batches.h, with YOLOv5's training pad 0); every sample is letterboxed into it, no
//     mosaic. The canvas belongs to the GLOBAL batch — it is computed from the images of every
//     rank's share — so each rank's micro-batch of step t has it and W ranks of B/W train like
//     one of B. Images that pad the last batch (the sampler repeats the first ones) are
//     letterboxed into the canvas of the batch's own images, which YOLOv5's shorter last batch
//     has alone;
//   --multi-scale: on top, the size each batch is resized to before the forward
//     (multi_scale.h), drawn per global step.
#pragma once

#include <cstdint>
#include <vector>

#include "data/dataset.h"
#include "data/sampler.h"

namespace bareyolo::data {

struct TrainBatchOptions {
  int imgsz = 640;
  int stride = 32;  // the model's largest, at least 32 (YOLOv5's gs)
  bool rect = false;
  bool multi_scale = false;
  uint64_t seed = 0;  // the run's: multi_scale's draw
};

// The order the sampler takes the images in without shuffling: by aspect ratio for --rect,
// else none (0..n-1, or shuffled).
std::vector<int64_t> training_order(const Dataset& dataset, bool rect);

// This rank's steps of `epoch`; `sampler` must take the images in training_order.
std::vector<Step> training_plan(const Dataset& dataset, const DistributedSampler& sampler,
                                int64_t epoch, const TrainBatchOptions& options);

}  // namespace bareyolo::data
