// tests/unit/mosaic.cpp — YOLOv5's 4-image mosaic (data/mosaic.h) against the spec's geometry
// (5.7): the tiles meet at a centre drawn from [s/2, 3s/2), each showing the corner of its image
// that touches the centre; the image asked for is one of the four, shuffled; every label frames
// its object on the rendered 2s x 2s canvas, and labels and polygons are clipped to it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "data/dataset.h"
#include "data/dataset_yaml.h"
#include "data/mosaic.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

constexpr int kImgsz = 64, kCanvas = 2 * kImgsz, kDraws = 48;

bool same_pixels(const data::Dataset::Pixels& a, const data::Dataset::Pixels& b) {
  return a.width == b.width && a.height == b.height &&
         std::memcmp(a.data, b.data, size_t(a.width) * size_t(a.height) * 3) == 0;
}

// kDraws mosaics of the train split `yaml` names, the image asked for cycling through the
// first six, each drawn from its own stream of `seed`; `check(dataset, index, mosaic, boxes,
// segments)` is called on each.
template <class Check>
void for_each_mosaic(const std::string& yaml, uint64_t seed, Check&& check) {
  const data::OpenedSplit train = data::open_split(data::read_dataset_yaml(yaml), "train");
  for (uint64_t position = 0; position < kDraws; ++position) {
    CAPTURE(position);
    const int64_t index = int64_t(position % 6);
    data::SampleRng rng(seed, 0, position);
    std::vector<data::PixelBox> boxes;
    std::vector<data::Polygon> segments;
    const data::Mosaic mosaic =
        data::build_mosaic(train.dataset, index, kImgsz, rng, boxes, segments);
    check(train.dataset, index, mosaic, boxes, segments);
  }
}

}  // namespace

TEST_CASE("mosaic: four tiles meet at a centre from s/2 to 3s/2, each its image's corner there") {
  TempDir dir;
  int lowest_x = kCanvas, lowest_y = kCanvas, highest_x = 0, highest_y = 0;
  for_each_mosaic(
      make_box_dataset(dir.path(), 6), 5,
      [&](const data::Dataset&, int64_t, const data::Mosaic& mosaic,
          const std::vector<data::PixelBox>&, const std::vector<data::Polygon>&) {
        const std::vector<data::CanvasTile>& tiles = mosaic.canvas.tiles;
        REQUIRE(tiles.size() == 4);  // no tile is empty: every image is >= 37 px a side here
        const int xc = tiles[0].x2, yc = tiles[0].y2;
        lowest_x = std::min(lowest_x, xc), highest_x = std::max(highest_x, xc);
        lowest_y = std::min(lowest_y, yc), highest_y = std::max(highest_y, yc);
        CHECK(xc >= kImgsz / 2);
        CHECK(xc < kImgsz * 3 / 2);
        CHECK(yc >= kImgsz / 2);
        CHECK(yc < kImgsz * 3 / 2);
        int quadrants_seen = 0;
        for (const data::CanvasTile& tile : tiles) {
          const bool left = tile.x2 == xc, top = tile.y2 == yc;
          CHECK((left || tile.x1 == xc));
          CHECK((top || tile.y1 == yc));
          quadrants_seen |= 1 << (2 * top + left);
          // Room to the canvas edge or the whole image, whichever is smaller...
          CHECK(tile.x2 - tile.x1 == std::min(tile.width, left ? xc : kCanvas - xc));
          CHECK(tile.y2 - tile.y1 == std::min(tile.height, top ? yc : kCanvas - yc));
          // ...taken from the image's side that touches the centre.
          CHECK(tile.image_x == (left ? tile.width - (tile.x2 - tile.x1) : 0));
          CHECK(tile.image_y == (top ? tile.height - (tile.y2 - tile.y1) : 0));
        }
        CHECK(quadrants_seen == 0b1111);
      });
  // Both ends of the range are reached on both axes.
  CHECK(lowest_x < kImgsz * 0.6);
  CHECK(highest_x > kImgsz * 1.4);
  CHECK(lowest_y < kImgsz * 0.6);
  CHECK(highest_y > kImgsz * 1.4);
}

TEST_CASE("mosaic: the image asked for is one of the four tiles, not always the first") {
  TempDir dir;
  int first = 0;
  for_each_mosaic(make_box_dataset(dir.path(), 6), 9,
                  [&](const data::Dataset& dataset, int64_t index, const data::Mosaic& mosaic,
                      const std::vector<data::PixelBox>&, const std::vector<data::Polygon>&) {
                    const data::Dataset::Pixels asked = dataset.pixels(index, kImgsz);
                    CHECK(std::any_of(mosaic.images.begin(), mosaic.images.end(),
                                      [&](const data::Dataset::Pixels& image) {
                                        return same_pixels(image, asked);
                                      }));
                    first += same_pixels(mosaic.images[0], asked);
                  });
  // Shuffled into any of 4 places (the others drawn from 6 images): first about 1/4 + of the time.
  CHECK(first < kDraws * 3 / 4);
}

TEST_CASE("mosaic: every label frames its white object on the canvas and stays inside it") {
  TempDir dir;
  int64_t white = 0, white_labelled = 0, inside = 0, inside_white = 0;
  for_each_mosaic(make_box_dataset(dir.path(), 6), 11,
                  [&](const data::Dataset&, int64_t, const data::Mosaic& mosaic,
                      const std::vector<data::PixelBox>& boxes, const std::vector<data::Polygon>&) {
                    const data::Image canvas = mosaic.canvas.render();
                    for (const data::PixelBox& b : boxes) {
                      CHECK(b.x1 >= 0);
                      CHECK(b.y1 >= 0);
                      CHECK(b.x2 <= kCanvas);
                      CHECK(b.y2 <= kCanvas);
                    }
                    // Pixel centres 1.5 px inside a label (within -1.5: near it), against the
                    // resize's blur.
                    auto near_label = [&](int x, int y, double margin) {
                      return std::any_of(boxes.begin(), boxes.end(), [&](const data::PixelBox& b) {
                        return x + 0.5 >= b.x1 - margin && x + 0.5 <= b.x2 + margin &&
                               y + 0.5 >= b.y1 - margin && y + 0.5 <= b.y2 + margin;
                      });
                    };
                    for (int y = 0; y < kCanvas; ++y)
                      for (int x = 0; x < kCanvas; ++x) {
                        const bool is_white = canvas.at(x, y)[0] > 200,
                                   is_inside = near_label(x, y, -1.5);
                        white += is_white, white_labelled += is_white && near_label(x, y, 1.5);
                        inside += is_inside, inside_white += is_inside && is_white;
                      }
                  });
  REQUIRE(inside > 10000);
  CHECK(inside_white == inside);   // every label lies on its object...
  CHECK(white_labelled == white);  // ...and every object has a label
}

TEST_CASE("mosaic: polygon labels are clipped to the canvas with their boxes") {
  TempDir dir;
  int64_t clipped = 0;
  for_each_mosaic(
      make_polygon_dataset(dir.path(), 6), 13,
      [&](const data::Dataset&, int64_t, const data::Mosaic&,
          const std::vector<data::PixelBox>& boxes, const std::vector<data::Polygon>& segments) {
        REQUIRE(segments.size() == boxes.size());
        for (const data::Polygon& polygon : segments)
          for (const data::Point& p : polygon) {
            CHECK(p.x >= 0);
            CHECK(p.y >= 0);
            CHECK(p.x <= kCanvas);
            CHECK(p.y <= kCanvas);
            clipped += p.x == 0 || p.y == 0;
          }
      });
  CHECK(clipped > 0);  // some tile was cut at the canvas's left or top edge
}
