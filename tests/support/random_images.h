// tests/support/random_images.h — what the batch and input-image tests share: samples of random
// pixels, and the model input their bytes stand for, computed here the plain way (one loop over
// NCHW, each value byte * (1.0f / 255.0f), the product the batch has always held) as the
// reference the ops and Batch::images_tensor are compared with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/sample.h"
#include "tests/support/testing.h"

namespace bareyolo::testing {

// `count` bytes, uniform over 0..255.
inline std::vector<uint8_t> random_bytes(Rng& rng, size_t count) {
  std::vector<uint8_t> bytes(count);
  for (uint8_t& byte : bytes) byte = uint8_t(random_int(rng, 0, 255));
  return bytes;
}

// `count` samples of width x height random pixels, sample i with one label of class i.
inline std::vector<data::Sample> random_samples(Rng& rng, int count, int width, int height) {
  std::vector<data::Sample> samples(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    data::Sample& sample = samples[size_t(i)];
    sample.image = data::Image(width, height, 0);
    sample.image.pixels = random_bytes(rng, sample.image.pixels.size());
    sample.labels = {{i, 0.5f, 0.5f, 0.25f, 0.5f}};
    sample.meta.path = "random" + std::to_string(i) + ".jpg";
  }
  return samples;
}

// n images of height x width interleaved RGB bytes as the model's float NCHW input.
inline std::vector<float> unit_floats_nchw(const uint8_t* bytes, int64_t n, int64_t height,
                                           int64_t width) {
  std::vector<float> floats(static_cast<size_t>(n * 3 * height * width));
  for (int64_t image = 0; image < n; ++image)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < height; ++y)
        for (int64_t x = 0; x < width; ++x)
          floats[size_t(((image * 3 + c) * height + y) * width + x)] =
              float(bytes[((image * height + y) * width + x) * 3 + c]) * (1.0f / 255.0f);
  return floats;
}

}  // namespace bareyolo::testing
