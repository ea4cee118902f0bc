// tests/unit/photos.cpp — real JPEG decoding on every clone: the photographs in
// tests/fixtures/photos (their licences: README.md there) decoded by bareyolo's loader against
// an independent decoder's result (libjpeg-turbo through Pillow, tools/make_photo_fixture.py):
// the size, and the mean of every 16x16 block of each channel. A block mean absorbs what two
// correct decoders may differ by (IDCT rounding, chroma upsampling), not a swapped channel, a
// shifted or flipped image, a mis-sampled chroma plane or a lost row. One photo is 4:4:4, one
// 4:2:0; a truncated file must fail as the reference decoder fails, with a message.
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/image.h"
#include "engine/shipped_files.h"
#include "tests/support/testing.h"

using namespace bareyolo;

namespace {

nlohmann::json reference() {
  std::ifstream in(shipped_file("tests/fixtures/photos/reference.json"));
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("real photographs decode as libjpeg-turbo decodes them (block means)") {
  const nlohmann::json all = reference();
  for (const char* name : {"rocket.jpg", "grace_hopper.jpg"}) {
    INFO(std::string(name));
    const nlohmann::json& want = all.at(name);
    const data::Image image =
        data::read_image(shipped_file(std::string("tests/fixtures/photos/") + name));
    REQUIRE(image.width == want.at("width").get<int>());
    REQUIRE(image.height == want.at("height").get<int>());
    const int block = want.at("block");
    const std::vector<double> means = want.at("means");
    const int bw = image.width / block, bh = image.height / block;
    REQUIRE(means.size() == size_t(bw) * bh * 3);
    double worst = 0, total = 0;
    for (int by = 0; by < bh; ++by)
      for (int bx = 0; bx < bw; ++bx)
        for (int c = 0; c < 3; ++c) {
          double sum = 0;
          for (int y = by * block; y < (by + 1) * block; ++y)
            for (int x = bx * block; x < (bx + 1) * block; ++x) sum += image.at(x, y)[c];
          const double diff =
              std::abs(sum / (block * block) - means[(size_t(by) * bw + bx) * 3 + c]);
          worst = std::max(worst, diff);
          total += diff;
        }
    const double mean_diff = total / double(means.size());
    MESSAGE(std::string(name) << ": block means differ by at most " << worst << ", on average "
                              << mean_diff);
    CHECK(worst <= 2.0);
    CHECK(mean_diff <= 0.5);
  }
}

TEST_CASE("a truncated JPEG fails with a message naming the file") {
  CHECK(reference().at("truncated.jpg").contains("error"));  // the reference decoder fails too
  const std::string path = shipped_file("tests/fixtures/photos/truncated.jpg");
  CHECK_THROWS_WITH_AS(data::read_image(path),
                       doctest::Contains(("cannot decode image " + path).c_str()),
                       data::ImageError);
}
