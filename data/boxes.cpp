// data/boxes.cpp — box conversions and the degenerate-box filter (see boxes.h).
#include "data/boxes.h"

#include <algorithm>

namespace bareyolo::data {

PixelBox to_pixels(const LabelBox& box, float w, float h, float pad_x, float pad_y) {
  return {box.class_id, w * (box.cx - box.w / 2) + pad_x, h * (box.cy - box.h / 2) + pad_y,
          w * (box.cx + box.w / 2) + pad_x, h * (box.cy + box.h / 2) + pad_y};
}

Polygon to_pixels(const Polygon& polygon, float w, float h, float pad_x, float pad_y) {
  Polygon pixels;
  pixels.reserve(polygon.size());
  for (const Point& p : polygon) pixels.push_back({w * p.x + pad_x, h * p.y + pad_y});
  return pixels;
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

void clip_polygons(std::vector<Polygon>& polygons, float width, float height) {
  for (Polygon& polygon : polygons)
    for (Point& p : polygon)
      p.x = std::clamp(p.x, 0.0f, width), p.y = std::clamp(p.y, 0.0f, height);
}

PixelBox mirror_left_right(const PixelBox& box, float width) {
  return {box.class_id, width - box.x2, box.y1, width - box.x1, box.y2};
}

Polygon mirror_left_right(const Polygon& polygon, float width) {
  Polygon mirrored;
  mirrored.reserve(polygon.size());
  for (const Point& p : polygon) mirrored.push_back({width - p.x, p.y});
  return mirrored;
}

bool box_survives(const PixelBox& before, const PixelBox& after, float min_area_kept) {
  constexpr float kMinSide = 2, kMaxAspect = 100, kEps = 1e-16f;
  float w1 = before.x2 - before.x1, h1 = before.y2 - before.y1;
  float w2 = after.x2 - after.x1, h2 = after.y2 - after.y1;
  float aspect = std::max(w2 / (h2 + kEps), h2 / (w2 + kEps));
  return w2 > kMinSide && h2 > kMinSide && w2 * h2 / (w1 * h1 + kEps) > min_area_kept &&
         aspect < kMaxAspect;
}

}  // namespace bareyolo::data
