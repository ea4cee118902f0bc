// tests/unit/jpeg_decode.cpp — JPEGs through TurboJPEG (data/jpeg_decode.h, data/image.cpp):
// the same pixels as stb_image's within the rounding of two correct decoders, grayscale to
// three channels, the DCT-domain reduction and load_resized after it, the pixel limit from the
// header, and which damaged or unusual JPEGs go to stb and with what error.
#include <stb/stb_image.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "data/image.h"
#include "data/jpeg_decode.h"
#include "data/letterbox.h"
#include "data/warp.h"
#include "engine/shipped_files.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

using Bytes = std::vector<uint8_t>;

std::string photo(const std::string& name) { return shipped_file("tests/fixtures/photos/" + name); }

Bytes file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// `pixels` (width x height, in TurboJPEG's `pixel_format`) compressed by TurboJPEG.
Bytes turbojpeg_encode(const Bytes& pixels, int width, int height, int pixel_format,
                       int subsampling, int quality) {
  tjhandle compressor = tjInitCompress();
  REQUIRE(compressor != nullptr);
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int status = tjCompress2(compressor, pixels.data(), width, 0, height, pixel_format, &jpeg,
                                 &size, subsampling, quality, 0);
  INFO(tjGetErrorStr2(compressor));
  REQUIRE(status == 0);
  Bytes bytes(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(compressor);
  return bytes;
}

// A JPEG written by stb_image_write: 4:2:0 chroma at quality <= 90, 4:4:4 above.
Bytes stb_encode(const data::Image& image, int quality) {
  TempDir dir;
  const std::string file = (dir.path() / "stb.jpg").string();
  data::write_image(file, image, quality);
  return file_bytes(file);
}

// Smooth gradients and waves with seeded noise on top: edges and texture at every frequency
// the 8x8 blocks hold, and colours across the gamut.
data::Image textured_image(int width, int height, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> noise(-24, 24);
  data::Image image(width, height, 0);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const double wave = 60 * std::sin(x * 0.21) * std::cos(y * 0.13);
      const int base[3] = {int(255.0 * x / width + wave), int(255.0 * y / height - wave),
                           int(128 + 100 * std::sin((x + y) * 0.05))};
      for (int c = 0; c < 3; ++c)
        image.at(x, y)[c] = uint8_t(std::clamp(base[c] + noise(rng), 0, 255));
    }
  return image;
}

data::Image stb_decode(const Bytes& jpeg) {
  int width = 0, height = 0, channels = 0;
  unsigned char* decoded =
      stbi_load_from_memory(jpeg.data(), int(jpeg.size()), &width, &height, &channels, 3);
  REQUIRE(decoded != nullptr);
  data::Image image(width, height, 0);
  std::copy(decoded, decoded + image.pixels.size(), image.pixels.begin());
  stbi_image_free(decoded);
  return image;
}

struct Difference {
  double mean = 0;
  int max = 0;
};
Difference difference(const data::Image& a, const data::Image& b) {
  REQUIRE(a.width == b.width);
  REQUIRE(a.height == b.height);
  Difference d;
  for (size_t i = 0; i < a.pixels.size(); ++i) {
    const int diff = std::abs(int(a.pixels[i]) - int(b.pixels[i]));
    d.mean += diff;
    d.max = std::max(d.max, diff);
  }
  d.mean /= double(a.pixels.size());
  return d;
}

// Sets the height and width that a JPEG's baseline frame header claims (SOF0: FF C0, length,
// precision, then height and width, big-endian).
void claim_size(Bytes& jpeg, int width, int height) {
  const uint8_t sof0[] = {0xFF, 0xC0};
  const auto marker = std::search(jpeg.begin(), jpeg.end(), std::begin(sof0), std::end(sof0));
  REQUIRE(marker != jpeg.end());
  const size_t at = size_t(marker - jpeg.begin()) + 5;
  const uint8_t sides[] = {uint8_t(height >> 8), uint8_t(height), uint8_t(width >> 8),
                           uint8_t(width)};
  std::copy(std::begin(sides), std::end(sides), jpeg.begin() + long(at));
}

