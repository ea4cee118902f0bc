// data/plane_resize.cpp — PyTorch's bilinear resize, align_corners=False (see plane_resize.h).
#include "data/plane_resize.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace bareyolo::data {

namespace {

// Where output coordinate `o` reads along one axis: two input coordinates and their weights.
struct Tap {
  int first = 0, second = 0;
  float first_weight = 1, second_weight = 0;
};

std::vector<Tap> taps(int in, int out) {
  const float scale = float(in) / float(out);
  std::vector<Tap> result(static_cast<size_t>(out));
  for (int o = 0; o < out; ++o) {
    const float source = std::max(scale * (float(o) + 0.5f) - 0.5f, 0.0f);
    Tap& tap = result[size_t(o)];
    tap.first = int(source);  // floor: source >= 0
    tap.second = tap.first + (tap.first < in - 1 ? 1 : 0);
    tap.second_weight = std::min(source - float(tap.first), 1.0f);
    tap.first_weight = 1.0f - tap.second_weight;
  }
  return result;
}

}  // namespace

void resize_plane_bilinear(const float* in, int in_width, int in_height, float* out, int out_width,
                           int out_height) {
  if (in_width < 1 || in_height < 1 || out_width < 1 || out_height < 1)
    throw std::invalid_argument("resize_plane_bilinear: " + std::to_string(in_width) + "x" +
                                std::to_string(in_height) + " to " + std::to_string(out_width) +
                                "x" + std::to_string(out_height) + ": every side must be >= 1");
  const std::vector<Tap> columns = taps(in_width, out_width), rows = taps(in_height, out_height);
  for (int y = 0; y < out_height; ++y) {
    const Tap& row = rows[size_t(y)];
    const float* top = in + size_t(row.first) * size_t(in_width);
    const float* bottom = in + size_t(row.second) * size_t(in_width);
    float* line = out + size_t(y) * size_t(out_width);
    for (int x = 0; x < out_width; ++x) {
      const Tap& c = columns[size_t(x)];
      line[x] =
          row.first_weight * (c.first_weight * top[c.first] + c.second_weight * top[c.second]) +
          row.second_weight *
              (c.first_weight * bottom[c.first] + c.second_weight * bottom[c.second]);
    }
  }
}

}  // namespace bareyolo::data
