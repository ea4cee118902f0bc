// tests/unit/augment.cpp — image decoding, resize and warp against naive references,
// OpenCV-compatible HSV, letterbox geometry, box conversions and the degenerate-box filter,
// and the whole training pipeline keeping every label on its object.
#include <stb/stb_image_write.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "data/boxes.h"
#include "data/cache_files.h"
#include "data/hsv.h"
#include "data/image.h"
#include "data/letterbox.h"
#include "data/perspective.h"
#include "data/sample.h"
#include "data/verify.h"
#include "data/warp.h"
#include "tests/support/data_fixtures.h"
#include "tests/support/sanitizers.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

data::Image gradient_image(int width, int height) {
  data::Image image(width, height, 0);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      uint8_t* p = image.at(x, y);
      p[0] = uint8_t((x * 37 + y * 11) % 256), p[1] = uint8_t((x * y) % 256),
      p[2] = uint8_t(y * 5 % 256);
    }
  return image;
}

// OpenCV's INTER_LINEAR in plain doubles: the reference for resize_bilinear.
double reference_resize(const data::Image& src, int width, int height, int x, int y, int c) {
  auto coordinate = [](int d, int src_size, int dst_size, int& s0, double& frac) {
    double s = (d + 0.5) * src_size / dst_size - 0.5;
    s0 = int(std::floor(s));
    frac = s - s0;
    if (s0 < 0) s0 = 0, frac = 0;
    if (s0 >= src_size - 1) s0 = src_size - 1, frac = 0;
  };
  int x0, y0;
  double fx, fy;
  coordinate(x, src.width, width, x0, fx);
  coordinate(y, src.height, height, y0, fy);
  int x1 = std::min(x0 + 1, src.width - 1), y1 = std::min(y0 + 1, src.height - 1);
  return (1 - fy) * ((1 - fx) * src.at(x0, y0)[c] + fx * src.at(x1, y0)[c]) +
         fy * ((1 - fx) * src.at(x0, y1)[c] + fx * src.at(x1, y1)[c]);
}

}  // namespace

TEST_CASE("a grayscale PNG decodes to three equal channels") {
  TempDir dir;
  std::vector<uint8_t> gray(12 * 10);
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = uint8_t(i * 2);
  std::string file = (dir.path() / "gray.png").string();
  REQUIRE(stbi_write_png(file.c_str(), 12, 10, 1, gray.data(), 12));
  data::Image image = data::read_image(file);
  CHECK(image.width == 12);
  CHECK(image.height == 10);
  CHECK(image.at(5, 3)[0] == gray[3 * 12 + 5]);
  CHECK(image.at(5, 3)[1] == gray[3 * 12 + 5]);
  CHECK(image.at(5, 3)[2] == gray[3 * 12 + 5]);
}

TEST_CASE("bilinear resize matches OpenCV's INTER_LINEAR formula within one level") {
  data::Image src = gradient_image(37, 23);
  for (auto [w, h] : {std::pair{20, 11}, std::pair{64, 50}, std::pair{37, 9}}) {
    data::Image out = data::resize_bilinear(src, w, h);
    double worst = 0;
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int c = 0; c < 3; ++c)
          worst = std::max(worst, std::abs(out.at(x, y)[c] - reference_resize(src, w, h, x, y, c)));
    CHECK(worst <= 1.0);
  }
}

TEST_CASE("warp: an integer translation shifts pixels and fills the border with the pad value") {
  data::Image src = gradient_image(30, 20);
  data::Mat3 shift;
  shift(0, 2) = 5, shift(1, 2) = -3;
  data::Image out = data::warp(src, shift, 30, 20, data::kPadValue);
  CHECK(std::equal(out.at(5, 0), out.at(5, 0) + 3, src.at(0, 3)));
  CHECK(std::equal(out.at(29, 16), out.at(29, 16) + 3, src.at(24, 19)));
  CHECK(out.at(4, 0)[0] == 114);    // left of the shifted image
  CHECK(out.at(10, 17)[1] == 114);  // below it
  // A half-pixel shift averages neighbours.
  data::Mat3 half;
  half(0, 2) = 0.5;
  data::Image blended = data::warp(src, half, 30, 20, 0);
  CHECK(std::abs(blended.at(10, 4)[0] - (src.at(9, 4)[0] + src.at(10, 4)[0]) / 2.0) <= 1.0);
}

