// data/preview.cpp — drawing a batch as a grid (see preview.h).
#include "data/preview.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "data/raster.h"

namespace bareyolo::data {

std::vector<BatchBox> batch_labels(const Batch& batch) {
  std::vector<BatchBox> boxes;
  for (int64_t t = 0; t < batch.num_targets(); ++t) {
    const LabelRow label = batch.label(t);
    const float w = float(batch.width), h = float(batch.height);
    boxes.push_back({.image = label.image,
                     .x1 = (label.cx - label.w / 2) * w,
                     .y1 = (label.cy - label.h / 2) * h,
                     .x2 = (label.cx + label.w / 2) * w,
                     .y2 = (label.cy + label.h / 2) * h,
                     .cls = label.class_id});
  }
  return boxes;
}

Image render_batch(const Batch& batch, const std::vector<std::string>& names) {
  return render_batch(batch, names, batch_labels(batch));
}

Image render_batch(const Batch& batch, const std::vector<std::string>& names,
                   const std::vector<BatchBox>& boxes) {
  int columns = int(std::ceil(std::sqrt(double(batch.size))));
  int rows = (batch.size + columns - 1) / std::max(columns, 1);
  Image grid(columns * batch.width, rows * batch.height, 0);
  const size_t row_bytes = size_t(batch.width) * 3;
  for (int i = 0; i < batch.size; ++i) {
    int ox = (i % columns) * batch.width, oy = (i / columns) * batch.height;
    const uint8_t* pixels = batch.image(i);  // RGB rows, as the grid's
    for (int y = 0; y < batch.height; ++y)
      std::memcpy(grid.at(ox, oy + y), pixels + size_t(y) * row_bytes, row_bytes);
    outline_rect(grid, ox, oy, ox + batch.width, oy + batch.height, 1, kWhite);
  }
  for (const BatchBox& box : boxes) {
    int ox = (box.image % columns) * batch.width, oy = (box.image / columns) * batch.height;
    draw_box(grid, ox + int(box.x1), oy + int(box.y1), ox + int(box.x2), oy + int(box.y2), box.cls,
             box_text(box.cls, box.conf, names), oy);
  }
  return grid;
}

void draw_box(Image& image, int x1, int y1, int x2, int y2, int cls, const std::string& text,
              int label_top, int thickness) {
  const Rgb colour = class_colour(cls);
  outline_rect(image, x1, y1, x2, y2, thickness, colour);
  if (!text.empty()) draw_label(image, x1, std::max(label_top, y1 - text_height()), text, colour);
}

std::string box_text(int cls, float conf, const std::vector<std::string>& names) {
  std::string text = cls >= 0 && cls < int(names.size()) ? names[size_t(cls)] : std::to_string(cls);
  if (conf >= 0) {
    char number[16];
    std::snprintf(number, sizeof number, " %.2f", double(conf));
    text += number;
  }
  return text;
}

}  // namespace bareyolo::data
