// tests/unit/preview.cpp — the batch pictures (data/preview.h: train_batch*.jpg,
// val_batch0_*.jpg): a batch drawn as a grid of its images in order, each label's box outlined
// in its class's colour in its own image's tile, at its place in pixels of a non-square image,
// its name (or class number, and a prediction's confidence) above it but inside the tile.
#include <doctest/doctest.h>

#include "data/batch.h"
#include "data/preview.h"
#include "data/raster.h"
#include "tests/support/pixels.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// Four black images of 48 x 32. The last holds class 1 near its top, half as wide and a quarter
// as tall as the image (x 12..36, y 4..12 in its pixels); the third holds class 0 as wide and
// as tall, lower (y 20..28).
data::Batch one_labelled_batch() {
  std::vector<data::Sample> samples(4);
  for (data::Sample& sample : samples) sample.image = data::Image(48, 32, 0);
  samples[3].labels = {{1, 0.5f, 0.25f, 0.5f, 0.25f}};
  samples[2].labels = {{0, 0.5f, 0.75f, 0.5f, 0.25f}};
  data::Step step;
  step.width = 48, step.height = 32;
  return data::collate(step, samples);
}

}  // namespace

TEST_CASE("batch pictures: a 2 x 2 grid, the label's box in its tile and class colour") {
  const data::Image grid = data::render_batch(one_labelled_batch(), {});
  CHECK(grid.width == 2 * 48);
  CHECK(grid.height == 2 * 32);
  // The last image's tile begins at (48, 32): the box's outline spans x 60..84, y 36..44 there,
  // its label "1" above it but not above the tile's top.
  const PixelBox box = colour_extent(grid, data::class_colour(1));
  CHECK(box[0] == 48 + 12);
  CHECK(box[1] == 32);
  CHECK(box[2] >= 48 + 36);
  CHECK(box[3] == 32 + 12);
  CHECK(has_colour(grid, 48 + 35, 32 + 8, data::class_colour(1)));        // the right edge
  CHECK(count_colour(grid, data::class_colour(1), {0, 0, 96, 32}) == 0);  // other tiles bare
  CHECK(count_colour(grid, data::class_colour(1), {0, 32, 48, 64}) == 0);
  // The third image's tile begins at (0, 32): its box's right edge, from y 20 to 28 there.
  CHECK(has_colour(grid, 35, 32 + 24, data::class_colour(0)));
  CHECK_FALSE(has_colour(grid, 35, 32 + 30, data::class_colour(0)));
  CHECK(count_colour(grid, data::class_colour(0), {48, 0, 96, 64}) == 0);
  CHECK(has_colour(grid, 48, 32, data::kWhite));  // each tile framed
  CHECK(has_colour(grid, 47, 31, data::kWhite));
}

TEST_CASE("batch pictures: a box's text is its class name, or its number, and a confidence") {
  CHECK(data::box_text(1, -1, {"cat", "dog"}) == "dog");
  CHECK(data::box_text(5, -1, {"cat"}) == "5");
  CHECK(data::box_text(0, 0.876f, {"cat"}) == "cat 0.88");
  CHECK(data::box_text(0, 0.0f, {"cat"}) == "cat 0.00");  // a confidence of 0 is still shown
  CHECK(data::box_text(-1, -1, {"cat"}) == "-1");
}