TEST_CASE("HSV: OpenCV's 8-bit values and a round trip within quantisation") {
  using Hsv = data::Hsv;
  CHECK(data::rgb_to_hsv({255, 0, 0}) == Hsv{0, 255, 255});
  CHECK(data::rgb_to_hsv({0, 255, 0}) == Hsv{60, 255, 255});
  CHECK(data::rgb_to_hsv({0, 0, 255}) == Hsv{120, 255, 255});
  CHECK(data::rgb_to_hsv({255, 255, 0}) == Hsv{30, 255, 255});
  CHECK(data::rgb_to_hsv({128, 128, 128}) == Hsv{0, 0, 128});
  CHECK(data::rgb_to_hsv({200, 100, 50}) == Hsv{10, 191, 200});  // cv2.cvtColor gives this
  int worst = 0;
  for (int r = 0; r < 256; r += 5)
    for (int g = 0; g < 256; g += 7)
      for (int b = 0; b < 256; b += 3) {
        data::Rgb back = data::hsv_to_rgb(data::rgb_to_hsv({uint8_t(r), uint8_t(g), uint8_t(b)}));
        worst =
            std::max({worst, std::abs(back[0] - r), std::abs(back[1] - g), std::abs(back[2] - b)});
      }
  CHECK(worst <= 6);  // hue has 180 levels, so saturated colours move by a few levels
}

TEST_CASE("hsv_to_rgb gives the bytes the fixtures were made with, for every input") {
  // The digest of hsv_to_rgb over all 2^24 (H, S, V) bytes as commit 854d193's Release build
  // computed them, which made the shapes dataset and the training fixtures. The sector formula
  // fuses one of its two multiply-adds; which one decides a level in 218 inputs, so a change of
  // the arithmetic (or of the compiler's contraction, data/hsv.cpp) shows here. OpenCV 4.6
  // itself agrees with neither choice on every input.
  uint64_t digest = 0xcbf29ce484222325ull;
  for (int h = 0; h < 256; ++h)
    for (int s = 0; s < 256; ++s)
      for (int v = 0; v < 256; ++v) {
        const data::Rgb rgb = data::hsv_to_rgb({uint8_t(h), uint8_t(s), uint8_t(v)});
        digest = data::fnv1a_bytes(rgb.data(), rgb.size(), digest);
      }
  CHECK(data::hex(digest) == "21363e81d0476dcb");
}

TEST_CASE("HSV jitter: zero gains change and draw nothing, one gain on draws all three") {
  data::Image image = gradient_image(8, 8), before = image;
  data::AugmentHyp hyp;
  hyp.hsv_h = hyp.hsv_s = hyp.hsv_v = 0;
  data::SampleRng rng(1, 2, 3), untouched(1, 2, 3);
  data::apply_hsv_jitter(image, data::draw_hsv_jitter(hyp, rng));
  CHECK(image.pixels == before.pixels);
  CHECK(rng.next() == untouched.next());
  hyp.hsv_v = 0.4;  // any one gain on: all three drawn
  const data::HsvJitter value_only = data::draw_hsv_jitter(hyp, rng);
  CHECK(value_only.on);
  CHECK(value_only.gain_h == 1);
  CHECK(value_only.gain_v != 1);
}

TEST_CASE("letterbox: YOLOv5's padding split and rounding") {
  data::Image wide(200, 100, 50);
  data::LetterboxPlacement placement;
  data::Image out = data::letterbox(wide, 64, 64, true, placement);
  CHECK(placement.ratio == doctest::Approx(0.32));
  CHECK(placement.pad_x == 0);
  CHECK(placement.pad_y == doctest::Approx(16));  // 64 - round(32) = 32, split 16/16
  CHECK(out.at(10, 15)[0] == 114);
  CHECK(out.at(10, 16)[0] == 50);
  CHECK(out.at(10, 47)[0] == 50);
  CHECK(out.at(10, 48)[0] == 114);
  // Odd padding puts the extra pixel at the bottom; scale_up=false never enlarges.
  data::Image small(20, 13, 50);
  data::Image kept = data::letterbox(small, 32, 32, false, placement);
  CHECK(placement.ratio == 1.0);
  CHECK(placement.pad_y == doctest::Approx(9.5));
  CHECK(kept.at(16, 8)[0] == 114);
  CHECK(kept.at(16, 9)[0] == 50);  // top = round(9.4) = 9
  CHECK(kept.at(16, 21)[0] == 50);
  CHECK(kept.at(16, 22)[0] == 114);  // bottom = round(9.6) = 10
}

