// tests/unit/verify.cpp — label checks (file:line problems, NaN/Inf, class >= nc,
// tolerance, duplicates), the verification pass over a dataset with a corrupt image, the
// cache (written, reused, rebuilt on change, read-only fallback, waiting ranks), and the
// error for a split with no usable image.
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <thread>

#include "data/dataset.h"
#include "data/image.h"
#include "data/image_files.h"
#include "data/label_cache.h"
#include "data/label_file.h"
#include "data/verify.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

bool has_problem(const std::vector<data::Problem>& problems, const std::string& file, int line,
                 const std::string& text) {
  return std::any_of(problems.begin(), problems.end(), [&](const data::Problem& p) {
    return p.file == file && p.line == line && p.message.find(text) != std::string::npos;
  });
}

}  // namespace

TEST_CASE("label lines: every kind of bad value is reported with its line") {
  const char* text =
      "0 0.5 0.5 0.2 0.2\n"       // 1 good
      "1 0.5 0.5 0.2\n"           // 2 four columns
      "1 0.5 abc 0.2 0.2\n"       // 3 not a number
      "1 nan 0.5 0.2 0.2\n"       // 4 NaN (passes a naive range test)
      "1 0.5 0.5 inf 0.2\n"       // 5 Inf
      "3 0.5 0.5 0.2 0.2\n"       // 6 class >= nc
      "1.5 0.5 0.5 0.2 0.2\n"     // 7 fractional class
      "2 0.5 1.2 0.2 0.2\n"       // 8 outside [0, 1]
      "-1 0.5 0.5 0.2 0.2\n"      // 9 negative class
      "\n"                        // 10 blank: ignored
      "1 0.5 0.5 0.2 0.2 0.1\n";  // 11 six columns: neither a box nor a polygon
  data::LabelFile parsed = data::parse_labels(text, "x.txt", 3);
  CHECK_FALSE(parsed.usable());
  CHECK(parsed.problems.size() == 9);
  CHECK(has_problem(parsed.problems, "x.txt", 2, "expected 5 columns"));
  CHECK(has_problem(parsed.problems, "x.txt", 3, "'abc' is not a number"));
  CHECK(has_problem(parsed.problems, "x.txt", 4, "not a finite number"));
  CHECK(has_problem(parsed.problems, "x.txt", 5, "not a finite number"));
  CHECK(has_problem(parsed.problems, "x.txt", 6, "class 3 is out of range: the dataset has nc=3"));
  CHECK(has_problem(parsed.problems, "x.txt", 7, "not a whole number"));
  CHECK(has_problem(parsed.problems, "x.txt", 8, "cy = 1.2 is outside [0, 1]"));
  CHECK(has_problem(parsed.problems, "x.txt", 9, "not a whole number >= 0"));
  CHECK(has_problem(parsed.problems, "x.txt", 11, "found 6"));
  CHECK(parsed.problems[0].to_string() ==
        "x.txt:2: expected 5 columns (class cx cy w h) or a polygon (class x1 y1 x2 y2 x3 y3 ..., "
        "an odd count of at least 7), found 4 (image skipped)");
}

TEST_CASE("label lines: tolerance is clamped and duplicates dropped with a warning") {
  data::LabelFile parsed = data::parse_labels(
      "0 1.0005 0.5 0.2 0.2\n0 0.3 0.3 0.1 0.1\n0 0.3 0.3 0.1 0.1\n1 -0.0004 0.5 0.2 0.2\n",
      "y.txt", 2);
  CHECK(parsed.usable());
  REQUIRE(parsed.boxes.size() == 3);
  CHECK(parsed.boxes[0].cx == 1.0f);
  CHECK(parsed.boxes[2].cx == 0.0f);
  REQUIRE(parsed.problems.size() == 1);
  CHECK(parsed.problems[0].line == 3);
  CHECK_FALSE(parsed.problems[0].image_skipped);
  CHECK(data::parse_labels("0 1.01 0.5 0.2 0.2\n", "z.txt", 1).problems.size() == 1);
  // Just past the 0.001 tolerance, at either end.
  CHECK(data::parse_labels("0 1.0015 0.5 0.2 0.2\n", "z.txt", 1).problems.size() == 1);
  CHECK(data::parse_labels("0 -0.0015 0.5 0.2 0.2\n", "z.txt", 1).problems.size() == 1);
}

