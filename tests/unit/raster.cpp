// tests/unit/raster.cpp — the drawing primitives (data/raster.h) and the chart built on them
// (data/chart.h): exact pixels for rectangles and lines, text confined to its measured box,
// ticks that are round and inside their range, and data mapped onto the plot area.
#include <doctest/doctest.h>

#include <cmath>

#include "data/chart.h"
#include "data/raster.h"
#include "tests/support/pixels.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

const data::Rgb kRed = {255, 0, 0};

}  // namespace

TEST_CASE("raster: rectangles fill and outline exactly their pixels, clipped at the edges") {
  data::Image image(10, 8, 0);
  data::fill_rect(image, -3, 6, 4, 20, kRed);  // clipped to x 0..3, y 6..7
  CHECK(count_colour(image, kRed) == 4 * 2);
  CHECK(colour_extent(image, kRed) == std::array<int, 4>{0, 6, 4, 8});
  data::Image frame(10, 8, 0);
  data::outline_rect(frame, 1, 1, 9, 7, 1, kRed);
  CHECK(count_colour(frame, kRed) == 8 * 2 + 4 * 2);
  CHECK(has_colour(frame, 1, 1, kRed));
  CHECK(has_colour(frame, 8, 6, kRed));
  CHECK(!has_colour(frame, 4, 4, kRed));
}

TEST_CASE("raster: lines join their end points with the pen's thickness") {
  data::Image image(20, 20, 0);
  data::draw_line(image, 2, 5, 17, 5, 3, kRed);
  CHECK(colour_extent(image, kRed) == std::array<int, 4>{1, 4, 19, 7});
  CHECK(count_colour(image, kRed) == 18 * 3);
  data::Image diagonal(20, 20, 0);
  data::draw_line(diagonal, 0, 0, 19, 19, 1, kRed);
  CHECK(count_colour(diagonal, kRed) == 20);
  for (int i = 0; i < 20; ++i) CHECK(has_colour(diagonal, i, i, kRed));
  data::draw_line(diagonal, 0, 0, std::nan(""), 3, 1, data::kWhite);  // a gap: nothing drawn
  CHECK(count_colour(diagonal, data::kWhite) == 0);
}

TEST_CASE("raster: a polygon covers the pixels whose centres are inside it, clipped at the edges") {
  const auto covered = [](const data::Polygon& polygon, int width, int height) {
    data::Image image(width, height, 0);
    data::polygon_spans(polygon, width, height, [&](int y, int x1, int x2) {
      data::fill_rect(image, x1, y, x2, y + 1, kRed);
    });
    return image;
  };
  // A rectangle with whole-pixel corners covers what fill_rect fills.
  data::Image rect(12, 9, 0);
  data::fill_rect(rect, 2, 1, 7, 5, kRed);
  CHECK(covered({{2, 1}, {7, 1}, {7, 5}, {2, 5}}, 12, 9).pixels == rect.pixels);
  // Half-way corners: a pixel counts when its centre is inside.
  CHECK(colour_extent(covered({{2.5f, 1.4f}, {7.6f, 1.4f}, {7.6f, 5.5f}, {2.5f, 5.5f}}, 12, 9),
                      kRed) == std::array<int, 4>{2, 1, 8, 5});
  // A right triangle below the diagonal of a 10 x 10 square: the centres (x + .5, y + .5) with
  // x < y, 45 pixels (centres on the diagonal are on its right edge: outside).
  data::Image triangle = covered({{0, 0}, {10, 10}, {0, 10}}, 10, 10);
  CHECK(count_colour(triangle, kRed) == 45);
  CHECK(has_colour(triangle, 0, 1, kRed));
  CHECK_FALSE(has_colour(triangle, 1, 1, kRed));
  // Clipped at the image's edges; fewer than 3 points cover nothing.
  CHECK(count_colour(covered({{-5, -5}, {30, -5}, {30, 3}, {-5, 3}}, 10, 10), kRed) == 30);
  CHECK(count_colour(covered({{1, 1}, {8, 8}}, 10, 10), kRed) == 0);
}

