// models/eval/detection_crop.cpp — see detection_crop.h.
#include "models/eval/detection_crop.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace bareyolo::models {

namespace {

constexpr float kCropGain = 1.02f;  // save_one_box's gain and pad
constexpr float kCropPad = 10.0f;

}  // namespace

PixelRegion crop_region(const BoxXYXY& box, int width, int height) {
  // torch's round() rounds halves to even, as nearbyint does in the default rounding mode.
  const BoxXYXY rounded = {std::nearbyint(box.x1), std::nearbyint(box.y1), std::nearbyint(box.x2),
                           std::nearbyint(box.y2)};
  BoxXYWH grown = xyxy_to_xywh(rounded);
  grown.w = grown.w * kCropGain + kCropPad;
  grown.h = grown.h * kCropGain + kCropPad;
  const BoxXYXY corners = xywh_to_xyxy(grown);
  // .long() truncates toward zero; clip_boxes then clamps to [0, width] x [0, height].
  auto pixel = [](float v, int limit) { return std::clamp(int(std::trunc(v)), 0, limit); };
  return {pixel(corners.x1, width), pixel(corners.y1, height), pixel(corners.x2, width),
          pixel(corners.y2, height)};
}

data::Image detection_crop(const data::Image& image, const BoxXYXY& box) {
  const PixelRegion region = crop_region(box, image.width, image.height);
  data::Image crop(region.width(), region.height(), 0);
  for (int y = 0; y < crop.height; ++y)
    std::memcpy(crop.row(y), image.at(region.x1, region.y1 + y), size_t(crop.width) * 3);
  return crop;
}

}  // namespace bareyolo::models
