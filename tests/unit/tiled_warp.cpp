// tests/unit/tiled_warp.cpp — the warp of a TiledCanvas (the mosaic's undrawn canvas) against
// the warp of the same canvas drawn: byte for byte, through the vector path, the tile edges,
// the fill between tiles and the canvas's border.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "data/warp.h"

using namespace bareyolo;

namespace {

data::Image random_image(int width, int height, std::mt19937& gen) {
  data::Image image(width, height, 0);
  for (uint8_t& byte : image.pixels) byte = uint8_t(gen());
  return image;
}

// A random rotation, scale, shear and translation about the canvas's centre, perspective too
// when asked, mapping the canvas onto a width x height output.
data::Mat3 random_transform(const data::TiledCanvas& canvas, int width, int height,
                            bool perspective, std::mt19937& gen) {
  std::uniform_real_distribution<double> u(-1, 1);
  data::Mat3 centre, turn, shift;
  centre(0, 2) = -canvas.width / 2.0, centre(1, 2) = -canvas.height / 2.0;
  const double angle = 0.3 * u(gen), zoom = 1 + 0.6 * u(gen);
  turn(0, 0) = zoom * std::cos(angle), turn(0, 1) = zoom * std::sin(angle) + 0.1 * u(gen);
  turn(1, 0) = -zoom * std::sin(angle), turn(1, 1) = zoom * std::cos(angle);
  if (perspective) turn(2, 0) = 0.001 * u(gen), turn(2, 1) = 0.001 * u(gen);
  shift(0, 2) = width / 2.0 + 20 * u(gen), shift(1, 2) = height / 2.0 + 20 * u(gen);
  return shift * turn * centre;
}

}  // namespace

TEST_CASE("warp of a tiled canvas equals the warp of the canvas drawn") {
  std::mt19937 gen(7);
  // Four tiles around a centre, with fill between and around them, one only a pixel tall,
  // showing parts of their images (not from the images' corners).
  const data::Image a = random_image(90, 70, gen), b = random_image(60, 80, gen),
                    c = random_image(75, 1, gen), d = random_image(50, 40, gen);
  data::TiledCanvas canvas{200, 180, 114, {}};
  canvas.tiles.push_back({a.pixels.data(), a.width, a.height, 10, 20, 100, 90, 0, 0});
  canvas.tiles.push_back({b.pixels.data(), b.width, b.height, 100, 5, 150, 85, 10, 0});
  canvas.tiles.push_back({c.pixels.data(), c.width, c.height, 30, 90, 100, 91, 5, 0});
  canvas.tiles.push_back({d.pixels.data(), d.width, d.height, 100, 90, 140, 125, 10, 5});
  const data::Image drawn = canvas.render();
  CHECK(drawn.at(0, 0)[0] == 114);
  CHECK(std::equal(drawn.at(100, 5), drawn.at(100, 5) + 3, b.at(10, 0)));

  int compared = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const bool perspective = trial % 4 == 3;
    const int width = 97 + trial % 8, height = 83;  // rows of whole and partial 8-pixel groups
    const data::Mat3 m = random_transform(canvas, width, height, perspective, gen);
    const data::Image from_tiles = data::warp(canvas, m, width, height);
    const data::Image from_drawn = data::warp(drawn, m, width, height, 114);
    REQUIRE(from_tiles.pixels.size() == from_drawn.pixels.size());
    CHECK(from_tiles.pixels == from_drawn.pixels);
    compared += from_tiles.pixels != data::Image(width, height, 114).pixels;
  }
  CHECK(compared == 40);  // every output shows some of the tiles
}

TEST_CASE("a warp with flips equals the warp flipped afterwards") {
  std::mt19937 gen(11);
  const data::Image a = random_image(70, 50, gen), b = random_image(40, 60, gen);
  data::TiledCanvas canvas{120, 100, 114, {}};
  canvas.tiles.push_back({a.pixels.data(), a.width, a.height, 0, 10, 70, 60, 0, 0});
  canvas.tiles.push_back({b.pixels.data(), b.width, b.height, 70, 30, 110, 90, 0, 0});
  for (int trial = 0; trial < 12; ++trial) {
    const int width = 61 + trial, height = 45;  // whole and partial 8-pixel groups
    const data::Mat3 m = random_transform(canvas, width, height, trial % 4 == 3, gen);
    const data::Image plain = data::warp(canvas, m, width, height);
    for (const data::Flips flips :
         {data::Flips{true, false}, data::Flips{false, true}, data::Flips{true, true}}) {
      const data::Image flipped = data::warp(canvas, m, width, height, flips);
      int differing = 0;
      for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) {
          const uint8_t* expected =
              plain.at(flips.left_right ? width - 1 - x : x, flips.up_down ? height - 1 - y : y);
          differing += !std::equal(expected, expected + 3, flipped.at(x, y));
        }
      CHECK(differing == 0);
    }
  }
}
