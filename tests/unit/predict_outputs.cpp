// tests/unit/predict_outputs.cpp — what predict writes beside its drawn images: the crop of a
// detection as detect.py --save-crop cuts it (save_one_box: rounded box, 1.02x + 10 px, clipped)
// and the Speed: line of detect.py and val.py. The crops' expected regions are worked out by
// hand below; YOLOv5's save_one_box gives the same crop shapes for these boxes.
#include <chrono>
#include <thread>

#include "models/eval/detection_crop.h"
#include "models/eval/speed.h"
#include "tests/support/testing.h"

using namespace bareyolo;

TEST_CASE("a detection's crop is its rounded box grown 1.02x plus 10 pixels, clipped") {
  struct Case {
    models::BoxXYXY box;
    models::PixelRegion region;
  };
  // In a 100 x 80 image:
  const Case cases[] = {
      // rounded (10, 21, 50, 60): centre (30, 40.5), size 40 x 39 -> 50.8 x 49.78;
      // x 4.6..55.4 -> 4..55, y 15.61..65.39 -> 15..65
      {{10.4f, 20.6f, 50.2f, 60.5f}, {4, 15, 55, 65}},
      // the whole image grows past every edge and is clipped back to it
      {{0, 0, 100, 80}, {0, 0, 100, 80}},
      // halves round to even: (92, 4, 100, 78); centre (96, 41), size 8 x 74 -> 18.16 x 85.48;
      // x 86.92..105.08 -> 86..100 (clipped), y -1.74..83.74 -> 0 (truncated, clipped)..80
      {{92.5f, 3.5f, 99.5f, 77.5f}, {86, 0, 100, 80}},
      // (30, 10, 32, 12): a 2 x 2 box becomes 12.04 x 12.04: 24.98..37.02 -> 24..37
      {{30.5f, 10.5f, 31.5f, 11.5f}, {24, 4, 37, 17}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.box.x1);
    CHECK(models::crop_region(c.box, 100, 80) == c.region);
  }
}

TEST_CASE("a detection's crop holds the image's pixels of its region") {
  data::Image image(100, 80, 0);
  for (int y = 0; y < image.height; ++y)
    for (int x = 0; x < image.width; ++x)
      image.at(x, y)[0] = uint8_t(x), image.at(x, y)[1] = uint8_t(y);
  const data::Image crop = models::detection_crop(image, {10.4f, 20.6f, 50.2f, 60.5f});
  REQUIRE(crop.width == 51);
  REQUIRE(crop.height == 50);
  CHECK(crop.at(0, 0)[0] == 4);  // the region's top-left pixel, (4, 15)
  CHECK(crop.at(0, 0)[1] == 15);
  CHECK(crop.at(50, 49)[0] == 54);  // its bottom-right one, (54, 64)
  CHECK(crop.at(50, 49)[1] == 64);
}

TEST_CASE("the Speed line gives milliseconds per image and the input's shape as YOLOv5 does") {
  // 12 ms, 40 ms and 2 ms over 4 images: 3.0, 10.0 and 0.5 ms each.
  const models::StageTimes times{.pre_process_s = 0.012, .inference_s = 0.040, .nms_s = 0.002};
  CHECK(models::speed_line(times, 4, {1, 3, 640, 480}) ==
        "Speed: 3.0ms pre-process, 10.0ms inference, 0.5ms NMS per image at shape (1, 3, 640, "
        "480)");
  // No image predicted (all unreadable): nothing was timed, so zeros rather than a division by 0.
  CHECK(models::speed_line({}, 0, {32, 3, 64, 64}) ==
        "Speed: 0.0ms pre-process, 0.0ms inference, 0.0ms NMS per image at shape (32, 3, 64, 64)");
}

TEST_CASE("a timed stage returns its work's result and adds its seconds") {
  double total_s = 1.0;
  const int result = models::timed_stage(total_s, Device::cpu(), [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return 7;
  });
  CHECK(result == 7);
  CHECK(total_s >= 1.005);
}
