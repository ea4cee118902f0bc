// tests/unit/data_images.cpp — image inputs that used to vanish, abort or cost gigabytes:
// symbolic links that lead nowhere, into a loop or at a FIFO, and an image whose header claims
// 20000x20000 pixels.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "data/image.h"
#include "data/image_files.h"
#include "data/label_cache.h"
#include "data/letterbox.h"
#include "data/verify.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

const data::Problem* find_problem(const std::vector<data::Problem>& problems,
                                  const fs::path& file) {
  auto found = std::find_if(problems.begin(), problems.end(),
                            [&](const data::Problem& p) { return p.file == file.string(); });
  return found == problems.end() ? nullptr : &*found;
}

uint32_t crc32(const std::string& bytes) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::string big_endian(uint32_t value) {
  return {char(value >> 24), char(value >> 16), char(value >> 8), char(value)};
}

std::string png_chunk(const std::string& type, const std::string& data) {
  return big_endian(uint32_t(data.size())) + type + data + big_endian(crc32(type + data));
}

// A PNG of a few dozen bytes whose header claims width x height 8-bit grey pixels (a grey
// image passes stb's own 1 GiB check, so a real one of that size would be decoded).
std::string png_claiming(uint32_t width, uint32_t height) {
  const std::string header = big_endian(width) + big_endian(height) + std::string{8, 0, 0, 0, 0};
  return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", header) + png_chunk("IEND", "");
}

}  // namespace

TEST_CASE(
    "symbolic links: dead ends, loops and FIFOs are reported per file, and the split goes on") {
  // Before: a dead link or a link to a FIFO vanished from the count, and a folder link back
  // up the tree aborted the listing with a raw filesystem error.
  TempDir dir;
  const fs::path root = dir.path(), images = root / "images" / "train";
  add_image(root, "train", "real", 32, 32, {{0, 0.5f, 0.5f, 0.2f, 0.2f}});
  add_image(root, "elsewhere", "target", 40, 40, {});
  fs::create_symlink(root / "images" / "elsewhere" / "target.png", images / "linked.png");
  write_text(root / "labels" / "train" / "linked.txt", "0 0.5 0.5 0.3 0.3\n");
  fs::create_symlink(root / "gone.png", images / "dead.png");
  fs::create_symlink(images / "loop.png", images / "loop.png");
  REQUIRE(::mkfifo((root / "fifo").c_str(), 0600) == 0);
  fs::create_symlink(root / "fifo", images / "fifo.png");
  fs::create_directories(images / "sub");
  fs::create_directory_symlink(images, images / "sub" / "up");  // a folder loop
  fs::remove(root / "labels" / "train" / "real.txt");
  fs::create_symlink(root / "gone.txt", root / "labels" / "train" / "real.txt");

  std::vector<data::Problem> listing;
  const std::vector<std::string> files = data::list_image_files({images.string()}, &listing);
  CHECK(files.size() == 5);  // real, linked, dead, loop, fifo: each once
  REQUIRE(listing.size() == 1);
  CHECK(listing[0].file == (images / "sub" / "up").string());
  CHECK(listing[0].message.starts_with("leads to a folder already searched"));

  const data::SplitReport report = data::verify_images(files, 1, 2);
  CHECK(report.summary() == "1 images, 0 backgrounds, 4 corrupt, 1 labels");  // linked is used
  const data::Problem* dead = find_problem(report.problems, images / "dead.png");
  REQUIRE(dead != nullptr);
  CHECK(dead->message == "unreadable image: it is a symbolic link to '" +
                             (root / "gone.png").string() + "', which does not exist");
  const data::Problem* loop = find_problem(report.problems, images / "loop.png");
  REQUIRE(loop != nullptr);
  CHECK(loop->message.find("in a loop of links") != std::string::npos);
  const data::Problem* fifo = find_problem(report.problems, images / "fifo.png");
  REQUIRE(fifo != nullptr);
  CHECK(fifo->message.find("it is a FIFO") != std::string::npos);
  // A label that is a dead link is not a missing label (a background): the image is skipped.
  const data::Problem* label =
      find_problem(report.problems, root / "labels" / "train" / "real.txt");
  REQUIRE(label != nullptr);
  CHECK(label->message.find("which does not exist") != std::string::npos);
  CHECK(label->image_skipped);

  // Through the cache, the folder loop's note reaches the report data-check prints.
  const data::CachedSplit split = data::load_or_build_split({images.string()}, 1);
  CHECK(find_problem(split.report.problems, images / "sub" / "up") != nullptr);
}

TEST_CASE("pixel limit: a header claiming 20000x20000 is refused before decoding, file named") {
  // Before: the PNG's 400 M grey pixels were decoded (2.5 GB of RSS in data-check).
  TempDir dir;
  const fs::path big = dir.path() / "images" / "train" / "big.png";
  write_text(big, png_claiming(20000, 20000));
  CHECK_THROWS_WITH_AS(
      data::read_image(big.string()),
      doctest::Contains((big.string() + ": 20000x20000 is 400000000 pixels, more than the "
                                        "limit 178956970 (--max-pixels")
                            .c_str()),
      data::ImageError);
  CHECK_THROWS_WITH_AS(data::load_resized(big.string(), 64), doctest::Contains("--max-pixels"),
                       data::ImageError);  // predict's path
  // A small limit on a normal image: skipped as a bad image by verification, named.
  add_image(dir.path(), "train", "normal", 64, 48, {{0, 0.5f, 0.5f, 0.2f, 0.2f}});
  const std::vector<std::string> files = {
      big.string(), (dir.path() / "images" / "train" / "normal.png").string()};
  const data::SplitReport limited = data::verify_images(files, 1, 1, 3000);
  CHECK(limited.summary() == "0 images, 0 backgrounds, 2 corrupt, 0 labels");
  const data::Problem* normal =
      find_problem(limited.problems, dir.path() / "images" / "train" / "normal.png");
  REQUIRE(normal != nullptr);
  CHECK(
      normal->message.starts_with("unreadable image: 64x48 is 3072 pixels, more than the "
                                  "limit 3000"));
  CHECK(data::verify_images(files, 1, 1).summary() ==
        "1 images, 0 backgrounds, 1 corrupt, 1 labels");
  CHECK(data::read_image(files[1], 3072).width == 64);  // the limit itself is allowed
}
