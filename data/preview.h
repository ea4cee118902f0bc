// data/preview.h — a batch as one picture (`bareyolo show-batch`): its images in a grid, each
// box outlined in its class's colour with the class name above it, to see what the model is
// fed. Text uses stb_easy_font (a tiny built-in vector font), drawn as filled rectangles.
#pragma once

#include <string>
#include <vector>

#include "data/batch.h"
#include "data/image.h"

namespace bareyolo::data {

Image render_batch(const Batch& batch, const std::vector<std::string>& names);

// Outlines the box (x1, y1)-(x2, y2) in class `cls`'s colour and writes `text` above it,
// but not above row `label_top` (the top of the box's tile in a grid).
void draw_box(Image& image, int x1, int y1, int x2, int y2, int cls, const std::string& text,
              int label_top = 0);

}  // namespace bareyolo::data