TEST_CASE("load_image's size: the long side imgsz, the short one rounded up, none at r = 1") {
  CHECK(data::resized_size(640, 480, 640) == data::ImageSize{640, 480});
  CHECK(data::resized_size(480, 640, 640) == data::ImageSize{480, 640});
  CHECK(data::resized_size(1000, 333, 640) == data::ImageSize{640, 214});  // 213.12 up
  CHECK(data::resized_size(50, 100, 64) == data::ImageSize{32, 64});
}

TEST_CASE("validation samples are letterboxed without enlarging them (scaleup=False)") {
  // v0 (200 x 100) loads as 64 x 32; a 96 x 64 canvas would fit it 1.5 times larger.
  TempDir dir;
  data::OpenedSplit val =
      data::open_split(data::read_dataset_yaml(make_box_dataset(dir.path(), 1)), "val");
  const data::Sample sample = data::make_val_sample(val.dataset, 0, 64, 96, 64);
  CHECK(sample.image.width == 96);
  CHECK(sample.image.height == 64);
  CHECK(sample.meta.gain_x == doctest::Approx(64.0 / 200));
  CHECK(sample.meta.pad_x == 16);
  CHECK(sample.meta.pad_y == 16);
  REQUIRE(sample.labels.size() == 1);
  CHECK(sample.labels[0].w == doctest::Approx(0.4 * 64 / 96));
  CHECK(sample.image.at(15, 32)[0] == data::kPadValue);
  CHECK(sample.image.at(48, 32)[0] == 255);  // the object, at the image's centre
}

TEST_CASE("box conversions and the degenerate-box filter") {
  data::PixelBox p = data::to_pixels({2, 0.5f, 0.25f, 0.2f, 0.1f}, 100, 200, 10, 20);
  CHECK(p.x1 == doctest::Approx(50));
  CHECK(p.y1 == doctest::Approx(60));
  CHECK(p.x2 == doctest::Approx(70));
  CHECK(p.y2 == doctest::Approx(80));
  data::LabelBox n = data::to_normalised({1, -5, 10, 60, 250}, 50, 100);
  // Clipped to 0.001 px inside the image (YOLOv5's eps), which the default Approx cannot see.
  CHECK(n.cx == doctest::Approx((0 + 49.999) / 2 / 50).epsilon(1e-6));
  CHECK(n.h == doctest::Approx((99.999 - 10) / 100).epsilon(1e-6));
  data::PixelBox before{0, 0, 0, 10, 10};
  CHECK(data::box_survives(before, {0, 0, 0, 10, 10}));
  CHECK_FALSE(data::box_survives(before, {0, 0, 0, 2, 10}));  // 2 px wide
  CHECK_FALSE(data::box_survives(before, {0, 0, 0, 3, 3}));   // 9 % of the area left
  CHECK_FALSE(data::box_survives({0, 0, 0, 1000, 10}, {0, 0, 0, 1000, 9.9f}));  // aspect >= 100
  CHECK_FALSE(data::box_survives({0, 0, 0, 10, 1000}, {0, 0, 0, 9.9f, 1000}));  // and standing
  CHECK(data::box_survives({0, 0, 0, 10, 1000}, {0, 0, 0, 10.1f, 1000}));
}

TEST_CASE("random perspective with every range zero and no border is the identity") {
  data::AugmentHyp hyp;
  hyp.translate = hyp.scale = 0;
  data::Image image = gradient_image(40, 30), before = image;
  std::vector<data::PixelBox> boxes = {{1, 5, 5, 20, 25}};
  data::SampleRng rng(0, 0, 0);
  data::random_perspective(image, boxes, hyp, 0, rng);
  CHECK(image.pixels == before.pixels);
  REQUIRE(boxes.size() == 1);
  CHECK(boxes[0].x1 == doctest::Approx(5));
  CHECK(boxes[0].y2 == doctest::Approx(25));
}

