// tests/unit/validate.cpp — the validation glue: rectangular letterboxed batches, labels and
// predictions mapped back to each original image, metrics. An oracle that predicts exactly
// the labels must score YOLOv5's perfect 0.995 at every IoU threshold, whatever the batch
// shapes; an oracle that predicts the wrong class scores 0, unless --single-cls counts every
// class as one.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "data/shapes.h"
#include "models/eval/validate.h"
#include "tests/support/testing.h"
#include "tests/support/validation_oracle.h"

using namespace bareyolo;
using namespace bareyolo::models;

using testing::validation_oracle;

TEST_CASE("validation of an oracle predictor scores 0.995 and a wrong-class one 0") {
  const std::string root =
      (std::filesystem::temp_directory_path() / "bareyolo_test_validate").string();
  std::filesystem::remove_all(root);
  const std::string yaml = data::make_shapes_dataset(
      {.out = root, .n_train = 4, .n_val = 10, .imgsz = 96, .classes = 3, .seed = 5});
  const data::DatasetConfig config = data::read_dataset_yaml(yaml);
  const data::OpenedSplit split = data::open_split(config, "val");

  for (bool rect : {true, false}) {
    ValidationOptions options;
    options.batch = 4;
    options.imgsz = 64;  // the 96-pixel images are scaled down, then letterboxed
    options.rect = rect;
    ValidationResult perfect = validate(split.dataset, options, validation_oracle(0, 3), 32);
    CHECK(perfect.images == 10);
    CHECK(perfect.labels > 10);
    CHECK(perfect.metrics.map50 == doctest::Approx(0.995));
    CHECK(perfect.metrics.map50_95 == doctest::Approx(0.995));
    CHECK(perfect.metrics.mean_recall == doctest::Approx(1.0));
    ValidationResult confused = validate(split.dataset, options, validation_oracle(1, 3), 32);
    CHECK(confused.metrics.map50 == 0.0);
  }

  // --single-cls (val.py's): on the dataset as one class, detections of any class count as
  // it, so the wrong-class oracle scores as the perfect one.
  ValidationOptions single;
  single.batch = 4;
  single.imgsz = 64;
  single.single_cls = true;
  const data::Dataset one_class = data::as_single_class(split.dataset);
  ValidationResult merged = validate(one_class, single, validation_oracle(1, 3), 32);
  int64_t boxes = 0;
  for (const data::ImageRecord& r : split.dataset.records()) boxes += int64_t(r.boxes.size());
  CHECK(merged.labels == boxes);
  CHECK(merged.metrics.map50_95 == doctest::Approx(0.995));
  REQUIRE(merged.metrics.classes.size() == 1);
  CHECK(merged.metrics.classes[0].class_id == 0);
  CHECK(merged.confusion.classes() == 1);

  // The mapping back to the original image: the oracle's boxes, predicted on the 64-pixel
  // canvas, land on the dataset's own labels in the 96-pixel originals (within rounding).
  ValidationOptions options;
  options.batch = 3;
  options.imgsz = 64;
  options.keep_detections = true;
  ValidationResult kept = validate(split.dataset, options, validation_oracle(0, 3), 32);
  REQUIRE(kept.detections.size() == 10);
  for (const ImageDetections& image : kept.detections) {
    const auto& records = split.dataset.records();
    auto record = std::find_if(records.begin(), records.end(),
                               [&](const data::ImageRecord& r) { return r.path == image.path; });
    REQUIRE(record != records.end());
    REQUIRE(image.detections.size() == record->boxes.size());
    for (size_t k = 0; k < record->boxes.size(); ++k) {
      const data::LabelBox& label = record->boxes[k];
      const BoxXYXY expected = xywh_to_xyxy({label.cx * record->width, label.cy * record->height,
                                             label.w * record->width, label.h * record->height});
      const BoxXYXY& got = image.detections[k].box;
      CHECK(std::fabs(got.x1 - std::max(expected.x1, 0.0f)) < 0.6f);
      CHECK(std::fabs(got.y2 - std::min(expected.y2, float(record->height))) < 0.6f);
      CHECK(image.detections[k].class_id == label.class_id);
    }
  }
  // A shard's detections are its share's only: --save-json is refused with shards.
  options.shards = 2;
  CHECK_THROWS_WITH_AS(validate(split.dataset, options, validation_oracle(0, 3), 32),
                       "keep_detections: sharded validation gathers statistics, not detections",
                       std::invalid_argument);
  std::filesystem::remove_all(root);
}

TEST_CASE("validation's NMS is YOLOv5's val NMS, across classes under --single-cls") {
  ValidationOptions options;
  const NmsOptions multi = nms_of(options);
  CHECK(multi.conf_threshold == 0.001f);
  CHECK(multi.iou_threshold == 0.6f);
  CHECK(multi.max_det == 300);
  CHECK(multi.multi_label);
  CHECK_FALSE(multi.agnostic);
  options.single_cls = true;
  CHECK(nms_of(options).agnostic);
}
