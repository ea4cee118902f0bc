// data/mixup.cpp — blending two mosaics (see mixup.h).
#include "data/mixup.h"

#include <stdexcept>
#include <string>

namespace bareyolo::data {

double mixup_ratio(SampleRng& rng) {
  constexpr double kAlpha = 32.0;  // YOLOv5's alpha = beta
  return rng.beta(kAlpha, kAlpha);
}

void mix_up(Image& image, std::vector<PixelBox>& boxes, const Image& other,
            const std::vector<PixelBox>& other_boxes, double ratio) {
  if (other.width != image.width || other.height != image.height)
    throw std::invalid_argument("mixup needs two images of one size, got " +
                                std::to_string(image.width) + "x" + std::to_string(image.height) +
                                " and " + std::to_string(other.width) + "x" +
                                std::to_string(other.height));
  const double other_ratio = 1 - ratio;
  for (size_t i = 0; i < image.pixels.size(); ++i)
    image.pixels[i] = uint8_t(image.pixels[i] * ratio + other.pixels[i] * other_ratio);
  boxes.insert(boxes.end(), other_boxes.begin(), other_boxes.end());
}

}  // namespace bareyolo::data