TEST_CASE(
    "training pipeline: labels sit on their white objects after mosaic and zoom and translation "
    "and flips") {
  TempDir dir;
  data::DatasetConfig config = data::read_dataset_yaml(make_box_dataset(dir.path(), 6));
  data::OpenedSplit train = data::open_split(config, "train");
  data::AugmentHyp hyp;
  hyp.hsv_h = hyp.hsv_s = hyp.hsv_v = 0;  // keep white white
  hyp.flipud = 0.5;                       // exercise both flips
  int64_t bright = 0, bright_covered = 0, inside = 0, inside_bright = 0, mosaics = 0;
  for (uint64_t position = 0; position < 24; ++position) {
    hyp.mosaic = position % 2 ? 1.0 : 0.0;
    mosaics += position % 2;
    data::SampleRng rng(7, 0, position);
    data::Sample sample =
        data::make_train_sample(train.dataset, int64_t(position % 6), 128, hyp, rng);
    REQUIRE(sample.image.width == 128);
    REQUIRE(sample.image.height == 128);
    auto in_box = [](const data::LabelBox& b, int x, int y, double slack) {
      return std::abs(x + 0.5 - b.cx * 128) <= b.w * 64 + slack &&
             std::abs(y + 0.5 - b.cy * 128) <= b.h * 64 + slack;
    };
    for (int y = 0; y < 128; ++y)
      for (int x = 0; x < 128; ++x) {
        bool white = sample.image.at(x, y)[0] > 200;
        bool covered = std::any_of(sample.labels.begin(), sample.labels.end(),
                                   [&](const data::LabelBox& b) { return in_box(b, x, y, 1.5); });
        bool well_inside =
            std::any_of(sample.labels.begin(), sample.labels.end(),
                        [&](const data::LabelBox& b) { return in_box(b, x, y, -1.5); });
        bright += white, bright_covered += white && covered;
        inside += well_inside, inside_bright += well_inside && white;
      }
  }
  CHECK(mosaics == 12);
  REQUIRE(inside > 1000);
  // Boxes are filled by their objects, and objects are labelled; the few uncovered bright
  // pixels are remnants of boxes the filter dropped (cut to < 10 % or <= 2 px).
  CHECK(double(inside_bright) / inside > 0.98);
  CHECK(double(bright_covered) / bright > 0.97);
}

TEST_CASE("training samples with mixup and copy-paste off are those of the pipeline before them") {
  // The digest of 8 samples (pixels and labels) as commit 8813c3b built them, before mixup and
  // copy-paste existed: at probability 0 they must draw nothing and change nothing. A deliberate
  // change to the default augmentations updates it.
  TempDir dir;
  data::DatasetConfig config = data::read_dataset_yaml(make_box_dataset(dir.path(), 6));
  data::OpenedSplit train = data::open_split(config, "train");
  data::AugmentHyp hyp;  // hyp.scratch-low, whose mixup and copy_paste are 0
  hyp.mosaic = 0.75;     // both pipelines: mosaic and letterbox
  uint64_t digest = 0xcbf29ce484222325ull;
  for (uint64_t position = 0; position < 8; ++position) {
    data::SampleRng rng(11, 3, position);
    data::Sample sample =
        data::make_train_sample(train.dataset, int64_t(position % 6), 96, hyp, rng);
    digest = data::fnv1a_bytes(sample.image.pixels.data(), sample.image.pixels.size(), digest);
    digest = data::fnv1a_bytes(sample.labels.data(), sample.labels.size() * sizeof(data::LabelBox),
                               digest);
  }
#if BAREYOLO_TEST_ASAN
  // The digest is the Release build's (gcc -O3): a sanitizer build may compute other float bits
  // in the warps (gcc -O1 with ASan and UBSan did: 889d3a5677b10b37), so there the test only
  // runs the pipeline under the sanitizers. valgrind finds no uninitialised read in it.
  MESSAGE("sanitizer build: digest " << data::hex(digest) << " not compared");
#else
  CHECK(data::hex(digest) == "dffcd7fdbf8f18f3");
#endif
}

