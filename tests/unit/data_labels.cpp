// tests/unit/data_labels.cpp — label problems that used to pass unnoticed: a zero-size box, a
// UTF-8 byte-order mark, a split without a single label (no labels folder, an empty one, or
// only empty files), and a label edit the cache's fingerprint did not see.
#include "data/dataset.h"
#include "data/label_cache.h"
#include "data/label_cache_json.h"
#include "data/label_file.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("label lines: a zero-size box is refused like the other bad labels") {
  // Before: counted as a normal label.
  const data::LabelFile parsed = data::parse_labels(
      "0 0.5 0.5 0 0.2\n0 0.5 0.5 0.2 0.0\n0 0.5 0.5 0.2 -0.0004\n"
      "0 0.5 0.5 0.2 0.2\n",
      "z.txt", 1);
  CHECK_FALSE(parsed.usable());
  REQUIRE(parsed.problems.size() == 3);
  CHECK(parsed.problems[0].to_string() ==
        "z.txt:1: w = 0 makes a zero-size box: a box's width and height must be > 0 (image "
        "skipped)");
  CHECK(parsed.problems[1].message.starts_with("h = 0.0 makes a zero-size box"));
  CHECK(parsed.problems[2].message.starts_with("h = -0.0004 makes a zero-size box"));  // clamped
  CHECK(parsed.boxes.size() == 1);
}

TEST_CASE("label files: a UTF-8 byte-order mark is stripped with one note naming the file") {
  // Before: "class '\xEF\xBB\xBF0' is not a number" (the mark invisible), image skipped.
  const data::LabelFile parsed = data::parse_labels(
      "\xEF\xBB\xBF"
      "0 0.5 0.5 0.2 0.2\n1 0.3 0.3 0.1 0.1\n",
      "bom.txt", 2);
  CHECK(parsed.usable());
  REQUIRE(parsed.boxes.size() == 2);
  CHECK(parsed.boxes[0].class_id == 0);
  REQUIRE(parsed.problems.size() == 1);  // once per file, not per line
  CHECK(parsed.problems[0].to_string() ==
        "bom.txt: starts with a UTF-8 byte-order mark, ignored (saving it without one silences "
        "this)");
  CHECK(data::parse_labels("0 0.5 0.5 0.2 0.2\n", "plain.txt", 1).problems.empty());
}

TEST_CASE("a train split without a labels folder is refused, naming where labels were looked for") {
  // Before: trained "successfully" on 0 labels without a word.
  TempDir dir;
  const std::string yaml = make_box_dataset(dir.path(), 2);
  fs::remove_all(dir.path() / "labels");
  const data::DatasetConfig config = data::read_dataset_yaml(yaml);
  const std::string folder = (dir.path() / "labels" / "train").string();
  const std::string image = (dir.path() / "images" / "train" / "im0.png").string();
  CHECK_THROWS_WITH_AS(
      data::open_split(config, "train"),
      doctest::Contains(("cannot train on the train split: " + folder +
                         ": no labels: none of the 2 usable images has a label file, and this "
                         "folder does not exist (an image's label is its path with the last "
                         "/images/ made /labels/ and the extension .txt: " +
                         image + " -> " + folder + "/im0.txt); put the labels there")
                            .c_str()),
      std::runtime_error);
  // The val split opens (val and data-check say it), the problem first among its lines.
  const data::OpenedSplit val = data::open_split(config, "val");
  const std::vector<std::string> lines = data::problem_lines("val", val.verification.report);
  REQUIRE(lines.size() == 2);
  CHECK(lines[1].find((dir.path() / "labels" / "val").string() +
                      ": no labels: none of the 2 usable images") != std::string::npos);
}