data::Image turbojpeg_decode(const Bytes& jpeg) {
  const data::JpegHeader header = data::read_jpeg_header(jpeg.data(), jpeg.size());
  REQUIRE(header.error.empty());
  data::JpegPixels decoded = data::decode_jpeg(jpeg.data(), jpeg.size(), header);
  REQUIRE(decoded.error.empty());
  return std::move(decoded.image);
}

}  // namespace

TEST_CASE("JPEGs decode through TurboJPEG as stb_image decodes them, within rounding") {
  struct NamedJpeg {
    std::string name;
    Bytes jpeg;
  };
  const std::vector<NamedJpeg> jpegs = {
      {"rocket.jpg (4:4:4)", file_bytes(photo("rocket.jpg"))},
      {"grace_hopper.jpg (4:2:0)", file_bytes(photo("grace_hopper.jpg"))},
      {"stb q95 (4:4:4)", stb_encode(textured_image(203, 157, 1), 95)},
      {"stb q75 (4:2:0)", stb_encode(textured_image(203, 157, 2), 75)}};
  for (const NamedJpeg& j : jpegs) {
    INFO(j.name);
    const data::Image decoded = data::decode_image(j.jpeg.data(), j.jpeg.size(), j.name);
    // decode_image's JPEG is TurboJPEG's, bit for bit.
    CHECK(difference(decoded, turbojpeg_decode(j.jpeg)).max == 0);
    const Difference from_stb = difference(decoded, stb_decode(j.jpeg));
    MESSAGE(j.name << ": TurboJPEG vs stb_image: mean " << from_stb.mean << ", max "
                   << from_stb.max);
    // Each of the IDCT, the chroma upsampling and the YCbCr -> RGB conversion rounds its own
    // way, by one level at most: 3 levels at most, on few pixels. Measured: max 2 (4:4:4) and 3
    // (4:2:0), mean 0.01-0.07. A swapped channel, a shifted row or a mis-sampled chroma plane is
    // off by tens.
    CHECK(from_stb.mean < 0.25);
    CHECK(from_stb.max <= 3);
  }
}

TEST_CASE("a grayscale JPEG decodes to three equal channels") {
  const int width = 37, height = 29;
  Bytes gray(size_t(width) * height);
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = uint8_t(i * 7 % 256);
  const Bytes jpeg = turbojpeg_encode(gray, width, height, TJPF_GRAY, TJSAMP_GRAY, 100);
  const data::Image image = data::decode_image(jpeg.data(), jpeg.size(), "gray.jpg");
  REQUIRE(image.width == width);
  REQUIRE(image.height == height);
  int worst = 0;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) {
      const uint8_t* p = image.at(x, y);
      CHECK(p[0] == p[1]);
      CHECK(p[0] == p[2]);
      worst = std::max(worst, std::abs(p[0] - gray[size_t(y) * width + x]));
    }
  CHECK(worst <= 8);  // quality 100 on a sawtooth: close to the source, not a constant
}

TEST_CASE("JPEGs decoded on several threads at once are those decoded on one") {
  // Each thread has its own TurboJPEG handle: shared, the decodes would corrupt each other.
  const Bytes jpeg = file_bytes(photo("grace_hopper.jpg"));
  const data::Image alone = data::decode_image(jpeg.data(), jpeg.size(), "alone.jpg");
  const int threads = 4, decodes_per_thread = 6;
  std::vector<int> mismatches(threads, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int i = 0; i < decodes_per_thread; ++i) {
        try {
          mismatches[t] +=
              data::decode_image(jpeg.data(), jpeg.size(), "shared.jpg").pixels != alone.pixels;
        } catch (const data::ImageError&) {  // thrown out of a thread, it would end the tests
          ++mismatches[t];
        }
      }
    });
  for (std::thread& worker : workers) worker.join();
  for (int t = 0; t < threads; ++t) CHECK(mismatches[t] == 0);
}