TEST_CASE("random perspective with polygons: boxes from the points that land inside, kept at 1 %") {
  // A triangle whose apex (95, 50) is inside a 100 x 100 output and whose base (x = 140) is
  // outside: the part inside spans x 95..100 and, on its two edges at x = 100, y 50 -/+ 40 * 5/45.
  const std::vector<data::PixelBox> boxes = {{0, 95, 10, 140, 90}};
  const std::vector<data::Polygon> segments = {{{95, 50}, {140, 10}, {140, 90}}};
  const double half_height = 40.0 * 5 / 45;
  std::vector<data::PixelBox> moved =
      data::transform_segments(boxes, segments, data::Mat3::identity(), 1.0, 100, 100);
  REQUIRE(moved.size() == 1);  // 5 x 8.9 of 45 x 80 is 1.2 % of the area: above 1 %
  // 1000 points along 3 edges: a point every 0.26 px at most, so the extent is that close.
  CHECK(moved[0].x1 == doctest::Approx(95).epsilon(0.003));
  CHECK(moved[0].x2 == doctest::Approx(100).epsilon(0.003));
  CHECK(moved[0].y1 == doctest::Approx(50 - half_height).epsilon(0.006));
  CHECK(moved[0].y2 == doctest::Approx(50 + half_height).epsilon(0.006));
  // The corners' box clips to x 95..100, y 10..90, 11 % of the area: kept there, and larger.
  std::vector<data::PixelBox> corners =
      data::transform_boxes(boxes, data::Mat3::identity(), 1.0, 100, 100);
  REQUIRE(corners.size() == 1);
  CHECK(corners[0].y1 == 10);

  // A diamond turned 45 degrees about its centre is a square of side 10 sqrt(2): its box is that
  // square, where the turned corners of its box (x, y 40..60) would span 20 sqrt(2).
  data::Mat3 to_origin, turn, back;
  to_origin(0, 2) = to_origin(1, 2) = -50;
  back(0, 2) = back(1, 2) = 50;
  const double c = std::sqrt(0.5);
  turn(0, 0) = c, turn(0, 1) = -c, turn(1, 0) = c, turn(1, 1) = c;
  const data::Mat3 m = back * turn * to_origin;
  std::vector<data::PixelBox> turned = data::transform_segments(
      {{1, 40, 40, 60, 60}}, {{{50, 40}, {60, 50}, {50, 60}, {40, 50}}}, m, 1.0, 100, 100);
  REQUIRE(turned.size() == 1);
  CHECK(turned[0].x2 - turned[0].x1 == doctest::Approx(10 * std::sqrt(2.0)).epsilon(0.01));
  CHECK(turned[0].y2 - turned[0].y1 == doctest::Approx(10 * std::sqrt(2.0)).epsilon(0.01));
  std::vector<data::PixelBox> turned_corners =
      data::transform_boxes({{1, 40, 40, 60, 60}}, m, 1.0, 100, 100);
  REQUIRE(turned_corners.size() == 1);
  CHECK(turned_corners[0].x2 - turned_corners[0].x1 == doctest::Approx(20 * std::sqrt(2.0)));
  CHECK(turned_corners[0].y2 - turned_corners[0].y1 == doctest::Approx(20 * std::sqrt(2.0)));
}

