// tests/unit/image_prediction.cpp — one image on its way into predict's network and its boxes'
// way back: the letterbox measured from the original's own size (not the resized copy's), and
// the input's channels in the decoded image's RGB order, scaled to 0..1.
#include "models/eval/image_prediction.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("predict's letterbox maps the canvas back onto the original's pixels") {
  // 96 x 48 at canvas 64: read at 64 x 32 (gain 2/3), then padded 16 above and below.
  TempDir dir;
  const std::string path = (dir.path() / "wide.png").string();
  data::write_image(path, data::Image(96, 48, 90));
  const models::LetterboxedImage input = models::letterboxed_image(path, 64, 1 << 20);
  CHECK(input.image.width == 64);
  CHECK(input.image.height == 64);
  CHECK(input.letterbox.gain == doctest::Approx(2.0 / 3).scale(0).epsilon(1e-6));
  CHECK(input.letterbox.pad_x == 0);
  CHECK(input.letterbox.pad_y == 16);
  CHECK(input.letterbox.original_width == 96);
  CHECK(input.letterbox.original_height == 48);
  const models::BoxXYXY original = models::scale_box_to_original({16, 24, 48, 40}, input.letterbox);
  CHECK(original.x1 == doctest::Approx(24));
  CHECK(original.y1 == doctest::Approx(12));
  CHECK(original.x2 == doctest::Approx(72));
  CHECK(original.y2 == doctest::Approx(36));
}

TEST_CASE("predict's network input is the image's RGB in 0..1, a plane per channel") {
  data::Image image(2, 1, 0);
  image.at(0, 0)[0] = 255, image.at(0, 0)[1] = 51;  // red, a fifth of green
  image.at(1, 0)[2] = 255;                          // blue
  const std::vector<float> input = models::network_input(image, Device::cpu()).to_vector<float>();
  // [1, 3, 1, 2]: the red plane, the green plane, the blue plane.
  CHECK(input == std::vector<float>{1, 0, 0.2f, 0, 0, 1});
}
