// tests/unit/mixup.cpp — YOLOv5's MixUp (data/mixup.h): the blended bytes are numpy's
// (image * r + other * (1 - r)).astype(np.uint8), labels are the union, the ratio follows
// Beta(32, 32).
#include <doctest/doctest.h>

#include <cmath>

#include "data/mixup.h"

using namespace bareyolo;

namespace {

data::Image image_of(const std::vector<uint8_t>& bytes) {
  data::Image image(int(bytes.size() / 3), 1, 0);
  image.pixels = bytes;
  return image;
}

}  // namespace

TEST_CASE("mixup: each byte is r * a + (1 - r) * b cut to a byte as YOLOv5's numpy cast cuts it") {
  const std::vector<uint8_t> a = {255, 255, 0, 10, 200, 37, 100, 1, 254, 77, 128, 9, 3, 6, 12};
  const std::vector<uint8_t> b = {255, 0, 255, 20, 100, 250, 101, 3, 0, 200, 128, 90, 3, 6, 12};
  // /usr/bin/python3: (a * r + b * (1 - r)).astype(np.uint8) on uint8 arrays. At r = 0.3 the
  // equal bytes 3, 6 and 12 come out one lower: 3 * 0.3 + 3 * 0.7 is 2.9999999999999996 in
  // double, and the cast cuts it to 2.
  struct Expected {
    double ratio;
    std::vector<uint8_t> bytes;
  };
  const std::vector<Expected> expected = {
      {0.5, {255, 127, 127, 15, 150, 143, 100, 2, 127, 138, 128, 49, 3, 6, 12}},
      {0.3, {255, 76, 178, 17, 130, 186, 100, 2, 76, 163, 128, 65, 2, 5, 11}},
      {0.47, {255, 119, 135, 15, 147, 149, 100, 2, 119, 142, 128, 51, 3, 6, 12}}};
  for (const Expected& e : expected) {
    CAPTURE(e.ratio);
    data::Image image = image_of(a);
    std::vector<data::PixelBox> boxes;
    data::mix_up(image, boxes, image_of(b), {}, e.ratio);
    CHECK(image.pixels == e.bytes);
  }
}

TEST_CASE("mixup: the labels are both images' boxes, this image's first") {
  data::Image image(4, 4, 10), other(4, 4, 20);
  std::vector<data::PixelBox> boxes = {{0, 1, 1, 2, 2}};
  const std::vector<data::PixelBox> other_boxes = {{2, 0, 0, 3, 3}, {1, 1, 0, 4, 2}};
  data::mix_up(image, boxes, other, other_boxes, 0.5);
  REQUIRE(boxes.size() == 3);
  CHECK(boxes[0].class_id == 0);
  CHECK(boxes[1].class_id == 2);
  CHECK(boxes[2].x2 == 4);
  CHECK(image.pixels[0] == 15);
  data::Image small(3, 4, 0);
  CHECK_THROWS_WITH_AS(data::mix_up(small, boxes, other, {}, 0.5), doctest::Contains("3x4 and 4x4"),
                       std::invalid_argument);
}

TEST_CASE("mixup: the ratio has Beta(32, 32)'s mean, variance and skew") {
  // Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1)) = 1/260, symmetric. With 20000 draws the
  // mean's standard error is 0.00044 and the variance's about 1 %.
  data::SampleRng rng(3, 1, 4);
  constexpr int kDraws = 20000;
  double sum = 0, sum_sq = 0, sum_cube = 0;
  std::vector<double> draws;
  for (int i = 0; i < kDraws; ++i) {
    const double r = data::mixup_ratio(rng);
    REQUIRE(r > 0);
    REQUIRE(r < 1);
    draws.push_back(r);
    sum += r;
  }
  const double mean = sum / kDraws;
  for (double r : draws) sum_sq += (r - mean) * (r - mean), sum_cube += std::pow(r - mean, 3);
  const double variance = sum_sq / (kDraws - 1);
  // Relative tolerances (scale 0): at doctest's scale 1 epsilon is also an absolute slack, which
  // let the variance be anything from 0 to 0.054.
  CHECK(mean == doctest::Approx(0.5).scale(0).epsilon(0.004));
  CHECK(variance == doctest::Approx(1.0 / 260).scale(0).epsilon(0.05));
  CHECK(std::abs(sum_cube / kDraws / std::pow(variance, 1.5)) < 0.06);  // skewness 0
}
