// data/mosaic.cpp — the 4-image mosaic (see mosaic.h).
#include "data/mosaic.h"

#include <algorithm>
#include <array>
#include <utility>

#include "data/perspective.h"
#include "data/stage_clock.h"

namespace bareyolo::data {

namespace {

struct Rect {
  int x1, y1, x2, y2;
};

// Destination rectangle on the canvas for tile t of size w x h around (xc, yc), and the part
// of the tile that lands there (same size).
std::pair<Rect, Rect> tile_rects(int t, int w, int h, int xc, int yc, int canvas) {
  Rect dst{}, src{};
  switch (t) {
    case 0:
      dst = {std::max(xc - w, 0), std::max(yc - h, 0), xc, yc};
      src = {w - (dst.x2 - dst.x1), h - (dst.y2 - dst.y1), w, h};
      break;
    case 1:
      dst = {xc, std::max(yc - h, 0), std::min(xc + w, canvas), yc};
      src = {0, h - (dst.y2 - dst.y1), std::min(w, dst.x2 - dst.x1), h};
      break;
    case 2:
      dst = {std::max(xc - w, 0), yc, xc, std::min(canvas, yc + h)};
      src = {w - (dst.x2 - dst.x1), 0, w, std::min(dst.y2 - dst.y1, h)};
      break;
    default:
      dst = {xc, yc, std::min(xc + w, canvas), std::min(canvas, yc + h)};
      src = {0, 0, std::min(w, dst.x2 - dst.x1), std::min(dst.y2 - dst.y1, h)};
  }
  return {dst, src};
}

}  // namespace

Mosaic build_mosaic(const Dataset& dataset, int64_t index, int imgsz, SampleRng& rng,
                    std::vector<PixelBox>& boxes, std::vector<Polygon>& segments) {
  const int s = imgsz, canvas_side = 2 * imgsz;
  int yc = static_cast<int>(rng.uniform(s / 2.0, 1.5 * s));
  int xc = static_cast<int>(rng.uniform(s / 2.0, 1.5 * s));
  std::array<int64_t, 4> tiles = {index, 0, 0, 0};
  for (int t = 1; t < 4; ++t) tiles[size_t(t)] = int64_t(rng.below(uint64_t(dataset.size())));
  for (int t = 3; t > 0; --t) std::swap(tiles[size_t(t)], tiles[rng.below(uint64_t(t) + 1)]);

  Mosaic mosaic;
  for (int t = 0; t < 4; ++t) mosaic.images[size_t(t)] = dataset.pixels(tiles[size_t(t)], imgsz);
  const StageTimer timer(Stage::place);
  mosaic.canvas = {canvas_side, canvas_side, kPadValue, {}};
  boxes.clear();
  segments.clear();
  for (int t = 0; t < 4; ++t) {
    int64_t tile = tiles[size_t(t)];
    const Dataset::Pixels& image = mosaic.images[size_t(t)];
    auto [dst, src] = tile_rects(t, image.width, image.height, xc, yc, canvas_side);
    if (dst.x2 > dst.x1 && dst.y2 > dst.y1)
      mosaic.canvas.tiles.push_back(
          {image.data, image.width, image.height, dst.x1, dst.y1, dst.x2, dst.y2, src.x1, src.y1});
    float pad_x = float(dst.x1 - src.x1), pad_y = float(dst.y1 - src.y1);
    const ImageRecord& record = dataset.record(tile);
    for (size_t k = 0; k < record.boxes.size(); ++k) {
      boxes.push_back(
          to_pixels(record.boxes[k], float(image.width), float(image.height), pad_x, pad_y));
      segments.push_back(record.segments.empty() ? Polygon{}
                                                 : to_pixels(record.segments[k], float(image.width),
                                                             float(image.height), pad_x, pad_y));
    }
  }
  clip_boxes(boxes, float(canvas_side), float(canvas_side));
  clip_polygons(segments, float(canvas_side), float(canvas_side));
  return mosaic;
}

}  // namespace bareyolo::data
