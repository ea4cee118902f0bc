// models/eval/boxes.cpp — box encodings, IoU and letterbox undoing; see boxes.h.
#include "models/eval/boxes.h"

#include <algorithm>

namespace bareyolo::models {

BoxXYXY xywh_to_xyxy(const BoxXYWH& box) {
  return {box.cx - box.w / 2, box.cy - box.h / 2, box.cx + box.w / 2, box.cy + box.h / 2};
}

BoxXYWH xyxy_to_xywh(const BoxXYXY& box) {
  return {(box.x1 + box.x2) / 2, (box.y1 + box.y2) / 2, box.x2 - box.x1, box.y2 - box.y1};
}

float box_area(const BoxXYXY& box) { return (box.x2 - box.x1) * (box.y2 - box.y1); }

float intersection_area(const BoxXYXY& a, const BoxXYXY& b) {
  float overlap_w = std::max(0.0f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  float overlap_h = std::max(0.0f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  return overlap_w * overlap_h;
}

float box_iou(const BoxXYXY& a, const BoxXYXY& b) {
  constexpr float eps = 1e-7f;
  float inter = intersection_area(a, b);
  return inter / (box_area(a) + box_area(b) - inter + eps);
}

std::vector<float> box_iou_matrix(std::span<const BoxXYXY> first, std::span<const BoxXYXY> second) {
  std::vector<float> iou;
  iou.reserve(first.size() * second.size());
  for (const BoxXYXY& a : first)
    for (const BoxXYXY& b : second) iou.push_back(box_iou(a, b));
  return iou;
}

BoxXYXY scale_box_to_original(const BoxXYXY& box, const Letterbox& letterbox) {
  auto to_original_x = [&](float x) {
    return std::clamp((x - letterbox.pad_x) / letterbox.gain, 0.0f, letterbox.original_width);
  };
  auto to_original_y = [&](float y) {
    return std::clamp((y - letterbox.pad_y) / letterbox.gain, 0.0f, letterbox.original_height);
  };
  return {to_original_x(box.x1), to_original_y(box.y1), to_original_x(box.x2),
          to_original_y(box.y2)};
}

}  // namespace bareyolo::models
