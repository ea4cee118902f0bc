// data/rect_batches.h — YOLOv5's rectangular batches (its `rect` option), shared by validation
// (val_batches.h) and `train --rect` (train_batches.h).
//
// The images are ordered by aspect ratio h/w, so that a batch holds images of similar shape,
// and each batch gets the smallest stride-multiple canvas that holds its images letterboxed
// with the long side at imgsz:
//   (h, w) = ceil(shape * imgsz / stride + pad) * stride,
//   shape = (max ar, 1) when every image of the batch is wide (ar < 1), (1, 1 / min ar) when
//           every one is tall (ar > 1), else (1, 1).
// YOLOv5 pads 0.5 stride in validation (640 gives 672-pixel sides) and 0 in training.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/dataset.h"
#include "data/letterbox.h"  // defines: ImageSize

namespace bareyolo::data {

struct RectShapeOptions {
  int imgsz = 640;
  int stride = 32;
  double pad = 0.0;
};

// The dataset's indices by increasing aspect ratio h/w (of the images as stored), equal ratios
// in index order.
std::vector<int64_t> aspect_ratio_order(const Dataset& dataset);

// The canvas of a batch of `images` (dataset indices, at least one).
ImageSize rect_batch_shape(const Dataset& dataset, std::span<const int64_t> images,
                           const RectShapeOptions& options);

}  // namespace bareyolo::data