TEST_CASE("label lines: a polygon's box is its extent and its points are kept") {
  // YOLOv5's segment format: class then x y pairs. The box is the points' extent
  // (x 0.1..0.5, y 0.2..0.6); a box line beside polygons has no polygon.
  data::LabelFile parsed = data::parse_labels(
      "1 0.1 0.2 0.5 0.2 0.3 0.6\n0 0.5 0.5 0.2 0.2\n1 0.1 0.2 0.5 0.2 0.3 0.6\n"
      "1 0.1 0.2 0.5 0.2 0.1 0.6 0.5 0.6\n",
      "p.txt", 2);
  CHECK(parsed.usable());
  REQUIRE(parsed.boxes.size() == 3);  // the repeated polygon is dropped
  CHECK(parsed.boxes[0].class_id == 1);
  CHECK(parsed.boxes[0].cx == doctest::Approx(0.3));
  CHECK(parsed.boxes[0].cy == doctest::Approx(0.4));
  CHECK(parsed.boxes[0].w == doctest::Approx(0.4));
  CHECK(parsed.boxes[0].h == doctest::Approx(0.4));
  REQUIRE(parsed.segments.size() == 3);
  CHECK(parsed.segments[0] == data::Polygon{{0.1f, 0.2f}, {0.5f, 0.2f}, {0.3f, 0.6f}});
  CHECK(parsed.segments[1].empty());
  // Another polygon with the same box is another object.
  CHECK(parsed.boxes[2] == parsed.boxes[0]);
  CHECK(parsed.segments[2].size() == 4);
  REQUIRE(parsed.problems.size() == 1);
  CHECK(parsed.problems[0].line == 3);
  // A file of boxes only keeps no polygons; box lines before the first polygon get empty ones.
  CHECK(data::parse_labels("0 0.5 0.5 0.2 0.2\n", "b.txt", 1).segments.empty());
  const data::LabelFile box_first =
      data::parse_labels("0 0.5 0.5 0.2 0.2\n1 0.1 0.2 0.5 0.2 0.3 0.6\n", "c.txt", 2);
  REQUIRE(box_first.segments.size() == 2);
  CHECK(box_first.segments[0].empty());
  CHECK(box_first.segments[1].size() == 3);
}

TEST_CASE("label lines: a bad polygon is reported with its line and the column it names") {
  const char* text =
      "0 0.1 0.2 0.5 0.2 0.3 0.6 0.4\n"  // 1 an even count: not x y pairs
      "0 0.1 0.2 1.5 0.2 0.3 0.6\n"      // 2 x2 outside [0, 1]
      "0 0.1 y 0.5 0.2 0.3 0.6\n"        // 3 y1 not a number
      "0 0.1 0.2 0.1 0.5 0.1 0.9\n"      // 4 every x the same: no width
      "0 0.1 0.2 0.5 0.2 0.9 0.2\n"      // 5 every y the same: no height
      "2 0.1 0.2 0.5 0.2 0.3 0.6\n";     // 6 class >= nc
  data::LabelFile parsed = data::parse_labels(text, "q.txt", 2);
  CHECK_FALSE(parsed.usable());
  CHECK(parsed.problems.size() == 6);
  CHECK(has_problem(parsed.problems, "q.txt", 1, "found 8"));
  CHECK(has_problem(parsed.problems, "q.txt", 2, "x2 = 1.5 is outside [0, 1]"));
  CHECK(has_problem(parsed.problems, "q.txt", 3, "y1 'y' is not a number"));
  CHECK(has_problem(parsed.problems, "q.txt", 4, "span zero width"));
  CHECK(has_problem(parsed.problems, "q.txt", 5, "span zero height"));
  CHECK(has_problem(parsed.problems, "q.txt", 6, "class 2 is out of range"));
}