TEST_CASE("a labels folder that holds none of the files, or only empty ones, is no labels too") {
  TempDir dir;
  const std::string yaml = make_box_dataset(dir.path(), 2);
  const fs::path labels = dir.path() / "labels" / "train";
  for (const char* stem : {"im0", "im1"}) fs::remove(labels / (std::string(stem) + ".txt"));
  const data::DatasetConfig config = data::read_dataset_yaml(yaml);
  CHECK_THROWS_WITH_AS(data::open_split(config, "train"),
                       doctest::Contains("has a label file, and this folder holds none of them"),
                       std::runtime_error);
  for (const char* stem : {"im0", "im1"}) write_text(labels / (std::string(stem) + ".txt"), "");
  CHECK_THROWS_WITH_AS(
      data::open_split(config, "train"),
      doctest::Contains((labels.string() + ": no labels: the label files of the 2 usable images "
                                           "are all empty")
                            .c_str()),
      std::runtime_error);
  // One label among them is enough.
  write_text(labels / "im1.txt", "0 0.5 0.5 0.2 0.2\n");
  CHECK(data::open_split(config, "train").dataset.size() == 2);
}

TEST_CASE("label cache: an edit that keeps the size and the modification time rebuilds it") {
  // Before: the fingerprint held size and mtime only, so this edit kept the stale labels.
  TempDir dir;
  make_box_dataset(dir.path(), 3);
  const std::vector<std::string> sources = {(dir.path() / "images" / "train").string()};
  const fs::path label = dir.path() / "labels" / "train" / "im0.txt";
  write_text(label, "0 0.5 0.5 0.2 0.2\n");
  const fs::file_time_type stamp = fs::last_write_time(label);
  CHECK_FALSE(data::load_or_build_split(sources, 3).from_cache);
  CHECK(data::load_or_build_split(sources, 3).from_cache);
  write_text(label, "2 0.5 0.5 0.2 0.2\n");  // same size
  fs::last_write_time(label, stamp);         // same time, as within one clock tick
  const data::CachedSplit rebuilt = data::load_or_build_split(sources, 3);
  CHECK_FALSE(rebuilt.from_cache);
  REQUIRE(rebuilt.report.images[0].boxes.size() == 1);
  CHECK(rebuilt.report.images[0].boxes[0].class_id == 2);
  // The pixel limit decides which images verification keeps: it is in the fingerprint too.
  CHECK_FALSE(data::load_or_build_split(sources, 3, 1000).from_cache);
}

TEST_CASE("label cache: a missing labels folder is not created for the cache") {
  // Before: the cache's write made labels/, so the next run saw an empty labels folder.
  TempDir dir, cache_home;
  make_box_dataset(dir.path(), 2);
  fs::remove_all(dir.path() / "labels");
  setenv("BAREYOLO_CACHE_DIR", cache_home.path().c_str(), 1);
  const data::CachedSplit split =
      data::load_or_build_split({(dir.path() / "images" / "val").string()}, 3);
  unsetenv("BAREYOLO_CACHE_DIR");
  CHECK_FALSE(fs::exists(dir.path() / "labels"));
  CHECK(split.cache_file.rfind(cache_home.path().string(), 0) == 0);
  REQUIRE(split.notes.size() == 1);
  CHECK(split.notes[0].find("(the folder does not exist)") != std::string::npos);
}

