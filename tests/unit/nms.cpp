// tests/unit/nms.cpp — non_max_suppression on hand-built rows: which boxes survive, in which
// order, with which score and class, under every option that changes the answer.
#include <doctest/doctest.h>

#include <stdexcept>

#include "models/eval/nms.h"

namespace bareyolo::models {
namespace {

// Rows [cx, cy, w, h, objectness, class scores...] for one image.
struct Rows {
  int num_classes;
  std::vector<float> values;
  explicit Rows(int classes) : num_classes(classes) {}
  Rows& add(BoxXYWH box, float objectness, std::vector<float> class_scores) {
    REQUIRE(class_scores.size() == static_cast<size_t>(num_classes));
    values.insert(values.end(), {box.cx, box.cy, box.w, box.h, objectness});
    values.insert(values.end(), class_scores.begin(), class_scores.end());
    return *this;
  }
};

std::vector<Detection> run_nms(const Rows& rows, NmsOptions options = {}) {
  return non_max_suppression(rows.values, rows.num_classes, options);
}

std::vector<int> classes_of(const std::vector<Detection>& detections) {
  std::vector<int> classes;
  for (const Detection& d : detections) classes.push_back(d.class_id);
  return classes;
}

std::vector<float> confs_of(const std::vector<Detection>& detections) {
  std::vector<float> confs;
  for (const Detection& d : detections) confs.push_back(d.conf);
  return confs;
}

}  // namespace

TEST_CASE("nms suppresses an overlapping box of the same class") {
  Rows rows{2};
  rows.add({50, 50, 20, 20}, 0.8f, {0.5f, 0.1f})    // conf 0.4, IoU 0.82 with the next
      .add({52, 50, 20, 20}, 0.9f, {0.5f, 0.1f})    // conf 0.45: wins
      .add({150, 50, 20, 20}, 0.6f, {0.5f, 0.1f});  // conf 0.3, far away
  const std::vector<Detection> kept = run_nms(rows);
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].box == BoxXYXY{42, 40, 62, 60});
  CHECK(kept[0].conf == doctest::Approx(0.45));
  CHECK(kept[0].class_id == 0);
  CHECK(kept[1].box == BoxXYXY{140, 40, 160, 60});
  CHECK(kept[1].conf == doctest::Approx(0.3));
}

TEST_CASE("nms keeps overlapping boxes of different classes unless agnostic") {
  Rows rows{3};
  rows.add({50, 50, 20, 20}, 1.0f, {0.9f, 0.0f, 0.0f})
      .add({50, 50, 20, 20}, 1.0f, {0.0f, 0.0f, 0.8f});
  CHECK(classes_of(run_nms(rows)) == std::vector<int>{0, 2});  // the class offset separates them
  NmsOptions agnostic;
  agnostic.agnostic = true;
  CHECK(classes_of(run_nms(rows, agnostic)) == std::vector<int>{0});
}

TEST_CASE("nms multi_label gives one row per class above the threshold") {
  Rows rows{3};
  rows.add({50, 50, 20, 20}, 0.5f, {0.6f, 0.9f, 0.4f});  // scores 0.3, 0.45, 0.2
  NmsOptions options;
  options.multi_label = true;
  const std::vector<Detection> kept = run_nms(rows, options);
  CHECK(classes_of(kept) == std::vector<int>{1, 0});  // sorted by conf; 0.2 < 0.25 dropped
  CHECK(confs_of(kept) == std::vector<float>{0.5f * 0.9f, 0.5f * 0.6f});
  CHECK(kept[0].box == kept[1].box);
  CHECK(classes_of(run_nms(rows)) == std::vector<int>{1});  // best class only
}

TEST_CASE("nms confidence threshold applies to objectness and to the product strictly") {
  Rows rows{1};
  rows.add({10, 10, 4, 4}, 0.2f, {1.0f})   // objectness below 0.25
      .add({30, 10, 4, 4}, 0.9f, {0.2f})   // 0.18 below 0.25
      .add({50, 10, 4, 4}, 0.25f, {1.0f})  // objectness (and product) equal: not above
      .add({70, 10, 4, 4}, 0.5f, {0.6f});  // 0.3 kept
  const std::vector<Detection> kept = run_nms(rows);
  REQUIRE(kept.size() == 1);
  CHECK(kept[0].box.x1 == 68);
}