TEST_CASE(
    "verification pass: corrupt and tiny images skipped and bad labels reported and backgrounds "
    "counted") {
  TempDir dir;
  fs::path root = dir.path();
  add_image(root, "train", "good", 64, 48,
            {{0, 0.5f, 0.5f, 0.2f, 0.2f}, {1, 0.3f, 0.3f, 0.1f, 0.1f}});
  add_image(root, "train", "gray", 40, 40, {{1, 0.5f, 0.5f, 0.5f, 0.5f}});
  add_image(root, "train", "empty", 30, 30, {});
  add_image(root, "train", "nolabel", 30, 30, {});
  fs::remove(root / "labels" / "train" / "nolabel.txt");
  add_image(root, "train", "badlabel", 30, 30, {});
  write_text(root / "labels" / "train" / "badlabel.txt", "0 0.5 0.5 0.2 0.2\n0 nan 0.5 0.1 0.1\n");
  write_text(root / "images" / "train" / "corrupt.jpg", "this is not a JPEG");
  write_text(root / "images" / "train" / "zero.png", "");
  add_image(root, "train", "tiny", 8, 30, {});
  add_image(root, "train", "flat", 30, 8, {});
  std::vector<std::string> files = data::list_image_files({(root / "images" / "train").string()});
  REQUIRE(files.size() == 9);

  data::SplitReport report = data::verify_images(files, 2, 3);
  CHECK(report.summary() == "4 images, 2 backgrounds, 5 corrupt, 3 labels");
  std::string bad_label = (root / "labels" / "train" / "badlabel.txt").string();
  CHECK(has_problem(report.problems, bad_label, 2, "cx is 'nan'"));
  CHECK(has_problem(report.problems, (root / "images" / "train" / "corrupt.jpg").string(), 0,
                    "unreadable image: unknown image type"));
  CHECK(has_problem(report.problems, (root / "images" / "train" / "zero.png").string(), 0,
                    "the file is empty"));
  CHECK(has_problem(report.problems, (root / "images" / "train" / "tiny.png").string(), 0,
                    "smaller than 10 px"));
  CHECK(has_problem(report.problems, (root / "images" / "train" / "flat.png").string(), 0,
                    "30x8, smaller than 10 px"));
  // Sizes are recorded; the report does not depend on the thread count.
  auto good = std::find_if(
      report.images.begin(), report.images.end(),
      [](const data::ImageRecord& r) { return r.path.find("good") != std::string::npos; });
  REQUIRE(good != report.images.end());
  CHECK(good->width == 64);
  CHECK(good->height == 48);
  CHECK(data::verify_images(files, 2, 1).summary() == report.summary());
}

TEST_CASE("a split's problem lines: a count, the first few, and how many more") {
  data::SplitReport report;
  report.images.resize(10);
  report.corrupt = 2;
  for (int line = 1; line <= 6; ++line)
    report.problems.push_back({"a.txt", line, "bad", /*image_skipped=*/line <= 2});
  std::vector<std::string> lines = data::problem_lines("train", report, 5);
  REQUIRE(lines.size() == 7);
  CHECK(lines[0] ==
        "train: 2 of 12 images skipped (unreadable, or a label that cannot be used) and 4 "
        "warning(s) on the images kept:");
  CHECK(lines[1] == "  a.txt:1: bad (image skipped)");
  CHECK(lines[5] == "  a.txt:5: bad");
  CHECK(lines[6] == "  ... and 1 more (bareyolo data-check --data <yaml> lists them all)");
  report.problems.pop_back();  // exactly `shown`: no "more" line
  CHECK(data::problem_lines("train", report, 5).size() == 6);
  report.problems.clear();
  CHECK(data::problem_lines("train", report, 5).empty());
}

