// tests/unit/copy_paste.cpp — YOLOv5's copy-paste (data/copy_paste.h) on small synthetic canvases:
// the pasted pixels are the mirrored object (its box, or its polygon's inside), the new label is
// the mirrored box, a paste covering 30 % or more of a box is skipped, round(p * n) objects are
// tried with Python's rounding, and p = 0 changes and draws nothing.
#include <doctest/doctest.h>

#include "data/copy_paste.h"

using namespace bareyolo;

namespace {

// Every pixel different, so that a pasted pixel shows where it came from.
data::Image pattern(int width, int height) {
  data::Image image(width, height, 0);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      uint8_t* p = image.at(x, y);
      p[0] = uint8_t(x * 5 + 1), p[1] = uint8_t(y * 7 + 2), p[2] = uint8_t(x * y + 3);
    }
  return image;
}

bool same_pixel(const data::Image& a, int ax, int ay, const data::Image& b, int bx, int by) {
  return std::equal(a.at(ax, ay), a.at(ax, ay) + 3, b.at(bx, by));
}

// Is (x, y) inside the triangle? The sign of the three edge cross products: an independent
// test of what the rasteriser fills (the vertices below keep pixel centres off the edges).
bool in_triangle(const data::Polygon& t, double x, double y) {
  auto side = [&](const data::Point& a, const data::Point& b) {
    return (b.x - a.x) * (y - a.y) - (b.y - a.y) * (x - a.x);
  };
  const double s0 = side(t[0], t[1]), s1 = side(t[1], t[2]), s2 = side(t[2], t[0]);
  return (s0 > 0 && s1 > 0 && s2 > 0) || (s0 < 0 && s1 < 0 && s2 < 0);
}

}  // namespace

TEST_CASE("copy-paste: a box object is pasted mirrored, its pixels the mirror of its own") {
  const data::Image before = pattern(40, 20);
  data::Image canvas = before;
  std::vector<data::PixelBox> boxes = {{3, 4, 5, 12, 15}};
  std::vector<data::Polygon> segments(1);  // a box label: no polygon
  data::SampleRng rng(1, 2, 3);
  data::copy_paste(canvas, boxes, segments, 1.0, rng);
  REQUIRE(boxes.size() == 2);
  CHECK(boxes[1].class_id == 3);
  CHECK(boxes[1].x1 == 28);  // 40 - 12
  CHECK(boxes[1].x2 == 36);  // 40 - 4
  CHECK(boxes[1].y1 == 5);
  CHECK(boxes[1].y2 == 15);
  REQUIRE(segments.size() == 2);
  CHECK(segments[1].empty());
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 40; ++x) {
      const bool pasted = x >= 28 && x < 36 && y >= 5 && y < 15;
      CAPTURE(x);
      CAPTURE(y);
      CHECK(same_pixel(canvas, x, y, before, pasted ? 39 - x : x, y));
    }
}

TEST_CASE("copy-paste: a polygon object pastes the mirror of its inside and its mirrored polygon") {
  const data::Image before = pattern(50, 30);
  data::Image canvas = before;
  const data::Polygon triangle = {{3.2f, 4.1f}, {17.7f, 9.3f}, {6.4f, 25.6f}};
  std::vector<data::PixelBox> boxes = {{1, 3.2f, 4.1f, 17.7f, 25.6f}};
  std::vector<data::Polygon> segments = {triangle};
  data::SampleRng rng(4, 5, 6);
  data::copy_paste(canvas, boxes, segments, 1.0, rng);
  REQUIRE(boxes.size() == 2);
  CHECK(boxes[1].x1 == doctest::Approx(50 - 17.7));
  CHECK(boxes[1].x2 == doctest::Approx(50 - 3.2));
  CHECK(boxes[1].y2 == doctest::Approx(25.6));
  REQUIRE(segments.size() == 2);
  REQUIRE(segments[1].size() == 3);
  CHECK(segments[1][1].x == doctest::Approx(50 - 17.7));
  CHECK(segments[1][1].y == doctest::Approx(9.3));
  int pasted_pixels = 0;
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < 50; ++x) {
      // Pixel x shows pixel 49 - x when the source pixel's centre is inside the triangle.
      const bool pasted = in_triangle(triangle, 49 - x + 0.5, y + 0.5);
      pasted_pixels += pasted;
      CAPTURE(x);
      CAPTURE(y);
      CHECK(same_pixel(canvas, x, y, before, pasted ? 49 - x : x, y));
    }
  CHECK(pasted_pixels > 100);  // about the triangle's area, 143 px^2
}

