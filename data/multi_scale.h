// data/multi_scale.h — YOLOv5's --multi-scale: at every training step one random image size,
// and the batch resized to it on the device before the forward (bilinear, Batch::images_tensor);
// the labels are normalised to the image, so they do not change.
//
// The size (YOLOv5's train.py): an integer drawn uniformly from [imgsz / 2, 3 imgsz / 2 +
// stride), rounded down to a multiple of the stride — so every stride multiple from about half
// to one and a half imgsz is equally likely (imgsz 640, stride 32: 320, 352, ..., 960).
// The shape: the batch's longer side becomes that size and both sides are scaled alike, each
// rounded up to a multiple of the stride: side' = ceil(side * size / longer side / stride) *
// stride. A square batch stays square; a --rect batch keeps its aspect ratio within a stride.
// Computed in doubles in YOLOv5's order, which YOLOv5's rounding follows: 608 at size 672 is
// 608 * (672 / 608) / 32 = 21.000000000000004 strides, so 704 (one stride above the size).
//
// The draw comes from SampleRng(seed, iteration, kMultiScaleStream), iteration being the
// step's index in the run (epoch x steps per epoch + step): one size per global step, the same
// on every rank and for any world size or worker count, and again after a resume.
#pragma once

#include <cstdint>

#include "data/letterbox.h"  // defines: ImageSize

namespace bareyolo::data {

// The smallest and the largest size the draw can give.
struct SizeRange {
  int smallest = 0, largest = 0;
};
SizeRange multi_scale_range(int imgsz, int stride);

// The size of step `iteration` of the run.
int multi_scale_size(uint64_t seed, int64_t iteration, int imgsz, int stride);

// The shape a batch of `batch` becomes at `size`.
ImageSize multi_scale_shape(ImageSize batch, int size, int stride);

// The RNG stream index of the draw (sample positions and the shuffle's stream never reach it).
inline constexpr uint64_t kMultiScaleStream = ~0ull - 1;

}  // namespace bareyolo::data