TEST_CASE("label cache: written next to the labels then reused then rebuilt when a label changes") {
  TempDir dir;
  make_box_dataset(dir.path(), 5);
  std::vector<std::string> sources = {(dir.path() / "images" / "train").string()};
  // YOLOv5's own cache of the same labels, which bareyolo must leave as it is.
  write_text(dir.path() / "labels" / "train.cache", "yolov5's cache");
  data::CachedSplit first = data::load_or_build_split(sources, 3);
  CHECK_FALSE(first.from_cache);
  CHECK(first.cache_file == (dir.path() / "labels" / "train.bareyolo.cache").string());
  CHECK(fs::exists(first.cache_file));
  data::CachedSplit second = data::load_or_build_split(sources, 3);
  CHECK(second.from_cache);
  CHECK(second.report.summary() == first.report.summary());
  CHECK(second.report.images[2].boxes == first.report.images[2].boxes);
  // A changed label file changes the fingerprint (size differs), so the pass runs again.
  write_text(dir.path() / "labels" / "train" / "im0.txt", "0 0.5 0.5 0.1 0.1\n1 0.2 0.2 0.1 0.1\n");
  data::CachedSplit third = data::load_or_build_split(sources, 3);
  CHECK_FALSE(third.from_cache);
  CHECK(third.report.labels == first.report.labels + 1);
  // Each image's size and time are in it too: an image replaced by a broken file is found.
  write_text(dir.path() / "images" / "train" / "im1.png", "no longer a PNG");
  data::CachedSplit fourth = data::load_or_build_split(sources, 3);
  CHECK_FALSE(fourth.from_cache);
  CHECK(fourth.report.corrupt == third.report.corrupt + 1);
  // nc is part of the fingerprint: class 2 is an error with nc=2.
  CHECK(data::load_or_build_split(sources, 2).report.corrupt > fourth.report.corrupt);
  std::ifstream yolov5_cache(dir.path() / "labels" / "train.cache");
  CHECK(std::string(std::istreambuf_iterator<char>(yolov5_cache), {}) == "yolov5's cache");
}