TEST_CASE("a large JPEG is decoded reduced: the smallest of 1/2 1/4 1/8 that keeps the long side") {
  struct Case {
    const char* photo;
    int min_long_side, width, height;  // the sides times the factor, rounded up
  };
  const Case cases[] = {
      {"rocket.jpg", 0, 640, 427},          // no minimum: full size
      {"rocket.jpg", 321, 640, 427},        // 1/2 would give 320
      {"rocket.jpg", 320, 320, 214},        // 1/2
      {"rocket.jpg", 161, 320, 214},        // 1/4 would give 160
      {"rocket.jpg", 160, 160, 107},        // 1/4
      {"rocket.jpg", 80, 80, 54},           // 1/8
      {"rocket.jpg", 10, 80, 54},           // 1/8 is the smallest
      {"grace_hopper.jpg", 151, 256, 300},  // 512x600: the long side is the height
      {"grace_hopper.jpg", 150, 128, 150}, {"grace_hopper.jpg", 75, 64, 75}};
  for (const Case& c : cases) {
    INFO(c.photo << " at " << c.min_long_side);
    const data::ReducedImage read = data::read_image_reduced(photo(c.photo), c.min_long_side);
    CHECK(read.image.width == c.width);
    CHECK(read.image.height == c.height);
    CHECK(std::max(read.image.width, read.image.height) >= c.min_long_side);
    const data::Image full = data::read_image(photo(c.photo));
    CHECK(read.file_width == full.width);
    CHECK(read.file_height == full.height);
  }
}

TEST_CASE("load_resized after a reduced decode: the full decode's size and nearly its pixels") {
  // rocket.jpg is 640x427. At 160 the 1/4 decode is the final size; at 200 the 1/2 decode
  // (320x214) is resized bilinearly to 200x134, as the full image would have been.
  const std::string path = photo("rocket.jpg");
  const data::Image full = data::read_image(path);
  for (int imgsz : {160, 200}) {
    INFO("imgsz " << imgsz);
    const data::LoadedImage loaded = data::load_resized(path, imgsz);
    CHECK(loaded.original_width == 640);
    CHECK(loaded.original_height == 427);
    const data::ImageSize size = data::resized_size(640, 427, imgsz);
    REQUIRE(loaded.image.width == size.width);
    REQUIRE(loaded.image.height == size.height);
    const Difference from_full =
        difference(loaded.image, data::resize_bilinear(full, size.width, size.height));
    MESSAGE("imgsz " << imgsz << ": reduced decode vs full decode + bilinear: mean "
                     << from_full.mean << ", max " << from_full.max);
    // Block means against bilinear samples: they differ where the photograph has detail finer
    // than the output's pixels, not on average.
    CHECK(from_full.mean < 4.0);
  }
}

TEST_CASE("the pixel limit refuses a JPEG from its header") {
  Bytes jpeg = stb_encode(textured_image(16, 16, 3), 90);
  claim_size(jpeg, 20000, 20000);
  const data::JpegHeader header = data::read_jpeg_header(jpeg.data(), jpeg.size());
  REQUIRE(header.error.empty());  // TurboJPEG reads the claimed size: its header is refused
  CHECK(header.width == 20000);
  CHECK(header.height == 20000);
  CHECK_THROWS_WITH_AS(data::decode_image(jpeg.data(), jpeg.size(), "big.jpg"),
                       "cannot decode image big.jpg: 20000x20000 is 400000000 pixels, more than "
                       "the limit 178956970 (--max-pixels, a guard against decompression bombs); "
                       "raise --max-pixels if the image is genuine",
                       data::ImageError);
}

TEST_CASE("garbage after the JPEG signature fails with TurboJPEG's reason, file named") {
  Bytes jpeg = {0xFF, 0xD8, 0xFF};
  for (int i = 0; i < 300; ++i) jpeg.push_back(uint8_t((i * 37 + 11) % 256));
  const std::string reason = data::read_jpeg_header(jpeg.data(), jpeg.size()).error;
  REQUIRE_FALSE(reason.empty());
  // Named .png: the signature makes it a JPEG, not the name.
  CHECK_THROWS_WITH_AS(data::decode_image(jpeg.data(), jpeg.size(), "bad.png"),
                       ("cannot decode image bad.png: " + reason).c_str(), data::ImageError);
}

