// tests/unit/data_float_pixels.cpp — images that enter as floats (grads' batch file): NaN, Inf
// and values outside [0, 1] are refused with where they are.
#include <doctest/doctest.h>

#include <limits>
#include <stdexcept>
#include <vector>

#include "data/float_pixels.h"

using namespace bareyolo;

TEST_CASE("float images: NaN, Inf and values outside [0, 1] are refused, naming where") {
  // Before: grads ran on a NaN pixel and wrote a NaN loss with exit status 0.
  std::vector<float> pixels(2 * 3 * 4 * 5, 0.5f);
  data::check_float_pixels(Tensor::from_vector(pixels, {2, 3, 4, 5}), "b.safetensors");
  pixels[size_t(((1 * 3 + 2) * 4 + 3) * 5 + 1)] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(data::check_float_pixels(Tensor::from_vector(pixels, {2, 3, 4, 5}),
                                                "b.safetensors: 'images'"),
                       "b.safetensors: 'images': image 1, channel 2, y 3, x 1 is nan, not a "
                       "finite number: images hold pixels / 255, each in [0, 1]",
                       std::invalid_argument);
  std::vector<float> scaled(2 * 3 * 4 * 5, 0.5f);
  scaled[7] = 255.0f;
  CHECK_THROWS_WITH_AS(data::check_float_pixels(Tensor::from_vector(scaled, {2, 3, 4, 5}), "b"),
                       doctest::Contains("image 0, channel 0, y 1, x 2 is 255, outside [0, 1]"),
                       std::invalid_argument);
}
