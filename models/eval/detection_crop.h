// models/eval/detection_crop.h — the piece of an image around one detection that `predict
// --save-crop` writes, cut as YOLOv5's detect.py cuts it (save_one_box): the box with its
// corners rounded (detect.py rounds boxes before it uses them), grown about its centre to
// 1.02 times its width and height plus 10 pixels, corners truncated to whole pixels and
// clipped to the image. The margin keeps an object's edges inside its crop.
#pragma once

#include "data/image.h"
#include "models/eval/boxes.h"

namespace bareyolo::models {

// Pixels x1 <= x < x2, y1 <= y < y2 of an image.
struct PixelRegion {
  int x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  int width() const { return x2 - x1; }
  int height() const { return y2 - y1; }
  bool operator==(const PixelRegion&) const = default;
};

// Where the crop of `box` (in the image's pixels) lies in an image of width x height.
PixelRegion crop_region(const BoxXYXY& box, int width, int height);

// The crop itself: a copy of those pixels of `image`.
data::Image detection_crop(const data::Image& image, const BoxXYXY& box);

}  // namespace bareyolo::models