TEST_CASE("label cache: a cache whose values verification could not have written is not used") {
  // A cache is a file anyone can edit or damage; the loader indexes by its classes and divides
  // by its sizes. Before: any number was cast as found (1e30 into an int is undefined).
  const auto cache = [](const std::string& image, const std::string& box) {
    return R"({"version":)" + std::to_string(data::kLabelCacheVersion) +
           R"(,"fingerprint":"f","backgrounds":0,"corrupt":0,)"
           R"("missing_label_files":0,"labels":1,"images":[[)" +
           image + ",[" + box + R"(]]],"problems":[]})";
  };
  const auto parsed = [](const std::string& text) {
    return data::parse_label_cache(text, "f", 3).has_value();
  };
  const std::optional<data::SplitReport> good =
      data::parse_label_cache(cache(R"("a.jpg",64,48)", "[2,0.5,0.5,0.25,1]"), "f", 3);
  REQUIRE(good.has_value());
  REQUIRE(good->images.size() == 1);
  CHECK(good->images[0].height == 48);
  CHECK(good->images[0].boxes[0] == data::LabelBox{2, 0.5f, 0.5f, 0.25f, 1.0f});
  CHECK_FALSE(data::parse_label_cache(cache(R"("a.jpg",64,48)", "[2,0.5,0.5,0.25,1]"), "g", 3));
  CHECK_FALSE(parsed(cache(R"("a.jpg",64,48)", "[3,0.5,0.5,0.25,1]")));   // class of nc=3
  CHECK_FALSE(parsed(cache(R"("a.jpg",64,48)", "[-1,0.5,0.5,0.25,1]")));  // negative class
  CHECK_FALSE(parsed(cache(R"("a.jpg",64,48)", "[1.5,0.5,0.5,0.25,1]")));
  CHECK_FALSE(parsed(cache(R"("a.jpg",64,48)", "[0,0.5,0.5,0,1]")));     // zero-size box
  CHECK_FALSE(parsed(cache(R"("a.jpg",64,48)", "[0,0.5,1.5,0.25,1]")));  // outside [0, 1]
  CHECK_FALSE(parsed(cache(R"("a.jpg",64,48)", "[0,0.5,0.5,0.25]")));    // four values
  CHECK_FALSE(parsed(cache(R"("a.jpg",1e30,48)", "[0,0.5,0.5,0.25,1]")));
  CHECK_FALSE(parsed(cache(R"("a.jpg",0,48)", "[0,0.5,0.5,0.25,1]")));
  CHECK_FALSE(parsed(cache(R"("a.jpg",4294967360,48)", "[0,0.5,0.5,0.25,1]")));
  CHECK_FALSE(parsed("{\"version\":2"));  // cut short
}

TEST_CASE("label cache: polygon labels are verified, cached and read back with their points") {
  TempDir dir;
  make_polygon_dataset(dir.path(), 2);
  const std::vector<std::string> sources = {(dir.path() / "images" / "train").string()};
  const data::CachedSplit built = data::load_or_build_split(sources, 2);
  CHECK_FALSE(built.from_cache);
  REQUIRE(built.report.images.size() == 2);
  const data::ImageRecord& two = built.report.images[1];  // p1: two triangles
  REQUIRE(two.segments.size() == 2);
  CHECK(two.segments[1].size() == 3);
  CHECK(two.boxes[1].w == doctest::Approx(0.35).scale(0).epsilon(1e-5));  // the triangle's leg
  const data::CachedSplit cached = data::load_or_build_split(sources, 2);
  CHECK(cached.from_cache);
  CHECK(cached.report.images[1].segments == two.segments);
  CHECK(cached.report.images[1].boxes == two.boxes);

  // A cache's polygons must be verification's: 3 or more normalised points, one per box.
  const auto with_segments = [](const std::string& segments) {
    return data::parse_label_cache(
               R"({"version":)" + std::to_string(data::kLabelCacheVersion) +
                   R"(,"fingerprint":"f","backgrounds":0,"corrupt":0,"missing_label_files":0,)"
                   R"("labels":1,"images":[["a.jpg",64,48,[[0,0.5,0.5,0.2,0.2]],)" +
                   segments + R"(]],"problems":[]})",
               "f", 1)
        .has_value();
  };
  CHECK(with_segments("[[0.4,0.4,0.6,0.4,0.5,0.6]]"));
  CHECK(with_segments("[[]]"));                           // a box line among polygons
  CHECK_FALSE(with_segments("[[0.4,0.4,0.6,0.4]]"));      // 2 points
  CHECK_FALSE(with_segments("[[0.4,0.4,0.6,0.4,0.5]]"));  // an odd count
  CHECK_FALSE(with_segments("[[0.4,0.4,1.6,0.4,0.5,0.6]]"));
  CHECK_FALSE(with_segments("[[0.4,0.4,0.6,0.4,0.5,0.6],[]]"));  // 2 polygons, 1 box
  CHECK_FALSE(with_segments("[]"));
}
