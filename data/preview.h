// data/preview.h — a batch as one picture (`bareyolo show-batch`, train_batch*.jpg and
// val_batch*.jpg): its images in a grid, each box outlined in its class's colour with its
// class name (and confidence, for a prediction) above it. Drawn with data/raster.h.
#pragma once

#include <string>
#include <vector>

#include "data/batch.h"
#include "data/image.h"

namespace bareyolo::data {

// A box to draw on image `image` of a batch, in that image's pixels.
struct BatchBox {
  int image = 0;
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  int cls = 0;
  float conf = -1;  // < 0: a label (no confidence shown)
};

// The batch's labels as boxes.
std::vector<BatchBox> batch_labels(const Batch& batch);

// The grid of the batch's images with `boxes` drawn (by default its labels).
Image render_batch(const Batch& batch, const std::vector<std::string>& names);
Image render_batch(const Batch& batch, const std::vector<std::string>& names,
                   const std::vector<BatchBox>& boxes);

// Outlines the box (x1, y1)-(x2, y2) in class `cls`'s colour, `thickness` pixels wide, and
// writes `text` above it ("" writes nothing), but not above row `label_top` (the top of the
// box's tile in a grid).
void draw_box(Image& image, int x1, int y1, int x2, int y2, int cls, const std::string& text,
              int label_top = 0, int thickness = 2);

// "name" or "name 0.87": a box's label (class index when `names` lacks it).
std::string box_text(int cls, float conf, const std::vector<std::string>& names);

}  // namespace bareyolo::data
