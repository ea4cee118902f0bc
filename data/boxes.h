// data/boxes.h — box formats of the pipeline and the conversions between them:
// labels are normalised centre-size (xywhn, LabelBox); augmentation moves pixel corners
// (xyxy, PixelBox).
#pragma once

#include <vector>

#include "data/label_file.h"

namespace bareyolo::data {

struct PixelBox {
  int class_id = 0;
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

// xywhn -> pixel xyxy on a w x h image placed at (pad_x, pad_y).
PixelBox to_pixels(const LabelBox& box, float w, float h, float pad_x, float pad_y);

// Pixel xyxy -> xywhn of a width x height image, after clipping x to [0, width - 0.001] and y
// to [0, height - 0.001] (YOLOv5's xyxy2xywhn with clip=True).
LabelBox to_normalised(const PixelBox& box, int width, int height);

void clip_boxes(std::vector<PixelBox>& boxes, float width, float height);

// YOLOv5's box_candidates: does a box that was `before` (already multiplied by the zoom) and is
// `after` a geometric transform still show the object? Both sides > 2 px, area kept > 10 %,
// aspect ratio < 100.
bool box_survives(const PixelBox& before, const PixelBox& after);

}  // namespace bareyolo::data