TEST_CASE("nms suppresses only above the iou threshold and only by kept boxes") {
  // Boxes of 3x1 shifted by 1: neighbours have IoU exactly 2/4 = 0.5, the outer pair 1/5.
  Rows rows{1};
  rows.add({1.5f, 0.5f, 3, 1}, 0.9f, {1})
      .add({2.5f, 0.5f, 3, 1}, 0.8f, {1})
      .add({3.5f, 0.5f, 3, 1}, 0.7f, {1});
  NmsOptions options;
  options.iou_threshold = 0.5f;  // IoU 0.5 is not above 0.5: all kept
  CHECK(run_nms(rows, options).size() == 3);
  options.iou_threshold = 0.45f;
  // The middle box is suppressed by the first; being suppressed, it does not suppress the
  // third, whose IoU with the first is only 0.2.
  CHECK(confs_of(run_nms(rows, options)) == std::vector<float>{0.9f, 0.7f});
}

TEST_CASE("nms max_det and max_nms keep the highest scores") {
  Rows rows{1};
  const float objectness[] = {0.3f, 0.4f, 0.5f, 0.6f, 0.7f};
  for (int i = 0; i < 5; ++i) rows.add({20.0f * i, 0, 10, 10}, objectness[i], {1});
  NmsOptions options;
  options.max_det = 3;
  CHECK(confs_of(run_nms(rows, options)) == std::vector<float>{0.7f, 0.6f, 0.5f});
  options.max_det = 300;
  options.max_nms = 2;
  CHECK(confs_of(run_nms(rows, options)) == std::vector<float>{0.7f, 0.6f});
  for (int none : {0, -1}) {  // keeps nothing, as a GPU's NMS does
    options.max_nms = none;
    CHECK(run_nms(rows, options).empty());
  }
}

TEST_CASE("nms output is sorted by conf descending and ties keep input order") {
  Rows rows{2};
  rows.add({0, 0, 10, 10}, 0.4f, {1, 0})
      .add({100, 0, 10, 10}, 0.9f, {0, 1})
      .add({200, 0, 10, 10}, 0.4f, {0, 1})
      .add({300, 0, 10, 10}, 0.6f, {1, 0});
  const std::vector<Detection> kept = run_nms(rows);
  CHECK(confs_of(kept) == std::vector<float>{0.9f, 0.6f, 0.4f, 0.4f});
  CHECK(kept[2].box.x1 == -5);
  CHECK(kept[3].box.x1 == 195);
}

TEST_CASE("nms class filter keeps only the listed classes") {
  Rows rows{3};
  rows.add({0, 0, 10, 10}, 1, {0.9f, 0, 0})
      .add({50, 0, 10, 10}, 1, {0, 0.9f, 0})
      .add({100, 0, 10, 10}, 1, {0, 0, 0.9f});
  NmsOptions options;
  options.classes = {2, 0};
  CHECK(classes_of(run_nms(rows, options)) == std::vector<int>{0, 2});
  // With multi_label too: a box's classes off the list give no rows.
  Rows both{3};
  both.add({50, 50, 20, 20}, 1, {0.6f, 0.9f, 0.8f});
  options.multi_label = true;
  CHECK(classes_of(run_nms(both, options)) == std::vector<int>{2, 0});
}

TEST_CASE("nms of empty input or no candidates is empty") {
  CHECK(run_nms(Rows{4}).empty());
  Rows rows{1};
  rows.add({0, 0, 10, 10}, 0.1f, {1});
  CHECK(run_nms(rows).empty());
  CHECK_THROWS_AS(non_max_suppression(std::vector<float>(7, 1.0f), 1, {}), std::invalid_argument);
}

TEST_CASE("nms batch treats each image on its own") {
  Rows image0{1}, image1{1};
  image0.add({50, 50, 20, 20}, 0.9f, {1}).add({51, 50, 20, 20}, 0.8f, {1});
  image1.add({51, 50, 20, 20}, 0.8f, {1}).add({300, 50, 20, 20}, 0.7f, {1});
  std::vector<float> batch = image0.values;
  batch.insert(batch.end(), image1.values.begin(), image1.values.end());
  const auto kept =
      batch_detections(flat_view<const float>(batch.data(), int64_t(batch.size())), 2, 1, {});
  REQUIRE(kept.size() == 2);
  CHECK(confs_of(kept[0]) == std::vector<float>{0.9f});
  CHECK(confs_of(kept[1]) == std::vector<float>{0.8f, 0.7f});
}

}  // namespace bareyolo::models
