// data/copy_paste.cpp — copy-paste on the mosaic canvas (see copy_paste.h).
#include "data/copy_paste.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "data/raster.h"

namespace bareyolo::data {

namespace {

// `count` distinct indices of [0, n) in random order (Python's random.sample): the first
// `count` steps of a Fisher-Yates shuffle.
std::vector<size_t> sample_indices(size_t n, size_t count, SampleRng& rng) {
  std::vector<size_t> indices(n);
  std::iota(indices.begin(), indices.end(), size_t{0});
  for (size_t i = 0; i < count; ++i) std::swap(indices[i], indices[i + rng.below(n - i)]);
  indices.resize(count);
  return indices;
}

// Does `box` cover less than kMaxCoverOfExistingBox of every box in `existing`?
bool covers_little(const PixelBox& box, const std::vector<PixelBox>& existing) {
  constexpr double kEps = 1e-7;  // YOLOv5's bbox_ioa: a zero-area box divides by this
  return std::all_of(existing.begin(), existing.end(), [&](const PixelBox& other) {
    const double w = std::max(0.0, double(std::min(box.x2, other.x2)) - std::max(box.x1, other.x1));
    const double h = std::max(0.0, double(std::min(box.y2, other.y2)) - std::max(box.y1, other.y1));
    const double area = double(other.x2 - other.x1) * double(other.y2 - other.y1);
    return w * h / (area + kEps) < kMaxCoverOfExistingBox;
  });
}

Polygon box_outline(const PixelBox& box) {
  return {{box.x1, box.y1}, {box.x2, box.y1}, {box.x2, box.y2}, {box.x1, box.y2}};
}

}  // namespace

void copy_paste(Image& canvas, std::vector<PixelBox>& boxes, std::vector<Polygon>& segments,
                double probability, SampleRng& rng) {
  const size_t n = boxes.size();
  if (probability == 0 || n == 0) return;
  const size_t count = size_t(std::nearbyint(probability * double(n)));  // ties to even
  const Image before = canvas;
  const float width = float(canvas.width);
  for (size_t j : sample_indices(n, count, rng)) {
    const PixelBox mirrored_box = mirror_left_right(boxes[j], width);
    if (!covers_little(mirrored_box, boxes)) continue;
    const Polygon& outline = segments[j].empty() ? box_outline(boxes[j]) : segments[j];
    // Pixel x of a row shows pixel width - 1 - x of the row before any paste.
    polygon_spans(mirror_left_right(outline, width), canvas.width, canvas.height,
                  [&](int y, int x1, int x2) {
                    for (int x = x1; x < x2; ++x)
                      std::memcpy(canvas.at(x, y), before.at(canvas.width - 1 - x, y), 3);
                  });
    boxes.push_back(mirrored_box);
    segments.push_back(mirror_left_right(segments[j], width));  // a box's stays empty
  }
}

}  // namespace bareyolo::data