TEST_CASE("a JPEG TurboJPEG could not read leaves the thread's next JPEGs to TurboJPEG") {
  // TurboJPEG 2.1 leaves a failed header read in its handle: unless the handle is replaced,
  // the thread's next calls fail with the same message (and their JPEGs go to stb).
  const Bytes good = file_bytes(photo("rocket.jpg"));
  const Bytes garbage = {0xFF, 0xD8, 0xFF, 0x0B, 0x00, 0x04, 0x12, 0x34, 0x56, 0x78};
  for (int attempt = 0; attempt < 2; ++attempt) {
    CHECK_FALSE(data::read_jpeg_header(garbage.data(), garbage.size()).error.empty());
    const data::JpegHeader header = data::read_jpeg_header(good.data(), good.size());
    CHECK(header.error.empty());
    CHECK(data::decode_jpeg(good.data(), good.size(), header).error.empty());
  }
}

TEST_CASE("a JPEG cut short is refused with TurboJPEG's reason, as stb_image refused it") {
  // libjpeg would fill the missing rows with grey (OpenCV's imread accepts such a file); but
  // YOLOv5's check of the dataset skips it as corrupt (PIL cannot load it), and so did
  // bareyolo's with stb. TurboJPEG's warning sends it to stb, whose refusal stands.
  const Bytes whole = file_bytes(photo("rocket.jpg"));
  const Bytes cut(whole.begin(), whole.begin() + long(whole.size() / 2));
  const data::JpegHeader header = data::read_jpeg_header(cut.data(), cut.size());
  REQUIRE(header.error.empty());
  const std::string reason = data::decode_jpeg(cut.data(), cut.size(), header).error;
  REQUIRE_FALSE(reason.empty());
  CHECK_THROWS_WITH_AS(data::decode_image(cut.data(), cut.size(), "cut.jpg"),
                       ("cannot decode image cut.jpg: " + reason).c_str(), data::ImageError);
}

TEST_CASE("a JPEG TurboJPEG decodes only with a warning is decoded by stb_image, as before") {
  // 200 junk bytes before the end-of-image marker: libjpeg warns ("extraneous bytes"), stb
  // skips them.
  const Bytes whole = file_bytes(photo("rocket.jpg"));
  Bytes junk(whole.begin(), whole.end() - 2);
  for (int i = 0; i < 200; ++i) junk.push_back(uint8_t(1 + i * 13 % 254));
  junk.insert(junk.end(), whole.end() - 2, whole.end());
  const data::JpegHeader header = data::read_jpeg_header(junk.data(), junk.size());
  REQUIRE(header.error.empty());
  CHECK_FALSE(data::decode_jpeg(junk.data(), junk.size(), header).error.empty());
  const data::Image decoded = data::decode_image(junk.data(), junk.size(), "junk.jpg");
  CHECK(difference(decoded, stb_decode(junk)).max == 0);
}

TEST_CASE("a CMYK JPEG, which TurboJPEG cannot give as RGB, is decoded by stb_image") {
  const int width = 24, height = 16;
  Bytes cmyk(size_t(width) * height * 4);
  for (size_t i = 0; i < cmyk.size(); ++i) cmyk[i] = uint8_t(i * 29 % 256);
  // TurboJPEG writes CMYK as an Adobe YCCK JPEG.
  const Bytes jpeg = turbojpeg_encode(cmyk, width, height, TJPF_CMYK, TJSAMP_444, 95);
  const data::JpegHeader header = data::read_jpeg_header(jpeg.data(), jpeg.size());
  REQUIRE(header.error.empty());
  CHECK_FALSE(header.converts_to_rgb);
  CHECK_FALSE(data::decode_jpeg(jpeg.data(), jpeg.size(), header).error.empty());
  const data::Image decoded = data::decode_image(jpeg.data(), jpeg.size(), "cmyk.jpg");
  CHECK(difference(decoded, stb_decode(jpeg)).max == 0);
}
