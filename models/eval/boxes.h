// models/eval/boxes.h — axis-aligned boxes in pixels: the two encodings (centre + size as the
// Detect head predicts them, corners as NMS and the metrics use them), IoU, and the undoing
// of a letterbox, as YOLOv5's utils/general.py does them.
//
// Arithmetic is in float, in the order YOLOv5 does it, so that a box sitting exactly on an
// IoU threshold falls on the same side here as there.
#pragma once

#include <span>
#include <vector>

namespace bareyolo::models {

struct BoxXYWH {  // centre x, centre y, width, height
  float cx = 0, cy = 0, w = 0, h = 0;
};

struct BoxXYXY {  // top-left and bottom-right corners
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  bool operator==(const BoxXYXY&) const = default;
};

BoxXYXY xywh_to_xyxy(const BoxXYWH& box);
BoxXYWH xyxy_to_xywh(const BoxXYXY& box);

float box_area(const BoxXYXY& box);
// Area of the overlap, 0 when the boxes are disjoint.
float intersection_area(const BoxXYXY& a, const BoxXYXY& b);

// inter / (area_a + area_b - inter + 1e-7): YOLOv5's box_iou, whose eps keeps two empty
// boxes at IoU 0 instead of NaN.
float box_iou(const BoxXYXY& a, const BoxXYXY& b);
// IoU of every pair, row-major [first.size() x second.size()].
std::vector<float> box_iou_matrix(std::span<const BoxXYXY> first, std::span<const BoxXYXY> second);

// How an original image of (original_width x original_height) was placed on the network's
// input canvas: resized by `gain`, then shifted by (pad_x, pad_y).
struct Letterbox {
  float gain = 1;
  float pad_x = 0, pad_y = 0;
  float original_width = 0, original_height = 0;
};

// A box on the canvas mapped back onto the original image: subtract the padding, divide by
// the gain, clip to [0, width] x [0, height] (scale_boxes).
BoxXYXY scale_box_to_original(const BoxXYXY& box, const Letterbox& letterbox);

}  // namespace bareyolo::models