TEST_CASE("copy-paste: a paste covering 30 % of a box or more is skipped, less is pasted") {
  // Box a's mirror lands on box b's column and b's on a's; they overlap b (and a) by 2.9 or
  // 3.1 of their 10 rows: 29 % pastes both, 31 % neither, in whichever order they are tried.
  struct Case {
    float b_top;
    bool pasted;
  };
  for (const Case& c : {Case{7.1f, true}, Case{6.9f, false}}) {
    CAPTURE(c.b_top);
    data::Image canvas = pattern(40, 20);
    const data::Image before = canvas;
    std::vector<data::PixelBox> boxes = {{0, 2, 0, 10, 10}, {1, 30, c.b_top, 38, c.b_top + 10}};
    std::vector<data::Polygon> segments(2);
    data::SampleRng rng(7, 8, 9);
    data::copy_paste(canvas, boxes, segments, 1.0, rng);
    CHECK(boxes.size() == (c.pasted ? 4u : 2u));
    CHECK((canvas.pixels == before.pixels) == !c.pasted);
  }
  // An object on the middle line would cover itself: skipped.
  data::Image canvas = pattern(40, 20);
  const data::Image before = canvas;
  std::vector<data::PixelBox> boxes = {{0, 15, 2, 25, 12}};
  std::vector<data::Polygon> segments(1);
  data::SampleRng rng(7, 8, 9);
  data::copy_paste(canvas, boxes, segments, 1.0, rng);
  CHECK(boxes.size() == 1);
  CHECK(canvas.pixels == before.pixels);
}

TEST_CASE("copy-paste: round(p * n) objects are tried, halves rounded to even as Python does") {
  // Five small objects on the left half, whose mirrors touch nothing: every one tried is pasted.
  auto pasted_count = [](double p, size_t n) {
    data::Image canvas = pattern(100, 60);
    std::vector<data::PixelBox> boxes;
    for (size_t k = 0; k < n; ++k)
      boxes.push_back({0, 5, 2 + 11.0f * float(k), 15, 10 + 11.0f * float(k)});
    std::vector<data::Polygon> segments(n);
    data::SampleRng rng(1, 1, 1);
    data::copy_paste(canvas, boxes, segments, p, rng);
    return boxes.size() - n;
  };
  CHECK(pasted_count(0.5, 5) == 2);  // round(2.5) = 2
  CHECK(pasted_count(0.5, 3) == 2);  // round(1.5) = 2
  CHECK(pasted_count(0.5, 1) == 0);  // round(0.5) = 0
  CHECK(pasted_count(0.1, 5) == 0);  // hyp.scratch-high's 0.1 on 5 objects
  CHECK(pasted_count(0.3, 5) == 2);  // round(1.5) = 2
  CHECK(pasted_count(1.0, 5) == 5);
}

TEST_CASE("copy-paste: at p = 0 nothing changes and nothing is drawn") {
  data::Image canvas = pattern(40, 20);
  const data::Image before = canvas;
  std::vector<data::PixelBox> boxes = {{3, 4, 5, 12, 15}};
  std::vector<data::Polygon> segments(1);
  data::SampleRng rng(1, 2, 3), untouched(1, 2, 3);
  data::copy_paste(canvas, boxes, segments, 0.0, rng);
  CHECK(canvas.pixels == before.pixels);
  CHECK(boxes.size() == 1);
  CHECK(rng.next() == untouched.next());
}