TEST_CASE("random perspective: the matrix moves points as T S R P C of its eight draws") {
  // Each point by the spec's steps (5.8), not by matrix products: centre it, divide by the
  // perspective's w, turn and zoom, shear, translate; the draws taken from a copy of the rng in
  // YOLOv5's order.
  data::AugmentHyp hyp;
  hyp.degrees = 30, hyp.shear = 10, hyp.scale = 0.5, hyp.translate = 0.1;
  const int in_w = 200, in_h = 120, out_w = 160, out_h = 100;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    CAPTURE(seed);
    hyp.perspective = seed % 2 ? 1e-3 : 0.0;
    data::SampleRng rng(seed, 0, 0), draws = rng;
    double zoom = 0;
    const data::Mat3 m = data::random_perspective_matrix(hyp, in_w, in_h, out_w, out_h, rng, zoom);
    const double px = draws.uniform(-hyp.perspective, hyp.perspective);
    const double py = draws.uniform(-hyp.perspective, hyp.perspective);
    const auto radians = [](double degrees) { return degrees * std::numbers::pi / 180; };
    const double a = radians(draws.uniform(-hyp.degrees, hyp.degrees));
    const double s = draws.uniform(1 - hyp.scale, 1 + hyp.scale);
    const double shear_x = std::tan(radians(draws.uniform(-hyp.shear, hyp.shear)));
    const double shear_y = std::tan(radians(draws.uniform(-hyp.shear, hyp.shear)));
    const double tx = draws.uniform(0.5 - hyp.translate, 0.5 + hyp.translate) * out_w;
    const double ty = draws.uniform(0.5 - hyp.translate, 0.5 + hyp.translate) * out_h;
    CHECK(rng.uniform() == draws.uniform());  // exactly eight draws
    CHECK(zoom == s);
    for (const auto& [x, y] : {std::pair{0.0, 0.0}, {200.0, 0.0}, {37.0, 91.0}, {200.0, 120.0}}) {
      const double cx = x - in_w / 2.0, cy = y - in_h / 2.0;
      const double w = px * cx + py * cy + 1;
      const double rx = s * (std::cos(a) * cx + std::sin(a) * cy) / w;
      const double ry = s * (-std::sin(a) * cx + std::cos(a) * cy) / w;
      const double expected_x = rx + shear_x * ry + tx, expected_y = shear_y * rx + ry + ty;
      const double mw = m(2, 0) * x + m(2, 1) * y + m(2, 2);
      CHECK((m(0, 0) * x + m(0, 1) * y + m(0, 2)) / mw == doctest::Approx(expected_x));
      CHECK((m(1, 0) * x + m(1, 1) * y + m(1, 2)) / mw == doctest::Approx(expected_y));
    }
  }
}

TEST_CASE("random perspective keeps a box by its area against the box times the zoom") {
  // Zoom 0.5, then 40 px (46 px) to the left: the 100 x 40 box becomes 50 x 20 and is cut to
  // 10 x 20 (4 x 20), 20 % (8 %) of its zoomed area, 5 % (2 %) of the box's own.
  for (const double shift : {40.0, 46.0}) {
    CAPTURE(shift);
    const bool kept = shift == 40;
    data::Mat3 m;
    m(0, 0) = m(1, 1) = 0.5;
    m(0, 2) = -shift;
    const std::vector<data::PixelBox> moved =
        data::transform_boxes({{0, 0, 0, 100, 40}}, m, 0.5, 200, 200);
    REQUIRE(moved.size() == size_t(kept));
    if (kept) CHECK(moved[0].x2 == doctest::Approx(10));
  }
}

TEST_CASE("random perspective takes the polygons' path only when every box has a polygon") {
  data::AugmentHyp hyp;
  hyp.translate = hyp.scale = 0;
  const std::vector<data::Polygon> triangle = {{{95, 50}, {140, 10}, {140, 90}}};
  // The triangle example above on a 100 x 100 image: its polygon's box is 8.9 px high, its
  // corners' box 80.
  for (const bool with_polygon : {true, false}) {
    data::Image image = gradient_image(100, 100);
    std::vector<data::PixelBox> boxes = {{0, 95, 10, 140, 90}};
    data::SampleRng rng(0, 0, 0);
    data::random_perspective(image, boxes, hyp, 0, rng,
                             with_polygon ? triangle : std::vector<data::Polygon>{{}});
    REQUIRE(boxes.size() == 1);
    CHECK((boxes[0].y2 - boxes[0].y1 < 10) == with_polygon);
  }
}

