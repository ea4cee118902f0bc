// tests/support/pixels.h — probes for tests of drawn pictures (data/raster.h): whether a pixel
// has a colour, how many pixels of a region have it, and the rectangle they span.
#pragma once

#include <algorithm>
#include <array>
#include <limits>

#include "data/image.h"
#include "data/raster.h"

namespace bareyolo::testing {

// {x1, y1, x2, y2}, ends exclusive; the default is the whole image.
using PixelBox = std::array<int, 4>;
inline constexpr PixelBox kWholeImage = {0, 0, std::numeric_limits<int>::max(),
                                         std::numeric_limits<int>::max()};

inline bool has_colour(const data::Image& image, int x, int y, data::Rgb colour) {
  const uint8_t* p = image.at(x, y);
  return p[0] == colour[0] && p[1] == colour[1] && p[2] == colour[2];
}

// Calls visit(x, y) for each pixel of `colour` inside `within`.
template <class Visit>
void for_each_of_colour(const data::Image& image, data::Rgb colour, PixelBox within, Visit visit) {
  for (int y = std::max(within[1], 0); y < std::min(within[3], image.height); ++y)
    for (int x = std::max(within[0], 0); x < std::min(within[2], image.width); ++x)
      if (has_colour(image, x, y, colour)) visit(x, y);
}

inline int count_colour(const data::Image& image, data::Rgb colour, PixelBox within = kWholeImage) {
  int n = 0;
  for_each_of_colour(image, colour, within, [&](int, int) { ++n; });
  return n;
}

// The smallest box holding every pixel of `colour` inside `within`; {w, h, -1, -1} for none.
inline PixelBox colour_extent(const data::Image& image, data::Rgb colour,
                              PixelBox within = kWholeImage) {
  PixelBox box = {image.width, image.height, -1, -1};
  for_each_of_colour(image, colour, within, [&](int x, int y) {
    box = {std::min(box[0], x), std::min(box[1], y), std::max(box[2], x + 1),
           std::max(box[3], y + 1)};
  });
  return box;
}

}  // namespace bareyolo::testing
