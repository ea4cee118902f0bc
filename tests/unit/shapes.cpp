// tests/unit/shapes.cpp — the built-in shapes dataset: a valid YOLO dataset on disk that
// verifies cleanly, deterministic from its seed, with labels on the painted shapes.
#include <algorithm>
#include <fstream>

#include "data/dataset.h"
#include "data/hsv.h"
#include "data/shapes.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("make-shapes writes a dataset that verifies cleanly with its labels on the shapes") {
  TempDir dir;
  data::ShapesOptions options;
  options.out = (dir.path() / "shapes").string();
  options.n_train = 40;
  options.n_val = 8;
  options.imgsz = 96;
  options.classes = 6;
  std::string yaml = data::make_shapes_dataset(options);
  data::DatasetConfig config = data::read_dataset_yaml(yaml);
  CHECK(config.names == data::shape_class_names());
  data::OpenedSplit train = data::open_split(config, "train");
  data::OpenedSplit val = data::open_split(config, "val");
  CHECK(train.dataset.size() == 40);
  CHECK(val.dataset.size() == 8);
  CHECK(train.verification.report.corrupt == 0);
  CHECK(train.verification.report.problems.empty());
  CHECK(train.verification.report.labels > 40);
  // The labels on disk are the ones the generator reports.
  std::vector<data::LabelBox> boxes;
  data::make_shapes_image(96, 6, 0, 0, 3, boxes);
  const std::vector<data::LabelBox>& stored = train.dataset.record(3).boxes;
  REQUIRE(stored.size() == boxes.size());
  for (size_t i = 0; i < boxes.size(); ++i) {
    CHECK(stored[i].class_id == boxes[i].class_id);
    CHECK(stored[i].cx == doctest::Approx(boxes[i].cx).scale(0).epsilon(1e-5));
  }
}

TEST_CASE("shapes: same seed same image and another seed another with boxes inside the image") {
  std::vector<data::LabelBox> a, b, c;
  data::Image first = data::make_shapes_image(64, 4, 1, 0, 7, a);
  data::Image again = data::make_shapes_image(64, 4, 1, 0, 7, b);
  data::Image other = data::make_shapes_image(64, 4, 2, 0, 7, c);
  CHECK(first.pixels == again.pixels);
  CHECK(a == b);
  CHECK(first.pixels != other.pixels);
  int backgrounds = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    std::vector<data::LabelBox> boxes;
    data::Image image = data::make_shapes_image(64, 3, 0, 0, i, boxes);
    backgrounds += boxes.empty();
    for (const data::LabelBox& box : boxes) {
      CHECK(box.class_id < 3);
      CHECK((box.w > 0 && box.h > 0 && box.cx - box.w / 2 >= 0 && box.cx + box.w / 2 <= 1.0001f));
    }
  }
  CHECK(backgrounds > 2);
  CHECK(backgrounds < 30);
}

TEST_CASE("shapes: each class is painted in its own band of hues") {
  // The centre pixel of a box shows its shape unless a later shape covers it (overlaps are
  // allowed up to IoU 0.35), so most centres, not all, must carry the class's hue.
  const int classes = 4;
  const double band = 180.0 / classes;
  int boxes_seen = 0, in_band = 0;
  for (uint64_t i = 0; i < 100; ++i) {
    std::vector<data::LabelBox> boxes;
    data::Image image = data::make_shapes_image(128, classes, 0, 0, i, boxes);
    for (const data::LabelBox& box : boxes) {
      const uint8_t* p = image.at(int(box.cx * 128), int(box.cy * 128));
      data::Hsv hsv = data::rgb_to_hsv({p[0], p[1], p[2]});
      double off = std::abs(hsv[0] - box.class_id * band);
      off = std::min(off, 180 - off);  // hue is circular
      boxes_seen += 1;
      in_band += off <= 0.3 * band + 2;  // +2: the colour conversions round the hue
    }
  }
  REQUIRE(boxes_seen > 150);
  CHECK(in_band > 0.85 * boxes_seen);  // random hues would put about 60 % in band
}

TEST_CASE("shapes: a dataset written by an older generator is told apart from a current one") {
  TempDir dir;
  const std::string yaml = data::make_shapes_dataset(
      {.out = (dir.path() / "shapes").string(), .n_train = 2, .n_val = 1, .imgsz = 32});
  CHECK(data::shapes_dataset_age(yaml) == data::ShapesDatasetAge::current);
  const std::string older = (dir.path() / "older.yaml").string();
  const std::string other = (dir.path() / "other.yaml").string();
  std::ofstream(older) << "# synthetic shapes, written by `bareyolo make-shapes` (seed 0)\n"
                          "path: .\n";
  std::ofstream(other) << "path: ../coco128\ntrain: images/train2017\n";
  CHECK(data::shapes_dataset_age(older) == data::ShapesDatasetAge::older);
  CHECK(data::shapes_dataset_age(other) == data::ShapesDatasetAge::not_shapes);
  CHECK(data::shapes_dataset_age((dir.path() / "missing.yaml").string()) ==
        data::ShapesDatasetAge::not_shapes);
}

TEST_CASE("make-shapes writes an absolute path, and a moved dataset opens from its own folder") {
  TempDir dir;
  const fs::path written = fs::canonical(dir.path()) / "shapes";
  const std::string yaml = data::make_shapes_dataset(
      {.out = (dir.path() / "shapes").string(), .n_train = 2, .n_val = 1, .imgsz = 32});
  std::ifstream text(yaml);
  std::string line;
  bool has_absolute_path = false;
  while (std::getline(text, line)) has_absolute_path |= line == "path: " + written.string();
  CHECK(has_absolute_path);
  CHECK(data::read_dataset_yaml(yaml).root == written.string());

  const fs::path moved = fs::canonical(dir.path()) / "moved";
  fs::rename(written, moved);
  data::DatasetConfig config = data::read_dataset_yaml((moved / "data.yaml").string());
  CHECK(config.root == moved.string());
  REQUIRE(config.train.size() == 1);
  CHECK(config.train[0] == (moved / "images" / "train").string());
  CHECK(data::open_split(config, "val").dataset.size() == 1);
}

TEST_CASE("make-shapes rejects options it cannot honour") {
  data::ShapesOptions options;
  options.out = "/nonexistent-unused";
  options.classes = 7;
  CHECK_THROWS_WITH_AS(data::make_shapes_dataset(options), doctest::Contains("--classes 7"),
                       std::invalid_argument);
}
