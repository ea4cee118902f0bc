// tests/unit/single_cls.cpp — YOLOv5's --single-cls: a multi-class dataset trains as one class
// ('item', nc 1, every label class 0; data::as_single_class), and validation counts every
// label and detection as that class (models/eval/validate.h).
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/shapes.h"
#include "engine/safetensors.h"
#include "engine/shipped_files.h"
#include "models/train/trainer.h"
#include "tests/support/data_fixtures.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("--single-cls makes every box class 0 and names the one class 'item'") {
  const std::vector<data::ImageRecord> records = {
      {"a.jpg", 10, 10, {{2, 0.5f, 0.5f, 0.2f, 0.2f}, {0, 0.1f, 0.2f, 0.1f, 0.1f}}},
      {"b.jpg", 20, 10, {}},
      {"c.jpg", 10, 20, {{1, 0.3f, 0.4f, 0.5f, 0.6f}}}};
  const data::Dataset merged = data::as_single_class(data::Dataset(records, {"a", "b", "c"}));
  CHECK(merged.names() == std::vector<std::string>{"item"});
  REQUIRE(merged.size() == 3);
  for (size_t i = 0; i < records.size(); ++i) {
    const data::ImageRecord& got = merged.record(int64_t(i));
    CHECK(got.path == records[i].path);
    REQUIRE(got.boxes.size() == records[i].boxes.size());
    for (size_t k = 0; k < got.boxes.size(); ++k) {
      data::LabelBox expected = records[i].boxes[k];
      expected.class_id = 0;
      CHECK(got.boxes[k] == expected);
    }
  }
  // One name is kept, as YOLOv5 keeps it.
  CHECK(data::single_class_names({"cat"}) == std::vector<std::string>{"cat"});
}

// The loss refuses a target whose class is outside the head's (models/loss/loss.cpp), so a run
// whose 2-class labels reached an nc-1 head unmerged would fail; one that ignored --single-cls
// would end with a 2-class head.
TEST_CASE("train --single-cls on a 2-class dataset: an nc-1 model, one class scored") {
  TempDir dir;
  const std::string yaml = data::make_shapes_dataset({.out = (dir.path() / "shapes").string(),
                                                      .n_train = 8,
                                                      .n_val = 4,
                                                      .imgsz = 64,
                                                      .classes = 2,
                                                      .seed = 3});
  int64_t val_labels = 0;
  std::set<int> label_classes;
  const data::OpenedSplit val = data::open_split(data::read_dataset_yaml(yaml), "val");
  for (const data::ImageRecord& r : val.dataset.records())
    for (const data::LabelBox& box : r.boxes) ++val_labels, label_classes.insert(box.class_id);
  REQUIRE(label_classes == std::set<int>{0, 1});

  models::TrainOptions options;
  options.data = yaml;
  options.cfg = shipped_file("models/yolov5-tiny.yaml");
  options.run_dir = (dir.path() / "run").string();
  options.epochs = 1;
  options.batch = 4;
  options.imgsz = 64;
  options.workers = 1;
  options.show_progress = false;
  options.plots = false;
  options.single_cls = true;
  std::vector<models::ValidationReport> reports;
  models::TrainCallbacks recorder;
  recorder.on_val_end = [&](const models::ValidationReport& r) { reports.push_back(r); };
  options.callbacks = {recorder};
  REQUIRE(models::train(options, [](const std::string&) {}).finished);

  const SafetensorsFile weights =
      SafetensorsFile::load((dir.path() / "run" / "weights" / "final.safetensors").string());
  CHECK(weights.metadata().at("nc") == "1");
  CHECK(weights.metadata().at("names") == "item");
  // The Detect head's rows: 3 anchors x (5 + nc).
  CHECK(weights.record("model.24.m.0.weight").shape[0] == 3 * (5 + 1));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].labels == val_labels);  // both classes' labels, as one
  const models::ConfusionMatrix& confusion = reports[0].confusion;
  REQUIRE(confusion.classes() == 1);
  CHECK(confusion.at(0, 0) + confusion.at(1, 0) == val_labels);  // every label's truth: item
}