TEST_CASE("label cache: a read-only labels folder falls back to the user cache folder") {
  TempDir dir, cache_home;
  make_box_dataset(dir.path(), 3);
  fs::permissions(dir.path() / "labels",
                  fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  setenv("BAREYOLO_CACHE_DIR", cache_home.path().c_str(), 1);
  std::vector<std::string> sources = {(dir.path() / "images" / "train").string()};
  data::CachedSplit built = data::load_or_build_split(sources, 3);
  unsetenv("BAREYOLO_CACHE_DIR");
  CHECK_FALSE(fs::exists(dir.path() / "labels" / "train.bareyolo.cache"));
  CHECK(built.cache_file.rfind(cache_home.path().string(), 0) == 0);
  REQUIRE(built.notes.size() == 1);
  CHECK(built.notes[0].find("read-only") != std::string::npos);
  setenv("BAREYOLO_CACHE_DIR", cache_home.path().c_str(), 1);
  CHECK(data::load_or_build_split(sources, 3).from_cache);
  unsetenv("BAREYOLO_CACHE_DIR");
}

TEST_CASE("label cache: other ranks wait for rank 0's cache or time out with a clear error") {
  TempDir dir;
  make_box_dataset(dir.path(), 4);
  std::vector<std::string> sources = {(dir.path() / "images" / "train").string()};
  CHECK_THROWS_WITH_AS(data::wait_for_split(sources, 3, 150, 1),
                       doctest::Contains("rank 1 waited 0 s for the label cache"),
                       std::runtime_error);
  std::thread rank0([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    data::load_or_build_split(sources, 3);
  });
  data::CachedSplit waited = data::wait_for_split(sources, 3, 20000, 1);
  rank0.join();
  CHECK(waited.from_cache);
  CHECK(waited.report.images.size() == 4);
}

TEST_CASE("a split with no usable image is an error that says where it looked") {
  TempDir dir;
  std::string yaml = write_yaml(dir.path(), 1);
  write_text(dir.path() / "images" / "train" / "broken.jpg", "garbage");
  data::DatasetConfig config = data::read_dataset_yaml(yaml);
  std::string expected =
      "the train split has no usable image (0 images, 0 backgrounds, 1 "
      "corrupt, 0 labels); searched " +
      (dir.path() / "images" / "train").string();
  CHECK_THROWS_WITH_AS(data::open_split(config, "train"), doctest::Contains(expected.c_str()),
                       std::runtime_error);
}

TEST_CASE("label files: a FIFO or a directory is reported at once, never read or waited on") {
  // Before: a FIFO named like a label file blocked the verification pass forever.
  TempDir dir;
  const fs::path fifo = dir.path() / "fifo.txt", folder = dir.path() / "folder.txt";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  fs::create_directory(folder);
  const data::LabelFile from_fifo = data::read_label_file(fifo.string(), 2);
  REQUIRE(from_fifo.problems.size() == 1);
  CHECK(from_fifo.problems[0].to_string() ==
        fifo.string() +
            ": label file cannot be read: it is a FIFO, not a regular file (image skipped)");
  const data::LabelFile from_folder = data::read_label_file(folder.string(), 2);
  REQUIRE(from_folder.problems.size() == 1);
  CHECK(from_folder.problems[0].message == "label file cannot be read: it is a directory");
  CHECK_FALSE(from_folder.usable());
  // A missing label file is a background image, with no problem.
  CHECK(data::read_label_file((dir.path() / "none.txt").string(), 2).problems.empty());
  // An image path that is a FIFO fails as an unreadable image, without blocking either.
  const fs::path fifo_image = dir.path() / "image.jpg";
  REQUIRE(::mkfifo(fifo_image.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(data::read_image(fifo_image.string()), doctest::Contains("it is a FIFO"),
                       data::ImageError);
}

TEST_CASE("label lines: duplicates among many rows are found in n log n, in file order") {
  // Before: each row was compared with every kept row (1M rows: minutes). bench_data_loader
  // times a million rows; here the result of many is checked row by row.
  std::string text;
  const int rows = 20000;
  for (int i = 0; i < rows; ++i) {
    const int k = i % (rows / 2);  // the second half repeats the first
    text += std::to_string(k % 3) + " " + std::to_string(0.1 + 0.8 * k / rows) + " 0.5 0.1 0.1\n";
  }
  const data::LabelFile parsed = data::parse_labels(text, "big.txt", 3);
  CHECK(parsed.boxes.size() == size_t(rows / 2));
  REQUIRE(parsed.problems.size() == size_t(rows / 2));
  CHECK(parsed.problems.front().line == rows / 2 + 1);
  CHECK(parsed.problems.back().line == rows);
  CHECK(parsed.boxes[7].cx == doctest::Approx(0.1 + 0.8 * 7 / rows));
}

TEST_CASE("formats YOLOv5 lists but the decoder cannot read are named, with what it reads") {
  // Before: "unknown image type" for a .webp or .tiff, as for any garbage.
  const std::vector<uint8_t> bytes = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P'};
  for (const char* name : {"a.webp", "b.TIFF", "c.tif"})
    CHECK_THROWS_WITH_AS(data::decode_image(bytes.data(), bytes.size(), name),
                         doctest::Contains("files are listed as images (as YOLOv5 lists them), "
                                           "but bareyolo's decoder reads only JPEG, PNG"),
                         data::ImageError);
  CHECK_THROWS_WITH_AS(data::decode_image(bytes.data(), bytes.size(), "d.jpg"),
                       doctest::Contains("d.jpg: unknown image type"), data::ImageError);
}
