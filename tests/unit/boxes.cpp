// tests/unit/boxes.cpp — box encodings, IoU (with YOLOv5's eps) and letterbox undoing, on
// boxes whose answers are worked out by hand.
#include <doctest/doctest.h>

#include "models/eval/boxes.h"

namespace bareyolo::models {

TEST_CASE("box conversion between centre-size and corners") {
  const BoxXYXY corners = xywh_to_xyxy({10, 20, 4, 6});
  CHECK(corners == BoxXYXY{8, 17, 12, 23});
  const BoxXYWH centre = xyxy_to_xywh(corners);
  CHECK(centre.cx == 10);
  CHECK(centre.cy == 20);
  CHECK(centre.w == 4);
  CHECK(centre.h == 6);
}

TEST_CASE("box iou of hand-built pairs") {
  const BoxXYXY square{0, 0, 2, 2};
  CHECK(box_area(square) == 4);
  CHECK(box_iou(square, square) == doctest::Approx(1.0));
  CHECK(box_iou(square, {1, 0, 3, 2}) == doctest::Approx(2.0 / 6.0));   // half overlap
  CHECK(box_iou({0, 0, 4, 4}, {1, 1, 3, 3}) == doctest::Approx(0.25));  // one inside the other
  CHECK(box_iou(square, {2, 0, 4, 2}) == 0);                            // touching edges
  CHECK(box_iou(square, {5, 5, 6, 6}) == 0);                            // disjoint
  CHECK(box_iou(square, {5, 0, 7, 2}) == 0);        // apart in x only: no negative "overlap"
  CHECK(box_iou(square, {0, 5, 2, 7}) == 0);        // apart in y only
  CHECK(box_iou({1, 1, 1, 1}, {1, 1, 1, 1}) == 0);  // empty boxes: the eps avoids 0/0
  CHECK(intersection_area({0, 0, 3, 2}, {1, -1, 5, 1}) == 2);
}

TEST_CASE("box iou matrix is first-major") {
  const std::vector<BoxXYXY> first = {{0, 0, 2, 2}, {10, 10, 12, 12}};
  const std::vector<BoxXYXY> second = {{10, 10, 12, 12}, {0, 0, 2, 2}, {1, 0, 3, 2}};
  const std::vector<float> iou = box_iou_matrix(first, second);
  REQUIRE(iou.size() == 6);
  CHECK(iou[0] == 0);
  CHECK(iou[1] == doctest::Approx(1.0));
  CHECK(iou[2] == doctest::Approx(1.0 / 3.0));
  CHECK(iou[3] == doctest::Approx(1.0));
  CHECK(iou[4] == 0);
  CHECK(iou[5] == 0);
}

TEST_CASE("box scaling undoes a letterbox and clips to the original image") {
  // A 640x480 image resized by 0.5 to 320x240 and centred on a 320x320 canvas: 40 pixels of
  // padding above and below.
  const Letterbox letterbox{0.5f, 0.0f, 40.0f, 640.0f, 480.0f};
  CHECK(scale_box_to_original({10, 50, 110, 150}, letterbox) == BoxXYXY{20, 20, 220, 220});
  // Parts in the padding or beyond the image are clipped.
  CHECK(scale_box_to_original({-5, 30, 400, 300}, letterbox) == BoxXYXY{0, 0, 640, 480});
}

}  // namespace bareyolo::models
