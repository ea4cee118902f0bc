// data/boxes.h — box formats of the pipeline and the conversions between them:
// labels are normalised centre-size (xywhn, LabelBox); augmentation moves pixel corners
// (xyxy, PixelBox) and, for polygon labels, the polygons' pixel points.
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
// The same for a polygon's normalised points.
Polygon to_pixels(const Polygon& polygon, float w, float h, float pad_x, float pad_y);

// Pixel xyxy -> xywhn of a width x height image, after clipping x to [0, width - 0.001] and y
// to [0, height - 0.001] (YOLOv5's xyxy2xywhn with clip=True).
LabelBox to_normalised(const PixelBox& box, int width, int height);

void clip_boxes(std::vector<PixelBox>& boxes, float width, float height);
void clip_polygons(std::vector<Polygon>& polygons, float width, float height);

// The box and polygon mirrored left-right in an image `width` wide (x -> width - x).
PixelBox mirror_left_right(const PixelBox& box, float width);
Polygon mirror_left_right(const Polygon& polygon, float width);

// YOLOv5's box_candidates: does a box that was `before` (already multiplied by the zoom) and is
// `after` a geometric transform still show the object? Both sides > 2 px, more than
// `min_area_kept` of the area kept (10 %; 1 % for a box made from a polygon), aspect ratio < 100.
bool box_survives(const PixelBox& before, const PixelBox& after, float min_area_kept = 0.1f);

}  // namespace bareyolo::data