TEST_CASE("training pipeline: polygon labels stay on their objects through copy-paste and turns") {
  TempDir dir;
  data::OpenedSplit train =
      data::open_split(data::read_dataset_yaml(make_polygon_dataset(dir.path(), 6)), "train");
  REQUIRE(train.dataset.record(1).segments.size() == 2);
  data::AugmentHyp hyp;
  hyp.hsv_h = hyp.hsv_s = hyp.hsv_v = 0;  // keep white white
  hyp.degrees = 30;                       // turned triangles: the polygons give tight boxes
  hyp.copy_paste = 1;
  int64_t bright = 0, bright_covered = 0, box_pixels = 0, box_bright = 0;
  size_t labels = 0;
  for (uint64_t position = 0; position < 12; ++position) {
    data::SampleRng rng(3, 0, position);
    data::Sample sample =
        data::make_train_sample(train.dataset, int64_t(position % 6), 128, hyp, rng);
    labels += sample.labels.size();
    for (int y = 0; y < 128; ++y)
      for (int x = 0; x < 128; ++x) {
        const bool white = sample.image.at(x, y)[0] > 200;
        bool covered = false;
        for (const data::LabelBox& b : sample.labels) {
          const bool inside = std::abs(x + 0.5 - b.cx * 128) <= b.w * 64 &&
                              std::abs(y + 0.5 - b.cy * 128) <= b.h * 64;
          covered = covered || inside;
          box_pixels += inside, box_bright += inside && white;
        }
        bright += white, bright_covered += white && covered;
      }
  }
  CHECK(labels > 24);  // 1.5 triangles an image, 4 images a mosaic, copies, minus cut ones
  CHECK(double(bright_covered) / double(bright) > 0.97);
  // A right triangle fills half its box, less where boxes overlap or cut it: 0.45 here. The
  // corners' box of the turned triangle's box would leave 0.31.
  CHECK(double(box_bright) / double(box_pixels) > 0.4);
}

TEST_CASE("training pipeline: with mixup a mosaic's labels are its own and then its partner's") {
  TempDir dir;
  data::OpenedSplit train =
      data::open_split(data::read_dataset_yaml(make_box_dataset(dir.path(), 6)), "train");
  data::AugmentHyp plain;
  plain.fliplr = 0;  // labels as the mosaics left them
  data::AugmentHyp mixed = plain;
  mixed.mixup = 1;
  size_t partners_labels = 0;
  for (uint64_t position = 0; position < 6; ++position) {
    data::SampleRng plain_rng(9, 1, position), mixed_rng(9, 1, position);
    const data::Sample alone = data::make_train_sample(train.dataset, 0, 96, plain, plain_rng);
    const data::Sample blended = data::make_train_sample(train.dataset, 0, 96, mixed, mixed_rng);
    REQUIRE(blended.labels.size() >= alone.labels.size());
    CHECK(std::equal(alone.labels.begin(), alone.labels.end(), blended.labels.begin()));
    partners_labels += blended.labels.size() - alone.labels.size();
    CHECK(blended.image.pixels != alone.image.pixels);
  }
  CHECK(partners_labels > 6);
}

TEST_CASE("HSV jitter equals OpenCV's per-pixel round trip through the tables for every colour") {
  // All 2^24 colours, jittered by the tables and by the definition: RGB -> HSV, through
  // lut_h/lut_s/lut_v, and back with hsv_to_rgb.
  data::Image image(4096, 4096, 0);
  for (uint32_t colour = 0; colour < (1u << 24); ++colour) {
    uint8_t* p = image.pixels.data() + size_t(colour) * 3;
    p[0] = uint8_t(colour >> 16), p[1] = uint8_t(colour >> 8), p[2] = uint8_t(colour);
  }
  const data::Image original = image;
  data::AugmentHyp hyp;
  hyp.hsv_h = 0.5, hyp.hsv_s = 0.7, hyp.hsv_v = 0.9;  // wide gains: every table is exercised
  data::SampleRng rng(5, 1, 9), same(5, 1, 9);
  data::apply_hsv_jitter(image, data::draw_hsv_jitter(hyp, rng));
  const double gain_h = same.uniform(-1, 1) * hyp.hsv_h + 1;
  const double gain_s = same.uniform(-1, 1) * hyp.hsv_s + 1;
  const double gain_v = same.uniform(-1, 1) * hyp.hsv_v + 1;
  int64_t differing = 0;
  for (size_t i = 0; i < original.pixels.size(); i += 3) {
    const data::Hsv hsv =
        data::rgb_to_hsv({original.pixels[i], original.pixels[i + 1], original.pixels[i + 2]});
    const data::Rgb expected = data::hsv_to_rgb({uint8_t(std::fmod(hsv[0] * gain_h, 180.0)),
                                                 uint8_t(std::clamp(hsv[1] * gain_s, 0.0, 255.0)),
                                                 uint8_t(std::clamp(hsv[2] * gain_v, 0.0, 255.0))});
    differing += !std::equal(expected.begin(), expected.end(), image.pixels.begin() + long(i));
  }
  CHECK(differing == 0);
}
