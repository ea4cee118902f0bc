// data/boxes.cpp — box conversions and the degenerate-box filter (see boxes.h).
#include "data/boxes.h"

#include <algorithm>

namespace bareyolo::data {

PixelBox to_pixels(const LabelBox& box, float w, float h, float pad_x, float pad_y) {
  return {box.class_id, w * (box.cx - box.w / 2) + pad_x, h * (box.cy - box.h / 2) + pad_y,
          w * (box.cx + box.w / 2) + pad_x, h * (box.cy + box.h / 2) + pad_y};
}

LabelBox to_normalised(const PixelBox& box, int width, int height) {
  constexpr float kEdge = 1e-3f;
  float x1 = std::clamp(box.x1, 0.0f, width - kEdge), x2 = std::clamp(box.x2, 0.0f, width - kEdge);
  float y1 = std::clamp(box.y1, 0.0f, height - kEdge),
        y2 = std::clamp(box.y2, 0.0f, height - kEdge);
  return {box.class_id, (x1 + x2) / 2 / width, (y1 + y2) / 2 / height, (x2 - x1) / width,
          (y2 - y1) / height};
}

void clip_boxes(std::vector<PixelBox>& boxes, float width, float height) {
  for (PixelBox& b : boxes) {
    b.x1 = std::clamp(b.x1, 0.0f, width), b.x2 = std::clamp(b.x2, 0.0f, width);
    b.y1 = std::clamp(b.y1, 0.0f, height), b.y2 = std::clamp(b.y2, 0.0f, height);
  }
}

bool box_survives(const PixelBox& before, const PixelBox& after) {
  constexpr float kMinSide = 2, kMinAreaKept = 0.1f, kMaxAspect = 100, kEps = 1e-16f;
  float w1 = before.x2 - before.x1, h1 = before.y2 - before.y1;
  float w2 = after.x2 - after.x1, h2 = after.y2 - after.y1;
  float aspect = std::max(w2 / (h2 + kEps), h2 / (w2 + kEps));
  return w2 > kMinSide && h2 > kMinSide && w2 * h2 / (w1 * h1 + kEps) > kMinAreaKept &&
         aspect < kMaxAspect;
}

}  // namespace bareyolo::data
