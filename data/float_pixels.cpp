// data/float_pixels.cpp — see float_pixels.h.
#include "data/float_pixels.h"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace bareyolo::data {

void check_float_pixels(const Tensor& images, const std::string& source) {
  const std::vector<double> values = images.to_doubles();
  const Shape4 shape = images.shape();
  for (size_t i = 0; i < values.size(); ++i) {
    const double value = values[i];
    if (std::isfinite(value) && value >= 0 && value <= 1) continue;
    const int64_t x = int64_t(i) % shape.w, y = int64_t(i) / shape.w % shape.h,
                  channel = int64_t(i) / shape.plane() % shape.c,
                  image = int64_t(i) / shape.image_numel();
    std::ostringstream message;
    message << source << ": image " << image << ", channel " << channel << ", y " << y << ", x "
            << x << " is " << value
            << (std::isfinite(value) ? ", outside [0, 1]" : ", not a finite number")
            << ": images hold pixels / 255, each in [0, 1]";
    throw std::invalid_argument(message.str());
  }
}

}  // namespace bareyolo::data