TEST_CASE("raster: text stays inside its measured box and tells strings apart") {
  data::Image a(80, 30, 0), b(80, 30, 0);
  data::draw_text(a, 5, 7, "mAP50", kRed, 2);
  data::draw_text(b, 5, 7, "mAP95", kRed, 2);
  const std::array<int, 4> box = colour_extent(a, kRed);
  CHECK(box[0] >= 5);
  CHECK(box[1] >= 7);
  CHECK(box[2] <= 5 + data::text_width("mAP50", 2));
  CHECK(box[3] <= 7 + data::text_height(2));
  CHECK(count_colour(a, kRed) > 40);
  CHECK(a.pixels != b.pixels);
  CHECK(data::text_width("mAP50-95") > data::text_width("mAP50"));
  CHECK(data::text_width("ab", 3) == 3 * data::text_width("ab"));
}

TEST_CASE("chart: ticks are round numbers inside the range") {
  const std::vector<double> tenths = data::nice_ticks(0, 1, 6);
  REQUIRE(tenths.size() == 6);
  for (size_t i = 0; i < tenths.size(); ++i) CHECK(tenths[i] == doctest::Approx(0.2 * double(i)));
  const std::vector<double> ticks = data::nice_ticks(0.13, 7.3, 6);  // step 2: 2, 4, 6
  REQUIRE(ticks.size() == 3);
  CHECK(ticks.front() == doctest::Approx(2));
  CHECK(ticks.back() == doctest::Approx(6));
  for (double lo : {-3.7, 0.0, 1e-4}) {
    const std::vector<double> t = data::nice_ticks(lo, lo + 0.37, 5);
    CHECK(t.size() >= 2);
    CHECK(t.size() <= 5);
    for (double v : t) CHECK((v >= lo - 1e-12 && v <= lo + 0.37 + 1e-12));
  }
  CHECK(data::finite_range({{NAN, 2.0, 5.0}, {-1.0}}) == std::pair<double, double>{-1, 5});
}

TEST_CASE("chart: data map onto the plot area and lines land where their points map") {
  data::Image image(200, 150, 255);
  data::Chart chart(image, {0, 0, 200, 150}, "title", "x", "y", {0, 10}, {0, 1});
  CHECK(chart.to_x(0) < chart.to_x(10));
  CHECK(chart.to_y(0) > chart.to_y(1));  // y grows upwards
  CHECK(chart.to_x(5) == doctest::Approx((chart.to_x(0) + chart.to_x(10)) / 2));
  chart.line({0, 5, 10}, {0.5, 0.5, NAN}, kRed, 1);
  const int y = int(std::lround(chart.to_y(0.5)));
  CHECK(has_colour(image, int(std::lround(chart.to_x(2.5))), y, kRed));
  CHECK(!has_colour(image, int(std::lround(chart.to_x(7.5))), y, kRed));  // the NaN ends the line
  CHECK(count_colour(image, data::kBlack) > 200);                         // frame, ticks, title
}

TEST_CASE("chart: a lone point is a dot of side 2r + 1, the legend sits at the plot's top right") {
  data::Image image(200, 150, 255);
  data::Chart chart(image, {0, 0, 200, 150}, "", "", "", {0, 10}, {0, 1});
  chart.line({0, 5, 10}, {NAN, 0.5, NAN}, kRed, 1);  // a point between gaps: radius 2
  const int x = int(std::lround(chart.to_x(5))), y = int(std::lround(chart.to_y(0.5)));
  CHECK(colour_extent(image, kRed) == PixelBox{x - 2, y - 2, x + 3, y + 3});
  const data::Rgb green = {0, 200, 0}, blue = {0, 0, 255};
  chart.dot(2, 0.25, 1, green);
  CHECK(count_colour(image, green) == 3 * 3);
  chart.bar(6, 7, 0, green);  // an empty bin draws nothing over the frame
  CHECK(count_colour(image, green) == 3 * 3);
  chart.legend({{"a", blue}});
  const PixelBox swatch = colour_extent(image, blue);
  CHECK(swatch[3] < chart.to_y(0.5));  // above the plot's middle
  CHECK(swatch[0] > chart.to_x(5));    // right of its centre
}
